"""Saved prefix states in host memory: a second tier behind the KV cache.

When a prefix group leaves the KV cache (its last user finished, or its cells were needed),
the engine serialises its cells (`llama_state_seq_get_data`) and the bytes are kept here,
keyed by the prefix's tokens. A later request with the same prefix gets the cells back by
copying those bytes in (`llama_state_seq_set_data`) instead of evaluating the prompt again:
what llama-server's prompt cache does for a re-sent prompt. Bounded by bytes, least recently
used first out.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass


@dataclass
class PromptCacheStats:
    saved: int = 0  # states stored
    restored: int = 0  # states put back into the KV cache
    restored_tokens: int = 0  # prompt tokens not evaluated thanks to them
    evicted: int = 0  # states dropped to stay within the budget
    refused: int = 0  # states larger than the whole budget, never stored


class PromptCache:
    """Prefix token tuple -> saved sequence state, within `max_bytes`."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError(f"a prompt cache of {max_bytes} bytes")
        self.max_bytes = max_bytes
        self.num_bytes = 0
        self._states: OrderedDict[tuple[int, ...], bytearray] = OrderedDict()
        self.stats = PromptCacheStats()

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, key: tuple[int, ...]) -> bool:
        return key in self._states

    def get(self, key: tuple[int, ...]) -> bytearray | None:
        """The state saved for exactly these prefix tokens (now the most recently used)."""
        data = self._states.get(key)
        if data is not None:
            self._states.move_to_end(key)
        return data

    def put(self, key: tuple[int, ...], data: bytearray) -> None:
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
