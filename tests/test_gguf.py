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


def _nested_array_gguf(path, depth: int):
    """A GGUF whose one metadata value is an array of arrays `depth` levels deep."""
    import struct

    body = b"GGUF" + struct.pack("<I", 3) + struct.pack("<Q", 1) + struct.pack("<Q", 1)
    key = b"evil.nesting"
    body += struct.pack("<Q", len(key)) + key + struct.pack("<I", 9)  # an array...
    body += (struct.pack("<I", 9) + struct.pack("<Q", 1)) * depth  # ...of one array, and so on
    body += struct.pack("<I", 4) + struct.pack("<Q", 1) + struct.pack("<I", 7)
    path.write_bytes(body + b"\0" * 64)
    return path


def test_deeply_nested_metadata_is_a_model_error_not_a_recursion_error(tmp_path):
    path = _nested_array_gguf(tmp_path / "deep.gguf", depth=100_000)
    with pytest.raises(ModelError, match="nested too deep"):
        read_gguf_header(path)
    assert read_gguf_header(_nested_array_gguf(tmp_path / "ok.gguf", depth=2)).version == 3


def test_huge_declared_counts_fail_fast(tmp_path):
    import struct

    body = b"GGUF" + struct.pack("<I", 3) + struct.pack("<Q", 1) + struct.pack("<Q", 2**62)
    path = tmp_path / "huge.gguf"
    path.write_bytes(body + b"\0" * 16)
    with pytest.raises(ModelError, match="truncated"):
        read_gguf_header(path)


def _token_list_gguf(path, tokens: list[bytes]):
    """A GGUF whose metadata is a long token list (an array of strings) and then a scalar."""
    import struct

    def string(data: bytes) -> bytes:
        return struct.pack("<Q", len(data)) + data

    body = b"GGUF" + struct.pack("<I", 3) + struct.pack("<Q", 1) + struct.pack("<Q", 2)
    body += string(b"tokenizer.ggml.tokens") + struct.pack("<I", 9)
    body += struct.pack("<I", 8) + struct.pack("<Q", len(tokens))
    body += b"".join(string(token) for token in tokens)
    body += string(b"llama.context_length") + struct.pack("<I", 4) + struct.pack("<I", 4096)
    path.write_bytes(body + b"\0" * 64)
    return path


def test_a_long_token_list_is_stepped_over_and_the_keys_after_it_read(tmp_path):
    tokens = [f"tok{n}".encode() * (n % 7) for n in range(1000)]  # empty ones too
    path = _token_list_gguf(tmp_path / "tokens.gguf", tokens)
    header = read_gguf_header(path)
    assert header.metadata["tokenizer.ggml.tokens"] is None  # long arrays are not kept
    assert header.metadata["llama.context_length"] == 4096
    whole = path.read_bytes()
    middle = whole.index(b"tok500")
    for cut in (middle, middle + 3, len(whole) - 80):  # inside the list, and in the key after it
        (tmp_path / "cut.gguf").write_bytes(whole[:cut])
        with pytest.raises(ModelError, match="truncated"):
            read_gguf_header(tmp_path / "cut.gguf")


def test_a_token_whose_length_runs_past_the_file_is_truncated(tmp_path):
    import struct

    path = _token_list_gguf(tmp_path / "tokens.gguf", [b"a"] * 100)
    whole = bytearray(path.read_bytes())
    first = whole.index(b"a") - 8  # the first token's length
    whole[first : first + 8] = struct.pack("<Q", 2**40)
    path.write_bytes(bytes(whole))
    with pytest.raises(ModelError, match="truncated"):
        read_gguf_header(path)
