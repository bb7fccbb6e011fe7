from __future__ import annotations

import pytest

from localjudge.engine.gguf import read_gguf_header
from localjudge.errors import ModelError
from tests.gguf_factory import write_gguf


def test_reads_synthetic_header(tmp_path):
    header = read_gguf_header(write_gguf(tmp_path / "m.gguf", chat_template="{{ messages }}"))
    assert header.version == 3
    assert header.architecture == "llama"
    assert header.context_length == 2048
    assert header.chat_template == "{{ messages }}"


def test_missing_file(tmp_path):
    with pytest.raises(ModelError, match="not found"):
        read_gguf_header(tmp_path / "nope.gguf")


def test_not_gguf(tmp_path):
    path = tmp_path / "x.gguf"
    path.write_bytes(b"PK\x03\x04 definitely a zip")
    with pytest.raises(ModelError, match="not a GGUF file"):
        read_gguf_header(path)


def test_truncated_header(tmp_path):
    full = write_gguf(tmp_path / "full.gguf").read_bytes()
    path = tmp_path / "cut.gguf"
    path.write_bytes(full[:40])
    with pytest.raises(ModelError, match="truncated"):
        read_gguf_header(path)


def test_directory_is_not_a_model(tmp_path):
    with pytest.raises(ModelError, match="not a file"):
        read_gguf_header(tmp_path)
