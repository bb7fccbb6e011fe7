"""The scorers: factories with named steps, on a local judge."""

from localjudge.scorers.base import Scorer, ScorerResult, ScorerRun, StepUsage, shared_judge
from localjudge.scorers.hallucination import (
    HallucinationScorer,
    create_hallucination_scorer,
    hallucination_score,
)
from localjudge.scorers.messages import assistant_text, extract_tool_results, user_text
from localjudge.scorers.text import round_half_up, split_sentences
from localjudge.scorers.toxicity import (
    SEVERITY_WEIGHTS,
    ToxicityScorer,
    create_toxicity_scorer,
    split_opinions,
    toxicity_score,
)

__all__ = [
    "SEVERITY_WEIGHTS",
    "HallucinationScorer",
    "Scorer",
    "ScorerResult",
    "ScorerRun",
    "StepUsage",
    "ToxicityScorer",
    "assistant_text",
    "create_hallucination_scorer",
    "create_toxicity_scorer",
    "extract_tool_results",
    "hallucination_score",
    "round_half_up",
    "shared_judge",
    "split_opinions",
    "split_sentences",
    "toxicity_score",
    "user_text",
]
