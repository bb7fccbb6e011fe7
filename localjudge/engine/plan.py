"""What the scheduler asks the engine to do in one step, and what comes back.

These types sit in the engine package because the engine executes them; the scheduler
builds them. Neither side needs to know the other's internals.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class BatchToken:
    """One token placed in a `llama_decode` batch."""

    token: int  # vocabulary id
    pos: int  # position of the token in its sequence
    seq_id: int  # llama.cpp sequence the token belongs to
    logits: bool  # whether the step must return the logits row after this token


@dataclass(frozen=True)
class SeqCopy:
    """Share the KV cells of positions [p0, p1) of `src` with `dst` (bit-exact, no compute)."""

    src: int
    dst: int
    p0: int
    p1: int


@dataclass(frozen=True)
class SeqTrim:
    """Drop the KV cells of `seq_id` from position `pos` on; the cells before it stay."""

    seq_id: int
    pos: int


@dataclass(frozen=True)
class SeqSave:
    """Serialise the KV cells of positions [p0, p1) of `seq_id` (`StepOutput.states`).

    The cells outside that range are dropped from the sequence first: a save is always
    followed by the sequence's removal in the same step, and a kept prompt saves only the
    cells its prefix group does not hold (restored later behind a copy of that prefix)."""

    seq_id: int
    p0: int
    p1: int


@dataclass(frozen=True)
class SeqRestore:
    """Write a sequence's saved state (`StepOutput.states`) back into `seq_id`, which it
    replaces: the KV cells of the same positions, bit-exact, without compute. Copies into
    `seq_id` afterwards add cells at other positions (a saved tail gets its prefix back)."""

    seq_id: int
    data: bytearray


@dataclass(frozen=True)
class PrefixPrefill:
    """Evaluate positions [start, end) of a shared prefix in the engine's prefill context:
    a small KV cache of its own, where the prefix's tokens attend over the prefix's cells
    only, not over every other sequence's (in the unified cache, each token's attention
    walks all cells in use: with several long contexts alive, a new one's prefill ran ~20%
    slower). Chunks of one prefix come in order, no other prefix in between. With the last
    one (`end == len(key)`), the cells of positions [parent_len, end) move into `seq_id`
    (which they replace), and `parent`'s cells of positions [0, parent_len) are copied in
    before them; the first chunk starts from those, read from `parent`."""

    seq_id: int  # the sequence that holds the whole prefix once its last chunk is done
    key: tuple[int, ...]  # the prefix's tokens from position 0
    parent: int | None  # the sequence holding key[:parent_len] (None: parent_len is 0)
    parent_len: int
    start: int
    end: int

    @property
    def last(self) -> bool:
        return self.end == len(self.key)


@dataclass
class StepPlan:
    """One engine step: save states, free sequences, trim sequences, restore states, share
    prefixes, evaluate prefixes apart, then decode one batch.

    Executed in that order: `saves`, `removals`, `trims`, `restores`, `copies`, `prefills`,
    then `tokens` in a single `llama_decode`. The i-th logits row of the output belongs to
    the i-th token whose `logits` is True.
    """

    saves: list[SeqSave] = field(default_factory=list)  # cells whose state the output returns
    removals: list[int] = field(default_factory=list)  # seq ids whose cells are dropped
    trims: list[SeqTrim] = field(default_factory=list)  # sequences cut short, cells kept before
    restores: list[SeqRestore] = field(default_factory=list)  # saved states put back
    copies: list[SeqCopy] = field(default_factory=list)  # prefix shares, after removals
    prefills: list[PrefixPrefill] = field(default_factory=list)  # in the prefill context
    tokens: list[BatchToken] = field(default_factory=list)  # the batch, in order

    @property
    def num_logits(self) -> int:
        return sum(1 for t in self.tokens if t.logits)


@dataclass
class StepOutput:
    """What one step returns: a (num_logits, n_vocab) float32 array, valid until the next step."""

    logits: np.ndarray
    seconds: float = 0.0  # wall time of the decode calls (the batch's, the prefills')
    states: dict[int, bytearray] = field(default_factory=dict)  # `saves`: seq id -> state
