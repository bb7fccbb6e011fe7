"""Byte-level vocabulary for outlines-core, built from a llama.cpp vocabulary.

Left out: control, unused and unknown tokens (an end-of-turn token must never be sampled
inside a JSON string) and the EOS id (given to outlines separately). The raw byte tokens
0x80-0xFF stay: a byte-level BPE vocabulary (Qwen's, Llama 3's) spells thousands of CJK
characters only with them (岡 is a two-byte token, then one raw byte), and without them
a model copying Japanese text must change its characters. The grammar keeps every string
valid UTF-8.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import outlines_core

from localjudge.engine.base import ATTR_CONTROL, ATTR_UNKNOWN, ATTR_UNUSED

_EXCLUDED_ATTRS = ATTR_UNKNOWN | ATTR_UNUSED | ATTR_CONTROL


class TokenVocabulary:
    """Token pieces of one model, filtered for grammar use.

    Held as three arrays: the kept ids in order, offsets into one byte string, and that
    string. Decoding reads a token's piece straight from them (`piece`); the dictionaries
    that only compiling a grammar needs (`pieces`, `token_bytes`) are built on first use,
    so a vocabulary of 262k tokens loads from the cache without a Python loop over it.
    """

    def __init__(
        self,
        *,
        eos_id: int,
        n_vocab: int,
        ids: np.ndarray,
        offsets: np.ndarray,
        data: bytes,
        fingerprint: str,
        control_texts: tuple[str, ...] = (),
        eog_ids: frozenset[int] = frozenset(),
    ) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        offsets = np.asarray(offsets, dtype=np.int64)
        if ids.ndim != 1 or offsets.shape != (len(ids) + 1,) or int(offsets[-1]) != len(data):
            raise ValueError("inconsistent vocabulary arrays")
        if len(ids) and (int(ids[0]) < 0 or int(ids[-1]) >= n_vocab or np.any(np.diff(ids) <= 0)):
            raise ValueError("vocabulary ids must be increasing and below n_vocab")
        if np.any(np.diff(offsets) < 0):
            raise ValueError("vocabulary offsets must not decrease")
        self.eos_id = eos_id  # id outlines allows in final states
        self.n_vocab = n_vocab  # size of the model's logits row
        self.fingerprint = fingerprint  # sha256 of the kept mapping: compiled indexes' key
        self.control_texts = control_texts  # texts of control tokens (<end_of_turn>, ...)
        self.eog_ids = frozenset(eog_ids)  # tokens that end a generation (EOS, end of turn)
        self.ids = ids  # kept ids, increasing
        self._offsets = offsets
        self._data = data
        self._position = np.full(n_vocab, -1, dtype=np.int32)  # id -> index in ids, or -1
        self._position[ids] = np.arange(len(ids), dtype=np.int32)

    def piece(self, token: int) -> bytes:
        """The bytes of a kept token; b"" for any other id."""
        if not 0 <= token < self.n_vocab:
            return b""
        index = int(self._position[token])
        if index < 0:
            return b""
        return self._data[int(self._offsets[index]) : int(self._offsets[index + 1])]

    @functools.cached_property
    def token_bytes(self) -> dict[int, bytes]:
        """id -> bytes, for every kept id."""
        data, offsets = self._data, self._offsets.tolist()
        return {
            token: data[offsets[index] : offsets[index + 1]]
            for index, token in enumerate(self.ids.tolist())
        }

    @functools.cached_property
    def pieces(self) -> dict[bytes, list[int]]:
        """Token bytes -> the ids that spell them (several may share), increasing."""
        pieces: dict[bytes, list[int]] = {}
        for token, piece in self.token_bytes.items():
            pieces.setdefault(piece, []).append(token)
        return pieces

    def to_outlines(self) -> outlines_core.Vocabulary:
        return outlines_core.Vocabulary(self.eos_id, self.pieces)

    def save(self, path: Path) -> None:
        """Write the vocabulary as plain arrays (`.npz`, no pickle): loading it runs no code."""
        with path.open("wb") as handle:
            np.savez(
                handle,
                ids=self.ids,
                offsets=self._offsets,
                data=np.frombuffer(self._data, dtype=np.uint8),
                meta=np.array(
                    json.dumps(
                        {
                            "eos_id": self.eos_id,
                            "n_vocab": self.n_vocab,
                            "fingerprint": self.fingerprint,
                            "control_texts": list(self.control_texts),
                            "eog_ids": sorted(self.eog_ids),
                        }
                    )
                ),
            )

    @classmethod
    def load(cls, path: Path) -> TokenVocabulary:
        """Read what `save` wrote; raises `ValueError` (or `OSError`, `KeyError`) on anything
        else."""
        with np.load(path, allow_pickle=False) as arrays:
            ids, offsets, data = arrays["ids"], arrays["offsets"], arrays["data"].tobytes()
            meta = json.loads(str(arrays["meta"]))
        return cls(
            eos_id=int(meta["eos_id"]),
            n_vocab=int(meta["n_vocab"]),
            ids=ids,
            offsets=offsets,
            data=data,
            fingerprint=str(meta["fingerprint"]),
            control_texts=tuple(meta["control_texts"]),
            eog_ids=frozenset(int(t) for t in meta["eog_ids"]),
        )


def keep_token(piece: bytes, attr: int) -> bool:
    """Whether a token may appear inside constrained output."""
    return bool(piece) and not attr & _EXCLUDED_ATTRS


def build_vocabulary(
    tokens: Iterable[tuple[int, bytes, int]],
    *,
    eos_id: int,
    n_vocab: int,
    eog_ids: Iterable[int] = (),
) -> TokenVocabulary:
    """Filter `(id, bytes, attr)` triples into a vocabulary outlines can index; `eog_ids`
    are the model's end-of-generation tokens, kept with it."""
    pieces: dict[bytes, list[int]] = {}
    token_bytes: dict[int, bytes] = {}
    control_texts: set[str] = set()
    for token_id, piece, attr in tokens:
        if attr & ATTR_CONTROL and len(piece) > 1:
            control_texts.add(piece.decode("utf-8", "replace"))
        if token_id == eos_id or not keep_token(piece, attr):
            continue
        pieces.setdefault(piece, []).append(token_id)
        token_bytes[token_id] = piece
    digest = hashlib.sha256()
    digest.update(f"{eos_id}:{n_vocab}:".encode())
    for piece in sorted(pieces):
        digest.update(
            piece.hex().encode() + b"=" + ",".join(map(str, pieces[piece])).encode() + b";"
        )
    ids = sorted(token_bytes)
    return TokenVocabulary(
        eos_id=eos_id,
        n_vocab=n_vocab,
        ids=np.array(ids, dtype=np.int64),
        offsets=np.cumsum([0] + [len(token_bytes[t]) for t in ids], dtype=np.int64),
        data=b"".join(token_bytes[t] for t in ids),
        fingerprint=digest.hexdigest(),
        control_texts=tuple(sorted(control_texts, key=len, reverse=True)),
        eog_ids=frozenset(eog_ids),
    )
