"""Live scoring: score a pipeline's outputs in the background without ever blocking,
slowing (beyond an enqueue) or failing the pipeline."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import inspect
import random
import threading
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localjudge.evals.dataset import json_line
from localjudge.scorers.base import Scorer
from localjudge.scorers.result import ScorerResult
from localjudge.scorers.scorer_run import ScorerRun


@dataclass
class LiveStats:
    """Counters of a live scorer."""

    submitted: int = 0  # outputs offered
    sampled_out: int = 0  # skipped by the sampling rate
    dropped: int = 0  # skipped because the queue was full
    scored: int = 0  # runs scored by every scorer
    failed: int = 0  # runs where a scorer (or the results callback) failed
    pending: int = 0  # still queued or in flight (after close: left unscored)


class LiveScorer:
    """Scores outputs in a background thread through the scorers' shared judge.

    `submit()` (or a function wrapped with `watch`, plain or `async def`) only samples and
    enqueues; a full queue drops the run and counts it. Results go to
    `on_result(run, results, errors)` and/or a JSONL `sink` file, one flushed line per run.
    `close()` drains what is queued (or, with `drain=False`, stops and reports what was
    left), within its `timeout`. The background thread never keeps the interpreter from
    exiting: at exit, a live scorer that was not closed is closed without draining, before
    the shared judges close.
    """

    def __init__(
        self,
        scorers: Sequence[Scorer],
        *,
        sample_rate: float = 1.0,
        max_queue: int = 1000,
        concurrency: int = 8,
        on_result: Callable[[ScorerRun, dict[str, ScorerResult], dict[str, str]], Any]
        | None = None,
        sink: str | Path | None = None,
        seed: int | None = None,
    ) -> None:
        if not scorers:
            raise ValueError("LiveScorer needs at least one scorer")
        if not 0.0 <= sample_rate <= 1.0:
            raise ValueError(f"sample_rate must be between 0 and 1, not {sample_rate}")
        if max_queue < 1:
            raise ValueError(f"max_queue must be at least 1, not {max_queue}")
        self.scorers = list(scorers)
        self.sample_rate = sample_rate
        self.max_queue = max_queue
        self.concurrency = max(1, concurrency)
        self.on_result = on_result
        self.sink = Path(sink) if sink is not None else None
        self.stats = LiveStats()
        self._queue: deque[ScorerRun] = deque()
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._closed = False  # no more submissions
        self._abandon = False  # leave what is queued unscored
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._worker, name="localjudge-live", daemon=True)
        self._thread.start()
        self._ready.wait()
        _live_scorers.add(self)

    # -- the pipeline side ----------------------------------------------------------------

    def submit(
        self, *, output: Any, input: Any = None, context: list[str] | None = None, **fields: Any
    ) -> bool:
        """Offer one output for scoring; returns whether it was queued. Never raises for
        the judge's sake and never waits."""
        with self._lock:
            self.stats.submitted += 1
            if self._closed or len(self._queue) >= self.max_queue:
                self.stats.dropped += 1
                return False
            if self.sample_rate < 1.0 and self._random.random() >= self.sample_rate:
                self.stats.sampled_out += 1
                return False
            try:
                run = ScorerRun(output=output, input=input, context=context, **fields)
            except TypeError:
                self.stats.dropped += 1
                return False
            self._queue.append(run)
            self.stats.pending += 1
        self._notify()
        return True

    def _notify(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nothing to wake
                loop.call_soon_threadsafe(wake.set)

    def watch(
        self, function: Callable | None = None, *, input_from: Callable[..., Any] | None = None
    ):
        """Decorator: the wrapped function's return value is submitted as the output, its
        first argument (or `input_from(*args, **kwargs)`) as the input. `async def`
        functions stay async: their awaited result is what gets scored."""

        def offer(output: Any, args: tuple, kwargs: dict) -> None:
            try:
                user_input = (
                    input_from(*args, **kwargs)
                    if input_from
                    else (args[0] if args else kwargs.get("input"))
                )
                self.submit(output=output, input=user_input)
            except Exception:  # the pipeline must never fail because of scoring
                with self._lock:
                    self.stats.dropped += 1

        def decorate(fn: Callable) -> Callable:
            if inspect.iscoroutinefunction(fn):

                @functools.wraps(fn)
                async def async_wrapper(*args, **kwargs):
                    output = await fn(*args, **kwargs)
                    offer(output, args, kwargs)
                    return output

                return async_wrapper

            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                output = fn(*args, **kwargs)
                offer(output, args, kwargs)
                return output

            return wrapper

        return decorate(function) if function is not None else decorate

    # -- the scoring side -----------------------------------------------------------------

    def _worker(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._ready.set()
        in_flight: set[asyncio.Task] = set()
        while True:
            with self._lock:
                run = self._queue.popleft() if self._queue and not self._abandon else None
                stop = run is None and self._closed
            if stop:
                break
            if run is None:
                self._wake.clear()
                with self._lock:
                    idle = not self._queue and not self._closed
                if idle:
                    await self._wake.wait()
                continue
            while len(in_flight) >= self.concurrency:
                _, in_flight = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
            in_flight.add(asyncio.ensure_future(self._score(run)))
        if in_flight:
            await asyncio.wait(in_flight)

    async def _score(self, run: ScorerRun) -> None:
        outcomes = await asyncio.gather(
            *(s.run_async(run) for s in self.scorers), return_exceptions=True
        )
        results: dict[str, ScorerResult] = {}
        errors: dict[str, str] = {}
        for scorer, outcome in zip(self.scorers, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                errors[scorer.id] = f"{type(outcome).__name__}: {outcome}"
            else:
                results[scorer.id] = outcome
        try:
            if self.sink is not None:
                line = {
                    "runId": run.run_id,
                    "scores": {k: r.score for k, r in results.items()},
                    "results": {k: r.to_dict() for k, r in results.items()},
                    "errors": errors,
                }
                with self.sink.open("ab") as handle:
                    handle.write(json_line(line))
                    handle.flush()
            if self.on_result is not None:
                self.on_result(run, results, errors)
        except Exception as error:
            errors["callback"] = f"{type(error).__name__}: {error}"
        with self._lock:
            self.stats.pending -= 1
            if errors:
                self.stats.failed += 1
            else:
                self.stats.scored += 1

    def close(self, *, drain: bool = True, timeout: float | None = None) -> LiveStats:
        """Stop accepting runs; score what is queued (`drain`) or abandon it, waiting at
        most `timeout` seconds. Returns the counters; `pending` says how many runs were
        left unscored (abandoned, or still running when the timeout passed)."""
        with self._lock:
            self._closed = True
            if not drain:
                self._abandon = True
                self._queue.clear()
        self._notify()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)
        with self._lock:
            return LiveStats(**vars(self.stats))

    def __enter__(self) -> LiveScorer:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


_live_scorers: weakref.WeakSet[LiveScorer] = weakref.WeakSet()


def _close_live_scorers() -> None:
    """At exit: stop every live scorer that is still open, without draining, so nothing
    submits to a judge that is being closed and no thread holds the interpreter."""
    for scorer in list(_live_scorers):
        scorer.close(drain=False, timeout=1.0)


# atexit runs hooks last-registered first: registering after the scorers' module (which
# closes the shared judges) makes this run before the judges close.
atexit.register(_close_live_scorers)
