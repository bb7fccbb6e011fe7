"""The scorers: factories with named steps, on a local judge."""

import inspect

from localjudge.scorers.base import Scorer, ScorerResult, ScorerRun, StepUsage, shared_judge
from localjudge.scorers.hallucination import (
    HallucinationScorer,
    create_hallucination_scorer,
    hallucination_score,
)
from localjudge.scorers.messages import assistant_text, extract_tool_results, user_text
from localjudge.scorers.text import round_half_up, split_sentences, split_statements
from localjudge.scorers.toxicity import (
    SEVERITY_WEIGHTS,
    ToxicityScorer,
    create_toxicity_scorer,
    toxicity_score,
)

# The scorer registry: short name -> (factory, scorer class). A new scorer is one module
# here plus one line.
SCORERS = {
    "hallucination": (create_hallucination_scorer, HallucinationScorer),
    "toxicity": (create_toxicity_scorer, ToxicityScorer),
}


def scorer_options(name: str) -> set[str]:
    """The keyword options a registered scorer takes (its class and the base class)."""
    _, cls = _entry(name)
    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        for parameter in inspect.signature(init).parameters.values():
            if parameter.kind is parameter.KEYWORD_ONLY:
                names.add(parameter.name)
    return names


def _entry(name: str):
    try:
        return SCORERS[name]
    except KeyError:
        raise ValueError(f"unknown scorer {name!r}; known: {', '.join(SCORERS)}") from None


def make_scorer(name: str, model=None, **options):
    """A scorer by its short name ("hallucination", "toxicity"). Options that are None,
    or that this scorer does not take, are left out, so one option set can configure
    several scorers (`score_mode` reaches the toxicity scorer only)."""
    factory, _ = _entry(name)
    accepted = scorer_options(name)
    chosen = {k: v for k, v in options.items() if v is not None and k in accepted}
    return factory(model, **chosen)


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
    "scorer_options",
    "round_half_up",
    "shared_judge",
    "split_sentences",
    "split_statements",
    "toxicity_score",
    "user_text",
]
