"""The only part of localjudge that imports llama_cpp; it owns the native handles.

`LlamaEngine`, `EngineConfig` and `llama_build_info` are imported on first use, so the pure
parts (the scheduler, the fake engine, the GGUF reader) load without llama_cpp.
"""

from typing import TYPE_CHECKING, Any

from localjudge.engine.gguf import GGUFHeader, read_gguf_header
from localjudge.engine.plan import (
    BatchToken,
    PrefixPrefill,
    SeqCopy,
    SeqRestore,
    SeqTrim,
    StepOutput,
    StepPlan,
)

if TYPE_CHECKING:
    from localjudge.engine.llama import EngineConfig, LlamaEngine, llama_build_info

_LLAMA = ("EngineConfig", "LlamaEngine", "llama_build_info")


def __getattr__(name: str) -> Any:
    if name in _LLAMA:
        from localjudge.engine import llama

        return getattr(llama, name)
    raise AttributeError(f"module 'localjudge.engine' has no attribute {name!r}")


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
