"""`run_evals`: every scorer on every item, all judge work through one scheduler."""

from __future__ import annotations

import asyncio
import inspect
import json
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from localjudge.errors import LocalJudgeError, ScorerInputError, error_kind
from localjudge.evals.progress import ItemBar, wanted
from localjudge.scorers.base import Scorer
from localjudge.scorers.result import ScorerResult
from localjudge.scorers.scorer_run import ScorerRun, record_fields
from localjudge.scorers.steps import run_coroutine
from localjudge.scorers.threshold import Threshold, threshold_results

ITEM_FIELDS = ("input", "output", "context", "ground_truth", "request_context", "id", "metadata")
ITEM_ERROR = "item"  # the key of an item's own error (malformed, or no output to score)


@dataclass
class EvalItem:
    """One dataset item: `input`, and optionally a precomputed `output` and the rest."""

    input: Any = None
    output: Any = None  # when absent, `target(input)` produces it
    context: list[str] | None = None  # the hallucination scorer's context for this item
    ground_truth: Any = None
    request_context: Any = None
    id: Any = None
    metadata: Any = None  # carried to the result record untouched
    extra: dict[str, Any] = field(default_factory=dict)  # other keys (tags, labels...), kept

    @classmethod
    def from_value(cls, value: EvalItem | dict, *, where: str = "item") -> EvalItem:
        if isinstance(value, EvalItem):
            return value
        data, extra = record_fields(value, set(ITEM_FIELDS), where=where)
        if "input" not in data and "output" not in data:
            raise ScorerInputError(f"{where}: missing field 'input' (or a precomputed 'output')")
        return cls(**data, extra=extra)


@dataclass
class ItemResult:
    """What happened to one item."""

    index: int  # position in the data
    item: EvalItem
    target_result: Any = None  # the output scored (the target's, or the item's own)
    scorer_results: dict[str, ScorerResult] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # scorer id, "target" or "item" -> message
    error_kinds: dict[str, str] = field(default_factory=dict)  # same keys -> "input"/"transient"

    @property
    def ok(self) -> bool:
        return not self.errors

    def fields(
        self, names: dict[str, str] | None = None, *, store_text: bool = True
    ) -> dict[str, Any]:
        """The item's id, texts (unless `store_text` is False), metadata, scores, results and
        errors, keyed by scorer name (`names`: scorer id -> name; default the ids). What an
        `eval` record and a `serve` NDJSON line hold beside their own keys."""
        names = names or {}
        item = self.item
        fields: dict[str, Any] = {"id": item.id}
        if store_text:
            fields["input"] = item.input
            fields["output"] = self.target_result
        if item.metadata is not None:
            fields["metadata"] = item.metadata
        fields["scores"] = {names.get(k, k): r.score for k, r in self.scorer_results.items()}
        fields["results"] = {
            names.get(k, k): r.to_dict(store_text=store_text)
            for k, r in self.scorer_results.items()
        }
        fields["errors"] = {names.get(k, k): m for k, m in self.errors.items()}
        fields["errorKinds"] = {names.get(k, k): kind for k, kind in self.error_kinds.items()}
        return fields

    def fail(self, key: str, error: BaseException) -> None:
        """Record `error` under `key` (a scorer id, "target", "item" or "callback")."""
        prefix = "" if isinstance(error, LocalJudgeError) else f"{type(error).__name__}: "
        self.errors[key] = f"{prefix}{error}"
        self.error_kinds[key] = error_kind(error)


@dataclass
class EvalResult:
    """`scores`: unrounded mean per scorer id over the items it scored; `summary`: counts,
    and for scorers made with a `threshold`, `thresholdResults` and a `verdict`."""

    scores: dict[str, float]
    summary: dict[str, Any]
    items: list[ItemResult]

    def to_dict(self, *, store_text: bool = True) -> dict[str, Any]:
        """Plain JSON-ready data: scores, summary, and per item its id, results and errors."""
        return {
            "scores": self.scores,
            "summary": self.summary,
            "items": [
                {
                    "index": r.index,
                    "id": r.item.id,
                    "results": {
                        k: v.to_dict(store_text=store_text) for k, v in r.scorer_results.items()
                    },
                    "errors": r.errors,
                    "errorKinds": r.error_kinds,
                }
                for r in self.items
            ],
        }

    def to_json(self, *, store_text: bool = True, **kwargs: Any) -> str:
        return json.dumps(
            self.to_dict(store_text=store_text), ensure_ascii=False, default=str, **kwargs
        )

    def to_rows(self, per: str = "scorer", *, store_text: bool = True) -> list[dict[str, Any]]:
        """Flat rows, as Ragas users tabulate them. `per="scorer"`: one row per item and
        scorer (`index`, `id`, `scorer`, `score`, `passed`, `reason`, `error`, `errorKind`);
        an item that failed before scoring gives one row with its error. `per="verdict"`:
        one row per verdict of every scored item (`index`, `id`, `scorer`, `verdict`,
        `statement`, `confidence`, `reason`, and for a claim judged against evidence
        `pYes`, `evidenceStart`, `evidenceEnd`). `store_text=False` leaves out the
        statements, as `to_dict` does."""
        if per not in ("scorer", "verdict"):
            raise ValueError(f'per must be "scorer" or "verdict", not {per!r}')
        rows: list[dict[str, Any]] = []
        for item in self.items:
            base = {"index": item.index, "id": item.item.id}
            results = {k: r.to_dict(store_text=store_text) for k, r in item.scorer_results.items()}
            if per == "verdict":
                for scorer_id, result in results.items():
                    for verdict in result["analyzeStepResult"].get("verdicts", []):
                        rows.append({**base, "scorer": scorer_id, **_verdict_row(verdict)})
                continue
            for scorer_id, result in results.items():
                rows.append(
                    {
                        **base,
                        "scorer": scorer_id,
                        "score": result["score"],
                        "passed": result.get("passed"),
                        "reason": result["reason"],
                        "error": None,
                        "errorKind": None,
                    }
                )
            for key, message in item.errors.items():
                rows.append(
                    {
                        **base,
                        "scorer": key,
                        "score": None,
                        "passed": None,
                        "reason": None,
                        "error": message,
                        "errorKind": item.error_kinds.get(key),
                    }
                )
        return rows

    def to_pandas(self, per: str = "scorer", *, store_text: bool = True):
        """`to_rows` as a pandas DataFrame (pandas is optional: `pip install
        'localjudge[pandas]'`)."""
        try:
            import pandas
        except ImportError:
            raise ImportError(
                "EvalResult.to_pandas needs pandas: pip install 'localjudge[pandas]'"
            ) from None
        return pandas.DataFrame(self.to_rows(per, store_text=store_text))


def _verdict_row(verdict: dict[str, Any]) -> dict[str, Any]:
    evidence = verdict.get("evidence") or {}
    row = {"verdict": verdict.get("verdict")}
    if "statement" in verdict:  # not when the texts are left out
        row["statement"] = verdict["statement"]
    row.update(confidence=verdict.get("confidence"), reason=verdict.get("reason"))
    if evidence:
        row.update(
            pYes=evidence.get("pYes"),
            evidenceStart=evidence.get("start"),
            evidenceEnd=evidence.get("end"),
        )
    return row


class Tally:
    """The scores and counts of items as they finish, without keeping the items."""

    def __init__(self, scorer_ids: Iterable[str]) -> None:
        self.ids = list(scorer_ids)
        self.values: dict[str, list[float]] = {i: [] for i in self.ids}
        self.failures = dict.fromkeys(self.ids, 0)
        self.total = self.failed = self.invalid = self.target_failures = 0

    def add(self, result: ItemResult) -> None:
        self.total += 1
        self.failed += not result.ok
        self.invalid += ITEM_ERROR in result.errors
        self.target_failures += "target" in result.errors
        for scorer_id in self.ids:
            if scorer_id in result.scorer_results:
                self.values[scorer_id].append(result.scorer_results[scorer_id].score)
            self.failures[scorer_id] += scorer_id in result.errors

    def finish(
        self, thresholds: dict[str, Threshold] | None = None
    ) -> tuple[dict[str, float], dict[str, Any]]:
        scores = {i: math.fsum(v) / len(v) for i, v in self.values.items() if v}
        summary: dict[str, Any] = {
            "total_items": self.total,
            "failed_items": self.failed,
            "invalid_items": self.invalid,
            "target_failures": self.target_failures,
            "failures": dict(self.failures),
        }
        if thresholds:
            results = threshold_results(scores, thresholds)
            summary["thresholdResults"] = results
            if results:
                summary["verdict"] = "passed" if all(r["passed"] for r in results) else "failed"
        return scores, summary


def summarize(
    items: Sequence[ItemResult],
    scorer_ids: Iterable[str],
    thresholds: dict[str, Threshold] | None = None,
) -> tuple[dict[str, float], dict[str, Any]]:
    """Mean score per scorer and the counts; with `thresholds` (scorer id -> threshold),
    Mastra's `thresholdResults` on the means and a `verdict`, "passed" or "failed"."""
    tally = Tally(scorer_ids)
    for item in items:
        tally.add(item)
    return tally.finish(thresholds)


def default_scoring_concurrency(scorers: Sequence[Scorer]) -> int:
    """Items scored at once: enough to keep every slot of the judge busy (each item brings
    a few requests, and items wait on each other's steps), at least 4."""
    return max(4, 2 * max(scorer.judge.slots for scorer in scorers))


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _keyword_callback(callback: Callable[..., Any]) -> bool:
    """Whether `callback` takes `item=, target_result=, scorer_results=` (else it takes one
    object, Mastra's `({item, targetResult, scorerResults})` form)."""
    try:
        parameters = inspect.signature(callback).parameters.values()
    except (TypeError, ValueError):
        return True
    names = {p.name for p in parameters}
    if {"item", "target_result", "scorer_results"} <= names or any(
        p.kind is p.VAR_KEYWORD for p in parameters
    ):
        return True
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) != 1


def _prepare(
    data: Iterable[EvalItem | dict], has_target: bool, raise_on_error: bool
) -> Iterator[ItemResult]:
    """One `ItemResult` per item, as the items are read; a malformed item, or one with
    nothing to score, carries its error (or raises it with `raise_on_error`)."""
    for index, value in enumerate(data):
        where = f"item {index}"
        try:
            item = EvalItem.from_value(value, where=where)
            if item.output is None and not has_target:
                raise ScorerInputError(
                    f"{where}: has no 'output' and no target was given to produce it"
                )
        except ScorerInputError as error:
            if raise_on_error:
                raise
            item_id = value.get("id") if isinstance(value, dict) else None
            result = ItemResult(index=index, item=EvalItem(id=item_id))
            result.fail(ITEM_ERROR, error)
            yield result
            continue
        yield ItemResult(index=index, item=item)


async def run_evals_async(
    data: Iterable[EvalItem | dict],
    scorers: Sequence[Scorer],
    target: Callable[[Any], Any] | None = None,
    on_item_complete: Callable[..., Any] | None = None,
    *,
    concurrency: int = 1,
    scoring_concurrency: int | None = None,
    raise_on_error: bool = False,
    on_item_result: Callable[[ItemResult], Any] | None = None,
    progress: bool | None = None,
    keep_items: bool = True,
) -> EvalResult:
    """The async form of `run_evals`; `on_item_result(item_result)` also sees the errors
    (an async one is awaited before the worker takes the next item: back-pressure).
    `keep_items=False`: the result's `items` stays empty and each item is let go once
    `on_item_result` has it, so a long stream of items takes memory for the items in
    flight only."""
    if not scorers:
        raise ValueError("run_evals needs at least one scorer")
    ids = [s.id for s in scorers]
    if len(set(ids)) != len(ids):
        raise ValueError(f"scorer ids must be unique (give one an id=): {ids}")
    total = len(data) if hasattr(data, "__len__") else None
    pending = _prepare(data, target is not None, raise_on_error)
    kept: list[ItemResult] = []
    tally = Tally(ids)
    scoring_concurrency = max(1, scoring_concurrency or default_scoring_concurrency(scorers))
    target_slots = asyncio.Semaphore(max(1, concurrency))
    scoring_slots = asyncio.Semaphore(scoring_concurrency)
    keyword_callback = on_item_complete is None or _keyword_callback(on_item_complete)

    async def produce(result: ItemResult) -> Any:
        item = result.item
        if item.output is not None:
            return item.output
        async with target_slots:
            try:
                if inspect.iscoroutinefunction(target):
                    return await target(item.input)
                return await _maybe_await(await asyncio.to_thread(target, item.input))
            except Exception as error:
                if raise_on_error:
                    raise
                result.fail("target", error)
                return None

    async def one(result: ItemResult) -> None:
        if result.ok:
            output = await produce(result)
            if result.ok:
                await score(result, output)
        await complete(result)

    async def score(result: ItemResult, output: Any) -> None:
        item = result.item
        result.target_result = output
        run = ScorerRun(
            output=output,
            input=item.input,
            ground_truth=item.ground_truth,
            request_context=item.request_context,
            context=item.context,
            extra=item.extra,
        )
        if item.id is not None:
            run.run_id = str(item.id)
        async with scoring_slots:
            outcomes = await asyncio.gather(
                *(s.run_async(run) for s in scorers), return_exceptions=True
            )
        for scorer, outcome in zip(scorers, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                if raise_on_error or not isinstance(outcome, Exception):
                    raise outcome
                result.fail(scorer.id, outcome)
            else:
                result.scorer_results[scorer.id] = outcome

    async def complete(result: ItemResult) -> None:
        bar.advance()
        try:
            if on_item_result is not None:
                await _maybe_await(on_item_result(result))
            if on_item_complete is not None:
                if keyword_callback:
                    value = on_item_complete(
                        item=result.item,
                        target_result=result.target_result,
                        scorer_results=result.scorer_results,
                    )
                else:
                    value = on_item_complete(
                        {
                            "item": result.item,
                            "targetResult": result.target_result,
                            "scorerResults": result.scorer_results,
                        }
                    )
                await _maybe_await(value)
        except Exception as error:
            if raise_on_error:
                raise
            result.fail("callback", error)

    async def worker() -> None:
        for result in pending:  # workers share one iterator: each item is taken once
            if keep_items:
                kept.append(result)
            await one(result)
            tally.add(result)

    # enough workers to fill every target and scoring slot, but not one task per item
    workers = max(1, concurrency) + scoring_concurrency
    with ItemBar(wanted(progress)) as bar:
        bar.start(total)
        tasks = [asyncio.ensure_future(worker()) for _ in range(workers)]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
    thresholds = {s.id: s.threshold for s in scorers if getattr(s, "threshold", None) is not None}
    scores, summary = tally.finish(thresholds)
    kept.sort(key=lambda r: r.index)
    return EvalResult(scores=scores, summary=summary, items=kept)


def run_evals(
    data: Iterable[EvalItem | dict],
    scorers: Sequence[Scorer],
    target: Callable[[Any], Any] | None = None,
    on_item_complete: Callable[..., Any] | None = None,
    *,
    concurrency: int = 1,
    scoring_concurrency: int | None = None,
    raise_on_error: bool = False,
    progress: bool | None = None,
) -> EvalResult:
    """Run every scorer on every item; return mean scores and a summary.

    Items hold `input` and optionally `output`, `context`, `ground_truth`,
    `request_context`, `id`, `metadata` (other keys are kept in `item.extra`). `target`
    (sync or async) produces the output from the input when an item has none; at most
    `concurrency` target calls run at once (default 1, as Mastra's, so a pipeline that is
    not thread-safe is safe). Scoring is separate: `scoring_concurrency` items (default:
    twice the judge's slots) are judged at once and all their requests share one
    scheduler, so claims of different items share decode steps.
    `on_item_complete(item=, target_result=, scorer_results=)`, or Mastra's one-object form
    `on_item_complete({"item", "targetResult", "scorerResults"})`, is called per item as it
    finishes. A failing or malformed item is recorded with its error; `raise_on_error=True`
    aborts on the first error instead (Mastra's behaviour). Works inside a running event
    loop too (Jupyter), in a helper thread; there `await run_evals_async(...)` is better.
    `progress`: a progress bar on stderr (default: only when stderr is a terminal).
    """
    return run_coroutine(
        run_evals_async(
            data,
            scorers,
            target,
            on_item_complete,
            concurrency=concurrency,
            scoring_concurrency=scoring_concurrency,
            raise_on_error=raise_on_error,
            progress=progress,
        )
    )
