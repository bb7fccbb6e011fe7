"""`VerdictTask`: what a scorer asks the judge about one text (a claim, a statement, an
output), declared once beside the scorer: its verdict schema, prompt and prompt version,
how a labelled row reads, the verdict a true label stands for, and the word rules it is
compared with. `quality`, `calibrate` and training reach every registered scorer through it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from localjudge.prompts import PromptParts
from localjudge.scorers.text import split_statements

CONTEXT_MODES = ("required", "optional", "none")
_TRUE = {"true", "1", "yes", "y", "t"}
_FALSE = {"false", "0", "no", "n", "f"}


@dataclass(frozen=True)
class LabelledRow:
    """One labelled row, read and checked."""

    number: int  # line (JSONL) or record (CSV) number in the file, from 1
    label: bool  # True: the task's flagged verdict (hallucinated, toxic, ...)
    text: str  # what is judged: the claim, the statement, the output
    context: tuple[str, ...] = ()  # what the text is judged against, if anything
    input: str = ""  # the user's message the text answers
    severity: str | None = None
    group: str | None = None  # a slice name for per-group tables


@dataclass(frozen=True)
class Baseline:
    """A trivial word rule the judge is compared with on the same rows."""

    name: str
    flags: Callable[[str, Sequence[str]], bool]  # (text, context) -> flagged


@dataclass(frozen=True)
class VerdictTask:
    """One verdict per row: `prompt(row)` judged under `schema`, P(`flagged`) at the
    `verdict` field. With `windowed`, a long context is judged in evidence windows and the
    window that clears the text most (the lowest P(flagged)) decides, as the hallucination
    scorer does. `reason(value, evidence)` builds a verdict's reason without free text.
    `statements(text)` is how the scorer cuts a whole output into the texts it judges one
    by one without a judge (what `quality --statements` measures)."""

    name: str
    schema: str | dict  # a grammar name under grammars/, or a JSON Schema
    prompt_version: str  # calibrations are stored per version
    prompt: Callable[[LabelledRow], PromptParts]
    reason: Callable[[dict, dict | None], str]
    text_field: str = "text"  # the row key holding what is judged
    context: str = "none"  # whether a row needs a `context`: required, optional, none
    flagged: str = "yes"  # the verdict a true label stands for
    windowed: bool = False
    baselines: tuple[Baseline, ...] = ()
    devset: str | None = None  # the built-in dev set of this task, if any
    statements: Callable[[str], list[str]] = split_statements
    leaves_out: str = ""  # what `statements` leaves out of a text, named in reports

    def __post_init__(self) -> None:
        if self.context not in CONTEXT_MODES:
            raise ValueError(f"context must be one of {', '.join(CONTEXT_MODES)}")

    def p_flagged(self, result) -> float:
        """P(flagged verdict) of a verdict result (1 or 0 when the judge gave no choice)."""
        choice = result.choice("verdict")
        if choice is None:
            return 1.0 if result.value.get("verdict") == self.flagged else 0.0
        return float(choice.probabilities.get(self.flagged, 0.0))

    def read_row(self, record: Any, number: int) -> LabelledRow:
        """A checked row; ValueError says what is wrong with it."""
        if not isinstance(record, dict):
            raise ValueError("a row must be an object")
        if "label" not in record or record["label"] in (None, ""):
            raise ValueError("needs a 'label'")
        label = read_label(record["label"])
        group = record.get("group")
        context: tuple[str, ...] = ()
        if self.context != "none":
            context = read_context(record.get("context", ""))
            if not context and self.context == "required":
                raise ValueError("needs a non-empty 'context'")
        severity = record.get("severity")
        return LabelledRow(
            number,
            label,
            _text(record, self.text_field, required=True),
            context,
            input=_text(record, "input", required=False),
            severity=None if severity in (None, "") else str(severity),
            group=None if group in (None, "") else str(group),
        )


def read_label(value: Any) -> bool:
    """A class label: true/false, 1/0, yes/no."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
    raise ValueError(f"label must be true/false (or 1/0, yes/no), not {value!r}")


def read_context(value: Any) -> tuple[str, ...]:
    """A row's context: a list of strings, one string, or a CSV cell holding a JSON list."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.startswith("["):
            try:
                value = json.loads(stripped)
            except ValueError:
                return (value,)
        else:
            return (value,) if stripped else ()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(v for v in value if v.strip())
    raise ValueError("'context' must be a list of strings or one string")


def _text(record: dict, key: str, *, required: bool) -> str:
    value = record.get(key)
    if value is None or value == "":
        if required:
            raise ValueError(f"needs a non-empty {key!r}")
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{key!r} must be text, not {type(value).__name__}")
    if required and not value.strip():
        raise ValueError(f"needs a non-empty {key!r}")
    return value
