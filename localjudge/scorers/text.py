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
# a CJK full stop ends a sentence unless a closing quote follows that runs on into the text
_BOUNDARY = re.compile(
    r"(?<=[.!?])[\"')\]]*\s+"
    r"|(?<=[。！？])(?![」』）])\s*"
    r"|(?<=[。！？][」』）])(?=\s|$)\s*"
    r"|\n+"
)


def split_sentences(text: str) -> list[str]:
    """Split text into sentences, deterministically; works for English and Japanese.

    Line breaks always end a sentence; a period ends one only when followed by whitespace
    and not part of an abbreviation ("e.g.") or an initial ("J. Smith").
    """
    sentences: list[str] = []
    buffer = ""
    position = 0
    for match in _BOUNDARY.finditer(text):
        piece = text[position : match.end()]
        position = match.end()
        buffer += piece
        stripped = buffer.strip()
        last_word = stripped.split()[-1].lower() if stripped.split() else ""
        is_abbreviation = (
            last_word in _ABBREVIATIONS or re.fullmatch(r"[a-z]\.", last_word) is not None
        )
        if "\n" not in piece and is_abbreviation:
            continue
        if stripped:
            sentences.append(stripped)
        buffer = ""
    buffer += text[position:]
    if buffer.strip():
        sentences.append(buffer.strip())
    return sentences
