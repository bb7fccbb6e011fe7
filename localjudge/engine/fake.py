"""A scripted engine for exact, fast tests of everything above the engine (STYLE: fakes
ship in the package).

`FakeEngine` executes `StepPlan`s like llama.cpp would, on an emulated KV cache: it checks
that positions are contiguous per sequence, honours removals and prefix copies, and returns
logits from a script. If the scheduler got a position, a copy or a row order wrong, the
script sees the wrong text and the test sees the wrong output.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import numpy as np

from localjudge.engine.plan import PrefixPrefill, StepOutput, StepPlan
from localjudge.engine.template import render_completion
from localjudge.errors import GenerationError, ModelError

BOS_ID, EOS_ID = 0, 1
_MULTI = [
    '{"',
    '"}',
    '": "',
    '", "',
    "yes",
    "no",
    "verdict",
    "reason",
    "claims",
    '["',
    '"]',
    "mild",
    "severe",
]
_CHARS = (
    ["\n"]
    + [chr(c) for c in range(32, 127)]
    + list("あいうえおはがのにをでしたすです。、日本語東京")
)


class FakeTokenizer:
    """Greedy longest-match tokenizer over a small vocabulary of characters and a few words."""

    def __init__(self) -> None:
        self.pieces: list[str] = ["<bos>", "<eos>"] + _CHARS + _MULTI
        self.ids = {p: i for i, p in enumerate(self.pieces)}
        self.max_len = max(len(p) for p in self.pieces)
        # longest match first, in C: alternatives sorted by length, any other character last
        texts = sorted((p for p in self.pieces[EOS_ID + 1 :]), key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(p) for p in texts) + "|.", re.DOTALL)
        self._texts = ["" if i <= EOS_ID else p for i, p in enumerate(self.pieces)]  # no BOS/EOS

    @property
    def n_vocab(self) -> int:
        return len(self.pieces)

    def tokenize(self, text: str, add_bos: bool = True) -> list[int]:
        tokens = [BOS_ID] if add_bos else []
        unknown = self.ids["?"]
        tokens.extend(self.ids.get(piece, unknown) for piece in self._pattern.findall(text))
        return tokens

    def detokenize(self, tokens: list[int]) -> str:
        return "".join(map(self._texts.__getitem__, tokens))

    def vocabulary_pieces(self) -> list[tuple[int, bytes, int]]:
        """(id, bytes, attributes) per token; BOS and EOS are control tokens."""
        return [(i, p.encode(), 0 if i > EOS_ID else 8) for i, p in enumerate(self.pieces)]


Script = Callable[[str], str]  # prompt text -> the output the fake model wants to write


class FakeEngine:
    """An `Engine` that executes step plans on an emulated KV cache; logits come from a
    script. Its prompts are plain completion text (no chat template)."""

    name = "fake"
    eos_id = EOS_ID
    eog_ids = frozenset({EOS_ID})
    chat_template = None
    cache_key = None  # building its vocabulary is instant: nothing to cache

    def __init__(
        self,
        script: Script,
        *,
        marker: str | tuple[str, ...] = "\n>",
        tokenizer: FakeTokenizer | None = None,
        step_seconds: float = 0.0,
        n_ctx: int = 20000,
        shape_noise: float = 0.0,
        prefill_cells: int = 0,
        swa_window: int = 0,
    ) -> None:
        self.tokenizer = tokenizer or FakeTokenizer()
        self.step_seconds = step_seconds  # emulated device time per step
        # emulated batch-shape numerics: every logit moves by shape_noise x the step's token
        # count x its id / n_vocab, as a real engine's rounding moves with the batch shape
        self.shape_noise = shape_noise
        self.script = script
        self.markers = (marker,) if isinstance(marker, str) else tuple(marker)
        self.kv: dict[int, list[int]] = {}
        # the prefill context: the longest prefix it takes, and the tokens it holds
        self.prefill_cells = prefill_cells
        self.prefill_bytes = 0  # an emulated cache takes no host memory to speak of
        self.apart: list[int] = []
        # a sliding window, as llama.cpp keeps it: a copy of positions before the source's
        # end gets holes where the window before its end lies a window or more behind the
        # source's end (cells llama.cpp may have given to other tokens)
        self.swa_window = swa_window
        self.plans: list[StepPlan] = []
        self.n_vocab = self.tokenizer.n_vocab
        self.n_ctx = n_ctx
        self.closed = False

    def tokenize(
        self, text: str, *, add_special: bool = True, parse_special: bool = False
    ) -> list[int]:
        self._require_open()
        return self.tokenizer.tokenize(text, add_bos=add_special)

    def detokenize(self, tokens: list[int]) -> str:
        return self.tokenizer.detokenize(tokens)

    def vocabulary_pieces(self) -> list[tuple[int, bytes, int]]:
        return self.tokenizer.vocabulary_pieces()

    def render_chat(self, messages: list[dict[str, str]]) -> str:
        return render_completion(messages)

    def clear(self) -> None:
        self.kv.clear()
        self.apart = []

    def close(self) -> None:
        self.closed = True

    def _require_open(self) -> None:
        if self.closed:
            raise ModelError("fake engine: engine is closed")

    def execute(self, plan: StepPlan) -> StepOutput:
        self._require_open()
        if self.step_seconds:
            time.sleep(self.step_seconds)
        self.plans.append(plan)
        # a saved state: the first position, then the cells as int32 ids (llama.cpp writes
        # positions and KV rows instead)
        states = {}
        for save in plan.saves:
            cells = self.kv.get(save.seq_id, [])[save.p0 : save.p1]
            if None in cells:
                raise GenerationError(f"seq {save.seq_id}: saving positions it does not hold")
            states[save.seq_id] = bytearray(np.asarray([save.p0, *cells], dtype=np.int32).tobytes())
        for seq_id in plan.removals:
            self.kv.pop(seq_id, None)
        for trim in plan.trims:
            del self.kv.get(trim.seq_id, [])[trim.pos :]
        for restore in plan.restores:  # replaces the sequence; positions before p0 are holes
            start, *cells = np.frombuffer(bytes(restore.data), dtype=np.int32).tolist()
            self.kv[restore.seq_id] = [None] * start + cells
        for copy in plan.copies:  # shares cells: the destination's other positions stay
            source = self.kv.get(copy.src, [])
            if len(source) < copy.p1 or None in source[copy.p0 : copy.p1]:
                raise GenerationError(
                    f"copy of positions {copy.p0}..{copy.p1} from a sequence that lacks some"
                )
            cells = self.kv.setdefault(copy.dst, [])
            cells.extend([None] * (copy.p1 - len(cells)))
            cells[copy.p0 : copy.p1] = source[copy.p0 : copy.p1]
            if self.swa_window:  # the window before p1, where it may be gone from the source
                for pos in range(
                    max(copy.p0, copy.p1 - self.swa_window + 1),
                    min(copy.p1, len(source) - self.swa_window + 1),
                ):
                    cells[pos] = None
        for prefill in plan.prefills:
            self._prefill_apart(prefill)
        rows = []
        for item in plan.tokens:
            cells = self.kv.setdefault(item.seq_id, [])
            if item.pos != len(cells):
                raise GenerationError(
                    f"seq {item.seq_id}: position {item.pos} but {len(cells)} cells"
                )
            cells.append(item.token)
            if item.logits:
                if None in cells:  # attention would read positions that were never written
                    raise GenerationError(f"seq {item.seq_id}: decoding over missing positions")
                rows.append(self._logits(cells))
        logits = np.array(rows, dtype=np.float32).reshape(len(rows), self.n_vocab)
        if self.shape_noise:
            ramp = np.arange(self.n_vocab, dtype=np.float32) / self.n_vocab
            logits += np.float32(self.shape_noise * len(plan.tokens)) * ramp
        return StepOutput(logits=logits, states=states)

    def _prefill_apart(self, item: PrefixPrefill) -> None:
        """As llama.cpp's prefill context: a new prefix starts from its parent's cells (read
        from the main cache), chunks continue it, the last moves its own cells out."""
        if item.end > self.prefill_cells:
            raise GenerationError(f"a prefix of {len(item.key)} tokens exceeds the prefill context")
        if item.start == item.parent_len:
            parent = self.kv.get(item.parent, []) if item.parent is not None else []
            if parent[: item.parent_len] != list(item.key[: item.parent_len]):
                raise GenerationError("a prefix's parent does not hold the prefix's first tokens")
            self.apart = list(parent[: item.parent_len])
        elif self.apart != list(item.key[: item.start]):
            raise GenerationError("the prefill context does not hold the prefix going on")
        self.apart += item.key[item.start : item.end]
        if item.last:
            cells = [None] * item.parent_len + self.apart[item.parent_len :]
            cells[: item.parent_len] = self.kv.get(item.parent, [])[: item.parent_len]
            self.kv[item.seq_id] = cells

    def _logits(self, cells: list[int]) -> np.ndarray:
        text = self.tokenizer.detokenize(cells)
        logits = np.zeros(self.n_vocab, dtype=np.float32)
        cut, marker = max((text.rfind(m), m) for m in self.markers)
        if cut < 0:
            return logits
        prompt, written = text[: cut + len(marker)], text[cut + len(marker) :]
        target = self.script(prompt)
        if not target.startswith(written):
            return logits
        remainder = target[len(written) :]
        if not remainder:
            logits[EOS_ID] = 10.0
            return logits
        for size in range(min(self.tokenizer.max_len, len(remainder)), 0, -1):
            token = self.tokenizer.ids.get(remainder[:size])
            if token is not None and token > EOS_ID:
                logits[token] = 10.0
                return logits
        return logits
