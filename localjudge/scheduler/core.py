"""The continuous-batching scheduler: a pure state machine over tokenized requests.

Invariant: every admitted sequence and every live prefix group holds its own llama.cpp
sequence id from a fixed pool, and `num_reserved_cells` (the prefix lengths of live groups
plus prompt + token budget of each admitted sequence) never exceeds `n_ctx`. So a step
never overflows the KV cache: admission waits instead.

One step is `schedule() -> ScheduledStep`, executed by an engine, then
`update_from_output(step, output)`. The scheduler never touches llama.cpp; tests drive it
with hand-built logits.

Order of work inside a step, within `token_budget` tokens:
1. running sequences: the token sampled last step plus any jump-forward tokens, logits on
   the last one only;
2. prefill chunks of prefix groups (no logits);
3. prompt chunks of admitted sequences whose prefix is ready (copied in first), logits on
   the prompt's last token.
"""

from __future__ import annotations

import json
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from enum import Enum

import jsonschema
import numpy as np
import outlines_core

from localjudge.engine.plan import BatchToken, SeqCopy, StepOutput, StepPlan
from localjudge.errors import GenerationError, PromptTooLongError, RequestCancelled, VerdictError
from localjudge.grammar.compiled import CompiledGrammar
from localjudge.grammar.vocabulary import TokenVocabulary
from localjudge.scheduler.request import (
    ChoicePoint,
    GenerationRequest,
    GenerationResult,
    SamplingParams,
    Timings,
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
    num_refs: int = 0  # admitted sequences and child groups that use it

    @property
    def ready(self) -> bool:
        return self.num_evaluated == len(self.key)

    @property
    def own_cells(self) -> int:
        """KV cells this group adds beyond its parent's."""
        return len(self.key) - (len(self.parent.key) if self.parent else 0)


@dataclass
class Sequence:
    """One request's life inside the scheduler."""

    item: TokenizedRequest
    grammar: CompiledGrammar
    sampling: SamplingParams
    status: SeqStatus = SeqStatus.WAITING
    seq_id: int | None = None
    group: PrefixGroup | None = None
    copied: bool = False  # prefix cells shared into this sequence
    num_prompt_done: int = 0  # prompt tokens decoded
    guide: outlines_core.Guide | None = None  # this sequence's outlines guide
    state: int = 0  # the guide's state after the output so far
    output_tokens: list[int] = field(default_factory=list)
    output_bytes: bytearray = field(default_factory=bytearray)
    pending: list[int] = field(default_factory=list)  # output tokens not yet in the KV cache
    kv_len: int = 0  # positions of this sequence already in the KV cache
    choices: list[ChoicePoint] = field(default_factory=list)
    counts: TokenCounts = field(default_factory=TokenCounts)
    admitted_at: float = 0.0
    first_token_at: float = 0.0
    forced_close: bool = False  # the budget forced the closing path at least once
    rng: np.random.Generator | None = None
    cancelled: bool = False

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
        return len(self.item.prompt_tokens) + self.max_tokens


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
    num_prompt_tokens: int = 0  # prompt and prefix tokens in this step
    num_output_tokens: int = 0  # previously chosen output tokens fed in this step


class Scheduler:
    """Continuous batching with shared prefixes and one grammar state per sequence."""

    def __init__(
        self,
        *,
        vocabulary: TokenVocabulary,
        n_ctx: int,
        max_num_seqs: int = 8,
        max_num_prefixes: int = 8,
        token_budget: int = 512,
        jump_forward: bool = True,
    ) -> None:
        if max_num_seqs < 1 or max_num_prefixes < 1:
            raise ValueError("max_num_seqs and max_num_prefixes must be at least 1")
        self.vocabulary = vocabulary
        self.n_ctx = n_ctx
        self.max_num_seqs = max_num_seqs
        self.max_num_prefixes = max_num_prefixes
        self.token_budget = token_budget
        self.jump_forward = jump_forward
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []  # admitted, in admission order
        self.groups: dict[tuple[int, ...], PrefixGroup] = {}
        self._free_seq_ids = list(range(max_num_seqs))
        self._free_prefix_ids = list(range(max_num_seqs, max_num_seqs + max_num_prefixes))
        self._removals: list[int] = []
        self._finished: list[Finished] = []
        self._awaited: Counter[tuple[int, ...]] = Counter()  # prefix keys of queued requests
        self.num_reserved_cells = 0
        self.num_steps = 0
        self.num_prompt_tokens = 0  # prompt + prefix tokens decoded, all requests
        self.num_generated_tokens = 0
        self.num_forced_tokens = 0
        self.decode_seconds = 0.0  # engine time of all steps
        self.generation_steps = 0  # steps that carried output tokens only (no prompt tokens)
        self.generation_tokens = 0  # output tokens fed in those steps
        self.generation_seconds = 0.0  # engine time of those steps

    @property
    def num_seq_ids(self) -> int:
        """Sequence ids the engine context must provide (`n_seq_max`)."""
        return self.max_num_seqs + self.max_num_prefixes

    # -- intake ---------------------------------------------------------------------------

    def add(self, item: TokenizedRequest) -> None:
        """Queue a tokenized request; one that can never fit finishes at once with an error.

        Never raises: whatever goes wrong with one request is that request's error.
        """
        try:
            seq = self._new_sequence(item)
        except Exception as error:
            self._finished.append(
                Finished(
                    request_id=item.request.request_id,
                    error=GenerationError(f"request could not be queued: {error}"),
                )
            )
            return
        self._queue(seq)

    @staticmethod
    def _new_sequence(item: TokenizedRequest) -> Sequence:
        request = item.request
        grammar = request.grammar
        seq = Sequence(
            item=item,
            grammar=grammar,
            sampling=request.sampling,
            guide=grammar.new_guide(),
            state=grammar.initial_state,
        )
        if request.sampling.temperature > 0:
            seq.rng = np.random.default_rng(request.sampling.seed)
        return seq

    def _queue(self, seq: Sequence) -> None:
        item, request, grammar = seq.item, seq.item.request, seq.grammar
        if len(item.level_keys) > self.max_num_prefixes:  # share the innermost levels only
            item.level_keys = item.level_keys[-self.max_num_prefixes :]
        total = len(item.prefix_tokens) + len(item.prompt_tokens) + request.max_tokens
        if not item.prompt_tokens:
            self._fail(seq, GenerationError("empty prompt"))
        elif request.max_tokens < grammar.min_tokens:
            self._fail(
                seq,
                GenerationError(
                    f"max_tokens={request.max_tokens} is below the {grammar.min_tokens} tokens "
                    "the shortest valid JSON of this schema needs"
                ),
            )
        elif total > self.n_ctx:
            self._fail(
                seq,
                PromptTooLongError(
                    f"prompt of {total - request.max_tokens} tokens plus max_tokens={request.max_tokens} "
                    f"exceeds the judge context of {self.n_ctx} tokens"
                ),
            )
        else:
            self.waiting.append(seq)
            self._awaited.update(item.level_keys)

    def cancel(self, request_id: str) -> bool:
        """Cancel a queued or running request; its slot and cells are freed at once."""
        for seq in list(self.waiting):
            if seq.request_id == request_id:
                self.waiting.remove(seq)
                self._unawait(seq.item.level_keys)
                self._drop_idle_groups()
                self._fail(seq, RequestCancelled(f"request {request_id} was cancelled"))
                return True
        for seq in self.running:
            if seq.request_id == request_id:
                self._release(seq)
                self._fail(seq, RequestCancelled(f"request {request_id} was cancelled"))
                return True
        return False

    def has_work(self) -> bool:
        return bool(self.waiting or self.running or self._removals)

    def take_finished(self) -> list[Finished]:
        finished, self._finished = self._finished, []
        return finished

    # -- admission ------------------------------------------------------------------------

    def _admit(self, now: float) -> None:
        """Admit queued requests in order while a slot and KV cells are free.

        Idle prefix groups (kept because a queued request will reuse them) are evicted when
        the request at the head of the queue needs their sequence id or cells.
        """
        while self.waiting and self._free_seq_ids:
            seq = self.waiting[0]
            keys = seq.item.level_keys
            keep = set(keys)
            missing = [k for k in keys if k not in self.groups]
            needed = seq.cells_needed
            previous = 0
            for key in keys:
                if key not in self.groups:
                    needed += len(key) - previous
                previous = len(key)
            while len(self._free_prefix_ids) < len(missing):
                if not self._evict_idle_group(keep):
                    return
            while self.num_reserved_cells + needed > self.n_ctx:
                if not self._evict_idle_group(keep):
                    return  # wait for running sequences to free cells
            self.waiting.popleft()
            self._unawait(keys)
            parent = None
            for key in keys:
                group = self.groups.get(key)
                if group is None:
                    group = PrefixGroup(key=key, seq_id=self._free_prefix_ids.pop(0), parent=parent)
                    if parent is not None:
                        parent.num_refs += 1
                    self.groups[key] = group
                parent = group
            if parent is not None:
                parent.num_refs += 1
                seq.group = parent
                seq.kv_len = len(parent.key)
            seq.seq_id = self._free_seq_ids.pop(0)
            seq.status = SeqStatus.PREFILL
            seq.admitted_at = now
            self.num_reserved_cells += needed
            self.running.append(seq)

    def _unawait(self, keys) -> None:
        for key in keys:
            self._awaited[key] -= 1
            if self._awaited[key] <= 0:
                del self._awaited[key]

    def _evict_idle_group(self, keep: set[tuple[int, ...]]) -> bool:
        """Drop one prefix group nothing admitted uses (not in `keep`); False if none."""
        for key, group in self.groups.items():
            if group.num_refs == 0 and key not in keep:
                self._drop_group(group)
                return True
        return False

    def _drop_group(self, group: PrefixGroup) -> None:
        del self.groups[group.key]
        self._removals.append(group.seq_id)
        self._free_prefix_ids.append(group.seq_id)
        self._free_prefix_ids.sort()
        self.num_reserved_cells -= group.own_cells
        if group.parent is not None:
            group.parent.num_refs -= 1

    def _release(self, seq: Sequence) -> None:
        """Give back a sequence's id and cells; drop its prefix group when unused."""
        if seq in self.running:
            self.running.remove(seq)
        if seq.seq_id is not None:
            self._removals.append(seq.seq_id)
            self._free_seq_ids.append(seq.seq_id)
            self._free_seq_ids.sort()
            self.num_reserved_cells -= seq.cells_needed
            seq.seq_id = None
        if seq.group is not None:
            seq.group.num_refs -= 1
            seq.group = None
            self._drop_idle_groups()
        seq.status = SeqStatus.FINISHED

    def _drop_idle_groups(self) -> None:
        """Drop prefix groups that nothing admitted uses and no queued request awaits."""
        dropped = True
        while dropped:  # dropping a child can leave its parent idle
            dropped = False
            for key, group in list(self.groups.items()):
                if group.num_refs == 0 and self._awaited[key] <= 0:
                    self._drop_group(group)
                    dropped = True

    def _fail(self, seq: Sequence, error: Exception) -> None:
        seq.status = SeqStatus.FINISHED
        self._finished.append(Finished(request_id=seq.request_id, error=error))

    # -- planning -------------------------------------------------------------------------

    def schedule(self) -> ScheduledStep:
        """Plan the next step: removals, prefix copies and one batch of tokens."""
        now = time.perf_counter()
        self._admit(now)
        plan = StepPlan(removals=self._removals)
        self._removals = []
        step = ScheduledStep(plan=plan, rows=[])
        budget = self.token_budget

        for seq in self.running:  # 1. decode
            if seq.status is not SeqStatus.DECODE or not seq.pending:
                continue
            if len(seq.pending) > budget:
                continue
            last = len(seq.pending) - 1
            for i, token in enumerate(seq.pending):
                plan.tokens.append(BatchToken(token, seq.kv_len + i, seq.seq_id, i == last))
            seq.kv_len += len(seq.pending)
            step.num_output_tokens += len(seq.pending)
            budget -= len(seq.pending)
            seq.pending = []
            step.rows.append(seq)

        filled: set[int] = set()  # groups whose cells this very step is still writing
        for group in self.groups.values():  # 2. prefix prefill, parents before children
            if budget == 0:
                break
            if group.ready:
                continue
            if group.parent is not None and not group.copied:
                if not group.parent.ready or group.parent.seq_id in filled:
                    continue
                plan.copies.append(
                    SeqCopy(group.parent.seq_id, group.seq_id, 0, len(group.parent.key))
                )
                group.copied = True
                group.num_evaluated = len(group.parent.key)
            chunk = group.key[group.num_evaluated : group.num_evaluated + budget]
            for i, token in enumerate(chunk):
                plan.tokens.append(BatchToken(token, group.num_evaluated + i, group.seq_id, False))
            group.num_evaluated += len(chunk)
            budget -= len(chunk)
            step.num_prompt_tokens += len(chunk)
            filled.add(group.seq_id)
            payer = self._first_user(group)
            if payer is not None:
                payer.counts.prompt_evaluated += len(chunk)

        for seq in self.running:  # 3. prompt prefill
            if budget == 0:
                break
            if seq.status is not SeqStatus.PREFILL:
                continue
            if seq.group is not None and not seq.copied:
                # a group that finished prefilling in this very step is not in the cache yet
                if not seq.group.ready or seq.group.seq_id in filled:
                    continue
                plan.copies.append(SeqCopy(seq.group.seq_id, seq.seq_id, 0, len(seq.group.key)))
                seq.copied = True
                seq.counts.prefix_reused = len(seq.group.key)
            prompt = seq.item.prompt_tokens
            chunk = prompt[seq.num_prompt_done : seq.num_prompt_done + budget]
            ends_prompt = seq.num_prompt_done + len(chunk) == len(prompt)
            for i, token in enumerate(chunk):
                is_last = ends_prompt and i == len(chunk) - 1
                plan.tokens.append(BatchToken(token, seq.kv_len + i, seq.seq_id, is_last))
            seq.kv_len += len(chunk)
            seq.num_prompt_done += len(chunk)
            seq.counts.prompt_evaluated += len(chunk)
            budget -= len(chunk)
            step.num_prompt_tokens += len(chunk)
            if ends_prompt:
                step.rows.append(seq)

        # rows were appended in the batch order of their logits-bearing tokens
        return step

    def _first_user(self, group: PrefixGroup) -> Sequence | None:
        """The first admitted sequence that reads `group` (directly or through a child)."""
        for seq in self.running:
            node = seq.group
            while node is not None:
                if node is group:
                    return seq
                node = node.parent
        return None

    # -- reading the output back ----------------------------------------------------------

    def update_from_output(self, step: ScheduledStep, output: StepOutput) -> None:
        """Choose each row's next token under its grammar; finish sequences whose JSON is done."""
        self.num_steps += 1
        self.num_prompt_tokens += step.num_prompt_tokens
        self.decode_seconds += output.seconds
        if step.num_prompt_tokens == 0 and step.num_output_tokens:
            self.generation_steps += 1
            self.generation_tokens += step.num_output_tokens
            self.generation_seconds += output.seconds
        if output.logits.shape[0] != len(step.rows):
            raise GenerationError(
                f"engine returned {output.logits.shape[0]} logits rows for {len(step.rows)} sequences"
            )
        now = time.perf_counter()
        for row, seq in enumerate(step.rows):
            if seq.status is SeqStatus.FINISHED:  # cancelled while the step ran
                continue
            if seq.status is SeqStatus.PREFILL:
                seq.status = SeqStatus.DECODE
                seq.first_token_at = now
            try:
                self._advance(seq, output.logits[row])
            except Exception as error:  # one broken sequence must not stop the others
                self._release(seq)
                self._fail(
                    seq,
                    error if isinstance(error, GenerationError) else GenerationError(str(error)),
                )

    def _advance(self, seq: Sequence, logits: np.ndarray) -> None:
        grammar = seq.grammar
        self._accept(seq, self._choose(seq, logits), forced=False)
        while self.jump_forward and not grammar.is_final(seq.state):
            forced = self._forced(seq)
            if forced is None:
                break
            self._accept(seq, forced, forced=True)
        if grammar.is_final(seq.state):
            self._complete(seq)

    @staticmethod
    def _forced(seq: Sequence) -> int | None:
        """The grammar's only token here, if taking it still leaves room to close the JSON."""
        grammar = seq.grammar
        token = grammar.forced_token(seq.state)
        if token is None:
            return None
        limit = seq.max_tokens - len(seq.output_tokens) - 1
        next_state = grammar.next_state(seq.state, token)
        if next_state is None or grammar.distance.get(next_state, limit + 1) > limit:
            return None
        return token

    def _accept(self, seq: Sequence, token: int, *, forced: bool) -> None:
        try:
            seq.guide.advance(token, return_tokens=False)
        except ValueError:  # _choose only returns allowed tokens; this guards the invariant
            raise GenerationError(f"token {token} is not allowed by the grammar") from None
        seq.state = seq.guide.get_state()
        seq.output_tokens.append(token)
        seq.output_bytes += self.vocabulary.token_bytes.get(token, b"")
        seq.pending.append(token)
        seq.counts.generated += 1
        self.num_generated_tokens += 1
        if forced:
            seq.counts.forced += 1
            self.num_forced_tokens += 1

    def _choose(self, seq: Sequence, logits: np.ndarray) -> int:
        """The next token: greedy fast path, else masked choice, else the closing path.

        A token is only taken if the JSON can still be closed within the budget left after
        it (`distance` of its next state <= tokens left - 1). The closing tokens always
        satisfy that, because the budget never drops below the current distance.
        """
        grammar = seq.grammar
        state = seq.state
        limit = seq.max_tokens - len(seq.output_tokens) - 1
        distance = grammar.distance

        field_name = grammar.choice_at(state, seq.output_bytes)
        if field_name is not None:
            self._record_choice(seq, field_name, logits)

        forced = self._forced(seq)
        if forced is not None:  # what jump-forward would have appended without logits
            return forced
        if seq.sampling.greedy:
            token = int(np.argmax(logits))
            next_state = grammar.next_state(state, token)
            if next_state is not None and distance.get(next_state, limit + 1) <= limit:
                return token
        allowed = grammar.allowed[state]
        if len(allowed) == 0:
            raise GenerationError("grammar has no allowed token in a non-final state")
        scores = logits[allowed]
        if seq.sampling.greedy:
            token = int(allowed[int(np.argmax(scores))])
        else:
            probs = _softmax(scores / seq.sampling.temperature)
            token = int(allowed[int(seq.rng.choice(len(allowed), p=probs))])
        next_state = grammar.next_state(state, token)
        if next_state is not None and distance.get(next_state, limit + 1) <= limit:
            return token
        seq.forced_close = True
        closing = grammar.closing[state]
        return int(closing[int(np.argmax(logits[closing]))])

    def _record_choice(self, seq: Sequence, field_name: str, logits: np.ndarray) -> None:
        grammar = seq.grammar
        allowed = grammar.allowed[seq.state]
        probs = _softmax(logits[allowed].astype(np.float64))
        by_option: dict[str, float] = dict.fromkeys(grammar.enum_fields[field_name], 0.0)
        for token, prob in zip(allowed.tolist(), probs.tolist(), strict=True):
            option = grammar.option_of(field_name, grammar.token_text.get(token, ""))
            if option is not None:
                by_option[option] += prob
        total = sum(by_option.values()) or 1.0
        probabilities = {k: v / total for k, v in by_option.items()}
        seq.choices.append(ChoicePoint(field=field_name, probabilities=probabilities, chosen=""))

    def _complete(self, seq: Sequence) -> None:
        now = time.perf_counter()
        text = seq.output_bytes.decode("utf-8", "replace")
        self._release(seq)
        try:
            value = json.loads(text)
            jsonschema.validate(value, seq.grammar.schema)
        except (ValueError, jsonschema.ValidationError) as error:
            message = getattr(error, "message", str(error))
            self._fail(seq, VerdictError(f"judge reply failed validation: {message}"))
            return
        choices = [
            ChoicePoint(
                field=c.field, probabilities=c.probabilities, chosen=str(value.get(c.field, ""))
            )
            for c in seq.choices
        ]
        submitted = seq.item.submitted_at
        result = GenerationResult(
            request_id=seq.request_id,
            value=value,
            text=text,
            counts=seq.counts,
            timings=Timings(
                queued_s=seq.admitted_at - submitted,
                first_token_s=seq.first_token_at - submitted,
                total_s=now - submitted,
            ),
            choices=choices,
            finish_reason="budget" if seq.forced_close else "stop",
        )
        self._finished.append(Finished(request_id=seq.request_id, result=result))

    def requeue_running(self, error: Exception, max_attempts: int = 3) -> None:
        """The engine lost its KV cache (a step failed and it was cleared): start every
        admitted request again from the queue's head, in order, with fresh grammar state.
        A request that has now failed `max_attempts` times finishes with `error`."""
        running, self.running = self.running, []
        for seq in running:
            seq.group = None  # every group is dropped below
            self._release(seq)
        self.groups.clear()
        self._free_prefix_ids = list(
            range(self.max_num_seqs, self.max_num_seqs + self.max_num_prefixes)
        )
        self._removals = []  # the engine's cache is empty already
        self.num_reserved_cells = 0
        retry: list[Sequence] = []
        for seq in running:
            item = seq.item
            item.num_attempts += 1
            if item.num_attempts >= max_attempts:
                self._fail(seq, error)
                continue
            retry.append(self._new_sequence(item))
        for seq in reversed(retry):
            self.waiting.appendleft(seq)
            self._awaited.update(seq.item.level_keys)

    def fail_all(self, error: Exception) -> None:
        """Fail every queued and running request (the engine broke); the pool is reset."""
        for seq in list(self.running):
            self._release(seq)
            self._fail(seq, error)
        while self.waiting:
            self._fail(self.waiting.popleft(), error)
        self._awaited.clear()
        self._drop_idle_groups()


def _softmax(scores: np.ndarray) -> np.ndarray:
    shifted = np.exp(scores - np.max(scores))
    return shifted / shifted.sum()
