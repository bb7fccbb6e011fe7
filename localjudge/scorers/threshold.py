"""Pass/fail thresholds on scores, with the command line's gate semantics.

A number is the highest score that passes: the built-in scorers score what is wrong
(hallucinated claims, toxic statements), as `eval --fail-above SCORER=X` reads them. A
mapping `{"min": a, "max": b}` gives both bounds, Mastra's `ThresholdConfig` object form.
(Mastra's bare number is a minimum; write `{"min": x}` for that.)
"""

from __future__ import annotations

import math
from typing import Any

Threshold = float | dict[str, float]


def check_threshold(value: Any, scorer: str = "scorer") -> Threshold | None:
    """`value` checked: None, a number in 0..1, or a mapping with "min" and/or "max" in 0..1
    (min not above max)."""
    if value is None:
        return None
    if isinstance(value, dict):
        unknown = set(value) - {"min", "max"}
        if unknown or not value:
            raise ValueError(
                f'{scorer}: a threshold mapping takes "min" and/or "max", not {sorted(value)}'
            )
        bounds = {key: _bound(v, f"{scorer}: threshold {key}") for key, v in value.items()}
        if "min" in bounds and "max" in bounds and bounds["min"] > bounds["max"]:
            raise ValueError(
                f"{scorer}: threshold min {bounds['min']} is above max {bounds['max']}"
            )
        return bounds
    return _bound(value, f"{scorer}: threshold")


def _bound(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"{what} must be a number from 0 to 1, not {value!r}")
    return float(value)


def passes(score: float, threshold: Threshold) -> bool:
    """Whether `score` passes: at most a number threshold, within a mapping's bounds. A
    score that is not a finite number never passes."""
    if not isinstance(score, (int, float)) or not math.isfinite(score):
        return False
    if isinstance(threshold, dict):
        low, high = threshold.get("min"), threshold.get("max")
        return (low is None or score >= low) and (high is None or score <= high)
    return score <= threshold


def threshold_results(
    scores: dict[str, float], thresholds: dict[str, Threshold]
) -> list[dict[str, Any]]:
    """Per scorer with a threshold and a mean score: Mastra's `thresholdResults` entries
    (`id`, `passed`, `averageScore`, `threshold`), judged on the mean, as the CLI gate."""
    return [
        {
            "id": scorer_id,
            "passed": passes(scores[scorer_id], threshold),
            "averageScore": scores[scorer_id],
            "threshold": threshold,
        }
        for scorer_id, threshold in thresholds.items()
        if scorer_id in scores
    ]
