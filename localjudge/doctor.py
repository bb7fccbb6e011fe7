"""`localjudge doctor`: what this installation can do, and whether it is sound."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


def run_checks(model: str | None = None, **engine_options) -> Iterator[Check]:
    """Every check in order; `model` (default: the default model) and `engine_options`
    (n_gpu_layers, n_ctx, n_threads) are those of the judge the offline check loads."""
    from localjudge.engine import llama_build_info
    from localjudge.model_registry import load_registry, verify
    from localjudge.paths import home

    info = llama_build_info()
    features = [
        f.split(" = ")[0] for f in str(info["system_info"]).split(" | ") if f.endswith("= 1")
    ]
    yield Check(
        "llama.cpp",
        True,
        f"llama-cpp-python {info['llama_cpp_python']}; CPU features: {', '.join(features[:12])}",
    )
    if info["amx_kernels"]:
        yield Check(
            "AMX kernels",
            True,
            "in this llama.cpp build and used (LOCALJUDGE_LLAMA_AMX=1)"
            if info["extra_buffers"]
            else "in this llama.cpp build, not used: their tile set-up is broken in this "
            "llama.cpp and dies with SIGILL (`make install` builds without them; "
            "LOCALJUDGE_LLAMA_AMX=1 uses them with a build known good)",
        )
    yield Check(
        "GPU offload",
        True,
        "available (n_gpu_layers defaults to all)"
        if info["gpu_offload"]
        else "not in this build (CPU only; `make install-cuda` for CUDA)",
    )
    yield Check("threads", True, f"{info['physical_cores']} physical cores (used by default)")
    folder = home()
    writable = os.access(folder, os.W_OK)
    yield Check(
        "cache folder", writable, f"{folder} ({'writable' if writable else 'not writable'})"
    )
    default, entries = load_registry()
    name = model or default
    label = "model" if model else "default model"
    try:
        result = verify(name)
        entry = entries.get(result.name)
        note = (
            "; a base model: its verdicts are not meaningful"
            if entry is not None and not entry.meaningful
            else ""
        )
        checksum = "sha256 OK" if result.ok else "not in the registry: no sha256 to compare"
        yield Check(label, True, f"{result.name} at {result.path}, {checksum}{note}")
    except Exception as error:
        yield Check(label, False, str(error))
        return
    yield _offline_check(name, engine_options)


def _offline_check(model: str, engine_options: dict) -> Check:
    """Load the judge and generate once while every way to open a socket raises."""
    from localjudge.judge import Judge

    attempts: list[str] = []
    saved = socket.socket, socket.create_connection, socket.getaddrinfo

    def refuse(*args, **kwargs):
        attempts.append(repr(args[:2]))
        raise OSError("network blocked by localjudge doctor")

    socket.socket = refuse  # type: ignore[assignment, misc]
    socket.create_connection = refuse  # type: ignore[assignment]
    socket.getaddrinfo = refuse  # type: ignore[assignment]
    try:
        options = {k: v for k, v in engine_options.items() if v is not None}
        options.setdefault("n_ctx", 1024)
        with Judge.load(model, slots=1, max_prefixes=1, **options) as judge:
            judge.generate_json("Text: offline check.\nJSON: ", "reason", max_tokens=16)
    except Exception as error:
        return Check("offline", False, f"generation failed with the network blocked: {error}")
    finally:
        socket.socket, socket.create_connection, socket.getaddrinfo = saved  # type: ignore[misc]
    if attempts:
        return Check("offline", False, f"{len(attempts)} network attempt(s): {attempts[0]}")
    return Check(
        "offline", True, "loaded the judge and generated with sockets blocked: no network attempt"
    )
