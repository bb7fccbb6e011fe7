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
    VerdictError,
)
from localjudge.judge import Judge
from localjudge.scheduler import ChoicePoint, GenerationRequest, GenerationResult, SamplingParams

__version__ = "0.1.0"

__all__ = [
    "ChecksumError",
    "ChoicePoint",
    "GenerationError",
    "GenerationRequest",
    "GenerationResult",
    "Judge",
    "LocalJudgeError",
    "ModelError",
    "PromptTooLongError",
    "RegistryError",
    "RequestCancelled",
    "SamplingParams",
    "SchemaError",
    "VerdictError",
    "__version__",
]
