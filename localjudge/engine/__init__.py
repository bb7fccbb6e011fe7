"""The only part of localjudge that imports llama_cpp; it owns the native handles."""

from localjudge.engine.gguf import GGUFHeader, read_gguf_header
from localjudge.engine.llama import EngineConfig, LlamaEngine, llama_build_info
from localjudge.engine.plan import (
    BatchToken,
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
    "SeqCopy",
    "SeqRestore",
    "SeqTrim",
    "StepOutput",
    "StepPlan",
    "llama_build_info",
    "read_gguf_header",
]
