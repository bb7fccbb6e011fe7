"""Saved prefix states in host memory, a second tier behind the KV cache: a prefix group's
cells as llama.cpp serialises them (`llama_state_seq_get_data`), keyed by its tokens, put
back by `llama_state_seq_set_data` for a later request with the same prefix instead of a
prefill. Bounded by bytes, least recently used out first. A nested group saves only its own
cells (restored, the outer prefix's cells are copied in behind them); a kept prompt saves
its own cells with the logits its first token is chosen from (`KeptPrompt`)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np


@dataclass
class SavedCells:
    """A sequence's cells from position `prefix_len` on, as llama.cpp serialised them: put
    back behind a copy of the `prefix_len` tokens before them (0: they stand alone)."""

    state: bytearray
    prefix_len: int

    def __len__(self) -> int:  # bytes held, for the cache's budget
        return len(self.state)


@dataclass
class KeptPrompt(SavedCells):
    """A kept prompt's cells after its prefix and the logits at its last token: the entries
    `ids` (None: the whole row), every other logit -inf. For a grammar, `ids` are the tokens
    its first choice can read (allowed or closing in the initial state), so the restored row
    chooses exactly as the full one did."""

    ids: np.ndarray | None = None
    values: np.ndarray | None = None

    def __len__(self) -> int:
        extra = self.values.nbytes + (0 if self.ids is None else self.ids.nbytes)
        return len(self.state) + extra

    def covers(self, ids: np.ndarray | None) -> bool:
        """Whether the saved logits hold every entry of `ids` (None: the whole row)."""
        if self.ids is None:
            return True
        return ids is not None and bool(np.isin(ids, self.ids, assume_unique=True).all())

    def logits(self, n_vocab: int) -> np.ndarray:
        if self.ids is None:
            return self.values
        row = np.full(n_vocab, -np.inf, dtype=np.float32)
        row[self.ids] = self.values
        return row


def kept_key(prompt: tuple[int, ...]) -> tuple[int, ...]:
    """Where a kept prompt is saved: apart from every prefix key (no token id is negative)."""
    return (-1, *prompt)


@dataclass
class PromptCacheStats:
    saved: int = 0  # states stored
    restored: int = 0  # states put back into the KV cache
    restored_tokens: int = 0  # prompt tokens not evaluated thanks to them
    evicted: int = 0  # states dropped to stay within the budget
    refused: int = 0  # states larger than the whole budget, never stored


class PromptCache:
    """Prefix token tuple -> its `SavedCells` (or `kept_key(prompt)` -> `KeptPrompt`),
    within `max_bytes`."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError(f"a prompt cache of {max_bytes} bytes")
        self.max_bytes = max_bytes
        self.num_bytes = 0
        self._states: OrderedDict[tuple[int, ...], SavedCells] = OrderedDict()
        self.stats = PromptCacheStats()

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, key: tuple[int, ...]) -> bool:
        return key in self._states

    def get(self, key: tuple[int, ...]) -> SavedCells | None:
        """The state saved for exactly these prefix tokens (now the most recently used)."""
        data = self._states.get(key)
        if data is not None:
            self._states.move_to_end(key)
        return data

    def peek(self, key: tuple[int, ...]) -> SavedCells | None:
        """`get` without counting as a use."""
        return self._states.get(key)

    def put(self, key: tuple[int, ...], data: SavedCells) -> None:
        if key in self._states:
            self.num_bytes -= len(self._states.pop(key))
        if len(data) > self.max_bytes:
            self.stats.refused += 1
            return
        while self._states and self.num_bytes + len(data) > self.max_bytes:
            _, dropped = self._states.popitem(last=False)
            self.num_bytes -= len(dropped)
            self.stats.evicted += 1
        self._states[key] = data
        self.num_bytes += len(data)
        self.stats.saved += 1

    def clear(self) -> None:
        self._states.clear()
        self.num_bytes = 0
