"""The scheduler's state: a request once tokenized, a shared prefix group, one sequence's
life, and what a step hands back and forth. Plain data; `core` plans, `choice` decodes."""

from __future__ import annotations

import codecs
import functools
import time
from dataclasses import dataclass, field
from enum import Enum

import numpy as np
import outlines_core

from localjudge.engine.plan import StepPlan
from localjudge.grammar.compiled import CompiledGrammar
from localjudge.scheduler.prompt_cache import SavedCells
from localjudge.scheduler.request import (
    ChoicePoint,
    GenerationRequest,
    GenerationResult,
    SamplingParams,
    TokenCounts,
)


class SeqStatus(Enum):
    WAITING = "waiting"  # queued, holds nothing
    PREFILL = "prefill"  # admitted: holds a seq id and cells, prompt being evaluated
    DECODE = "decode"  # generating
    FINISHED = "finished"


@dataclass
class TokenizedRequest:
    """A request after tokenization: the shared prefix and the rest of the prompt."""

    request: GenerationRequest
    prefix_tokens: list[int]  # shared tokens (a true token prefix of the prompt); may be empty
    prompt_tokens: list[int]  # tokens this request evaluates itself (at least one)
    prefix_cuts: tuple[int, ...] = ()  # nested shared prefixes, by length; the last is the whole
    submitted_at: float = field(default_factory=time.perf_counter)
    num_attempts: int = 0  # engine failures this request has been requeued after
    # the last `num_head` prompt tokens are the output's head: the text the schema fixes
    # before the first choice (`{"verdict":"`), evaluated with the prompt
    num_head: int = 0
    level_keys: tuple[tuple[int, ...], ...] = field(init=False)  # prefix group per level

    def __post_init__(self) -> None:
        cuts = [c for c in self.prefix_cuts if 0 < c < len(self.prefix_tokens)]
        if self.prefix_tokens:
            cuts.append(len(self.prefix_tokens))
        self.level_keys = tuple(tuple(self.prefix_tokens[:c]) for c in sorted(set(cuts)))

    @property
    def prefix_key(self) -> tuple[int, ...]:
        """The innermost prefix group this request reads from (empty: none)."""
        return self.level_keys[-1] if self.level_keys else ()

    @property
    def num_own_tokens(self) -> int:
        """The prompt's tokens, shared or not, without the head."""
        return len(self.prefix_tokens) + len(self.prompt_tokens) - self.num_head

    @functools.cached_property
    def kept_key(self) -> tuple[int, ...]:
        """The key a kept prompt of this request has: all its tokens (built once: admission
        looks it up on every step the request waits)."""
        return self.prefix_key + tuple(self.prompt_tokens)

    @functools.cached_property
    def kept_hash(self) -> int:
        """`hash(kept_key)`, computed once (a queue scan compares it on every step)."""
        return hash(self.kept_key)


@dataclass
class PrefixGroup:
    """A prefix evaluated once into its own sequence and shared by copying its cells.

    Groups nest: the judge's instructions can be one group and each item's context a child
    group that starts from a copy of its parent's cells, so the instructions are evaluated
    once for all items.
    """

    key: tuple[int, ...]  # the prefix tokens
    seq_id: int  # llama.cpp sequence holding the prefix
    parent: PrefixGroup | None = None  # the group whose cells this one starts from
    copied: bool = False  # the parent's cells were shared into this group
    num_evaluated: int = 0  # tokens already in this group's sequence
    last_used: int = 0  # admission tick of its latest user (least recently used goes first)
    num_refs: int = 0  # admitted sequences and child groups that use it
    auto: bool = False  # found by matching token prefixes (kept after its last user)
    kept: bool = False  # a finished request's prompt, kept in a sequence id of its own pool
    # a kept prompt's logits at its last token: the same request again evaluates nothing
    logits: np.ndarray | None = None
    # the entries of `logits` its grammar's first choice reads (None: free text, all of them)
    logit_ids: np.ndarray | None = None

    @property
    def ready(self) -> bool:
        """All its cells are in its sequence (a restored group's own cells wait for its
        parent's to be copied in)."""
        return self.num_evaluated == len(self.key) and (self.parent is None or self.copied)

    @functools.cached_property
    def key_hash(self) -> int:
        return hash(self.key)

    @property
    def own_cells(self) -> int:
        """KV cells this group adds beyond its parent's."""
        return len(self.key) - (len(self.parent.key) if self.parent else 0)


@dataclass(eq=False)  # compared by identity: queues remove this very sequence
class Sequence:
    """One request's life inside the scheduler."""

    item: TokenizedRequest
    grammar: CompiledGrammar | None  # None: free text
    sampling: SamplingParams
    prompt_tokens: list[int] = field(default_factory=list)  # what this sequence evaluates itself
    status: SeqStatus = SeqStatus.WAITING
    seq_id: int | None = None
    group: PrefixGroup | None = None
    copied: bool = False  # prefix cells shared into this sequence
    num_prompt_done: int = 0  # prompt tokens decoded
    prefix_counted: int = 0  # tokens of shared prefixes evaluated on this sequence's account
    guide: outlines_core.Guide | None = None  # this sequence's outlines guide
    state: int = 0  # the guide's state after the output so far
    start_state: int = 0  # the guide's state after the head: where the first choice is made
    output_tokens: list[int] = field(default_factory=list)
    output_bytes: bytearray = field(default_factory=bytearray)
    streamed: int = 0  # output bytes handed to the request's `on_text`
    text_decoder: codecs.IncrementalDecoder | None = None  # for `on_text`: whole characters
    pending: list[int] = field(default_factory=list)  # output tokens not yet in the KV cache
    kv_len: int = 0  # positions of this sequence already in the KV cache
    choices: list[ChoicePoint] = field(default_factory=list)
    counts: TokenCounts = field(default_factory=TokenCounts)
    admitted_at: float = 0.0
    first_token_at: float = 0.0
    forced_close: bool = False  # the budget forced the closing path at least once
    close_early: bool = False  # the verdict needs no reason: take the shortest way to close
    verdict_read: bool = False  # `reasons_for` was applied to the verdict (read once)
    rng: np.random.Generator | None = None
    cancelled: bool = False
    # the logits at the prompt's last token (kept prompts on): saved when the prompt is
    # evaluated, or given by the kept prompt this sequence starts from
    prompt_logits: np.ndarray | None = None

    @property
    def request_id(self) -> str:
        return self.item.request.request_id

    @property
    def prefix_key(self) -> tuple[int, ...]:
        return self.item.prefix_key

    @property
    def max_tokens(self) -> int:
        return self.item.request.max_tokens

    @property
    def cells_needed(self) -> int:
        """Prompt cells plus output cells (the head is both: counted once)."""
        return len(self.prompt_tokens) + self.max_tokens - self.item.num_head


@dataclass
class Finished:
    """A request that left the scheduler: exactly one of `result` and `error` is set."""

    request_id: str
    result: GenerationResult | None = None
    error: Exception | None = None


@dataclass
class ScheduledStep:
    """A step plan plus what the scheduler needs to read its output back."""

    plan: StepPlan
    rows: list[Sequence]  # the sequence each logits row belongs to, in row order
    kept_rows: list[Sequence] = field(
        default_factory=list
    )  # logits kept with their prompts, not the engine's
    num_prompt_tokens: int = 0  # prompt and prefix tokens in this step
    num_head_tokens: int = 0  # heads in this step (counted in num_output_tokens too)
    num_output_tokens: int = 0  # previously chosen output tokens fed in this step
    # save's seq id -> the prompt cache key, and the entry the saved bytes complete
    saved_keys: dict[int, tuple[tuple[int, ...], SavedCells]] = field(default_factory=dict)
