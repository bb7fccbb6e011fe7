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


def run_checks() -> Iterator[Check]:
    from localjudge.engine import llama_build_info
    from localjudge.grammar.paths import home
    from localjudge.registry import load_registry, verify

    info = llama_build_info()
    features = [
        f.split(" = ")[0] for f in str(info["system_info"]).split(" | ") if f.endswith("= 1")
    ]
    yield Check(
        "llama.cpp",
        True,
        f"llama-cpp-python {info['llama_cpp_python']}; CPU features: {', '.join(features[:12])}",
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
    try:
        result = verify(default)
        entry = entries[default]
        note = "" if entry.meaningful else "; a base model: its verdicts are not meaningful"
        yield Check("default model", result.ok, f"{default} at {result.path}, sha256 OK{note}")
    except Exception as error:
        yield Check("default model", False, str(error))
        return
    yield _offline_check(default)


def _offline_check(model: str) -> Check:
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
        with Judge(model, slots=1, max_prefixes=1, n_ctx=1024) as judge:
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
