"""How sure a quality figure is: percentile intervals of balanced accuracy and AUROC by a
stratified bootstrap over the labelled rows, for each way of judging and for the judge's
difference from each baseline on the same resampled rows (paired).

Each resample draws the positive rows and the negative rows separately, with replacement,
as many of each as there are, so that both classes are in every resample and balanced
accuracy and AUROC are always defined. The draw comes from a fixed seed (numpy's PCG64):
the same rows, scores and seed give the same intervals on every run and machine with the
same numpy.

An interval says how much the figure could move if other rows of the same kind had been
labelled. It says nothing about rows of another kind (another source), nor about the
judge's own run-to-run spread (another training seed).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

RESAMPLES = 1000
LEVEL = 0.95
SEED = 0


@dataclass(frozen=True)
class Interval:
    """A figure on the rows and its percentile interval over the resamples."""

    value: float
    low: float
    high: float

    def to_dict(self) -> dict[str, float]:
        return {"value": self.value, "low": self.low, "high": self.high}

    def __format__(self, spec: str) -> str:
        """`f"{interval:+.2f}"`: the value, then the interval in brackets, each so formatted."""
        return f"{self.value:{spec}} [{self.low:{spec}}, {self.high:{spec}}]"


@dataclass(frozen=True)
class Draw:
    """The resampled row indices: `positive` and `negative` are (resamples, count) arrays of
    indices into the rows, each row of them one resample of that class."""

    positive: np.ndarray
    negative: np.ndarray


CELLS = 2_000_000  # resampled row indices held at once (16 MB), whatever the rows


def draws(labels: list[bool], resamples: int = RESAMPLES, seed: int = SEED) -> Iterator[Draw]:
    """A stratified bootstrap draw over rows with these labels, in chunks of resamples small
    enough to hold at once (the chunks depend on the row count only, not on the machine);
    nothing without both classes or resamples."""
    labels_array = np.asarray(labels, dtype=bool)
    positive = np.flatnonzero(labels_array)
    negative = np.flatnonzero(~labels_array)
    if resamples < 1 or positive.size == 0 or negative.size == 0:
        return
    generator = np.random.default_rng(seed)
    step = max(1, CELLS // labels_array.size)
    for start in range(0, resamples, step):
        count = min(step, resamples - start)
        yield Draw(
            positive=positive[generator.integers(0, positive.size, (count, positive.size))],
            negative=negative[generator.integers(0, negative.size, (count, negative.size))],
        )


def draw(labels: list[bool], resamples: int = RESAMPLES, seed: int = SEED) -> Draw | None:
    """The whole draw at once (for small row sets and checks); None without both classes."""
    chunks = list(draws(labels, resamples, seed))
    if not chunks:
        return None
    return Draw(
        positive=np.concatenate([c.positive for c in chunks]),
        negative=np.concatenate([c.negative for c in chunks]),
    )


def rows_as_drawn(labels: list[bool]) -> Draw:
    """The rows themselves as one "resample" (for the figures on the rows)."""
    labels_array = np.asarray(labels, dtype=bool)
    return Draw(
        positive=np.flatnonzero(labels_array)[None, :],
        negative=np.flatnonzero(~labels_array)[None, :],
    )


def balanced_accuracies(sample: Draw, predictions: list[bool]) -> np.ndarray:
    """Balanced accuracy of the predictions in each resample."""
    said = np.asarray(predictions, dtype=bool)
    return (said[sample.positive].mean(axis=1) + (~said[sample.negative]).mean(axis=1)) / 2


def aurocs(sample: Draw, scores: list[float]) -> np.ndarray:
    """AUROC of the scores in each resample: the share of (positive, negative) pairs the
    positive scores above, ties counting half."""
    values = np.asarray(scores, dtype=float)
    out = np.empty(sample.positive.shape[0])
    for i, (pos, neg) in enumerate(zip(sample.positive, sample.negative, strict=True)):
        below = np.sort(values[neg])
        under = np.searchsorted(below, values[pos], side="left")
        level = np.searchsorted(below, values[pos], side="right")
        out[i] = (under.sum() + (level - under).sum() / 2) / (pos.size * neg.size)
    return out


def interval(value: float, samples: np.ndarray, level: float = LEVEL) -> Interval:
    """`value` with the central `level` share of the resampled figures around it."""
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(samples, [tail, 100 - tail])
    return Interval(value=float(value), low=float(low), high=float(high))


@dataclass(frozen=True)
class WayIntervals:
    """Intervals of one way of judging."""

    balanced_accuracy: Interval
    auroc: Interval

    def to_dict(self) -> dict[str, dict[str, float]]:
        return {
            "balanced_accuracy": self.balanced_accuracy.to_dict(),
            "auroc": self.auroc.to_dict(),
        }


@dataclass(frozen=True)
class Intervals:
    """Every way's intervals, and the first way's (the judge's) difference from each of the
    others on the same resamples."""

    ways: dict[str, WayIntervals]
    differences: dict[str, WayIntervals]  # judge minus the named way
    resamples: int
    level: float
    seed: int

    def to_dict(self) -> dict:
        return {
            "method": "stratified bootstrap, percentile",
            "resamples": self.resamples,
            "level": self.level,
            "seed": self.seed,
            "ways": {name: w.to_dict() for name, w in self.ways.items()},
            "judge_minus": {name: d.to_dict() for name, d in self.differences.items()},
        }


def intervals(
    labels: list[bool],
    ways: list[tuple[str, list[float], list[bool]]],
    *,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
    seed: int = SEED,
) -> Intervals | None:
    """Intervals for `ways` ((name, scores, predictions), the judge first) on rows with
    these labels; None without both classes or with `resamples` 0."""
    samples: dict[str, tuple[list, list]] = {name: ([], []) for name, _, _ in ways}
    for chunk in draws(labels, resamples, seed):  # nothing without both classes
        for name, scores, predictions in ways:
            samples[name][0].append(balanced_accuracies(chunk, predictions))
            samples[name][1].append(aurocs(chunk, scores))
    if not samples[ways[0][0]][0]:
        return None
    whole = rows_as_drawn(labels)
    figures = {
        name: (
            (balanced_accuracies(whole, predictions)[0], np.concatenate(samples[name][0])),
            (aurocs(whole, scores)[0], np.concatenate(samples[name][1])),
        )
        for name, scores, predictions in ways
    }

    def both(pairs) -> WayIntervals:
        (bacc, bacc_samples), (area, area_samples) = pairs
        return WayIntervals(
            interval(bacc, bacc_samples, level), interval(area, area_samples, level)
        )

    judge = ways[0][0]
    differences = {}
    for name, _, _ in ways[1:]:
        pairs = tuple(
            (mine[0] - theirs[0], mine[1] - theirs[1])
            for mine, theirs in zip(figures[judge], figures[name], strict=True)
        )
        differences[name] = both(pairs)
    return Intervals(
        ways={name: both(pairs) for name, pairs in figures.items()},
        differences=differences,
        resamples=resamples,
        level=level,
        seed=seed,
    )
