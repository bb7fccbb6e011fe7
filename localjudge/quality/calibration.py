"""`localjudge calibrate`: the P(yes) threshold that fits a judge on labelled rows, chosen
with cross-validation so the reported gain is measured on rows the choice did not see."""

from __future__ import annotations

import random
from dataclasses import dataclass

from localjudge.quality.labelled import Agreement


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
    return Calibration(
        threshold=choose_threshold(labels, scores, max_fpr=max_fpr),
        folds=folds,
        objective=objective,
        before=Agreement.of(labels, [s >= 0.5 for s in scores], scores),
        after=Agreement.of(labels, held_out, scores),
        fold_thresholds=fold_thresholds,
    )
