"""The scorers: factories with named steps, on a local judge."""

from localjudge.scorers.base import Scorer, ScorerResult, ScorerRun, StepUsage, shared_judge
from localjudge.scorers.hallucination import (
    HallucinationScorer,
    create_hallucination_scorer,
    hallucination_score,
)
from localjudge.scorers.messages import assistant_text, extract_tool_results, user_text
from localjudge.scorers.text import round_half_up, split_sentences

__all__ = [
    "HallucinationScorer",
    "Scorer",
    "ScorerResult",
    "ScorerRun",
    "StepUsage",
    "assistant_text",
    "create_hallucination_scorer",
    "extract_tool_results",
    "hallucination_score",
    "round_half_up",
    "shared_judge",
    "split_sentences",
    "user_text",
]
