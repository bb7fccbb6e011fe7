"""`load_judge`: how the front ends (the command line, `serve`, Ray workers, the pytest
fixture) turn a model name into a judge. `LOCALJUDGE_ENGINE=fake`, or the model "fake",
gives the scripted fake judge (`localjudge.testing.FakeJudge`) for tests of everything
above the engine; otherwise `Judge.load` opens the model with llama.cpp."""

from __future__ import annotations

import os
from typing import Any

from localjudge.errors import ModelError
from localjudge.judge import Judge

ENGINE_VARIABLE = "LOCALJUDGE_ENGINE"


def wants_fake(model: Any = None) -> bool:
    """Whether `model` or the environment asks for the scripted fake judge."""
    kind = os.environ.get(ENGINE_VARIABLE, "llama")
    if kind not in ("llama", "fake"):
        raise ModelError(f"unknown {ENGINE_VARIABLE} {kind!r}; known: llama, fake")
    return str(model) == "fake" or kind == "fake"


def load_judge(model: Any = None, **options: Any) -> Judge:
    """The judge for `model` (a registry name, a .gguf path, None for the default), with
    `Judge.load`'s options; the fake judge when `wants_fake(model)`."""
    if not wants_fake(model):
        return Judge.load(model, **options)
    from localjudge.testing import FakeJudge

    return FakeJudge(
        slots=options.get("slots") or 4,
        n_ctx=options.get("n_ctx") or 20000,
        cache_prefixes=options.get("cache_prefixes", False),
        prompt_cache_mib=options.get("prompt_cache_mib"),
        keep_prompts=options.get("keep_prompts"),
    )
