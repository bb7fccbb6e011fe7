"""The built-in dev sets (small, labelled, English and Japanese). A measurement for the
README, not a test threshold. The word-rule baselines live in `scorers/baselines.py`."""

from __future__ import annotations

import json
from pathlib import Path

from localjudge.scorers.baselines import TOXIC_WORDS, overlap_verdict, wordlist_verdict

__all__ = ["DATA", "TOXIC_WORDS", "load_devset", "overlap_verdict", "wordlist_verdict"]

DATA = Path(__file__).parent / "data"


def load_devset(name: str) -> list[dict]:
    path = DATA / f"{name}_dev.jsonl"
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
