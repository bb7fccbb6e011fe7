"""The continuous-batching scheduler: a pure state machine over tokenized requests.

Invariant: every admitted sequence and every live prefix group holds its own llama.cpp
sequence id from a fixed pool, and `num_reserved_cells` (the prefix lengths of live groups
plus prompt + token budget of each admitted sequence) never exceeds `n_ctx`. So a step
never overflows the KV cache: admission waits instead.

One step is `schedule() -> ScheduledStep`, executed by an engine, then
`update_from_output(step, output)`. The scheduler plans (admission, prefixes, the batch);
`choice.TokenChooser` picks tokens. It never touches llama.cpp; tests drive it with
hand-built logits.

Shared prefixes come two ways. A request may name them (prefix segments: the scorers' own
instructions and contexts). With `auto_prefix`, a request that names none is matched token by
token against every prefix group alive or kept: it reads the longest common prefix (a group
is split at that point, as a radix tree splits an edge; one as long as the model's sliding
window is not, see `swa_window`), and its own prompt becomes a group
that later requests can match. Groups found this way are kept after their last user and
evicted, least recently used first, when a request needs their sequence id or cells.

With a prompt cache (`prompt_cache_bytes`), a named prefix group that leaves the KV cache is
saved to host memory first (its cells as llama.cpp serialises them), and a later request
whose prefix is saved there gets the cells back by a restore instead of a prefill; the
deepest saved level is restored as a group of its own, and the levels below it are evaluated
as usual. A kept prompt (a finished request's whole prompt, kept for the same request sent
again) that leaves the KV cache is saved too: its own cells after its prefix, with the
logits its grammar's first choice reads. The same request sent again gets them back behind
its prefix (alive, restored or evaluated) and evaluates nothing of its own.

Order of work inside a step, within `token_budget` tokens:
1. running sequences: the token sampled last step plus any jump-forward tokens, logits on
   the last one only;
2. prefill chunks of prefix groups (no logits); with a prefill context (`prefill_cells`), a
   long named prefix is evaluated there instead, apart from the batch, so that its tokens
   attend over its own cells only and not over every other sequence's (its cells then move
   into its sequence, behind a copy of its parent's);
3. prompt chunks of admitted sequences whose prefix is ready (copied in first), logits on
   the prompt's last token; a sequence whose whole prompt is kept carries no token, its
   first token is chosen from the logits kept with that prompt.
"""

from __future__ import annotations

import codecs
import contextlib
import time
from collections import Counter, deque

import numpy as np

from localjudge.engine.plan import (
    BatchToken,
    PrefixPrefill,
    SeqCopy,
    SeqRestore,
    SeqSave,
    SeqTrim,
    StepOutput,
    StepPlan,
)
from localjudge.errors import GenerationError, PromptTooLongError, RequestCancelled
from localjudge.grammar.vocabulary import TokenVocabulary
from localjudge.scheduler.choice import TokenChooser
from localjudge.scheduler.prompt_cache import KeptPrompt, PromptCache, SavedCells, kept_key
from localjudge.scheduler.state import (
    Finished,
    PrefixGroup,
    ScheduledStep,
    SeqStatus,
    Sequence,
    TokenizedRequest,
)
from localjudge.scheduler.stats import SchedulerStats

# prefixes shorter than this are evaluated again rather than saved (a save costs a copy of
# the cells, and a short prefix is cheap to evaluate)
MIN_SAVED_TOKENS = 64
# how deep in the queue a request whose prompt is kept is looked for (see `_admit_kept_first`)
KEPT_LOOKAHEAD = 4096
# a prefix adding fewer tokens than this to its parent is evaluated in the batch, not apart
# (its tokens cost little attention; apart, they would cost a decode call of their own)
MIN_APART_TOKENS = 1024


def _lineage(group: PrefixGroup | None):
    """`group` and the groups it starts from, innermost first."""
    while group is not None:
        yield group
        group = group.parent


def _common_prefix(a, b, limit: int) -> int:
    """How many leading tokens `a` and `b` share, at most `limit`."""
    n = min(len(a), len(b), limit)
    if n <= 0:
        return 0
    differ = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(differ[0]) if differ.size else n


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
        eog_ids: frozenset[int] = frozenset(),
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
        self.groups: dict[tuple[int, ...], PrefixGroup] = {}
        self._free_seq_ids = list(range(max_num_seqs))
        self._free_prefix_ids = list(range(max_num_seqs, max_num_seqs + max_num_prefixes))
        # finished requests' prompts kept in the KV cache with their last logits, so that the
        # same request sent again evaluates nothing (llama-server's slots evaluate one token);
        # their ids: one more pool
        self.max_kept_prompts = max_kept_prompts
        self._free_kept_ids = self._kept_id_range()
        self._trims: list[SeqTrim] = []  # kept prompts: their output cells go
        self._removals: list[int] = []
        self._finished: list[Finished] = []
        self._awaited: Counter[tuple[int, ...]] = Counter()  # prefix keys of queued requests
        self.num_reserved_cells = 0
        # keep evaluated prefixes after their last user, for later requests that start the
        # same way; evicted, least recently used first, when ids or KV cells are needed
        self.cache_prefixes = cache_prefixes
        # share at least this many leading tokens between requests that name no prefix (0: off)
        self.auto_prefix = auto_prefix
        self._pending_copies: list[SeqCopy] = []  # group splits made at admission, copied first
        # host-memory tier for named prefixes leaving the KV cache (None: off)
        self.prompt_cache = PromptCache(prompt_cache_bytes) if prompt_cache_bytes > 0 else None
        # states to save first: (cells, prompt cache key, the entry their bytes complete)
        self._saves: list[tuple[SeqSave, tuple[int, ...], SavedCells]] = []
        self._restores: list[SeqRestore] = []  # saved prefixes put back at admission
        self._tick = 0
        # the request at the queue's head, and how many requests were admitted before it
        # because their prompts were kept (at most max_num_seqs: it is never starved)
        self._head: Sequence | None = None
        self._num_jumped = 0
        # the engine's prefill context: the longest prefix it holds (0: none), and the
        # group it is evaluating (one at a time: it holds one prefix)
        self.prefill_cells = prefill_cells
        self._apart: PrefixGroup | None = None
        # the model's sliding window (0: none). llama.cpp gives a cell of one sequence that
        # lies a window or more behind that sequence's end to other tokens, even with the
        # full SWA cache, and a saved state omits such cells: so a group that long may lack
        # the window before a point inside it, and is never split by copying its cells
        self.swa_window = swa_window
        self.stats = SchedulerStats()
        self.chooser = TokenChooser(
            vocabulary,
            self.stats,
            jump_forward=jump_forward,
            heads=heads,
            eog_ids=frozenset(eog_ids),
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

    def _kept_id_range(self) -> list[int]:
        first = self.max_num_seqs + self.max_num_prefixes
        return list(range(first, first + self.max_kept_prompts))

    def has_work(self) -> bool:
        return bool(self.waiting or self.running or self._removals or self._saves or self._trims)

    def take_finished(self) -> list[Finished]:
        finished, self._finished = self._finished, []
        return finished

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
            kept = self.groups.get(seq.item.kept_key) if self.max_kept_prompts else None
            if kept is not None and kept.logits is not None:
                if not self._admit_kept(seq, kept, now):
                    return
                continue
            if self.auto_prefix and not seq.item.level_keys:
                if not self._admit_matched(seq, now):
                    return
                continue
            if self._saving(seq.item.level_keys):
                return  # this step saves a prefix the request needs: admit it after
            start, restored = self._levels(seq.item.level_keys)
            keys = seq.item.level_keys[start:]  # levels above these: not needed
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
            self._unawait(seq.item.level_keys)
            parent = None
            self._tick += 1
            for level, key in enumerate(keys, start):
                group = self.groups.get(key)
                if group is None:
                    group = PrefixGroup(key=key, seq_id=self._free_prefix_ids.pop(0), parent=parent)
                    if parent is not None:
                        parent.num_refs += 1
                    if level in restored:  # the saved cells come back, no prefill
                        self._restore(group)
                    self.groups[key] = group
                group.last_used = self._tick
                parent = group
            if parent is not None:
                parent.num_refs += 1
                seq.group = parent
                seq.kv_len = len(parent.key)
            self._start(seq, now, needed)
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
        kept = {g.key_hash: g for g in self.groups.values() if g.kept}
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
        chain = {group.key for group in _lineage(kept)}
        needed = seq.max_tokens - seq.item.num_head
        while self.num_reserved_cells + needed > self.n_ctx:
            if not evict or not self._evict_idle_group(chain):
                return False
        if self.waiting[0] is seq:
            self.waiting.popleft()
        else:  # admitted before its turn
            self.waiting.remove(seq)
        self._unawait(seq.item.level_keys)
        self._tick += 1
        for group in _lineage(kept):
            group.last_used = self._tick
        kept.num_refs += 1
        self.stats.num_kept_prompts_used += 1
        seq.group = kept
        seq.kv_len = len(kept.key)
        seq.prompt_tokens = []
        seq.prompt_logits = kept.logits
        self._start(seq, now, needed)
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
        parent = seq.group
        key = seq.item.kept_key  # its prefix group's tokens and its own: the whole prompt
        if key in self.groups:
            return False
        if not self._free_kept_ids and not self._evict_idle_group(set(), kept_only=True):
            return False
        group = PrefixGroup(
            key=key,
            seq_id=seq.seq_id,
            parent=parent,  # the sequence's reference to it passes to the group
            copied=True,
            num_evaluated=len(key),
            last_used=self._tick,
            auto=True,  # kept after its last user; saved as a kept prompt, not a prefix
            kept=True,
            logits=seq.prompt_logits,
            logit_ids=seq.grammar.choice_ids(seq.start_state) if seq.grammar is not None else None,
        )
        self.groups[key] = group
        self.stats.num_prompts_kept += 1
        self._trims.append(SeqTrim(seq.seq_id, len(key)))
        self._free_seq_ids.append(self._free_kept_ids.pop(0))
        self._free_seq_ids.sort()
        self.num_reserved_cells += group.own_cells - seq.cells_needed
        self.running.remove(seq)
        seq.seq_id, seq.group = None, None
        seq.status = SeqStatus.FINISHED
        self._drop_idle_groups()  # as any release does: groups admissions left unawaited
        return True

    def _saving(self, keys) -> bool:
        """Whether this step's saves hold a prefix among `keys` (its state is not in the
        prompt cache until the step has run)."""
        return bool(self._saves) and any(
            key == saved for _, saved, _ in self._saves for key in keys
        )

    def _levels(self, keys) -> tuple[int, set[int]]:
        """The first prefix level a request uses, and the levels restored from the prompt
        cache. Below the deepest level alive in the KV cache, a level is restored if its
        cells are saved there: on their own (the level holds its ancestors' cells itself,
        so the request starts from it) or behind exactly the level above it (whose cells are
        copied in once that level is alive, restored or evaluated). Without a level saved on
        its own, the request starts from the deepest live level with the live levels above it."""
        live = max((i for i, key in enumerate(keys) if key in self.groups), default=-1)
        restored: set[int] = set()
        if self.prompt_cache is not None:
            for level in range(len(keys) - 1, live, -1):
                saved = self.prompt_cache.peek(keys[level])
                if saved is None:
                    continue
                if saved.prefix_len == 0:
                    restored.add(level)
                    return level, restored
                if level > 0 and saved.prefix_len == len(keys[level - 1]):
                    restored.add(level)
        if live < 0:
            return 0, restored
        start = live
        while start > 0 and keys[start - 1] in self.groups:
            start -= 1
        return start, restored

    def _restore(self, group: PrefixGroup) -> None:
        """Plan the restore of `group`'s saved cells into its sequence. Saved on their own,
        they make it ready (the restore runs before any copy from it in the step); saved
        behind its parent's cells, it is ready once those are copied in (prefill, step 2)."""
        saved = self.prompt_cache.get(group.key)
        self._restores.append(SeqRestore(group.seq_id, saved.state))
        group.copied = saved.prefix_len == 0
        group.num_evaluated = len(group.key)
        self.stats.num_states_restored += 1
        self.stats.num_tokens_restored += len(group.key) - saved.prefix_len

    def _restore_kept(self, seq: Sequence) -> None:
        """If the prompt cache holds this request's own cells, kept from an earlier identical
        request, plan their restore into its sequence (its prefix is copied in behind them):
        it evaluates nothing and chooses its first token from the logits saved with them."""
        if self.prompt_cache is None or not self.max_kept_prompts:
            return
        saved = self.prompt_cache.get(kept_key(seq.item.kept_key))
        if (
            not isinstance(saved, KeptPrompt)
            or saved.prefix_len != seq.kv_len
            or not saved.covers(
                seq.grammar.choice_ids(seq.start_state) if seq.grammar is not None else None
            )
        ):
            return
        self._restores.append(SeqRestore(seq.seq_id, saved.state))
        seq.num_prompt_done = len(seq.prompt_tokens)
        seq.kv_len += len(seq.prompt_tokens)
        seq.prompt_logits = saved.logits(self.vocabulary.n_vocab)
        self.stats.num_kept_prompts_restored += 1
        self.stats.num_tokens_restored += len(seq.prompt_tokens)

    def _start(self, seq: Sequence, now: float, cells: int) -> None:
        seq.seq_id = self._free_seq_ids.pop(0)
        seq.status = SeqStatus.PREFILL
        seq.admitted_at = now
        self.num_reserved_cells += cells
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
        best, length = None, 0
        whole = None  # the longest group matched to its end (read without a split)
        for group in self.groups.values():
            n = _common_prefix(group.key, tokens, limit)
            waiting = group.parent is not None and not group.copied and group.num_evaluated
            if (waiting or group is self._apart) and n < len(group.key):
                # restored, its parent's cells not copied in yet, or evaluated apart: its
                # cells are not in its sequence yet, not to be split
                continue
            if n > length or (n == length and best is not None and n == len(group.key)):
                best, length = group, n
            if n == len(group.key) and (whole is None or n > len(whole.key)):
                whole = group
        if length < self.auto_prefix:
            best, length = None, 0
        while best is not None and best.parent is not None and len(best.parent.key) >= length:
            best = best.parent  # the group whose own tokens hold the end of the match
        split = best is not None and length < len(best.key)
        # the match's head evaluated afresh after the group's parent (`anchor`), beside the
        # group; decided before evictions, which may drop the group
        fresh = split and self._window_unsure(best, length)
        if fresh and whole is not None and length - len(whole.key) < self.auto_prefix:
            # not worth a group evaluated afresh: the few tokens more are the request's own
            best, length, split, fresh = whole, len(whole.key), False, False
        anchor = best.parent if fresh else None
        own = limit - length >= self.auto_prefix
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
        self._tick += 1
        if fresh:
            parent = self._new_group(tuple(tokens[:length]), anchor)
            parent.auto = True
        else:
            parent = self._split(best, length) if split else best
        if own:
            parent = self._new_group(tuple(tokens[:limit]), parent)
            parent.auto = True
        for group in _lineage(parent):
            group.last_used = self._tick
        shared = 0
        if parent is not None:
            parent.num_refs += 1
            seq.group = parent
            shared = len(parent.key)
        seq.kv_len = shared
        seq.prompt_tokens = tokens[shared:]
        self._start(seq, now, seq.cells_needed)
        return True

    def _window_unsure(self, group: PrefixGroup, length: int) -> bool:
        """Whether the cells of `group` before `length` (an evaluated group's) may lack some
        of the sliding window that tokens after `length` attend over (see `swa_window`)."""
        return (
            self.swa_window > 0
            and group.num_evaluated >= length
            and len(group.key) >= self.swa_window
        )

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
        keep = {group.key for group in _lineage(best)}
        while len(self._free_prefix_ids) < int(split) + int(own):
            if not self._evict_idle_group(keep):
                return False
        while self.num_reserved_cells + total - shared > self.n_ctx:
            if not self._evict_idle_group(keep):
                return False
        return True

    def _new_group(self, key: tuple[int, ...], parent: PrefixGroup | None) -> PrefixGroup:
        group = PrefixGroup(key=key, seq_id=self._free_prefix_ids.pop(0), parent=parent)
        if parent is not None:
            parent.num_refs += 1
        self.groups[key] = group
        self.num_reserved_cells += group.own_cells
        return group

    def _split(self, group: PrefixGroup, length: int) -> PrefixGroup:
        """Cut `group` after `length` tokens: a new group holds the head and becomes the
        parent of `group`. Cells change owner, none are added."""
        head = PrefixGroup(
            key=group.key[:length], seq_id=self._free_prefix_ids.pop(0), parent=group.parent
        )
        head.auto = True
        head.num_refs = 1  # `group`, which the old parent counted already
        if group.num_evaluated >= length:  # the head's cells exist: share them now
            head.copied = True
            head.num_evaluated = length
            group.copied = True  # its sequence holds the head's cells already
            self._pending_copies.append(SeqCopy(group.seq_id, head.seq_id, 0, length))
        else:  # still being evaluated: the head takes over that sequence and its progress
            head.seq_id, group.seq_id = group.seq_id, head.seq_id
            head.copied, head.num_evaluated = group.copied, group.num_evaluated
            group.copied, group.num_evaluated = False, 0
        group.parent = head
        self.groups[head.key] = head
        return head

    def _unawait(self, keys) -> None:
        for key in keys:
            self._awaited[key] -= 1
            if self._awaited[key] <= 0:
                del self._awaited[key]

    def _evict_idle_group(self, keep: set[tuple[int, ...]], *, kept_only: bool = False) -> bool:
        """Drop the least recently used prefix group nothing admitted uses (not in `keep`;
        `kept_only`: a kept prompt); False if there is none."""
        sources = {copy.src for copy in self._pending_copies}
        idle = [
            g
            for k, g in self.groups.items()
            if g.num_refs == 0
            and k not in keep
            and g.seq_id not in sources
            and (g.kept or not kept_only)
        ]
        if not idle:
            return False
        victim = min(idle, key=lambda g: g.last_used)
        self._drop_group(victim)
        if victim.parent is not None and victim.parent.num_refs == 0:
            self._drop_idle_groups()  # a kept prompt's prefix that no one else needs
        return True

    @property
    def num_cached_prefixes(self) -> int:
        """Evaluated prefix groups that nothing uses now, kept for requests to come."""
        return sum(1 for g in self.groups.values() if g.num_refs == 0 and g.ready)

    def _drop_group(self, group: PrefixGroup) -> None:
        if group is self._apart:  # the prefill context's work on it is dropped with it
            self._apart = None
        if self.prompt_cache is not None and group.ready:
            self._plan_save(group)  # the step saves before it removes
        self._restores = [r for r in self._restores if r.seq_id != group.seq_id]
        del self.groups[group.key]
        self._removals.append(group.seq_id)
        pool = self._free_kept_ids if group.kept else self._free_prefix_ids
        pool.append(group.seq_id)
        pool.sort()
        self.num_reserved_cells -= group.own_cells
        if group.parent is not None:
            group.parent.num_refs -= 1

    def _plan_save(self, group: PrefixGroup) -> None:
        """Plan the save of the cells a group leaving the KV cache holds beyond its named
        parent's (a parent found by matching tokens is not a level a request names: then
        all of them). A kept prompt saves them with the logits its first token is chosen
        from; a named prefix when they are worth it (`MIN_SAVED_TOKENS`)."""
        parent = group.parent
        start = len(parent.key) if parent is not None and not parent.auto else 0
        if group.kept:
            key = kept_key(group.key)
            entry = self._kept_entry(group, key, start)
        elif group.auto or group.key in self.prompt_cache:
            return
        elif len(group.key) - start >= MIN_SAVED_TOKENS:
            key, entry = group.key, SavedCells(state=bytearray(), prefix_len=start)
        else:
            return
        if entry is not None:
            self._saves.append((SeqSave(group.seq_id, start, len(group.key)), key, entry))

    def _kept_entry(self, group: PrefixGroup, key, start: int) -> KeptPrompt | None:
        """What a kept prompt's save fills in (its logits), or None where a later identical
        request would not find it (behind a matched prefix, or with none while requests are
        matched against each other) or finds it saved already."""
        parent = group.parent
        if (parent is not None and parent.auto) or (parent is None and self.auto_prefix):
            return None
        saved = self.prompt_cache.get(key)
        if isinstance(saved, KeptPrompt) and saved.covers(group.logit_ids):
            return None  # saved by an earlier identical request
        ids = group.logit_ids
        values = group.logits if ids is None else group.logits[ids]
        return KeptPrompt(state=bytearray(), prefix_len=start, ids=ids, values=values)

    def _release(self, seq: Sequence, *, keep_prompt: bool = False) -> None:
        """Give back a sequence's id and cells; drop its prefix group when unused.
        `keep_prompt`: a finished request's prompt cells may stay for a later identical one."""
        if keep_prompt and seq.seq_id is not None and self._keep_prompt(seq):
            return
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

    def _drop_idle_groups(self, *, force: bool = False) -> None:
        """Drop prefix groups that nothing admitted uses and no queued request awaits
        (with `cache_prefixes`, only those not fully evaluated, unless `force`)."""
        dropped = True
        while dropped:  # dropping a child can leave its parent idle
            dropped = False
            for key, group in list(self.groups.items()):
                cached = (self.cache_prefixes or group.auto) and group.ready and not force
                if group.num_refs == 0 and self._awaited[key] <= 0 and not cached:
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
        plan = StepPlan(
            saves=[save for save, _, _ in self._saves],
            removals=self._removals,
            trims=self._trims,
            restores=self._restores,
            copies=self._pending_copies,
        )
        step = ScheduledStep(
            plan=plan,
            rows=[],
            saved_keys={save.seq_id: (key, entry) for save, key, entry in self._saves},
        )
        self._saves, self._removals, self._restores, self._pending_copies = [], [], [], []
        self._trims = []
        budget = self.token_budget

        for seq in self.running:  # 1. decode
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

        filled: set[int] = set()  # groups whose cells this very step is still writing
        for group in self.groups.values():  # 2. prefix prefill, parents before children
            if budget == 0:
                break
            if group.ready:
                continue
            parent = group.parent
            if parent is not None and not group.copied and group is not self._apart:
                if not parent.ready or parent.seq_id in filled:
                    continue
                if self._goes_apart(group):  # its parent's cells are read there
                    self._apart = group
                    group.num_evaluated = len(parent.key)
                else:
                    plan.copies.append(SeqCopy(parent.seq_id, group.seq_id, 0, len(parent.key)))
                    group.copied = True
                    # a restored group holds its own cells already: the copy makes it ready
                    group.num_evaluated = max(group.num_evaluated, len(parent.key))
            elif parent is None and self._goes_apart(group):
                self._apart = group
            chunk = group.key[group.num_evaluated : group.num_evaluated + budget]
            if not chunk:
                continue
            if group is self._apart:
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
                    self._apart = None
            else:
                for i, token in enumerate(chunk):
                    plan.tokens.append(
                        BatchToken(token, group.num_evaluated + i, group.seq_id, False)
                    )
            group.num_evaluated += len(chunk)
            budget -= len(chunk)
            step.num_prompt_tokens += len(chunk)
            filled.add(group.seq_id)
            payer = self._first_user(group)
            if payer is not None:
                # an auto prefix group may end inside its payer's head: those are output
                start = group.num_evaluated - len(chunk)
                paid = max(0, min(len(chunk), payer.item.num_own_tokens - start))
                payer.counts.prompt_evaluated += paid
                payer.prefix_paid += paid
                step.num_prompt_tokens -= len(chunk) - paid
                step.num_head_tokens += len(chunk) - paid
                step.num_output_tokens += len(chunk) - paid

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
                # a group may end inside the head (auto prefix): its tokens are output
                own = seq.item.num_own_tokens
                seq.counts.prefix_reused = min(len(seq.group.key), own) - seq.prefix_paid
            prompt = seq.prompt_tokens
            if seq.num_prompt_done >= len(prompt):  # a kept prompt: in cells, with its logits
                step.given.append(seq)
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

        # rows were appended in the batch order of their logits-bearing tokens
        return step

    def _goes_apart(self, group: PrefixGroup) -> bool:
        """Whether `group`, about to be evaluated, goes to the engine's prefill context: a
        named prefix (a matched one may be split while evaluated) that fits there and adds
        enough tokens, when the context is free."""
        return (
            len(group.key) <= self.prefill_cells  # first: 0 cells (off) settles it
            and self._apart is None
            and not group.num_evaluated  # fresh: nothing evaluated, nothing restored
            and not group.auto
            and group.own_cells >= MIN_APART_TOKENS
        )

    def _first_user(self, group: PrefixGroup) -> Sequence | None:
        """The first admitted sequence that reads `group` (directly or through a child)."""
        for seq in self.running:
            if any(node is group for node in _lineage(seq.group)):
                return seq
        return None

    # -- reading the output back ----------------------------------------------------------

    def update_from_output(self, step: ScheduledStep, output: StepOutput) -> None:
        """Choose each row's next token under its grammar; finish sequences whose JSON is done."""
        stats = self.stats
        stats.num_steps += 1
        for seq_id, data in output.states.items():
            key, entry = step.saved_keys.get(seq_id, (None, None))
            if key is not None and self.prompt_cache is not None:
                entry.state = data
                self.prompt_cache.put(key, entry)
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
        rows += [(seq, seq.prompt_logits) for seq in step.given]
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
        self.groups.clear()
        self._apart = None
        # kept prompts took slots' ids and gave theirs: every pool starts afresh
        self._free_seq_ids = list(range(self.max_num_seqs))
        self._free_prefix_ids = list(
            range(self.max_num_seqs, self.max_num_seqs + self.max_num_prefixes)
        )
        self._free_kept_ids = self._kept_id_range()
        # the engine's cache is empty already; saved states are dropped too, in case one of
        # them was what failed
        self._removals, self._pending_copies, self._saves, self._restores = [], [], [], []
        self._trims = []
        if self.prompt_cache is not None:
            self.prompt_cache.clear()
        self.num_reserved_cells = 0
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
            self._awaited.update(seq.item.level_keys)

    def fail_all(self, error: Exception) -> None:
        """Fail every queued and running request (the engine broke); the pool is reset."""
        for seq in list(self.running):
            self._release(seq)
            self._fail(seq, error)
        while self.waiting:
            self._fail(self.waiting.popleft(), error)
        self._awaited.clear()
        self._drop_idle_groups(force=True)
