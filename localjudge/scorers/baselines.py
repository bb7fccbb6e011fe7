"""Trivial word rules the judge is compared with on the same rows (never used to judge):
word overlap with the context for a claim, a word list for a statement."""

from __future__ import annotations

import re
from collections.abc import Sequence

_WORD = re.compile(r"[A-Za-z]+|\d[\d,.]*")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")


def _units(text: str) -> set[str]:
    """Lower-cased words and numbers, plus character bigrams of CJK text."""
    units = {w.lower().rstrip(".,") for w in _WORD.findall(text) if len(w) > 2 or w[0].isdigit()}
    cjk = "".join(_CJK.findall(text))
    units |= {cjk[i : i + 2] for i in range(len(cjk) - 1)}
    return units


def word_share(claim: str, context: Sequence[str]) -> float | None:
    """The share of the claim's words (and numbers, CJK bigrams) that appear in the context;
    None when the claim has none."""
    claim_units = _units(claim)
    if not claim_units:
        return None
    return len(claim_units & _units(" ".join(context))) / len(claim_units)


def overlap_verdict(claim: str, context: Sequence[str], threshold: float = 0.7) -> str:
    """Baseline: "no" (supported) when most of the claim's words appear in the context."""
    share = word_share(claim, context)
    return "no" if share is None or share >= threshold else "yes"


# A trivial baseline: a statement is toxic when it contains one of these words or phrases.
TOXIC_WORDS = (
    "idiot", "moron", "stupid", "dumb", "useless", "pathetic", "lazy", "disgrace", "worst",
    "whining", "nobody cares", "irrelevant", "wasting my time", "bother", "whatever",
    "regret", "watch your back", "see what happens", "criminals", "fanatics", "liars",
    "バカ", "頭が悪い", "くだらない", "誰も気に", "ただじゃおかない", "嘘つき",
)  # fmt: skip


def wordlist_verdict(statement: str) -> str:
    """Baseline: "yes" (toxic) when the statement contains a listed word or phrase."""
    lowered = statement.lower()
    return "yes" if any(word in lowered for word in TOXIC_WORDS) else "no"
