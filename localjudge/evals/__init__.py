"""Evaluation over datasets: dev-set quality measurements."""

from localjudge.evals.quality import (
    Metrics,
    hallucination_quality,
    load_devset,
    overlap_verdict,
    toxicity_quality,
    wordlist_verdict,
)

__all__ = [
    "Metrics",
    "hallucination_quality",
    "load_devset",
    "overlap_verdict",
    "toxicity_quality",
    "wordlist_verdict",
]
