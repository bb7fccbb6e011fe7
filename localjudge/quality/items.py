"""Scorer-level agreement: rows that are whole items (`input`, `output`, `context`) with a
label (a score, or a class), scored by the whole scorer through `run_evals`; reports AUROC
(class labels) and Pearson / Spearman correlation of the scorer's score with the label,
beside a trivial item-level baseline on the same items."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from localjudge.quality.labelled import RowError, as_task, auroc, left_out_lines, ranks
from localjudge.scorers.task import VerdictTask, read_context, read_label


@dataclass(frozen=True)
class ItemRow:
    number: int
    label: float  # a score, or 1.0 / 0.0 for a class
    output: str
    input: str = ""
    context: tuple[str, ...] = ()
    group: str | None = None


def is_item_record(record: Any, task: VerdictTask | str) -> bool:
    """An item-level row: it has an `output` and not the field a verdict row judges."""
    text_field = as_task(task).text_field
    return isinstance(record, dict) and "output" in record and text_field not in record


def item_row_of(record: Any, number: int, task: VerdictTask | str) -> ItemRow:
    if not isinstance(record, dict):
        raise ValueError("a row must be an object")
    label = record.get("label")
    if label is None or label == "":
        raise ValueError("needs a 'label'")
    if isinstance(label, bool):
        value = float(label)
    elif isinstance(label, (int, float)) or (isinstance(label, str) and _is_number(label)):
        value = float(label)
        if not math.isfinite(value):
            raise ValueError(f"label must be finite, not {label!r}")
    else:
        value = 1.0 if read_label(label) else 0.0  # a class: true/false, yes/no
    output = record.get("output")
    if not isinstance(output, str) or not output.strip():
        raise ValueError("needs a non-empty text 'output'")
    context: tuple[str, ...] = ()
    needs = as_task(task).context
    if needs != "none":
        context = read_context(record.get("context", ""))
        if not context and needs == "required":
            raise ValueError("needs a non-empty 'context'")
    user_input = record.get("input", "")
    group = record.get("group")
    return ItemRow(
        number,
        value,
        output,
        input=user_input if isinstance(user_input, str) else str(user_input),
        context=context,
        group=None if group in (None, "") else str(group),
    )


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def pearson(x: list[float], y: list[float]) -> float | None:
    n = len(x)
    if n < 2:
        return None
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return None
    return sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / math.sqrt(sxx * syy)


def spearman(x: list[float], y: list[float]) -> float | None:
    return pearson(ranks(x), ranks(y))


def baseline_score(task: VerdictTask | str, row: ItemRow) -> float | None:
    """The share of the output's sentences the task's first word rule flags (word overlap
    with the context for hallucination, the word list for toxicity); None without one."""
    from localjudge.scorers.text import split_statements

    rules = as_task(task).baselines
    if not rules:
        return None
    sentences = split_statements(row.output) or [row.output]
    flagged = [rules[0].flags(s, row.context) for s in sentences]
    return sum(flagged) / len(flagged)


@dataclass
class ItemReport:
    task: str
    source: str
    model: str
    rows: list[ItemRow]  # the items the scorer scored
    scores: dict[str, list[float]]  # way -> score per row ("scorer" first)
    bad_rows: list[RowError] = field(default_factory=list)
    item_errors: list[tuple[int, str]] = field(default_factory=list)  # row number, error
    seconds: float = 0.0

    @property
    def binary(self) -> bool:
        return all(r.label in (0.0, 1.0) for r in self.rows)

    def agreement(self) -> dict[str, dict[str, float | None]]:
        labels = [r.label for r in self.rows]
        out = {}
        for way, scores in self.scores.items():
            out[way] = {
                "n": len(scores),
                "auroc": auroc([y >= 0.5 for y in labels], scores) if self.binary else None,
                "pearson": pearson(scores, labels),
                "spearman": spearman(scores, labels),
            }
        return out

    def to_dict(self) -> dict[str, Any]:
        judged = len(self.rows) + len(self.item_errors)
        return {
            "task": self.task,
            "level": "item",
            "source": self.source,
            "model": self.model,
            "rows": len(self.rows),
            "bad_rows": [{"number": e.number, "message": e.message} for e in self.bad_rows],
            "item_errors": [{"row": n, "error": e} for n, e in self.item_errors],
            "seconds": round(self.seconds, 3),
            "rows_per_second": round(judged / self.seconds, 3) if self.seconds else 0.0,
            "labels": "classes" if self.binary else "scores",
            "agreement": self.agreement(),
        }

    def text(self) -> str:
        data = self.to_dict()
        lines = [
            f"{self.task} items on {self.source}: {len(self.rows)} items scored by the "
            f"{self.task} scorer on {self.model} ({data['rows_per_second']:.2f} items/s), "
            f"labels are {data['labels']}"
        ]
        lines += left_out_lines(self.bad_rows, self.item_errors, "items the scorer could not score")
        lines.append(f"  {'':24} {'AUROC':>6} {'Pearson':>8} {'Spearman':>9}")
        for way, a in data["agreement"].items():
            cells = [
                "-" if a[k] is None else f"{a[k]:.2f}" for k in ("auroc", "pearson", "spearman")
            ]
            lines.append(f"  {way:24} {cells[0]:>6} {cells[1]:>8} {cells[2]:>9}")
        return "\n".join(lines)


def measure_items(
    judge, rows: list[ItemRow], task: str, *, source: str, bad_rows: list[RowError]
) -> ItemReport:
    """Score every item with the task's scorer (template reasons: the score is what is
    compared) and compare with the labels, beside the item-level baseline."""
    from localjudge.evals.runner import run_evals
    from localjudge.scorers import make_scorer

    scorer = make_scorer(task, judge, reason="template")
    data = [
        {"input": r.input, "output": r.output, "context": list(r.context), "id": r.number}
        for r in rows
    ]
    started = time.perf_counter()
    result = run_evals(data, [scorer])
    seconds = time.perf_counter() - started
    kept, scores, errors = [], [], []
    for row, item in zip(rows, result.items, strict=True):
        if item.errors:
            errors.append((row.number, "; ".join(item.errors.values())))
            continue
        kept.append(row)
        scores.append(next(iter(item.scorer_results.values())).score)
    rules = as_task(task)  # resolved once: "rubric:FILE" reads its file
    word = [baseline_score(rules, r) for r in kept]
    baseline = {} if None in word else {"word baseline": word}
    return ItemReport(
        task=task,
        source=source,
        model=judge.name,
        rows=kept,
        scores={f"{task} scorer": scores, **baseline},
        bad_rows=bad_rows,
        item_errors=errors,
        seconds=seconds,
    )
