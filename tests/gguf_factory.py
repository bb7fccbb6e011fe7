"""Tiny synthetic GGUF files for header and registry tests."""

from __future__ import annotations

import struct
from pathlib import Path


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def write_gguf(path: Path, *, num_tensors: int = 1, chat_template: str | None = None) -> Path:
    kv = [("general.architecture", "llama"), ("llama.context_length", 2048)]
    if chat_template is not None:
        kv.append(("tokenizer.chat_template", chat_template))
    body = (
        b"GGUF" + struct.pack("<I", 3) + struct.pack("<Q", num_tensors) + struct.pack("<Q", len(kv))
    )
    for key, value in kv:
        body += _string(key)
        if isinstance(value, int):
            body += struct.pack("<I", 4) + struct.pack("<I", value)
        else:
            body += struct.pack("<I", 8) + _string(value)
    path.write_bytes(body + b"\0" * 64)
    return path
