"""Judge quality: agreement of a judge's verdicts with labelled data, beside trivial
baselines."""

from localjudge.quality.devsets import (
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
