"""`Scheduler`: continuous batching as a pure state machine over tokenized requests. It
admits requests while a slot and KV cells are free (`num_reserved_cells` never exceeds
`n_ctx`, so a step never overflows the KV cache), plans each step in three phases (decode,
prefixes, prompts; `schedule`), and reads the output back (`update_from_output`). Shared
prefixes live in `PrefixCache`; `choice.TokenChooser` picks tokens. It never touches
llama.cpp: tests drive it with hand-built logits. docs/ARCHITECTURE.md tells the story.
"""

from __future__ import annotations

import codecs
import contextlib
import time
from collections import deque

import numpy as np

from localjudge.engine.plan import (
    BatchToken,
    PrefixPrefill,
    SeqCopy,
    SeqRestore,
    SeqTrim,
    StepOutput,
    StepPlan,
)
from localjudge.errors import GenerationError, PromptTooLongError, RequestCancelled
from localjudge.grammar.vocabulary import TokenVocabulary
from localjudge.scheduler.choice import TokenChooser
from localjudge.scheduler.prefix_cache import PrefixCache, lineage
from localjudge.scheduler.prompt_cache import KeptPrompt, kept_key
from localjudge.scheduler.state import (
    Finished,
    PrefixGroup,
    ScheduledStep,
    SeqStatus,
    Sequence,
    TokenizedRequest,
)
from localjudge.scheduler.stats import SchedulerStats

# how deep in the queue a request whose prompt is kept is looked for (see `_admit_kept_first`)
KEPT_LOOKAHEAD = 4096


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
        heads: bool = True,
        cache_prefixes: bool = False,
        auto_prefix: int = 0,
        prompt_cache_bytes: int = 0,
        max_kept_prompts: int = 0,
        prefill_cells: int = 0,
        swa_window: int = 0,
    ) -> None:
        if max_num_seqs < 1 or max_num_prefixes < 1:
            raise ValueError("max_num_seqs and max_num_prefixes must be at least 1")
        if max_kept_prompts < 0:
            raise ValueError("max_kept_prompts must be 0 or more")
        self.vocabulary = vocabulary
        self.n_ctx = n_ctx
        self.max_num_seqs = max_num_seqs
        self.max_num_prefixes = max_num_prefixes
        self.token_budget = token_budget
        self.jump_forward = jump_forward
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []  # admitted, in admission order
        self._free_seq_ids = list(range(max_num_seqs))
        # finished requests' prompts kept in the KV cache with their last logits, so that the
        # same request sent again evaluates nothing (llama-server's slots evaluate one token)
        self.max_kept_prompts = max_kept_prompts
        first_kept = max_num_seqs + max_num_prefixes
        self.prefixes = PrefixCache(
            prefix_ids=range(max_num_seqs, first_kept),
            kept_ids=range(first_kept, first_kept + max_kept_prompts),
            cache_prefixes=cache_prefixes,
            auto_prefix=auto_prefix,
            prompt_cache_bytes=prompt_cache_bytes,
            prefill_cells=prefill_cells,
            swa_window=swa_window,
        )
        self._trims: list[SeqTrim] = []  # kept prompts: their output cells go
        self._finished: list[Finished] = []
        self._seq_cells = 0  # KV cells reserved by admitted sequences (prompt + budget)
        # the request at the queue's head, and how many requests were admitted before it
        # because their prompts were kept (at most max_num_seqs: it is never starved)
        self._head: Sequence | None = None
        self._num_jumped = 0
        self.stats = SchedulerStats()
        self.chooser = TokenChooser(
            vocabulary,
            self.stats,
            jump_forward=jump_forward,
            heads=heads,
        )

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

    def _new_sequence(self, item: TokenizedRequest) -> Sequence:
        """A fresh sequence for `item`, its head taken: the request's prompt tokens end with
        the head (the same tokens each time: a request requeued keeps them)."""
        request = item.request
        grammar = request.grammar
        seq = Sequence(
            item=item,
            grammar=grammar,
            sampling=request.sampling,
            guide=grammar.new_guide() if grammar is not None else None,
            state=grammar.initial_state if grammar is not None else 0,
        )
        if request.sampling.temperature > 0:
            seq.rng = np.random.default_rng(request.sampling.seed)
        head = self.chooser.take_head(seq)
        if head or item.num_head:  # heads off: the prompt's tokens are used as they are
            own = item.prompt_tokens[: len(item.prompt_tokens) - item.num_head]
            item.prompt_tokens, item.num_head = own + head, len(head)
        seq.prompt_tokens = item.prompt_tokens
        return seq

    def _queue(self, seq: Sequence) -> None:
        item, request, grammar = seq.item, seq.item.request, seq.grammar
        if len(item.level_keys) > self.max_num_prefixes:  # share the innermost levels only
            item.level_keys = item.level_keys[-self.max_num_prefixes :]
        total = len(item.prefix_tokens) + seq.cells_needed
        if len(item.prompt_tokens) == item.num_head:
            self._fail(seq, GenerationError("empty prompt"))
        elif grammar is not None and request.max_tokens < grammar.min_tokens:
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
            self.prefixes.await_keys(item.level_keys)

    def cancel(self, request_id: str) -> bool:
        """Cancel a queued or running request; its slot and cells are freed at once."""
        for seq in list(self.waiting):
            if seq.request_id == request_id:
                self.waiting.remove(seq)
                self.prefixes.unawait(seq.item.level_keys)
                self.prefixes.drop_idle()
                self._fail(seq, RequestCancelled(f"request {request_id} was cancelled"))
                return True
        for seq in self.running:
            if seq.request_id == request_id:
                self._release(seq)
                self._fail(seq, RequestCancelled(f"request {request_id} was cancelled"))
                return True
        return False

    def has_work(self) -> bool:
        return bool(self.waiting or self.running or self.prefixes.has_step_work() or self._trims)

    def take_finished(self) -> list[Finished]:
        finished, self._finished = self._finished, []
        return finished

    @property
    def num_reserved_cells(self) -> int:
        """KV cells reserved: the prefix groups' own cells and each admitted sequence's
        prompt and output budget. Never above `n_ctx`."""
        return self._seq_cells + self.prefixes.cells

    @property
    def groups(self):
        return self.prefixes.groups

    @property
    def prompt_cache(self):
        return self.prefixes.prompt_cache

    @prompt_cache.setter
    def prompt_cache(self, cache) -> None:
        self.prefixes.prompt_cache = cache

    @property
    def num_cached_prefixes(self) -> int:
        return self.prefixes.num_cached

    # -- admission ------------------------------------------------------------------------

    def _admit(self, now: float) -> None:
        """Admit queued requests in order while a slot and KV cells are free.

        Idle prefix groups (kept because a queued request will reuse them) are evicted when
        the request at the head of the queue needs their sequence id or cells.
        """
        if self.max_kept_prompts:
            self._admit_kept_first(now)
        while self.waiting and self._free_seq_ids:
            seq = self.waiting[0]
            kept = self.prefixes.groups.get(seq.item.kept_key) if self.max_kept_prompts else None
            if kept is not None and kept.logits is not None:
                if not self._admit_kept(seq, kept, now):
                    return
                continue
            if self.prefixes.auto_prefix and not seq.item.level_keys:
                if not self._admit_matched(seq, now):
                    return
                continue
            if self.prefixes.saving(seq.item.level_keys):
                return  # this step saves a prefix the request needs: admit it after
            start, restored = self.prefixes.levels(seq.item.level_keys)
            keys = seq.item.level_keys[start:]  # levels above these: not needed
            keep = set(keys)
            missing = [k for k in keys if k not in self.prefixes.groups]
            needed = seq.cells_needed
            previous = 0
            for key in keys:
                if key not in self.prefixes.groups:
                    needed += len(key) - previous
                previous = len(key)
            while len(self.prefixes.free_ids) < len(missing):
                if not self.prefixes.evict_idle(keep):
                    return
            while self.num_reserved_cells + needed > self.n_ctx:
                if not self.prefixes.evict_idle(keep):
                    return  # wait for running sequences to free cells
            self.waiting.popleft()
            self.prefixes.unawait(seq.item.level_keys)
            parent = None
            self.prefixes.tick += 1
            for level, key in enumerate(keys, start):
                group = self.prefixes.groups.get(key)
                if group is None:
                    group = self.prefixes.new_group(key, parent)
                    if level in restored:  # the saved cells come back, no prefill
                        self.prefixes.restore(group, self.stats)
                group.last_used = self.prefixes.tick
                parent = group
            if parent is not None:
                parent.num_refs += 1
                seq.group = parent
                seq.kv_len = len(parent.key)
            self._start(seq, now)
            self._restore_kept(seq)

    def _admit_kept_first(self, now: float) -> None:
        """Admit queued requests whose whole prompt is kept before their turn: they evaluate
        nothing, and by their turn the requests ahead of them may have evicted their kept
        prompts (a re-run over many contexts finds the last ones it judged still kept, and
        judges them first). At most `max_num_seqs` requests pass the same head request."""
        if not self.waiting or not self._free_seq_ids:  # most steps: every slot is busy
            return
        if self.waiting[0] is not self._head:
            self._head, self._num_jumped = self.waiting[0], 0
        if self._num_jumped >= self.max_num_seqs:
            return
        kept = {g.key_hash: g for g in self.prefixes.groups.values() if g.kept}
        if not kept:
            return
        found = []
        for depth, seq in enumerate(self.waiting):
            if depth >= KEPT_LOOKAHEAD or len(found) >= len(self._free_seq_ids):
                break
            group = kept.get(seq.item.kept_hash) if depth else None
            if group is not None and group.key == seq.item.kept_key:
                found.append((seq, group))
        for seq, group in found:
            if self._num_jumped >= self.max_num_seqs or not self._free_seq_ids:
                return
            if not self._admit_kept(seq, group, now, evict=False):
                return
            self._num_jumped += 1

    def _admit_kept(self, seq: Sequence, kept: PrefixGroup, now: float, *, evict=True) -> bool:
        """Admit a request whose whole prompt is kept from an earlier one: it shares those
        cells and starts from the logits kept with them, evaluating nothing (so its output
        is what a fresh evaluation of the same cells gives). False if it must wait for room
        (`evict`: idle groups may be evicted to make it; not before the request's turn)."""
        chain = {group.key for group in lineage(kept)}
        needed = seq.max_tokens - seq.item.num_head
        while self.num_reserved_cells + needed > self.n_ctx:
            if not evict or not self.prefixes.evict_idle(chain):
                return False
        if self.waiting[0] is seq:
            self.waiting.popleft()
        else:  # admitted before its turn
            self.waiting.remove(seq)
        self.prefixes.unawait(seq.item.level_keys)
        self.prefixes.tick += 1
        for group in lineage(kept):
            group.last_used = self.prefixes.tick
        kept.num_refs += 1
        self.stats.num_kept_prompts_used += 1
        seq.group = kept
        seq.kv_len = len(kept.key)
        seq.prompt_tokens = []
        seq.prompt_logits = kept.logits
        self._start(seq, now)
        return True

    def _keep_prompt(self, seq: Sequence) -> bool:
        """Keep a finished sequence's prompt cells, with the logits at its last token, as an
        idle group that a later identical request starts from; its output cells are trimmed.
        The group takes the sequence's id, and a free kept-prompt id replaces it in the
        slots' pool. False (nothing kept) when it is already kept or no kept-prompt id can
        be freed.

        The cells and the logits are exactly those the first request read, so the same
        request again evaluates nothing and chooses its first token from the same numbers
        (evaluating even its last token again, in another batch shape, could move them)."""
        if not self.max_kept_prompts or seq.prompt_logits is None:
            return False
        logit_ids = seq.grammar.choice_ids(seq.start_state) if seq.grammar is not None else None
        # its prefix group's tokens and its own: the whole prompt
        kept = self.prefixes.keep_prompt(
            seq.item.kept_key, seq.seq_id, seq.group, seq.prompt_logits, logit_ids
        )
        if kept is None:
            return False
        group, kept_id = kept
        self.stats.num_prompts_kept += 1
        self._trims.append(SeqTrim(seq.seq_id, len(group.key)))
        self._free_seq_ids.append(kept_id)
        self._free_seq_ids.sort()
        self._seq_cells -= seq.cells_needed
        self.running.remove(seq)
        seq.seq_id, seq.group = None, None
        seq.status = SeqStatus.FINISHED
        self.prefixes.drop_idle()  # as any release does: groups admissions left unawaited
        return True

    def _restore_kept(self, seq: Sequence) -> None:
        """If the prompt cache holds this request's own cells, kept from an earlier identical
        request, plan their restore into its sequence (its prefix is copied in behind them):
        it evaluates nothing and chooses its first token from the logits saved with them."""
        if self.prefixes.prompt_cache is None or not self.max_kept_prompts:
            return
        saved = self.prefixes.prompt_cache.get(kept_key(seq.item.kept_key))
        if (
            not isinstance(saved, KeptPrompt)
            or saved.prefix_len != seq.kv_len
            or not saved.covers(
                seq.grammar.choice_ids(seq.start_state) if seq.grammar is not None else None
            )
        ):
            return
        self.prefixes.restores.append(SeqRestore(seq.seq_id, saved.state))
        seq.num_prompt_done = len(seq.prompt_tokens)
        seq.kv_len += len(seq.prompt_tokens)
        seq.prompt_logits = saved.logits(self.vocabulary.n_vocab)
        self.stats.num_kept_prompts_restored += 1
        self.stats.num_tokens_restored += len(seq.prompt_tokens)

    def _start(self, seq: Sequence, now: float) -> None:
        seq.seq_id = self._free_seq_ids.pop(0)
        seq.status = SeqStatus.PREFILL
        seq.admitted_at = now
        self._seq_cells += seq.cells_needed
        self.running.append(seq)

    def _admit_matched(self, seq: Sequence, now: float) -> bool:
        """Admit a request that names no prefix, sharing the longest common token prefix
        with the groups there are (`auto_prefix`); False if it must wait for room.

        The group holding the longest match is split at the match when the match ends inside
        it; the request's own prompt (all but its last token) becomes a new group when it
        adds at least `auto_prefix` tokens, so later requests can start from it.
        """
        tokens = seq.item.prompt_tokens
        limit = len(tokens) - 1  # the sequence evaluates at least its last token
        best, length, whole = self.prefixes.match(tokens, limit)
        split = best is not None and length < len(best.key)
        # the match's head evaluated afresh after the group's parent (`anchor`), beside the
        # group; decided before evictions, which may drop the group
        fresh = split and self.prefixes.window_unsure(best, length)
        if fresh and whole is not None and length - len(whole.key) < self.prefixes.auto_prefix:
            # not worth a group evaluated afresh: the few tokens more are the request's own
            best, length, split, fresh = whole, len(whole.key), False, False
        anchor = best.parent if fresh else None
        own = limit - length >= self.prefixes.auto_prefix
        total = len(tokens) + seq.max_tokens - seq.item.num_head
        while not self._make_room(best, length, own, total, fresh):
            if own:  # keeping this prompt for later is worth less than running it now
                own = False
            elif self.running:
                return False  # wait: finishing sequences free ids and cells
            elif best is not None:  # nothing will free what the match holds: share nothing
                best, length, split, fresh = None, 0, False, False
            else:
                return False
        self.waiting.popleft()
        self.prefixes.tick += 1
        if fresh:
            parent = self.prefixes.new_group(tuple(tokens[:length]), anchor)
            parent.auto = True
        else:
            parent = self.prefixes.split(best, length) if split else best
        if own:
            parent = self.prefixes.new_group(tuple(tokens[:limit]), parent)
            parent.auto = True
        for group in lineage(parent):
            group.last_used = self.prefixes.tick
        shared = 0
        if parent is not None:
            parent.num_refs += 1
            seq.group = parent
            shared = len(parent.key)
        seq.kv_len = shared
        seq.prompt_tokens = tokens[shared:]
        self._start(seq, now)
        return True

    def _make_room(
        self, best: PrefixGroup | None, length: int, own: bool, total: int, fresh: bool
    ) -> bool:
        """Evict idle groups (never those whose cells the admission copies) until the
        sequence ids and cells a matched admission needs are free. `fresh`: the match's
        head is evaluated afresh after the parent of `best`."""
        split = best is not None and length < len(best.key)
        shared = length
        if fresh:
            best = best.parent
            shared = len(best.key) if best is not None else 0
        keep = {group.key for group in lineage(best)}
        while len(self.prefixes.free_ids) < int(split) + int(own):
            if not self.prefixes.evict_idle(keep):
                return False
        while self.num_reserved_cells + total - shared > self.n_ctx:
            if not self.prefixes.evict_idle(keep):
                return False
        return True

    def _release(self, seq: Sequence, *, keep_prompt: bool = False) -> None:
        """Give back a sequence's id and cells; drop its prefix group when unused.
        `keep_prompt`: a finished request's prompt cells may stay for a later identical one."""
        if keep_prompt and seq.seq_id is not None and self._keep_prompt(seq):
            return
        if seq in self.running:
            self.running.remove(seq)
        if seq.seq_id is not None:
            self.prefixes.removals.append(seq.seq_id)
            self._free_seq_ids.append(seq.seq_id)
            self._free_seq_ids.sort()
            self._seq_cells -= seq.cells_needed
            seq.seq_id = None
        if seq.group is not None:
            seq.group.num_refs -= 1
            seq.group = None
            self.prefixes.drop_idle()
        seq.status = SeqStatus.FINISHED

    def _fail(self, seq: Sequence, error: Exception) -> None:
        seq.status = SeqStatus.FINISHED
        self._finished.append(Finished(request_id=seq.request_id, error=error))

    # -- planning -------------------------------------------------------------------------

    def schedule(self) -> ScheduledStep:
        """Plan the next step: removals, prefix copies and one batch of tokens."""
        now = time.perf_counter()
        self._admit(now)
        saves, removals, restores, copies = self.prefixes.take_step_work()
        plan = StepPlan(
            saves=[save for save, _, _ in saves],
            removals=removals,
            trims=self._trims,
            restores=restores,
            copies=copies,
        )
        step = ScheduledStep(
            plan=plan,
            rows=[],
            saved_keys={save.seq_id: (key, entry) for save, key, entry in saves},
        )
        self._trims = []
        budget = self.token_budget
        budget = self._decode_phase(step, budget)
        budget, filled = self._prefix_phase(step, budget)
        self._prompt_phase(step, budget, filled)
        # rows were appended in the batch order of their logits-bearing tokens
        return step

    def _decode_phase(self, step: ScheduledStep, budget: int) -> int:
        """Running sequences: the token chosen last step plus any jump-forward tokens,
        logits on the last one only. Returns the budget left."""
        plan = step.plan
        for seq in self.running:
            if seq.status is not SeqStatus.DECODE or not seq.pending or budget == 0:
                continue
            # forced tokens beyond the budget wait for the next step (no logits until the last)
            feed, seq.pending = seq.pending[:budget], seq.pending[budget:]
            ends = not seq.pending
            for i, token in enumerate(feed):
                is_last = ends and i == len(feed) - 1
                plan.tokens.append(BatchToken(token, seq.kv_len + i, seq.seq_id, is_last))
            seq.kv_len += len(feed)
            step.num_output_tokens += len(feed)
            budget -= len(feed)
            if ends:
                step.rows.append(seq)
        return budget

    def _prefix_phase(self, step: ScheduledStep, budget: int) -> tuple[int, set[int]]:
        """Prefill chunks of prefix groups, parents before children (no logits); a long
        named prefix goes to the engine's prefill context instead. Returns the budget left
        and the groups whose cells this very step is still writing."""
        plan = step.plan
        filled: set[int] = set()  # groups whose cells this very step is still writing
        for group in self.prefixes.groups.values():
            if budget == 0:
                break
            if group.ready:
                continue
            parent = group.parent
            if (
                parent is not None
                and not group.copied
                and group is not self.prefixes.in_prefill_context
            ):
                if not parent.ready or parent.seq_id in filled:
                    continue
                if self.prefixes.goes_to_prefill_context(
                    group
                ):  # its parent's cells are read there
                    self.prefixes.in_prefill_context = group
                    group.num_evaluated = len(parent.key)
                else:
                    plan.copies.append(SeqCopy(parent.seq_id, group.seq_id, 0, len(parent.key)))
                    group.copied = True
                    # a restored group holds its own cells already: the copy makes it ready
                    group.num_evaluated = max(group.num_evaluated, len(parent.key))
            elif parent is None and self.prefixes.goes_to_prefill_context(group):
                self.prefixes.in_prefill_context = group
            chunk = group.key[group.num_evaluated : group.num_evaluated + budget]
            if not chunk:
                continue
            if group is self.prefixes.in_prefill_context:
                plan.prefills.append(
                    PrefixPrefill(
                        seq_id=group.seq_id,
                        key=group.key,
                        parent=parent.seq_id if parent is not None else None,
                        parent_len=len(parent.key) if parent is not None else 0,
                        start=group.num_evaluated,
                        end=group.num_evaluated + len(chunk),
                    )
                )
                if plan.prefills[-1].last:  # its cells and its parent's are in place after
                    group.copied = parent is not None
                    self.prefixes.in_prefill_context = None
            else:
                for i, token in enumerate(chunk):
                    plan.tokens.append(
                        BatchToken(token, group.num_evaluated + i, group.seq_id, False)
                    )
            group.num_evaluated += len(chunk)
            budget -= len(chunk)
            step.num_prompt_tokens += len(chunk)
            filled.add(group.seq_id)
            reader = self._first_reader(group)
            if reader is not None:  # the prompt tokens count on its first reader's account
                # an auto prefix group may end inside that reader's head: those are output
                start = group.num_evaluated - len(chunk)
                counted = max(0, min(len(chunk), reader.item.num_own_tokens - start))
                reader.counts.prompt_evaluated += counted
                reader.prefix_counted += counted
                step.num_prompt_tokens -= len(chunk) - counted
                step.num_head_tokens += len(chunk) - counted
                step.num_output_tokens += len(chunk) - counted
        return budget, filled

    def _prompt_phase(self, step: ScheduledStep, budget: int, filled: set[int]) -> None:
        """Prompt chunks of admitted sequences whose prefix is ready (copied in first),
        logits on the prompt's last token; a kept prompt carries no token."""
        plan = step.plan
        for seq in self.running:
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
                # a group may end inside the head (auto prefix): its tokens are output
                own = seq.item.num_own_tokens
                seq.counts.prefix_reused = min(len(seq.group.key), own) - seq.prefix_counted
            prompt = seq.prompt_tokens
            if seq.num_prompt_done >= len(prompt):  # a kept prompt: in cells, with its logits
                step.kept_rows.append(seq)
                continue
            # the head goes in a step of its own after the prompt, as it would after the
            # prompt's logits without one: its logits come from the same batch shapes
            own = len(prompt) - seq.item.num_head
            end = own if seq.num_prompt_done < own else len(prompt)
            chunk = prompt[seq.num_prompt_done : min(seq.num_prompt_done + budget, end)]
            ends_prompt = seq.num_prompt_done + len(chunk) == len(prompt)
            for i, token in enumerate(chunk):
                is_last = ends_prompt and i == len(chunk) - 1
                plan.tokens.append(BatchToken(token, seq.kv_len + i, seq.seq_id, is_last))
            seq.kv_len += len(chunk)
            evaluated = max(0, min(len(chunk), own - seq.num_prompt_done))
            seq.counts.prompt_evaluated += evaluated
            seq.num_prompt_done += len(chunk)
            budget -= len(chunk)
            step.num_prompt_tokens += evaluated
            step.num_head_tokens += len(chunk) - evaluated
            step.num_output_tokens += len(chunk) - evaluated  # the head is output
            if ends_prompt:
                step.rows.append(seq)

    def _first_reader(self, group: PrefixGroup) -> Sequence | None:
        """The first admitted sequence that reads `group` (directly or through a child)."""
        for seq in self.running:
            if any(node is group for node in lineage(seq.group)):
                return seq
        return None

    # -- reading the output back ----------------------------------------------------------

    def update_from_output(self, step: ScheduledStep, output: StepOutput) -> None:
        """Choose each row's next token under its grammar; finish sequences whose JSON is done."""
        stats = self.stats
        stats.num_steps += 1
        for seq_id, data in output.states.items():
            key, entry = step.saved_keys.get(seq_id, (None, None))
            if key is not None and self.prefixes.prompt_cache is not None:
                entry.state = data
                self.prefixes.prompt_cache.put(key, entry)
                stats.num_states_saved += 1
        stats.num_prompt_tokens += step.num_prompt_tokens
        stats.num_tokens_apart += sum(p.end - p.start for p in step.plan.prefills)
        stats.num_head_tokens += step.num_head_tokens
        stats.decode_seconds += output.seconds
        if step.num_prompt_tokens:
            stats.prefill_steps += 1
            stats.prefill_seconds += output.seconds
            if not step.num_output_tokens:
                stats.prompt_phase_steps += 1
                stats.prompt_phase_tokens += step.num_prompt_tokens
                stats.prompt_phase_seconds += output.seconds
        elif step.num_output_tokens:
            stats.generation_steps += 1
            stats.generation_tokens += step.num_output_tokens
            stats.generation_seconds += output.seconds
            num_seqs = len(step.rows)
            if len(step.plan.tokens) == num_seqs == step.num_output_tokens:
                steps, seconds = stats.generation_by_batch.get(num_seqs, (0, 0.0))
                stats.generation_by_batch[num_seqs] = (steps + 1, seconds + output.seconds)
        if output.logits.shape[0] != len(step.rows):
            raise GenerationError(
                f"engine returned {output.logits.shape[0]} logits rows for {len(step.rows)} sequences"
            )
        now = time.perf_counter()
        rows = [(seq, output.logits[row]) for row, seq in enumerate(step.rows)]
        rows += [(seq, seq.prompt_logits) for seq in step.kept_rows]
        for seq, logits in rows:
            if seq.status is SeqStatus.FINISHED:  # cancelled while the step ran
                continue
            if seq.status is SeqStatus.PREFILL:
                seq.status = SeqStatus.DECODE
                seq.first_token_at = now
                if self.max_kept_prompts and seq.prompt_logits is None:
                    # the engine's buffer is overwritten by the next step: keep a copy
                    seq.prompt_logits = np.array(logits, dtype=np.float32)
            try:
                done = self.chooser.advance(seq, logits)
                self._stream(seq, final=done)
                if done:
                    result = self.chooser.finish(seq)
                    self._release(seq, keep_prompt=True)
                    self._finished.append(result)
            except Exception as error:  # one broken sequence must not stop the others
                self._release(seq)
                self._fail(
                    seq,
                    error if isinstance(error, GenerationError) else GenerationError(str(error)),
                )

    @staticmethod
    def _stream(seq: Sequence, *, final: bool) -> None:
        """Hand the output chosen since the last step to the request's `on_text`."""
        on_text = seq.item.request.on_text
        if on_text is None or (len(seq.output_bytes) == seq.streamed and not final):
            return
        if seq.text_decoder is None:
            seq.text_decoder = codecs.getincrementaldecoder("utf-8")("replace")
        text = seq.text_decoder.decode(bytes(seq.output_bytes[seq.streamed :]), final)
        seq.streamed = len(seq.output_bytes)
        if text:
            with contextlib.suppress(Exception):  # the listener's failure is not the generation's
                on_text(text)

    def requeue_running(self, error: Exception, max_attempts: int = 3) -> None:
        """The engine lost its KV cache (a step failed and it was cleared): start every
        admitted request again from the queue's head, in order, with fresh grammar state.
        A request that has now failed `max_attempts` times finishes with `error`."""
        running, self.running = self.running, []
        for seq in running:
            seq.group = None  # every group is dropped below
            self._release(seq)
        # the engine's cache is empty already: every group goes, kept prompts took slots'
        # ids and gave theirs, so every pool starts afresh
        self.prefixes.reset()
        self._free_seq_ids = list(range(self.max_num_seqs))
        self._trims = []
        self._seq_cells = 0
        retry: list[Sequence] = []
        for seq in running:
            item = seq.item
            item.num_attempts += 1
            # a request that streamed text cannot take it back: it fails instead
            if item.num_attempts >= max_attempts or seq.streamed:
                self._fail(seq, error)
                continue
            retry.append(self._new_sequence(item))
        for seq in reversed(retry):
            self.waiting.appendleft(seq)
            self.prefixes.await_keys(seq.item.level_keys)

    def fail_all(self, error: Exception) -> None:
        """Fail every queued and running request (the engine broke); the pool is reset."""
        for seq in list(self.running):
            self._release(seq)
            self._fail(seq, error)
        while self.waiting:
            self._fail(self.waiting.popleft(), error)
        self.prefixes.awaited.clear()
        self.prefixes.drop_idle(force=True)
