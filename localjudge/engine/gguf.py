"""A pure-Python reader for the GGUF header: checks a file before llama.cpp touches it.

llama.cpp reports a bad file as a NULL handle and a log line; reading the header first lets
us say exactly what is wrong (not GGUF, truncated, unsupported version) in one line.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from localjudge.errors import ModelError

GGUF_MAGIC = b"GGUF"

# GGUF metadata value types -> struct format (scalars) ; 8 = string, 9 = array
_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9
_U64 = struct.Struct("<Q")  # a string's length
_MAX_ARRAY_KEEP = 16  # arrays (token lists) are skipped over; only short ones are kept
_MAX_NESTING = 4  # arrays of arrays deeper than this are not a real model's metadata


@dataclass
class GGUFHeader:
    """The metadata block of a GGUF file."""

    path: Path
    version: int  # GGUF format version
    num_tensors: int  # tensors declared in the header
    metadata: dict[str, object] = field(default_factory=dict)  # scalar and short-array keys

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", "unknown"))

    @property
    def context_length(self) -> int | None:
        value = self.metadata.get(f"{self.architecture}.context_length")
        return int(value) if isinstance(value, int) else None

    @property
    def kv_bytes_per_cell(self) -> int:
        """Bytes one KV cell takes over all layers, keys and values in f16 (llama.cpp's
        default cache type); 0 when the header lacks the shapes."""
        arch = self.architecture
        layers = self.metadata.get(f"{arch}.block_count")
        heads = self.metadata.get(f"{arch}.attention.head_count")
        heads_kv = self.metadata.get(f"{arch}.attention.head_count_kv", heads)
        width = self.metadata.get(f"{arch}.embedding_length")
        if not isinstance(layers, int) or not isinstance(heads, int) or not isinstance(width, int):
            return 0
        per_layer = heads_kv if isinstance(heads_kv, list) else [heads_kv] * layers
        key = self.metadata.get(f"{arch}.attention.key_length", width // max(heads, 1))
        value = self.metadata.get(f"{arch}.attention.value_length", key)
        return sum(int(n) for n in per_layer[:layers]) * (int(key) + int(value)) * 2

    @property
    def chat_template(self) -> str | None:
        value = self.metadata.get("tokenizer.chat_template")
        return value if isinstance(value, str) and value.strip() else None


class _Reader:
    def __init__(self, data: bytes, path: Path) -> None:
        self.data, self.offset, self.path = data, 0, path

    def take(self, size: int) -> bytes:
        end = self.offset + size
        if end > len(self.data):
            raise ModelError(f"{self.path}: truncated GGUF file (header ends early)")
        chunk = self.data[self.offset : end]
        self.offset = end
        return chunk

    def scalar(self, fmt: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        length = self.scalar("<Q")
        return self.take(length).decode("utf-8", errors="replace")

    def skip_strings(self, count: int) -> None:
        """Step over `count` strings without decoding them: a vocabulary's token and merge
        lists are hundreds of thousands of strings, and decoding each cost half a second
        on every model load."""
        data, offset, end = self.data, self.offset, len(self.data)
        length_at = _U64.unpack_from
        for _ in range(count):
            if offset + 8 > end:
                raise ModelError(f"{self.path}: truncated GGUF file (header ends early)")
            offset += 8 + length_at(data, offset)[0]
        if offset > end:
            raise ModelError(f"{self.path}: truncated GGUF file (header ends early)")
        self.offset = offset

    def value(self, kind: int, depth: int = 0):
        if kind in _SCALARS:
            return self.scalar(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            if depth >= _MAX_NESTING:
                raise ModelError(f"{self.path}: corrupt GGUF metadata (arrays nested too deep)")
            item_kind, count = self.scalar("<I"), self.scalar("<Q")
            if count > len(self.data) - self.offset:  # every item takes at least one byte
                raise ModelError(f"{self.path}: truncated GGUF file (header ends early)")
            if item_kind in _SCALARS and count > _MAX_ARRAY_KEEP:
                self.take(struct.calcsize(_SCALARS[item_kind]) * count)
                return None
            if item_kind == _STRING and count > _MAX_ARRAY_KEEP:
                self.skip_strings(count)
                return None
            items = [self.value(item_kind, depth + 1) for _ in range(count)]
            return items if count <= _MAX_ARRAY_KEEP else None
        raise ModelError(f"{self.path}: corrupt GGUF metadata (unknown value type {kind})")


def _check_magic(path: Path, data: bytes) -> None:
    if len(data) < 4 or data[:4] != GGUF_MAGIC:
        raise ModelError(
            f"{path}: not a GGUF file (magic bytes are {data[:4]!r}, expected b'GGUF')"
        )


def check_gguf_magic(path: str | Path) -> None:
    """Refuse a file that does not start as a GGUF does (reads its first 4 bytes only, not
    the header: for checking a path a user gives before it is stored or loaded)."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            data = handle.read(4)
    except OSError as error:
        raise ModelError(f"cannot read {path}: {error.strerror or error}") from None
    _check_magic(path, data)


def read_gguf_header(path: str | Path, *, max_header_bytes: int = 64 << 20) -> GGUFHeader:
    """Read and check a GGUF header; raise `ModelError` with one line when it is not usable."""
    path = Path(path)
    if not path.exists():
        raise ModelError(f"model file not found: {path}")
    if not path.is_file():
        raise ModelError(f"not a file: {path}")
    with path.open("rb") as handle:
        data = handle.read(max_header_bytes)
    _check_magic(path, data)
    reader = _Reader(data, path)
    reader.take(4)
    version = reader.scalar("<I")
    if version not in (2, 3):
        raise ModelError(f"{path}: unsupported GGUF version {version}")
    num_tensors, num_kv = reader.scalar("<Q"), reader.scalar("<Q")
    if num_kv > len(data):
        raise ModelError(f"{path}: truncated GGUF file (header ends early)")
    metadata: dict[str, object] = {}
    for _ in range(num_kv):
        key = reader.string()
        metadata[key] = reader.value(reader.scalar("<I"))
    if num_tensors == 0:
        raise ModelError(f"{path}: GGUF file declares no tensors")
    return GGUFHeader(path=path, version=version, num_tensors=num_tensors, metadata=metadata)
