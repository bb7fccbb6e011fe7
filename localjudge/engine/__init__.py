"""The only part of localjudge that imports llama_cpp; it owns the native handles."""

from localjudge.engine.gguf import GGUFHeader, read_gguf_header
from localjudge.engine.llama import EngineConfig, LlamaEngine, llama_build_info
from localjudge.engine.plan import (
    BatchToken,
    PrefixPrefill,
    SeqCopy,
    SeqRestore,
    SeqTrim,
    StepOutput,
    StepPlan,
)

__all__ = [
    "BatchToken",
    "EngineConfig",
    "GGUFHeader",
    "LlamaEngine",
    "PrefixPrefill",
    "SeqCopy",
    "SeqRestore",
    "SeqTrim",
    "StepOutput",
    "StepPlan",
    "llama_build_info",
    "read_gguf_header",
]
