"""The scorers: factories with named steps, on a local judge."""

from localjudge.scorers.base import Scorer
from localjudge.scorers.hallucination import (
    HallucinationScorer,
    create_hallucination_scorer,
    hallucination_score,
)
from localjudge.scorers.messages import assistant_text, extract_tool_results, user_text
from localjudge.scorers.registry import (
    SCORERS,
    make_scorer,
    register_scorer,
    scorer_names,
    scorer_options,
    task_names,
    verdict_task,
)
from localjudge.scorers.result import ScorerResult, StepUsage
from localjudge.scorers.rubric import RubricScorer, create_rubric_scorer
from localjudge.scorers.scorer_run import ScorerRun
from localjudge.scorers.shared import shared_judge
from localjudge.scorers.task import Baseline, LabelledRow, VerdictTask
from localjudge.scorers.text import round_half_up, split_sentences, split_statements
from localjudge.scorers.toxicity import (
    SEVERITY_WEIGHTS,
    ToxicityScorer,
    create_toxicity_scorer,
    toxicity_score,
)

__all__ = [
    "Baseline",
    "LabelledRow",
    "VerdictTask",
    "SCORERS",
    "SEVERITY_WEIGHTS",
    "HallucinationScorer",
    "RubricScorer",
    "Scorer",
    "ScorerResult",
    "ScorerRun",
    "StepUsage",
    "ToxicityScorer",
    "assistant_text",
    "create_hallucination_scorer",
    "create_rubric_scorer",
    "create_toxicity_scorer",
    "extract_tool_results",
    "hallucination_score",
    "make_scorer",
    "register_scorer",
    "scorer_names",
    "scorer_options",
    "round_half_up",
    "shared_judge",
    "split_sentences",
    "split_statements",
    "task_names",
    "toxicity_score",
    "user_text",
    "verdict_task",
]
