"""The plumbing of scorer steps: running a step's requests together, calling user hooks,
option checks, caps, and running a coroutine from synchronous code."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from localjudge.errors import LocalJudgeError, ScorerError
from localjudge.judge import Judge
from localjudge.scheduler import GenerationRequest, GenerationResult
from localjudge.scorers.result import StepUsage


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


def check_cap(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{name} must be None (no cap) or an integer >= 1, not {value!r}")


def cap(items: list[str], limit: int | None, what: str) -> tuple[list[str], dict | None]:
    """The first `limit` items, and a `truncated` record when some were left out."""
    if limit is None or len(items) <= limit:
        return items, None
    return items[:limit], {what: {"judged": limit, "leftOut": len(items) - limit}}


async def generate_all(
    judge: Judge, requests: Sequence[GenerationRequest]
) -> list[GenerationResult]:
    """Run requests together through the judge's scheduler. The first failure is raised and
    the item's other requests are cancelled (other items in the batch are not affected);
    cancelling the caller cancels them all."""
    queued = await submit_off_loop(lambda: judge.submit_many(requests))
    futures = [asyncio.wrap_future(future) for future in queued]
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


async def submit_off_loop(submit: Callable[[], list[Future]]) -> list[Future]:
    """`submit()` (a judge's `submit_many` or `submit`, which tokenize) on a worker thread:
    tokenizing a long prompt must not stall the event loop (other items, `serve`'s other
    clients). A caller cancelled meanwhile has its requests cancelled once they are queued."""
    submitted = asyncio.ensure_future(asyncio.to_thread(submit))
    try:
        return await asyncio.shield(submitted)
    except asyncio.CancelledError:
        submitted.add_done_callback(_cancel_all)
        raise


def _cancel_all(submitted: asyncio.Future) -> None:
    if not submitted.cancelled() and submitted.exception() is None:
        for future in submitted.result():
            future.cancel()


def accepted_keywords(hook: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments `hook` takes: all of them with a `**kwargs`, else the ones it
    names (as Mastra passes `{run, results, step}` and a function may read any subset)."""
    try:
        parameters = inspect.signature(hook).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: pass everything
        return kwargs
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return kwargs
    named = {p.name for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    return {k: v for k, v in kwargs.items() if k in named}


async def call_hook(hook: Callable[..., Any], name: str, **kwargs: Any) -> Any:
    """Call a user hook, plain or async, with the keywords it takes; its exception becomes
    one clear error."""
    try:
        value = hook(**accepted_keywords(hook, kwargs))
        if inspect.isawaitable(value):
            value = await value
    except LocalJudgeError:
        raise
    except Exception as error:
        raise ScorerError(f"{name} raised {type(error).__name__}: {error}") from error
    return value


def decide(result: GenerationResult, threshold: tuple[float, str] | None) -> str:
    """The verdict: the judge's own, or with a calibrated threshold "yes" exactly when
    P(yes) >= threshold."""
    choice = result.choice("verdict")
    if threshold is None or choice is None:
        return result.value["verdict"]
    return "yes" if choice.probabilities.get("yes", 0.0) >= threshold[0] else "no"


def verdict_confidence(result: GenerationResult, verdict: str | None = None) -> float | None:
    """The model's probability of a verdict (default: the one it gave), from the masked
    logits."""
    choice = result.choice("verdict")
    if choice is None:
        return None
    return round(choice.probabilities.get(verdict or result.value["verdict"], 0.0), 4)


class Step:
    """Times a step and collects its usage."""

    def __init__(self, usage: dict[str, StepUsage], name: str) -> None:
        self.usage = usage.setdefault(name, StepUsage())

    def __enter__(self) -> StepUsage:
        self._start = time.perf_counter()
        return self.usage

    def __exit__(self, *exc_info) -> None:
        self.usage.seconds += time.perf_counter() - self._start
