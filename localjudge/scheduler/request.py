"""What callers hand the scheduler and what they get back."""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from localjudge.grammar.compiled import CompiledGrammar


@dataclass(frozen=True)
class SamplingParams:
    """Greedy by default, so a run is reproducible."""

    temperature: float = 0.0  # 0: greedy (argmax of the masked logits)
    seed: int | None = None  # RNG seed when temperature > 0

    def __post_init__(self) -> None:
        if not isinstance(self.temperature, (int, float)) or not math.isfinite(self.temperature):
            raise ValueError(f"temperature must be a finite number, not {self.temperature!r}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be 0 (greedy) or more, not {self.temperature}")
        if self.seed is not None and (
            isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0
        ):
            raise ValueError(f"seed must be None or an integer >= 0, not {self.seed!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


@dataclass
class GenerationRequest:
    """One constrained generation: `prefix + suffix` is the prompt, `grammar` the output shape.

    Requests whose prompts start with the same prefix tokens share that prefix's KV cache:
    it is evaluated once and copied into each request's sequence. A prefix given as
    segments shares at every level: `(instructions, context)` evaluates the instructions once
    for all items and each item's context once for its claims.
    """

    prefix: (
        str | tuple[str, ...]
    )  # shared part of the prompt; segments nest (instructions, context)
    suffix: str  # this request's own part (one claim, one sentence)
    grammar: CompiledGrammar | None  # compiled JSON Schema the output must match; None: free text
    max_tokens: int = 192  # token budget for the output; the JSON is closed within it
    sampling: SamplingParams = field(default_factory=SamplingParams)
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    # called on the judge's worker thread with each piece of output text as it is chosen
    # (whole UTF-8 characters; the pieces join to the result's text); must not block
    on_text: Callable[[str], None] | None = field(default=None, repr=False, compare=False)
    # verdict values whose reason is decoded; for the others the JSON is closed as soon as
    # the verdict is known (an empty reason, no tokens spent on it). None: every reason
    reasons_for: frozenset[str] | None = None
    # the string property whose value `reasons_for` is read from, and the one skipped
    decision_field: str = "verdict"
    reason_field: str = "reason"
    # the reply read in the caller's terms (a question asked the other way round); None: as is
    reread: Reread | None = None

    def __post_init__(self) -> None:
        if self.reasons_for is not None:
            values = frozenset(self.reasons_for)
            if not all(isinstance(v, str) for v in values):
                raise ValueError(f"reasons_for must hold verdict strings, not {self.reasons_for!r}")
            object.__setattr__(self, "reasons_for", values)
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int):
            raise ValueError(f"max_tokens must be an integer, not {self.max_tokens!r}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, not {self.max_tokens}")

    @property
    def prefix_segments(self) -> tuple[str, ...]:
        return (self.prefix,) if isinstance(self.prefix, str) else tuple(self.prefix)

    @property
    def prompt(self) -> str:
        """The whole prompt text."""
        return "".join(self.prefix_segments) + self.suffix


@dataclass(frozen=True)
class ChoicePoint:
    """At an enum value (such as the verdict): the probability of every allowed option."""

    field: str  # the JSON property, e.g. "verdict"
    probabilities: dict[str, float]  # option -> probability from the masked logits
    chosen: str  # the option the decoding committed to


@dataclass(frozen=True)
class Reread:
    """A reply read in the caller's terms: the judge decides in `field`, and the result
    reports that decision as `as_field`, its values mapped by `means` (its probabilities
    with them). The result's `text` stays what the judge wrote."""

    field: str
    as_field: str
    means: dict[str, str]

    def value(self, value: dict) -> dict:
        mapped = {self.as_field: self.means[value[self.field]]}
        mapped.update((k, v) for k, v in value.items() if k != self.field)
        return mapped

    def choice(self, choice: ChoicePoint) -> ChoicePoint:
        if choice.field != self.field:
            return choice
        probabilities = {self.means[option]: p for option, p in choice.probabilities.items()}
        return ChoicePoint(self.as_field, probabilities, self.means.get(choice.chosen, ""))


@dataclass
class TokenCounts:
    """Where a request's tokens went."""

    prefix_reused: int = 0  # prompt tokens read from shared KV cells another request paid for
    prompt_evaluated: int = 0  # prompt tokens this request evaluated itself
    generated: int = 0  # output tokens (sampled + forced)
    forced: int = 0  # output tokens appended by jump-forward, without logits


@dataclass
class Timings:
    """Seconds, measured with `time.perf_counter`."""

    queued_s: float = 0.0  # from submission to admission
    first_token_s: float = 0.0  # from submission to the first output token
    total_s: float = 0.0  # from submission to completion


@dataclass
class GenerationResult:
    """A finished request: valid JSON that matches the schema, with accounting."""

    request_id: str
    value: Any  # the parsed JSON object (free text: the text)
    text: str  # the generated JSON text
    counts: TokenCounts
    timings: Timings
    choices: list[ChoicePoint] = field(default_factory=list)  # in output order
    finish_reason: str = "stop"  # "stop": the model ended; "budget": JSON closed by force;
    # "length": free text cut at max_tokens
    reason_skipped: bool = False  # closed after the verdict (not in `reasons_for`)

    def choice(self, field_name: str) -> ChoicePoint | None:
        return next((c for c in self.choices if c.field == field_name), None)
