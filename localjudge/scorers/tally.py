"""What a score's reason may state as fact (`Tally`: the score, and how many of the judged
claims or statements the verdicts flagged), and whether a judge's written reason states
otherwise (`misstates`). A small judge that writes its own reasons explains a score of 1
(every claim unsupported) with "all claims are supported", or counts "one of its two
statements" in a reply of one; such a reason contradicts the verdicts it was asked to
explain, and the scorers replace it with the reason built from them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from localjudge.prompts.base import PromptParts

# what a result says where it dropped the judge's reason for contradicting its verdicts
MISSTATED = "it contradicted the verdicts it explained"

_NUMBERS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
    "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
}  # fmt: skip
_NUMBER = r"(\d+|" + "|".join(_NUMBERS) + ")"
_ALL = ("all", "both", "every", "each")
_NONE = ("no", "none")
_ADVERB = r"(?: (?:all|fully|directly|clearly|explicitly|entirely))?"


@dataclass(frozen=True)
class Tally:
    """The facts a score's reason explains: the score, how many of the `total` judged
    units (`unit`: "claim", "statement") the verdicts flagged, the words that say a unit
    was flagged (`flag`: "unsupported") or was not (`clear`: "supported"), and the verb a
    reason uses for "not flagged" (`clear_verb`: "the context supports every claim").
    Without a `unit`, only the stated score is checked."""

    score: float
    flagged: int = 0
    total: int = 0
    unit: str = ""
    flag: tuple[str, ...] = ()
    clear: tuple[str, ...] = ()
    clear_verb: str = ""

    def count(self, polarity: str) -> int:
        return self.flagged if polarity == "flag" else self.total - self.flagged

    @classmethod
    def of(cls, score: float, verdicts: list[dict], words: dict) -> Tally:
        """The facts of a scorer's verdicts ("yes" flags a unit), in the scorer's `words`
        (`CLAIM_WORDS`, `STATEMENT_WORDS`)."""
        flagged = sum(v["verdict"] == "yes" for v in verdicts)
        return cls(score=score, flagged=flagged, total=len(verdicts), **words)


# the hallucination scorer's words: a "yes" verdict is an unsupported claim
CLAIM_WORDS = {
    "unit": "claim",
    "flag": ("not supported", "unsupported", "hallucinated", "contradicted"),
    "clear": ("supported",),
    "clear_verb": "supports",
}
# the toxicity scorer's: a "yes" verdict is a toxic statement
STATEMENT_WORDS = {
    "unit": "statement",
    "flag": ("toxic",),
    "clear": ("not toxic", "non-toxic", "civil"),
}


def misstates(reason: str, tally: Tally, parts: PromptParts | None = None) -> bool:
    """Whether an English reason states a score, a count or an "all"/"none" of the judged
    units that the tally contradicts: "The score is 1" for 0.5 (a score given to fewer
    decimals is read as rounded: "0.67" for 2/3, and a whole number must be exact), "one of
    its two statements" for one statement, "all claims are supported" or "both unsupported
    claims are supported" when any claim is unsupported, "there are no toxic statements"
    when one is. A phrase that the judged text (`parts`: the prompt's shared and own parts)
    holds is not counted: a reason may quote what it explains. Reasons in other languages,
    and statements of other kinds, are not read."""
    text = " ".join(reason.lower().split())
    judged = " ".join(f"{parts.shared} {parts.own}".lower().split()) if parts else ""
    return any(
        phrase not in judged
        for phrase in (
            *_misstated_scores(text, tally.score),
            *(_misstated_counts(text, tally) if tally.unit else ()),
        )
    )


def _misstated_scores(text: str, score: float):
    for match in re.finditer(r"\bscore (?:is|was|of) (\d+(?:\.(\d+))?)\b(?!\s*%)", text):
        stated, decimals = float(match[1]), len(match[2] or "")
        tolerance = 0.5 * 10**-decimals if decimals else 1e-9
        if abs(stated - score) > tolerance + 1e-9:
            yield match[0]


def _misstated_counts(text: str, tally: Tally):
    """The phrases of `text` that count the tally's units otherwise than it does."""
    words = {w: "flag" for w in tally.flag} | {w: "clear" for w in tally.clear}
    polarity = "(" + "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)) + ")"
    unit = rf"{re.escape(tally.unit)}s?"
    the = r"(?: of)?(?: the| its| these| those)?"
    be = r"(?:is|are|was|were)"

    # "one of (its) two (unsupported) claims (is supported)"
    counted = rf"\b{_NUMBER} of(?: the| its| all| these| those)? {_NUMBER} (?:{polarity} )?{unit}\b(?: {be}{_ADVERB} {polarity})?"
    for match in re.finditer(counted, text):
        part, whole = _number(match[1]), _number(match[2])
        adjective, predicate = words.get(match[3]), words.get(match[4])
        if adjective:
            wrong = whole != tally.count(adjective) or (
                predicate is not None and predicate != adjective and part > 0
            )
        else:
            wrong = whole != tally.total or (
                predicate is not None and part != tally.count(predicate)
            )
        if wrong or part > whole:
            yield match[0]

    # "all (3) claims are supported", "both unsupported claims", "no toxic statements"
    quantified = rf"(?<!not )\b({'|'.join(_ALL + _NONE)}){the}(?: {_NUMBER})?(?: {polarity})? {unit}\b(?: {be}{_ADVERB} {polarity})?"
    for match in re.finditer(quantified, text):
        quantifier, number = match[1], match[2]
        adjective, predicate = words.get(match[3]), words.get(match[4])
        group = tally.count(adjective) if adjective else tally.total
        if quantifier in _NONE:
            wrong = (
                tally.count(predicate) > 0 if predicate else (adjective is not None and group > 0)
            )
        else:
            wrong = (
                (quantifier == "both" and group != 2)
                or (number is not None and _number(number) != group)
                or (predicate is not None and predicate != adjective
                    and (adjective is not None or tally.count(predicate) != tally.total))
            )  # fmt: skip
        if wrong:
            yield match[0]

    # "the context supports every claim", "supports the claim" (said of a single one)
    if tally.clear_verb:
        verb = re.escape(tally.clear_verb)
        every = rf"(?:(?:all|both|every|each){the}(?: \d+)?|(the|this))"
        for match in re.finditer(rf"(?<!not )\b{verb} {every} {unit}\b", text):
            single = match[1] is not None
            if (not single and tally.count("clear") != tally.total) or (
                single and tally.total == 1 and tally.flagged == 1
            ):
                yield match[0]


def _number(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS[word]
