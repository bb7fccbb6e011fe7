"""Byte-level vocabulary for outlines-core, built from a llama.cpp vocabulary.

Left out: control, unused and unknown tokens (an end-of-turn token must never be sampled
inside a JSON string), the EOS id (given to outlines separately), and the raw byte tokens
0x80-0xFF (they make partial-UTF-8 states reachable: 4x the states, 2x the build time).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import outlines_core

from localjudge.engine.base import ATTR_CONTROL, ATTR_UNKNOWN, ATTR_UNUSED

_EXCLUDED_ATTRS = ATTR_UNKNOWN | ATTR_UNUSED | ATTR_CONTROL


@dataclass
class TokenVocabulary:
    """Token pieces of one model, filtered for grammar use."""

    eos_id: int  # id outlines allows in final states
    n_vocab: int  # size of the model's logits row
    pieces: dict[bytes, list[int]]  # token bytes -> ids that spell them (several may share)
    token_bytes: dict[int, bytes]  # id -> bytes, for every kept id
    fingerprint: str  # sha256 of the kept mapping: the cache key of compiled indexes
    control_texts: tuple[str, ...] = ()  # texts of control tokens (<end_of_turn>, ...)

    def to_outlines(self) -> outlines_core.Vocabulary:
        return outlines_core.Vocabulary(self.eos_id, self.pieces)

    def save(self, path: Path) -> None:
        """Write the vocabulary as plain arrays (`.npz`, no pickle): loading it runs no code."""
        ids = np.array(sorted(self.token_bytes), dtype=np.int64)
        pieces = [self.token_bytes[int(i)] for i in ids]
        offsets = np.cumsum([0] + [len(p) for p in pieces], dtype=np.int64)
        with path.open("wb") as handle:
            np.savez(
                handle,
                ids=ids,
                offsets=offsets,
                data=np.frombuffer(b"".join(pieces), dtype=np.uint8),
                meta=np.array(
                    json.dumps(
                        {
                            "eos_id": self.eos_id,
                            "n_vocab": self.n_vocab,
                            "fingerprint": self.fingerprint,
                            "control_texts": list(self.control_texts),
                        }
                    )
                ),
            )

    @classmethod
    def load(cls, path: Path) -> TokenVocabulary:
        """Read what `save` wrote; raises `ValueError` (or `OSError`) on anything else."""
        with np.load(path, allow_pickle=False) as arrays:
            ids, offsets, data = arrays["ids"], arrays["offsets"], arrays["data"].tobytes()
            meta = json.loads(str(arrays["meta"]))
        if len(offsets) != len(ids) + 1 or int(offsets[-1]) != len(data):
            raise ValueError(f"{path}: inconsistent vocabulary arrays")
        token_bytes: dict[int, bytes] = {}
        pieces: dict[bytes, list[int]] = {}
        for index, token in enumerate(ids.tolist()):
            piece = data[offsets[index] : offsets[index + 1]]
            token_bytes[token] = piece
            pieces.setdefault(piece, []).append(token)
        return cls(
            eos_id=int(meta["eos_id"]),
            n_vocab=int(meta["n_vocab"]),
            pieces=pieces,
            token_bytes=token_bytes,
            fingerprint=str(meta["fingerprint"]),
            control_texts=tuple(meta["control_texts"]),
        )


def keep_token(piece: bytes, attr: int) -> bool:
    """Whether a token may appear inside constrained output."""
    if not piece or attr & _EXCLUDED_ATTRS:
        return False
    return not (len(piece) == 1 and piece[0] >= 0x80)


def build_vocabulary(
    tokens: Iterable[tuple[int, bytes, int]], *, eos_id: int, n_vocab: int
) -> TokenVocabulary:
    """Filter `(id, bytes, attr)` triples into a vocabulary outlines can index."""
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
    return TokenVocabulary(
        eos_id=eos_id,
        n_vocab=n_vocab,
        pieces=pieces,
        token_bytes=token_bytes,
        fingerprint=digest.hexdigest(),
        control_texts=tuple(sorted(control_texts, key=len, reverse=True)),
    )
