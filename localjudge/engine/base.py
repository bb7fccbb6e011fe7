"""The engine seam: what a judge needs from a backend that runs a model.

`LlamaEngine` (llama.cpp, `engine/llama.py`) and `FakeEngine` (a script on an emulated KV
cache, `engine/fake.py`) implement it; a second backend implements it too, and everything
above (vocabulary, grammars, scheduler, scorers) works on it unchanged.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from localjudge.engine.plan import StepOutput, StepPlan

# llama_token_attr flags (llama.h), as `vocabulary_pieces` reports them
ATTR_UNKNOWN = 1 << 0
ATTR_UNUSED = 1 << 1
ATTR_CONTROL = 1 << 3


@runtime_checkable
class Engine(Protocol):
    """A loaded model with a multi-sequence KV cache, driven one step at a time."""

    name: str  # what results and messages call this model
    n_ctx: int  # KV cells shared by all sequences
    n_vocab: int  # width of a logits row
    eos_id: int  # the end-of-sequence token
    eog_ids: frozenset[int]  # every token that ends a generation (EOS, end of turn, ...)
    chat_template: str | None  # the model's own chat template, if it has one
    prefill_cells: int  # the longest prefix its prefill context evaluates apart (0: none)
    prefill_bytes: int  # the host memory its prefill context's KV cache takes (0: none)
    swa_window: int  # its sliding-window layers' window (0: none); see `Scheduler.swa_window`

    @property
    def cache_key(self) -> str | None:
        """Identifies this model's vocabulary for the on-disk cache (None: do not cache)."""

    def tokenize(
        self, text: str, *, add_special: bool = True, parse_special: bool = False
    ) -> list[int]:
        """Token ids of `text`; `add_special` adds BOS as the model wants it; with
        `parse_special`, texts of control tokens become those tokens."""

    def detokenize(self, tokens: list[int]) -> str:
        """The text of `tokens`."""

    def vocabulary_pieces(self) -> list[tuple[int, bytes, int]]:
        """Every token as (id, bytes, llama.cpp attribute flags): the grammar's input."""

    def render_chat(self, messages: list[dict[str, str]]) -> str:
        """The prompt text of `messages`: the chat template, or plain completion."""

    def execute(self, plan: StepPlan) -> StepOutput:
        """State saves, removals, trims, state restores, prefix copies, prefixes evaluated
        apart, then one batch; the logits rows that were asked for and the saved states."""

    def clear(self) -> None:
        """Drop every sequence's KV cells (after a failed step)."""

    def close(self) -> None:
        """Free what the engine holds (idempotent); later calls raise, never crash."""
