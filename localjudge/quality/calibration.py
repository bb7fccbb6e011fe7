"""`localjudge calibrate`: the P(yes) threshold that fits a judge on labelled rows, chosen
with cross-validation so the reported gain is measured on rows the choice did not see."""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field

import numpy as np

from localjudge.quality.intervals import (
    Interval,
    balanced_accuracies,
    draws,
    interval,
    rows_as_drawn,
)
from localjudge.quality.labelled import Agreement, statements_shape, windows_shape


def _rates(labels: list[bool], predictions: list[bool]) -> tuple[float, float]:
    """(true-positive rate, false-positive rate)."""
    positives = sum(labels)
    negatives = len(labels) - positives
    tp = sum(e and p for e, p in zip(labels, predictions, strict=True))
    fp = sum(p and not e for e, p in zip(labels, predictions, strict=True))
    return (tp / positives if positives else 0.0, fp / negatives if negatives else 0.0)


def choose_threshold(
    labels: list[bool], scores: list[float], *, max_fpr: float | None = None
) -> float:
    """The threshold (verdict yes when P(yes) >= it) that maximises balanced accuracy, or
    with `max_fpr` the true-positive rate among thresholds whose false-positive rate stays
    within it. Candidates lie halfway between neighbouring scores; ties go to the candidate
    nearest 0.5."""
    distinct = sorted(set(scores))
    candidates = [0.5, 0.0, 1.0 + 1e-9]
    candidates += [(a + b) / 2 for a, b in zip(distinct, distinct[1:], strict=False)]
    best, best_key = 0.5, None
    for cut in candidates:
        predictions = [s >= cut for s in scores]
        tpr, fpr = _rates(labels, predictions)
        if max_fpr is not None:
            if fpr > max_fpr:
                continue
            key = (tpr, (tpr + 1 - fpr) / 2, -abs(cut - 0.5))
        else:
            key = ((tpr + 1 - fpr) / 2, -abs(cut - 0.5))
        if best_key is None or key > best_key:
            best, best_key = cut, key
    return min(best, 1.0)


@dataclass
class Calibration:
    """A chosen threshold and what cross-validation says it is worth."""

    threshold: float  # chosen on all rows
    folds: int
    objective: str  # "balanced accuracy" or "true-positive rate at FPR <= x"
    before: Agreement  # held-out agreement at 0.5 (the judge's own verdicts)
    after: Agreement  # held-out agreement with each fold's threshold chosen on the others
    fold_thresholds: list[float]
    # after minus before in balanced accuracy, with its 95% interval: a stratified bootstrap
    # of the rows' held-out verdicts, both ways on the same resampled rows (None with one
    # class). It resamples the verdicts; it does not choose the thresholds again.
    gain: Interval | None = None

    @property
    def gain_is_sure(self) -> bool:
        """Whether the gain's interval lies wholly above zero."""
        return self.gain is not None and self.gain.low > 0


def gain_interval(labels: list[bool], after: list[bool], before: list[bool]) -> Interval | None:
    """Balanced accuracy of `after` minus that of `before`, with its 95% interval over
    stratified bootstrap resamples of the rows (both on the same resampled rows); None
    without both classes."""
    gains = [balanced_accuracies(c, after) - balanced_accuracies(c, before) for c in draws(labels)]
    if not gains:
        return None
    whole = rows_as_drawn(labels)
    value = balanced_accuracies(whole, after)[0] - balanced_accuracies(whole, before)[0]
    return interval(value, np.concatenate(gains))


def calibrate(
    labels: list[bool],
    scores: list[float],
    *,
    folds: int = 5,
    max_fpr: float | None = None,
    seed: int = 0,
) -> Calibration:
    """Cross-validated threshold choice: each fold's rows get the threshold chosen on the
    other folds, so `after` is measured on rows the choice did not see."""
    n = len(labels)
    folds = max(2, min(folds, n))
    order = list(range(n))
    random.Random(seed).shuffle(order)
    fold_of = {index: i % folds for i, index in enumerate(order)}
    held_out = [False] * n
    fold_thresholds = []
    for fold in range(folds):
        train = [i for i in range(n) if fold_of[i] != fold]
        cut = choose_threshold(
            [labels[i] for i in train], [scores[i] for i in train], max_fpr=max_fpr
        )
        fold_thresholds.append(cut)
        for i in range(n):
            if fold_of[i] == fold:
                held_out[i] = scores[i] >= cut
    objective = (
        "balanced accuracy" if max_fpr is None else f"true-positive rate at FPR <= {max_fpr:g}"
    )
    default = [s >= 0.5 for s in scores]
    return Calibration(
        threshold=choose_threshold(labels, scores, max_fpr=max_fpr),
        folds=folds,
        objective=objective,
        before=Agreement.of(labels, default, scores),
        after=Agreement.of(labels, held_out, scores),
        fold_thresholds=fold_thresholds,
        gain=gain_interval(labels, held_out, default),
    )


@dataclass
class CalibrationRun:
    """`calibrate` on one labelled file: the judge's verdicts, the chosen threshold with its
    cross-validated before/after, and what is stored with the model."""

    task: str
    model: str
    prompt_version: str
    source: str  # the file's name
    result: Calibration
    rows: int  # rows the judge answered
    unreadable: int
    judge_errors: int
    statements: bool = False  # each text judged statement by statement (`judge_rows`)
    left_out: str = ""  # what the statements leave out of each text (`VerdictTask.leaves_out`)
    weights: dict = field(default_factory=dict)  # the judge's `weights`: what it was fitted on
    # how long contexts were read (a windowed task's; `windows_shape`): the shape in which
    # the threshold holds
    windows: str | int | None = None
    window_tokens: int | None = None

    def shape(self, separator: str) -> str:
        """How each row was judged, beyond one verdict on its whole text, in words."""
        parts = [statements_shape(self.left_out)] if self.statements else []
        if self.windows is not None:
            parts.append(windows_shape(self.windows, self.window_tokens))
        return "".join(f"{separator}{part}" for part in parts)

    def record(self, date: str) -> dict:
        """What the registry stores for this model and prompt version."""
        result = self.result
        return {
            "threshold": round(result.threshold, 6),
            "source": f"calibrate {self.source}: {self.rows} rows, {result.folds}-fold, "
            f"{result.objective}{self.shape(', ')}",
            "date": date,
            "rows": self.rows,
            "heldout_balanced_accuracy": {
                "before": round(result.before.balanced_accuracy, 4),
                "after": round(result.after.balanced_accuracy, 4),
                "gain_interval": (
                    [round(result.gain.low, 4), round(result.gain.high, 4)] if result.gain else None
                ),
            },
            "fold_thresholds": [round(t, 6) for t in result.fold_thresholds],
            **({"weights": dict(self.weights)} if self.weights else {}),
        }

    def to_dict(self, record: dict, *, stored: bool) -> dict:
        return {
            "model": self.model,
            "prompt_version": self.prompt_version,
            "stored": stored,
            **record,
            "unreadable_rows": self.unreadable,
            "judge_errors": self.judge_errors,
            "before": asdict(self.result.before),
            "after": asdict(self.result.after),
        }

    def text(self, *, stored: bool) -> str:
        result = self.result
        lines = [
            f"{self.task}: {self.rows} rows judged by {self.model} ({self.unreadable} unreadable, "
            f"{self.judge_errors} the judge could not answer); {result.folds}-fold, "
            f"{result.objective}{self.shape('; ')}",
            f"  {'held out':24} {'accuracy':>9} {'balanced':>9} {'F1':>6} {'FPR':>6}",
        ]
        for label, a in (
            ("before (P(yes) >= 0.5)", result.before),
            ("after (calibrated)", result.after),
        ):
            lines.append(
                f"  {label:24} {a.accuracy:9.2f} {a.balanced_accuracy:9.2f} {a.f1:6.2f} "
                f"{a.false_positive_rate:6.2f}"
            )
        where = (
            f"stored for {self.model}, prompt {self.prompt_version}"
            if stored
            else "not stored (--dry-run)"
        )
        if result.gain is not None:
            gain = result.gain
            lines.append(
                f"  gain in balanced accuracy {gain.value:+.2f}, 95% interval "
                f"[{gain.low:+.2f}, {gain.high:+.2f}]"
                + (
                    ""
                    if result.gain_is_sure
                    else ": not surely above zero on rows like these; more labelled rows "
                    "would say whether the threshold helps"
                )
            )
        lines.append(f"  threshold P(yes) >= {result.threshold:.4f}: {where}")
        return "\n".join(lines)


def calibrate_rows(
    judge, rows: list, task, *, source: str, unreadable: int = 0, folds: int = 5,
    max_fpr: float | None = None, statements: bool = False, windows=None,
    window_tokens: int | None = None,
) -> CalibrationRun:  # fmt: skip
    """Judge labelled verdict rows and choose the threshold on them; DataError when they
    are item rows, or the judge answered too few rows of both labels. With `statements`,
    each text is judged statement by statement and a row takes its most flagged statement's
    P(yes) (`judge_rows`): a row is then flagged at a threshold exactly when one of its
    statements is, which is how the scorers use the threshold on an output. `windows` and
    `window_tokens`: the hallucination scorer's evidence-window options (default its top-k
    and the judge's own size), so that the threshold is fitted on the P(yes) the scorer
    will read; the run says which it used."""
    from localjudge.quality.labelled import DataError, Row, as_task, judge_rows, windows_read

    task = as_task(task)
    if not all(isinstance(row, Row) for row in rows):
        raise DataError("calibrate needs verdict rows (a label per claim or text)")
    if not task.windowed and (windows is not None or window_tokens is not None):
        raise DataError(f"evidence windows apply to tasks with a context; {task.name} has none")
    verdicts = judge_rows(
        judge, rows, task, statements=statements, windows=windows, window_tokens=window_tokens
    )
    answered = [(r, v) for r, v in zip(rows, verdicts, strict=True) if v.p_yes is not None]
    labels = [r.label for r, _ in answered]
    if len(answered) < 4 or all(labels) or not any(labels):
        raise DataError(
            f"calibration needs rows of both labels the judge answered; it has {len(answered)} "
            f"({sum(labels)} labelled yes)"
        )
    result = calibrate(labels, [v.p_yes for _, v in answered], folds=folds, max_fpr=max_fpr)
    read, size = windows_read(judge, task, windows, window_tokens)
    return CalibrationRun(
        task=task.name,
        model=judge.name,
        prompt_version=task.prompt_version,
        source=source,
        result=result,
        rows=len(answered),
        unreadable=unreadable,
        judge_errors=len(rows) - len(answered),
        statements=statements,
        left_out=task.leaves_out if statements else "",
        weights=judge.weights,
        windows=read,
        window_tokens=size,
    )
