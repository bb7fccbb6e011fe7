"""What both scorers share: the run they score, the result they return, the judge they
use, and the steps' bookkeeping (prompts, usage, hooks)."""

from __future__ import annotations

import asyncio
import atexit
import inspect
import json
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localjudge.errors import LocalJudgeError, ScorerError, ScorerInputError
from localjudge.judge import Judge, JudgeBase
from localjudge.prompts import PromptParts
from localjudge.scheduler import GenerationRequest, GenerationResult
from localjudge.scorers.messages import assistant_text, describe_shape, user_text

REASON_MODES = ("judge", "template")

BASE_MODEL_NOTE = "judged by a base model: the verdicts are not meaningful (use an instruct GGUF for real judging)"

# -- the run ---------------------------------------------------------------------------------

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


def run_coroutine(coroutine: Any) -> Any:
    """Run a coroutine to completion from synchronous code, even inside a running event
    loop (Jupyter), where it runs on its own loop in a helper thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = asyncio.run(coroutine)
        except BaseException as error:
            outcome["error"] = error

    helper = threading.Thread(target=target, name="localjudge-run", daemon=True)
    helper.start()
    helper.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


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


# -- the result ------------------------------------------------------------------------------


@dataclass
class StepUsage:
    """What one step cost."""

    requests: int = 0  # judge requests made
    prompt_tokens: int = 0  # prompt tokens evaluated for them
    prefix_reused: int = 0  # prompt tokens read from shared prefixes instead
    generated_tokens: int = 0  # output tokens
    seconds: float = 0.0  # wall time of the step

    def add(self, result: GenerationResult) -> None:
        self.requests += 1
        self.prompt_tokens += result.counts.prompt_evaluated
        self.prefix_reused += result.counts.prefix_reused
        self.generated_tokens += result.counts.generated

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "promptTokens": self.prompt_tokens,
            "prefixReused": self.prefix_reused,
            "generatedTokens": self.generated_tokens,
            "seconds": round(self.seconds, 4),
        }


@dataclass
class ScorerResult:
    """A scored run, with every step's result and prompt (SPEC §6)."""

    run_id: str
    scorer_id: str
    score: float
    reason: str
    preprocess_step_result: dict | None
    preprocess_prompt: str | None
    analyze_step_result: dict
    analyze_prompt: str | None
    generate_reason_prompt: str | None
    input: Any = None
    output: Any = None
    ground_truth: Any = None
    request_context: Any = None
    usage: dict[str, StepUsage] = field(default_factory=dict)
    judge: str = ""  # the judge model's name
    judge_meaningful: bool = True  # False: a base model judged; the verdicts mean nothing
    prompt_version: str = ""
    details: dict[str, Any] = field(default_factory=dict)  # scorer-specific settings used

    def to_dict(self, *, store_text: bool = True) -> dict[str, Any]:
        """Mastra's camelCase shape, so tools built for Mastra's results read it.

        `store_text=False` leaves out every text of the run (input, output, ground truth,
        request context, the prompts that quote them, claims and statements); ids, scores,
        verdict labels and reasons stay.
        """
        data: dict[str, Any] = {
            "runId": self.run_id,
            "scorerId": self.scorer_id,
            "score": self.score,
            "reason": self.reason,
            "preprocessStepResult": self.preprocess_step_result,
            "preprocessPrompt": self.preprocess_prompt,
            "analyzeStepResult": self.analyze_step_result,
            "analyzePrompt": self.analyze_prompt,
            "generateReasonPrompt": self.generate_reason_prompt,
            "input": self.input,
            "output": self.output,
            "groundTruth": self.ground_truth,
            "requestContext": self.request_context,
            "usage": {step: usage.to_dict() for step, usage in self.usage.items()},
            "judge": {
                "model": self.judge,
                "meaningful": self.judge_meaningful,
                **({} if self.judge_meaningful else {"note": BASE_MODEL_NOTE}),
            },
            "promptVersion": self.prompt_version,
            **self.details,
        }
        if self.preprocess_step_result is None and self.preprocess_prompt is None:
            del data["preprocessStepResult"], data["preprocessPrompt"]
        if not store_text:
            _strip_texts(data)
        return data

    def to_json(self, *, store_text: bool = True, **kwargs) -> str:
        return json.dumps(
            self.to_dict(store_text=store_text), ensure_ascii=False, default=str, **kwargs
        )


_TEXT_FIELDS = (
    "input",
    "output",
    "groundTruth",
    "requestContext",
    "preprocessPrompt",
    "analyzePrompt",
    "generateReasonPrompt",
)


def _strip_texts(data: dict[str, Any]) -> None:
    """Drop the run's texts from a result dict, in place (see `ScorerResult.to_dict`)."""
    for key in _TEXT_FIELDS:
        data.pop(key, None)
    preprocess = data.get("preprocessStepResult")
    if isinstance(preprocess, dict) and "claims" in preprocess:
        data["preprocessStepResult"] = {"numClaims": len(preprocess["claims"])}
    analyze = data.get("analyzeStepResult") or {}
    data["analyzeStepResult"] = {
        "verdicts": [
            {k: v for k, v in verdict.items() if k != "statement"}
            for verdict in analyze.get("verdicts", [])
        ]
    }
    data["textsStored"] = False


# -- the judge -------------------------------------------------------------------------------

_shared_judges: dict[str, Judge] = {}
_shared_lock = threading.Lock()


def shared_judge(model: JudgeBase | str | Path | None) -> JudgeBase:
    """A loaded judge: the one given, or one per model file shared by every scorer in the
    process (loading the same model twice is waste). Shared judges close at exit."""
    if isinstance(model, JudgeBase):
        return model
    from localjudge.registry import resolve

    key = str(resolve(model).path.resolve())
    with _shared_lock:
        judge = _shared_judges.get(key)
        if judge is None:
            judge = Judge(model)
            _shared_judges[key] = judge
        return judge


@atexit.register
def _close_shared_judges() -> None:
    for judge in list(_shared_judges.values()):
        judge.close()
    _shared_judges.clear()


# -- steps -----------------------------------------------------------------------------------


def check_cap(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{name} must be None (no cap) or an integer >= 1, not {value!r}")


def cap(items: list[str], limit: int | None, what: str) -> tuple[list[str], dict | None]:
    """The first `limit` items, and a `truncated` record when some were left out."""
    if limit is None or len(items) <= limit:
        return items, None
    return items[:limit], {what: {"judged": limit, "leftOut": len(items) - limit}}


async def generate_all(
    judge: JudgeBase, requests: Sequence[GenerationRequest]
) -> list[GenerationResult]:
    """Run requests together through the judge's scheduler. The first failure is raised and
    the item's other requests are cancelled (other items in the batch are not affected);
    cancelling the caller cancels them all."""
    futures = [asyncio.wrap_future(future) for future in judge.submit_many(requests)]
    try:
        done, _ = await asyncio.wait(futures, return_when=asyncio.FIRST_EXCEPTION)
        for future in futures:
            if future.done() and not future.cancelled() and future.exception() is not None:
                raise future.exception()
        return [future.result() for future in futures]
    finally:
        for future in futures:
            if not future.cancel() and not future.cancelled():  # finished: mark it seen
                future.exception()


async def call_hook(hook: Callable[..., Any], name: str, **kwargs: Any) -> Any:
    """Call a user hook, plain or async; its exception becomes one clear error."""
    try:
        value = hook(**kwargs)
        if inspect.isawaitable(value):
            value = await value
    except LocalJudgeError:
        raise
    except Exception as error:
        raise ScorerError(f"{name} raised {type(error).__name__}: {error}") from error
    return value


def verdict_confidence(result: GenerationResult) -> float | None:
    """The model's probability of the verdict it gave, from the masked logits."""
    choice = result.choice("verdict")
    if choice is None:
        return None
    return round(choice.probabilities.get(result.value["verdict"], 0.0), 4)


class Step:
    """Times a step and collects its usage."""

    def __init__(self, usage: dict[str, StepUsage], name: str) -> None:
        self.usage = usage.setdefault(name, StepUsage())

    def __enter__(self) -> StepUsage:
        self._start = time.perf_counter()
        return self.usage

    def __exit__(self, *exc_info) -> None:
        self.usage.seconds += time.perf_counter() - self._start


class Scorer:
    """A scorer: `run(run)` (or `await run_async(run)`) returns a `ScorerResult`."""

    id: str = "scorer"
    name: str = "Scorer"
    description: str = ""

    def __init__(
        self,
        model: JudgeBase | str | Path | None,
        *,
        scale: float | None = 1,
        reason: str = "judge",
        verdict_max_tokens: int = 96,
        reason_max_tokens: int = 128,
        id: str | None = None,
    ) -> None:
        check_option("reason mode", reason, REASON_MODES)
        if id is not None:
            if not isinstance(id, str) or not id.strip():
                raise ValueError(f"a scorer id must be a non-empty string, not {id!r}")
            self.id = id
        self._model = model
        self._judge: JudgeBase | None = model if isinstance(model, JudgeBase) else None
        self.scale = scale or 1  # 0 or None means 1, as in Mastra
        self.reason_mode = reason
        self.verdict_max_tokens = verdict_max_tokens
        self.reason_max_tokens = reason_max_tokens

    @property
    def judge(self) -> JudgeBase:
        """The judge, loaded on first use (shared with other scorers of the same model)."""
        if self._judge is None:
            self._judge = shared_judge(self._model)
        return self._judge

    async def run_async(self, run: ScorerRun | dict) -> ScorerResult:
        raise NotImplementedError

    def run(self, run: ScorerRun | dict) -> ScorerResult:
        """Score one run (blocking). Works inside a running event loop too (Jupyter): the
        coroutine then runs in a helper thread; there `await run_async(run)` is better."""
        return run_coroutine(self.run_async(run))

    def judge_request(self, parts: PromptParts, schema: str, max_tokens: int) -> GenerationRequest:
        """A request for one judge step: the prompt rendered for this judge and split into
        its shared prefix and own part."""
        judge = self.judge
        prefix, suffix = judge.split_prompt(parts)
        return judge.request(suffix, schema, prefix=prefix, max_tokens=max_tokens)

    def count_tokens(self, text: str) -> int:
        return len(self.judge.tokenize(text))

    async def ask(
        self, step: str, requests: Sequence[GenerationRequest], usage: dict[str, StepUsage]
    ) -> list[GenerationResult]:
        """Run one step's requests together, timing the step and counting its tokens."""
        with Step(usage, step) as step_usage:
            results = await generate_all(self.judge, requests)
            for result in results:
                step_usage.add(result)
        return results

    async def reason(
        self, fallback: str, parts: PromptParts | None, usage: dict[str, StepUsage]
    ) -> tuple[str, str | None]:
        """The generateReason step: (plain-text reason, prompt). In "template" mode, without
        a prompt (nothing was judged), or when the judge writes nothing: the reason built
        from the verdicts (`fallback`), with no judge call."""
        if self.reason_mode == "template" or parts is None:
            return fallback, None
        request = self.judge_request(parts, "reason", self.reason_max_tokens)
        (result,) = await self.ask("generateReason", [request], usage)
        return " ".join(result.value["reason"].split()) or fallback, request.prompt

    def result(self, run: ScorerRun, **fields: Any) -> ScorerResult:
        judge = self.judge
        return ScorerResult(
            run_id=run.run_id,
            scorer_id=self.id,
            input=run.input,
            output=run.output,
            ground_truth=run.ground_truth,
            request_context=run.request_context,
            judge=judge.name,
            judge_meaningful=judge.meaningful,
            **fields,
        )
