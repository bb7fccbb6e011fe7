"""The run a scorer scores: its fields, Mastra's camelCase aliases, and the
checks every run and dataset item goes through."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from localjudge.errors import ScorerInputError
from localjudge.scorers.messages import assistant_text, describe_shape, user_text

_ALIASES = {
    "runId": "run_id",
    "groundTruth": "ground_truth",
    "requestContext": "request_context",
}


@dataclass
class ScorerRun:
    """One thing to score: `output` (required), and what came with it."""

    output: Any  # a string, OpenAI chat messages, or Mastra agent messages
    input: Any = None  # the same shapes; the user's text is shown to the judge where useful
    run_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    ground_truth: Any = None
    request_context: Any = None
    context: list[str] | None = None  # this run's own context (a batch item's documents)
    extra: dict[str, Any] = field(default_factory=dict)  # other keys (metadata, tags...), kept

    @classmethod
    def from_value(cls, value: ScorerRun | dict) -> ScorerRun:
        """Accept a `ScorerRun` or a dict with snake_case or Mastra's camelCase keys; keys
        beyond those (metadata, tags, Mastra's runtimeContext) are kept in `extra`."""
        if isinstance(value, ScorerRun):
            return value
        allowed = {"output", "input", "run_id", "ground_truth", "request_context", "context"}
        data, extra = record_fields(value, allowed, where="the run")
        if "output" not in data:
            raise ScorerInputError("the run has no 'output' field (required)")
        if data.get("run_id") is None:
            data.pop("run_id", None)
        return cls(**data, extra=extra)

    def __getitem__(self, key: str) -> Any:  # so hooks written for dicts (run["output"]) work
        return getattr(self, _ALIASES.get(key, key))

    @property
    def output_text(self) -> str:
        if isinstance(self.output, bytes):
            raise ScorerInputError(
                "output must be text (str) or messages, not bytes: decode it first"
            )
        if not isinstance(self.output, (str, list, dict)):
            raise ScorerInputError(
                f"output must be text or messages, not {type(self.output).__name__}"
            )
        text = assistant_text(self.output)
        if text is None:
            raise ScorerInputError(
                f"output has no assistant text to judge ({describe_shape(self.output)}): give a "
                "string, a message with content, or a message list with an assistant turn"
            )
        return text

    @property
    def input_text(self) -> str:
        return user_text(self.input) or ""


def check_option(what: str, value: str, known: tuple[str, ...]) -> None:
    """Refuse an option value outside `known`, naming the known ones."""
    if value not in known:
        raise ValueError(f"unknown {what}: {value!r} (known: {', '.join(known)})")


def record_fields(
    value: Any, allowed: set[str], *, where: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A run or dataset item as (known snake_case fields, other fields): camelCase aliases
    mapped, the context checked. Each error names `where`."""
    if not isinstance(value, dict):
        raise ScorerInputError(f"{where}: must be an object (a dict), not {type(value).__name__}")
    data: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, item in value.items():
        name = _ALIASES.get(key, key)
        if not isinstance(key, str):
            raise ScorerInputError(f"{where}: field names must be strings, not {key!r}")
        (data if name in allowed else extra)[name if name in allowed else key] = item
    if data.get("context") is not None:
        data["context"] = check_context(data["context"], f"{where}: context")
    return data, extra


def check_context(context: Any, where: str) -> list[str]:
    """A context must be a list of strings; say exactly which entry is not."""
    if isinstance(context, str) or not isinstance(context, (list, tuple)):
        raise ScorerInputError(f"{where} must be a list of strings, not {type(context).__name__}")
    for index, entry in enumerate(context):
        if not isinstance(entry, str):
            raise ScorerInputError(
                f"{where}: entry {index} is {type(entry).__name__}; context entries must be strings"
            )
    return list(context)
