"""`PrefixCache`: the prompt prefixes shared in the KV cache, as a tree of `PrefixGroup`s
(each holds its own cells beyond its parent's, in a llama.cpp sequence of its own), and
their host-memory tier. It matches a prompt against the groups, inserts and splits them (a
group as long as the model's sliding window is never split, see `swa_window`), locks them
by reference counts, evicts idle ones least recently used first, saves a group that leaves
the KV cache to the prompt cache and restores it for a later request. The scheduler asks
it for room and plans the step; the cache never plans a batch.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from localjudge.engine.plan import SeqCopy, SeqRestore, SeqSave
from localjudge.scheduler.prompt_cache import KeptPrompt, PromptCache, SavedCells, kept_key
from localjudge.scheduler.state import PrefixGroup

# prefixes shorter than this are evaluated again rather than saved (a save costs a copy of
# the cells, and a short prefix is cheap to evaluate)
MIN_SAVED_TOKENS = 64
# a prefix adding fewer tokens than this to its parent is evaluated in the batch, not in
# the prefill context (its tokens cost little attention; there, they would cost a decode
# call of their own)
MIN_PREFILL_CONTEXT_TOKENS = 1024


def lineage(group: PrefixGroup | None):
    """`group` and the groups it starts from, innermost first."""
    while group is not None:
        yield group
        group = group.parent


def common_prefix(a, b, limit: int) -> int:
    """How many leading tokens `a` and `b` share, at most `limit`."""
    n = min(len(a), len(b), limit)
    if n <= 0:
        return 0
    differ = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(differ[0]) if differ.size else n


class PrefixCache:
    """The groups by their tokens, the sequence ids they may take, the KV cells they hold,
    and what the next step must do for them (saves, removals, restores, copies)."""

    def __init__(
        self,
        *,
        prefix_ids: range,
        kept_ids: range,
        cache_prefixes: bool = False,
        auto_prefix: int = 0,
        prompt_cache_bytes: int = 0,
        prefill_cells: int = 0,
        swa_window: int = 0,
    ) -> None:
        self.groups: dict[tuple[int, ...], PrefixGroup] = {}
        self.prefix_ids, self.kept_ids = prefix_ids, kept_ids
        self.free_ids = list(prefix_ids)
        # finished requests' prompts, kept with their last logits: one more pool of ids
        self.free_kept_ids = list(kept_ids)
        self.cells = 0  # KV cells the groups hold
        self.awaited: Counter[tuple[int, ...]] = Counter()  # prefix keys of queued requests
        # keep evaluated prefixes after their last user, for later requests that start the
        # same way; evicted, least recently used first, when ids or KV cells are needed
        self.cache_prefixes = cache_prefixes
        # share at least this many leading tokens between requests that name no prefix (0: off)
        self.auto_prefix = auto_prefix
        # host-memory tier for named prefixes leaving the KV cache (None: off)
        self.prompt_cache = PromptCache(prompt_cache_bytes) if prompt_cache_bytes > 0 else None
        # what the next step does first: states to save (cells, prompt cache key, the entry
        # their bytes complete), sequences to remove, saved states to restore, and copies
        # made by splits
        self.saves: list[tuple[SeqSave, tuple[int, ...], SavedCells]] = []
        self.removals: list[int] = []
        self.restores: list[SeqRestore] = []
        self.copies: list[SeqCopy] = []
        self.tick = 0  # admissions so far: a group's `last_used`
        # the engine's prefill context: the longest prefix it holds (0: none), and the
        # group it is evaluating (one at a time: it holds one prefix)
        self.prefill_cells = prefill_cells
        self.in_prefill_context: PrefixGroup | None = None
        # the model's sliding window (0: none). llama.cpp gives a cell of one sequence that
        # lies a window or more behind that sequence's end to other tokens, even with the
        # full SWA cache, and a saved state omits such cells: so a group that long may lack
        # the window before a point inside it, and is never split by copying its cells
        self.swa_window = swa_window

    # -- what the next step does ------------------------------------------------------------

    def take_step_work(self):
        """The saves, removals, restores and copies the next step runs first (handed over)."""
        work = (self.saves, self.removals, self.restores, self.copies)
        self.saves, self.removals, self.restores, self.copies = [], [], [], []
        return work

    def has_step_work(self) -> bool:
        return bool(self.removals or self.saves)

    def saving(self, keys) -> bool:
        """Whether this step's saves hold a prefix among `keys` (its state is not in the
        prompt cache until the step has run)."""
        return bool(self.saves) and any(key == saved for _, saved, _ in self.saves for key in keys)

    # -- the queue's interest ---------------------------------------------------------------

    def await_keys(self, keys) -> None:
        self.awaited.update(keys)

    def unawait(self, keys) -> None:
        for key in keys:
            self.awaited[key] -= 1
            if self.awaited[key] <= 0:
                del self.awaited[key]

    # -- lookup and insertion ---------------------------------------------------------------

    def touch(self, group: PrefixGroup | None) -> None:
        """Mark `group` and its ancestors used by the admission under way."""
        for node in lineage(group):
            node.last_used = self.tick

    def levels(self, keys) -> tuple[int, set[int]]:
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

    def new_group(self, key: tuple[int, ...], parent: PrefixGroup | None) -> PrefixGroup:
        """A group for `key` below `parent`, on a free prefix id; its cells are reserved."""
        group = PrefixGroup(key=key, seq_id=self.free_ids.pop(0), parent=parent)
        if parent is not None:
            parent.num_refs += 1
        self.groups[key] = group
        self.cells += group.own_cells
        return group

    def restore(self, group: PrefixGroup, stats) -> None:
        """Plan the restore of `group`'s saved cells into its sequence. Saved on their own,
        they make it ready (the restore runs before any copy from it in the step); saved
        behind its parent's cells, it is ready once those are copied in (prefill)."""
        saved = self.prompt_cache.get(group.key)
        self.restores.append(SeqRestore(group.seq_id, saved.state))
        group.copied = saved.prefix_len == 0
        group.num_evaluated = len(group.key)
        stats.num_states_restored += 1
        stats.num_tokens_restored += len(group.key) - saved.prefix_len

    def match(self, tokens, limit: int) -> tuple[PrefixGroup | None, int, PrefixGroup | None]:
        """The group sharing the longest common token prefix with `tokens` (at most `limit`
        tokens; shorter than `auto_prefix` counts as none), that length, and the longest
        group matched to its end (read without a split)."""
        best, length = None, 0
        whole = None
        for group in self.groups.values():
            n = common_prefix(group.key, tokens, limit)
            waiting = group.parent is not None and not group.copied and group.num_evaluated
            if (waiting or group is self.in_prefill_context) and n < len(group.key):
                # restored, its parent's cells not copied in yet, or evaluated in the
                # prefill context: its cells are not in its sequence yet, not to be split
                continue
            if n > length or (n == length and best is not None and n == len(group.key)):
                best, length = group, n
            if n == len(group.key) and (whole is None or n > len(whole.key)):
                whole = group
        if length < self.auto_prefix:
            best, length = None, 0
        while best is not None and best.parent is not None and len(best.parent.key) >= length:
            best = best.parent  # the group whose own tokens hold the end of the match
        return best, length, whole

    def window_unsure(self, group: PrefixGroup, length: int) -> bool:
        """Whether the cells of `group` before `length` (an evaluated group's) may lack some
        of the sliding window that tokens after `length` attend over (see `swa_window`)."""
        return (
            self.swa_window > 0
            and group.num_evaluated >= length
            and len(group.key) >= self.swa_window
        )

    def split(self, group: PrefixGroup, length: int) -> PrefixGroup:
        """Cut `group` after `length` tokens: a new group holds the head and becomes the
        parent of `group`. Cells change owner, none are added."""
        head = PrefixGroup(key=group.key[:length], seq_id=self.free_ids.pop(0), parent=group.parent)
        head.auto = True
        head.num_refs = 1  # `group`, which the old parent counted already
        if group.num_evaluated >= length:  # the head's cells exist: share them now
            head.copied = True
            head.num_evaluated = length
            group.copied = True  # its sequence holds the head's cells already
            self.copies.append(SeqCopy(group.seq_id, head.seq_id, 0, length))
        else:  # still being evaluated: the head takes over that sequence and its progress
            head.seq_id, group.seq_id = group.seq_id, head.seq_id
            head.copied, head.num_evaluated = group.copied, group.num_evaluated
            group.copied, group.num_evaluated = False, 0
        group.parent = head
        self.groups[head.key] = head
        return head

    def keep_prompt(self, key, seq_id: int, parent: PrefixGroup | None, logits, logit_ids):
        """A finished request's whole prompt kept as an idle group on its sequence (the
        sequence's reference to `parent` passes to it), or None when it is kept already or
        no kept-prompt id can be freed. Returns the group and the kept-prompt id that takes
        the sequence's place in the slots' pool."""
        if key in self.groups:
            return None
        if not self.free_kept_ids and not self.evict_idle(set(), kept_only=True):
            return None
        group = PrefixGroup(
            key=key,
            seq_id=seq_id,
            parent=parent,
            copied=True,
            num_evaluated=len(key),
            last_used=self.tick,
            auto=True,  # kept after its last user; saved as a kept prompt, not a prefix
            kept=True,
            logits=logits,
            logit_ids=logit_ids,
        )
        self.groups[key] = group
        self.cells += group.own_cells
        return group, self.free_kept_ids.pop(0)

    # -- eviction ---------------------------------------------------------------------------

    def evict_idle(self, keep: set[tuple[int, ...]], *, kept_only: bool = False) -> bool:
        """Drop the least recently used prefix group nothing admitted uses (not in `keep`;
        `kept_only`: a kept prompt); False if there is none."""
        sources = {copy.src for copy in self.copies}
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
        self.drop(victim)
        if victim.parent is not None and victim.parent.num_refs == 0:
            self.drop_idle()  # a kept prompt's prefix that no one else needs
        return True

    @property
    def num_cached(self) -> int:
        """Evaluated prefix groups that nothing uses now, kept for requests to come."""
        return sum(1 for g in self.groups.values() if g.num_refs == 0 and g.ready)

    def drop(self, group: PrefixGroup) -> None:
        """Remove `group` from the KV cache (saved to the prompt cache first when worth it)."""
        if group is self.in_prefill_context:  # the prefill context's work on it is dropped with it
            self.in_prefill_context = None
        if self.prompt_cache is not None and group.ready:
            self._plan_save(group)  # the step saves before it removes
        self.restores = [r for r in self.restores if r.seq_id != group.seq_id]
        del self.groups[group.key]
        self.removals.append(group.seq_id)
        pool = self.free_kept_ids if group.kept else self.free_ids
        pool.append(group.seq_id)
        pool.sort()
        self.cells -= group.own_cells
        if group.parent is not None:
            group.parent.num_refs -= 1

    def drop_idle(self, *, force: bool = False) -> None:
        """Drop prefix groups that nothing admitted uses and no queued request awaits
        (with `cache_prefixes`, only those not fully evaluated, unless `force`)."""
        dropped = True
        while dropped:  # dropping a child can leave its parent idle
            dropped = False
            for key, group in list(self.groups.items()):
                cached = (self.cache_prefixes or group.auto) and group.ready and not force
                if group.num_refs == 0 and self.awaited[key] <= 0 and not cached:
                    self.drop(group)
                    dropped = True

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
            self.saves.append((SeqSave(group.seq_id, start, len(group.key)), key, entry))

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

    # -- the prefill context ----------------------------------------------------------------

    def goes_to_prefill_context(self, group: PrefixGroup) -> bool:
        """Whether `group`, about to be evaluated, goes to the engine's prefill context: a
        named prefix (a matched one may be split while evaluated) that fits there and adds
        enough tokens, when the context is free."""
        return (
            len(group.key) <= self.prefill_cells  # first: 0 cells (off) settles it
            and self.in_prefill_context is None
            and not group.num_evaluated  # fresh: nothing evaluated, nothing restored
            and not group.auto
            and group.own_cells >= MIN_PREFILL_CONTEXT_TOKENS
        )

    def reset(self) -> None:
        """The engine lost its KV cache: every group is gone, every id free, and saved
        states are dropped too, in case one of them was what failed."""
        self.groups.clear()
        self.in_prefill_context = None
        self.free_ids = list(self.prefix_ids)
        self.free_kept_ids = list(self.kept_ids)
        self.saves, self.removals, self.restores, self.copies = [], [], [], []
        if self.prompt_cache is not None:
            self.prompt_cache.clear()
        self.cells = 0
