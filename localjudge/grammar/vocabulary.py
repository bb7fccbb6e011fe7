"""Byte-level vocabulary for outlines-core, built from a llama.cpp vocabulary.

Left out: control, unused and unknown tokens (an end-of-turn token must never be sampled
inside a JSON string), the EOS id (given to outlines separately), and the raw byte tokens
0x80-0xFF (they make partial-UTF-8 states reachable: 4x the states, 2x the build time).
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Iterable
from dataclasses import dataclass

import outlines_core

# llama_token_attr flags (llama.h)
ATTR_UNKNOWN = 1 << 0
ATTR_UNUSED = 1 << 1
ATTR_CONTROL = 1 << 3
ATTR_BYTE = 1 << 5
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

    def dumps(self) -> bytes:
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)


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
