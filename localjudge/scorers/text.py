"""Plain-text helpers shared by the scorers: rounding as Mastra does it, sentence splitting."""

from __future__ import annotations

import math
import re
import sys

_EPSILON = sys.float_info.epsilon  # JavaScript's Number.EPSILON


def round_half_up(value: float, digits: int = 2) -> float:
    """Round like Mastra's `roundToTwoDecimals`: `Math.round((x + EPSILON) * 100) / 100`.

    JavaScript's `Math.round` rounds halves up (towards +infinity); Python's `round` rounds
    halves to even, so `round(0.125, 2) == 0.12` where Mastra gives 0.13.
    """
    factor = 10**digits
    return math.floor((value + _EPSILON) * factor + 0.5) / factor


# Sentence ends: Western punctuation followed by space/end (not inside numbers like 3.5 or
# after common abbreviations), CJK full stops, and line breaks.
_ABBREVIATIONS = frozenset(
    [
        "e.g.",
        "i.e.",
        "etc.",
        "vs.",
        "mr.",
        "mrs.",
        "ms.",
        "dr.",
        "prof.",
        "st.",
        "no.",
        "approx.",
        "a.m.",
        "p.m.",
    ]
)
# a numbered list's marker, alone before its item ("2.", "iv."): it ends no sentence
_ENUMERATOR = re.compile(r"(\d{1,3}|[ivx]{1,5})\.")
# abbreviations that end a sentence when a capital follows: "at 9 a.m. It closes at 5 p.m."
_ENDS_A_SENTENCE_BEFORE_A_CAPITAL = frozenset(["a.m.", "p.m.", "etc."])
# a CJK full stop ends a sentence unless a closing quote follows that runs on into the text
_BOUNDARY = re.compile(
    r"(?<=[.!?])[\"')\]]*\s+"
    r"|(?<=[。！？])(?![」』）])\s*"
    r"|(?<=[。！？][」』）])(?=\s|$)\s*"
    r"|\n+"
)


def every(total: int, noun: str) -> str:
    """All `total` nouns as a reason names them: "its one claim" (a single one), "all 3 claims"."""
    return f"its one {noun}" if total == 1 else f"all {total} {noun}s"


def how_many(found: int, total: int, noun: str) -> str:
    """`found` of `total` nouns as a reason counts them, with its verb: "its one claim is"
    (a single one), "1 of 3 claims is", "2 of 3 claims are"."""
    if total == 1:
        return f"{every(1, noun)} is"
    return f"{found} of {total} {noun}s {'is' if found == 1 else 'are'}"


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) offsets of the sentences of `text`, without surrounding whitespace;
    deterministic, for English and Japanese.

    Line breaks always end a sentence; a period ends one only when followed by whitespace
    and not part of an abbreviation ("e.g."), an initial ("J. Smith") or a list's number
    ("2. Refunds go to your card." is one sentence).
    """
    spans: list[tuple[int, int]] = []
    start = position = 0
    for match in _BOUNDARY.finditer(text):
        piece = text[position : match.end()]
        position = match.end()
        words = text[start:position].split()
        last_word = words[-1].lower() if words else ""
        is_abbreviation = (
            last_word in _ABBREVIATIONS
            or re.fullmatch(r"[a-z]\.", last_word) is not None
            or (len(words) == 1 and _ENUMERATOR.fullmatch(last_word) is not None)
        )
        if (
            "\n" not in piece
            and is_abbreviation
            and not (
                last_word in _ENDS_A_SENTENCE_BEFORE_A_CAPITAL
                and text[position : position + 1].isupper()
            )
        ):
            continue
        if words:
            spans.append(_stripped_span(text, start, position))
        start = position
    if text[start:].strip():
        spans.append(_stripped_span(text, start, len(text)))
    return spans


def _stripped_span(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def split_sentences(text: str) -> list[str]:
    """Split text into sentences (`sentence_spans`)."""
    return [text[start:end] for start, end in sentence_spans(text)]


def split_statements(text: str, max_chars: int = 600) -> list[str]:
    """The statements of a text: its sentences, with any sentence longer than `max_chars`
    cut at spaces (or every `max_chars` characters where there are none), so every part of
    the text is judged and no prompt outgrows the context."""
    return [piece for sentence in split_sentences(text) for piece in cut_long(sentence, max_chars)]


def cut_long(sentence: str, max_chars: int = 600) -> list[str]:
    """One sentence as statements of at most `max_chars`, cut at spaces (or every
    `max_chars` characters where there are none)."""
    pieces: list[str] = []
    while len(sentence) > max_chars:
        cut = sentence.rfind(" ", 0, max_chars)
        cut = cut if cut > max_chars // 2 else max_chars
        pieces.append(sentence[:cut].strip())
        sentence = sentence[cut:].strip()
    if sentence:
        pieces.append(sentence)
    return pieces


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def judge_text(text: str) -> str:
    """Text as the judge should read it: control characters (binary junk) become spaces and
    lone surrogates (broken UTF-16) become U+FFFD, so every prompt is valid UTF-8."""
    return _SURROGATE.sub("\ufffd", _CONTROL.sub(" ", text))


def shorten_middle(text: str, max_tokens: int, count_tokens) -> tuple[str, int | None]:
    """`text` within `max_tokens` tokens: its head and tail, with a marker where the middle
    was left out. Returns (text, original token count), the count None when it already fit."""
    original = count_tokens(text)
    if original <= max_tokens:
        return text, None
    keep = int(len(text) * max_tokens / original)
    while True:
        keep = int(keep * 0.9)
        half = max(keep // 2, 0)
        shortened = f"{text[:half].rstrip()} [... {len(text) - 2 * half} characters left out ...] {text[len(text) - half :].lstrip()}"
        if half == 0 or count_tokens(shortened) <= max_tokens:
            return shortened, original
