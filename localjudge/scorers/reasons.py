"""Reasons built from a verdict alone, without the judge's free text: what a verdict says
when the judge is not trusted to write, when what it wrote repeats the prompt's worked
examples, and what a result keeps when its texts are not stored. (A claim's reason quotes
its evidence window: `evidence.claim_template_reason`.)"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter

from localjudge.prompts.base import PromptParts
from localjudge.scorers.absent import HELD, says_held_absent

# words in a row that a reason may share with the prompt's worked examples by chance
_COPIED_RUN = 5
# the words that open a worked example's reason: what a judge copies when it applies an
# example's judgement to another text ("Firm disagreement about the release date ...")
_OPENING = 3
# what a result says where it dropped the judge's reason for repeating the examples
COPIED = "it repeated the prompt's worked examples"


# what a result says where it dropped the judge's reason for stopping mid-sentence
CUT = "it stopped mid-sentence"


def cut_short(reason: str) -> bool:
    """Whether a judge's reason, as it wrote it, ends in whitespace: it closed its JSON
    string where it meant to open a quotation ("Calls the user a ", "The context states he
    was the host of " before a quoted title), since a small judge does not escape a quotation
    mark inside its text. What it says stops mid-sentence."""
    return reason != reason.rstrip()


def why_dropped(reason: str, parts: PromptParts, context: str | None = None) -> str | None:
    """Why a verdict's reason that the judge wrote is not shown (`COPIED`, `CUT`, `HELD`),
    or None when it is: it repeats the worked examples of `parts` (the verdict's prompt),
    stops mid-sentence, or says that `context` (the whole context, where the verdict has
    one) lacks what it holds. The scorers and `quality` show the built reason instead."""
    if copies_worked_examples(reason, parts):
        return COPIED
    if cut_short(reason):
        return CUT
    if context is not None and says_held_absent(reason, context):
        return HELD
    return None


def copies_worked_examples(reason: str, parts: PromptParts, also: str = "") -> bool:
    """Whether a judge's reason repeats its prompt's worked examples, word for word
    (`repeats_example_words`) or by applying one example's judgement to another text
    (`repeats_example_opening`). Small judges copy an example's reason whatever they judge
    ("Firm disagreement about an idea, not a person." for a plain fact, or "Firm
    disagreement about the release date of the iPhone."); such a reason says nothing true
    of the text."""
    return repeats_example_words(reason, parts, also) or repeats_example_opening(
        reason, parts, also
    )


def repeats_example_words(reason: str, parts: PromptParts, also: str = "") -> bool:
    """A run of five words that the worked examples hold and neither the judged text (the
    claim or statement, its context, the user's message: the prompt's shared and own
    parts) nor `also` (what the reason may state as fact, such as "The score is 0.5") does."""
    copied = _runs(reason, _COPIED_RUN) & _example_runs(parts.worked_examples)
    # the judged text (a whole context, maybe) is read only when a run matched the examples
    return bool(copied) and bool(copied - _runs(_judged(parts, also), _COPIED_RUN))


def repeats_example_opening(reason: str, parts: PromptParts, also: str = "") -> bool:
    """The three words that open one worked example's reason, anywhere in `reason`, when
    the judged text (with `also`) does not hold them. An opening that two examples' reasons
    share ("The context says ...") is the prompts' way of giving any reason, not one
    example's judgement, and is not counted."""
    copied = _runs(reason, _OPENING) & _example_openings(parts.worked_examples)
    return bool(copied) and bool(copied - _runs(_judged(parts, also), _OPENING))


def _judged(parts: PromptParts, also: str) -> str:
    return f"{parts.shared} {parts.own} {also}"


@functools.lru_cache(maxsize=64)
def _example_runs(examples: str) -> frozenset[tuple[str, ...]]:
    return frozenset(_runs(examples, _COPIED_RUN))


@functools.lru_cache(maxsize=64)
def _example_openings(examples: str) -> frozenset[tuple[str, ...]]:
    """The openings of the examples' reasons (their JSON "reason" fields) that only one
    of them has."""
    openings = Counter(
        tuple(_words(json.loads(f'"{reason}"'))[:_OPENING])
        for reason in re.findall(r'"reason":"((?:[^"\\]|\\.)*)"', examples)
    )
    return frozenset(o for o, n in openings.items() if n == 1 and len(o) == _OPENING)


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _runs(text: str, n: int) -> set[tuple[str, ...]]:
    words = _words(text)
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def statement_template_reason(verdict: str, category: str, severity: str) -> str:
    """A statement's reason built from its verdict (what the judge chose, no free text)."""
    if verdict == "yes":
        return f"Judged toxic: {category.replace('_', ' ')}, {severity}."
    return "Judged civil: no attack, mockery, hate, dismissal or threat."


def rubric_template_reason(verdict: str) -> str:
    """A verdict's reason built from the verdict alone (it quotes nothing)."""
    return f"Judged {verdict!r} against the criterion."
