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

SCORERS = {"hallucination": create_hallucination_scorer, "toxicity": create_toxicity_scorer}


def make_scorer(name: str, model=None, **options):
    """A scorer by its short name ("hallucination", "toxicity")."""
    try:
        factory = SCORERS[name]
    except KeyError:
        raise ValueError(f"unknown scorer {name!r}; known: {', '.join(SCORERS)}") from None
    return factory(model, **options)


__all__ = [
    "SCORERS",
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
    "make_scorer",
    "round_half_up",
    "shared_judge",
    "split_opinions",
    "split_sentences",
    "toxicity_score",
    "user_text",
]
