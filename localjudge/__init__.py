"""localjudge: offline LLM-as-judge evaluation on local GGUF models through llama.cpp."""

from localjudge.errors import (
    ChecksumError,
    GenerationError,
    LocalJudgeError,
    ModelError,
    PromptTooLongError,
    RegistryError,
    RequestCancelled,
    SchemaError,
    ScorerError,
    ScorerInputError,
    VerdictError,
)
from localjudge.evals.live import LiveScorer, LiveStats
from localjudge.evals.runner import EvalItem, EvalResult, ItemResult, run_evals, run_evals_async
from localjudge.judge import Judge
from localjudge.scheduler import ChoicePoint, GenerationRequest, GenerationResult, SamplingParams
from localjudge.scorers import (
    Scorer,
    ScorerResult,
    ScorerRun,
    create_hallucination_scorer,
    create_rubric_scorer,
    create_toxicity_scorer,
    extract_tool_results,
)
from localjudge.scorers.registry import make_scorer, register_scorer

__version__ = "0.2.0"

__all__ = [
    "ChecksumError",
    "ChoicePoint",
    "EvalItem",
    "EvalResult",
    "GenerationError",
    "GenerationRequest",
    "GenerationResult",
    "ItemResult",
    "Judge",
    "LiveScorer",
    "LiveStats",
    "LocalJudgeError",
    "ModelError",
    "PromptTooLongError",
    "RegistryError",
    "RequestCancelled",
    "SamplingParams",
    "SchemaError",
    "Scorer",
    "ScorerError",
    "ScorerInputError",
    "ScorerResult",
    "ScorerRun",
    "VerdictError",
    "__version__",
    "create_hallucination_scorer",
    "create_rubric_scorer",
    "create_toxicity_scorer",
    "extract_tool_results",
    "make_scorer",
    "register_scorer",
    "run_evals",
    "run_evals_async",
]
