"""`run_evals`: every scorer on every item, all judge work through one scheduler (SPEC §7)."""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from localjudge.errors import LocalJudgeError, ScorerInputError
from localjudge.scorers.base import Scorer, ScorerResult, ScorerRun, record_fields

ITEM_FIELDS = ("input", "output", "context", "ground_truth", "request_context", "id")


@dataclass
class EvalItem:
    """One dataset item: `input`, and optionally a precomputed `output` and the rest."""

    input: Any = None
    output: Any = None  # when absent, `target(input)` produces it
    context: list[str] | None = None  # the hallucination scorer's context for this item
    ground_truth: Any = None
    request_context: Any = None
    id: Any = None

    @classmethod
    def from_value(cls, value: EvalItem | dict, *, where: str = "item") -> EvalItem:
        if isinstance(value, EvalItem):
            return value
        data = record_fields(value, set(ITEM_FIELDS), where=where)
        if "input" not in data and "output" not in data:
            raise ScorerInputError(f"{where}: missing field 'input' (or a precomputed 'output')")
        return cls(**data)


@dataclass
class ItemResult:
    """What happened to one item."""

    index: int  # position in the data
    item: EvalItem
    target_result: Any = None  # the output scored (the target's, or the item's own)
    scorer_results: dict[str, ScorerResult] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # scorer id (or "target") -> message

    @property
    def ok(self) -> bool:
        return not self.errors


@dataclass
class EvalResult:
    """`scores`: unrounded mean per scorer id over the items it scored; `summary`: counts."""

    scores: dict[str, float]
    summary: dict[str, Any]
    items: list[ItemResult]


def summarize(
    items: Sequence[ItemResult], scorer_ids: Iterable[str]
) -> tuple[dict[str, float], dict[str, Any]]:
    scorer_ids = list(scorer_ids)
    scores: dict[str, float] = {}
    failures = {scorer_id: 0 for scorer_id in scorer_ids}
    for scorer_id in scorer_ids:
        values = [r.scorer_results[scorer_id].score for r in items if scorer_id in r.scorer_results]
        if values:
            scores[scorer_id] = math.fsum(values) / len(values)
        failures[scorer_id] = sum(1 for r in items if scorer_id in r.errors)
    summary = {
        "total_items": len(items),
        "failed_items": sum(1 for r in items if not r.ok),
        "target_failures": sum(1 for r in items if "target" in r.errors),
        "failures": failures,
    }
    return scores, summary


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def run_evals_async(
    data: Iterable[EvalItem | dict],
    scorers: Sequence[Scorer],
    target: Callable[[Any], Any] | None = None,
    on_item_complete: Callable[..., Any] | None = None,
    *,
    concurrency: int = 16,
    raise_on_error: bool = False,
    on_item_result: Callable[[ItemResult], Any] | None = None,
) -> EvalResult:
    """The async form of `run_evals`; `on_item_result(item_result)` also sees the errors."""
    if not scorers:
        raise ValueError("run_evals needs at least one scorer")
    ids = [s.id for s in scorers]
    if len(set(ids)) != len(ids):
        raise ValueError(f"scorer ids must be unique: {ids}")
    items = [EvalItem.from_value(value, where=f"item {i}") for i, value in enumerate(data)]
    if target is None:
        missing = [i for i, item in enumerate(items) if item.output is None]
        if missing:
            raise ScorerInputError(
                f"item {missing[0]} has no 'output' and no target was given to produce it"
            )
    semaphore = asyncio.Semaphore(max(1, concurrency))
    results: list[ItemResult] = [ItemResult(index=i, item=item) for i, item in enumerate(items)]

    async def one(result: ItemResult) -> None:
        async with semaphore:
            item = result.item
            output = item.output
            if output is None:
                try:
                    if inspect.iscoroutinefunction(target):
                        output = await target(item.input)
                    else:
                        output = await _maybe_await(await asyncio.to_thread(target, item.input))
                except Exception as error:
                    if raise_on_error:
                        raise
                    result.errors["target"] = f"{type(error).__name__}: {error}"
                    await _complete(result)
                    return
            result.target_result = output
            run = ScorerRun(
                output=output,
                input=item.input,
                ground_truth=item.ground_truth,
                request_context=item.request_context,
                context=item.context,
            )
            if item.id is not None:
                run.run_id = str(item.id)
            outcomes = await asyncio.gather(
                *(s.run_async(run) for s in scorers), return_exceptions=True
            )
            for scorer, outcome in zip(scorers, outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    if raise_on_error or not isinstance(outcome, Exception):
                        raise outcome
                    prefix = (
                        ""
                        if isinstance(outcome, LocalJudgeError)
                        else f"{type(outcome).__name__}: "
                    )
                    result.errors[scorer.id] = f"{prefix}{outcome}"
                else:
                    result.scorer_results[scorer.id] = outcome
            await _complete(result)

    async def _complete(result: ItemResult) -> None:
        if on_item_result is not None:
            await _maybe_await(on_item_result(result))
        if on_item_complete is not None:
            await _maybe_await(
                on_item_complete(
                    item=result.item,
                    target_result=result.target_result,
                    scorer_results=result.scorer_results,
                )
            )

    tasks = [asyncio.ensure_future(one(r)) for r in results]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    scores, summary = summarize(results, ids)
    return EvalResult(scores=scores, summary=summary, items=results)


def run_evals(
    data: Iterable[EvalItem | dict],
    scorers: Sequence[Scorer],
    target: Callable[[Any], Any] | None = None,
    on_item_complete: Callable[..., Any] | None = None,
    *,
    concurrency: int = 16,
    raise_on_error: bool = False,
) -> EvalResult:
    """Run every scorer on every item; return mean scores and a summary.

    Items hold `input` and optionally `output`, `context`, `ground_truth`,
    `request_context`, `id`. `target` (sync or async) produces the output from the input
    when an item has none. `concurrency` items are in flight at once, and the judge work of
    all of them shares one scheduler, so claims of different items share decode steps.
    `on_item_complete(item=, target_result=, scorer_results=)` is called per item as it
    finishes. A failing item is recorded with its error; `raise_on_error=True` aborts on
    the first error instead (Mastra's behaviour).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(
            run_evals_async(
                data,
                scorers,
                target,
                on_item_complete,
                concurrency=concurrency,
                raise_on_error=raise_on_error,
            )
        )
    raise RuntimeError(
        "run_evals() was called inside a running event loop: use `await run_evals_async(...)`"
    )
