"""The only part of localjudge that imports llama_cpp; it owns the native handles.

`LlamaEngine`, `EngineConfig` and `llama_build_info` are imported on first use, so the pure
parts (the scheduler, the fake engine, the GGUF reader) load without llama_cpp.
`open_engine` is the one place that chooses an engine for a model file.
"""

from pathlib import Path
from typing import TYPE_CHECKING, Any

from localjudge.engine.base import Engine
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
from localjudge.errors import ModelError

if TYPE_CHECKING:
    from localjudge.engine.llama import EngineConfig, LlamaEngine, llama_build_info

_LLAMA = ("EngineConfig", "LlamaEngine", "llama_build_info")


ENGINE_KINDS = ("llama",)  # engines that open a model file


def open_engine(kind: str, path: str | Path, config: "EngineConfig") -> Engine:
    """The engine of `kind` on the model file at `path`: "llama" is llama.cpp (the test
    double, `FakeEngine`, takes a script instead of a file: `localjudge.testing`)."""
    if kind == "llama":
        from localjudge.engine.llama import LlamaEngine

        return LlamaEngine(path, config)
    raise ModelError(f"unknown engine {kind!r}; known: {', '.join(ENGINE_KINDS)}")


def __getattr__(name: str) -> Any:
    if name in _LLAMA:
        from localjudge.engine import llama

        return getattr(llama, name)
    raise AttributeError(f"module 'localjudge.engine' has no attribute {name!r}")


__all__ = [
    "ENGINE_KINDS",
    "BatchToken",
    "Engine",
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
    "open_engine",
    "read_gguf_header",
]
