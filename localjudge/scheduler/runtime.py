"""Drives a `Scheduler` on an engine from one worker thread; submission is thread-safe.

Producers (a scorer, `run_evals`, live scoring) call `submit()` from any thread and get a
`concurrent.futures.Future`. Only the worker thread touches the scheduler and the engine,
so every `llama_decode` carries the work of all producers at once.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from typing import Any

from localjudge.engine.base import Engine
from localjudge.errors import GenerationError, LocalJudgeError, RequestCancelled
from localjudge.scheduler.core import Scheduler
from localjudge.scheduler.request import GenerationRequest, GenerationResult
from localjudge.scheduler.state import TokenizedRequest
from localjudge.scheduler.stats import SchedulerStats


def split_shared_prefix(prefix_tokens: list[int], full_tokens: list[int]) -> int:
    """How many leading tokens of the prompt can be shared: the longest common token
    prefix of the tokenized prefix and the tokenized prompt, keeping one prompt token."""
    shared = 0
    for a, b in zip(prefix_tokens, full_tokens, strict=False):
        if a != b:
            break
        shared += 1
    return min(shared, len(full_tokens) - 1)


class BatchRuntime:
    """A scheduler, an engine and the worker thread that runs steps while work exists.

    Nothing a caller does can leave a future unresolved: every request ends with a result
    or an error, whether a request is malformed, the engine fails a step, the caller
    cancels, or the judge is closed while other threads submit.
    """

    max_attempts = 3  # engine step failures a request survives (requeued each time)

    def __init__(
        self, engine: Engine, scheduler: Scheduler, tokenize: Callable[[str], list[int]]
    ) -> None:
        self.engine = engine
        self.scheduler = scheduler
        self._tokenize = tokenize
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._futures: dict[str, Future] = {}
        self._wakeup = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._state_lock = threading.Lock()  # orders submissions against close()
        self._prefix_tokens: dict[str, list[int]] = {}  # prefix text -> tokens (bounded)
        # (prefix segments, prompt) -> (tokens, shared, cuts) of requests seen lately
        self._seen: OrderedDict[tuple, tuple[array, int, tuple[int, ...]]] = OrderedDict()
        self._seen_tokens = 0
        self._seen_lock = threading.Lock()
        self.num_step_failures = 0  # engine steps that raised (their requests were requeued)
        # the worker found nothing to do and nothing submitted since (see `wait_idle`)
        self._idle = True
        self._idle_changed = threading.Condition()

    @property
    def stats(self) -> SchedulerStats:
        """A snapshot of the scheduler's counters."""
        return self.scheduler.stats.copy()

    @property
    def closed(self) -> bool:
        return self._stopping

    # -- producers ------------------------------------------------------------------------

    max_seen_tokens = 1 << 20  # tokenized prompts remembered for requests sent again (4 MiB)

    def tokenize_request(self, request: GenerationRequest) -> TokenizedRequest:
        """Split the prompt into shared prefix tokens (one cut per prefix segment) and this
        request's own tokens. A prompt sent again (a re-run) is not tokenized again."""
        if not request.prompt.strip():
            raise GenerationError("empty prompt")
        key = (request.prefix_segments, request.prompt)
        with self._seen_lock:
            seen = self._seen.get(key)
            if seen is not None:
                self._seen.move_to_end(key)
        if seen is not None:
            tokens, shared, cuts = seen
            full = tokens.tolist()
        else:
            full = self._tokenize(request.prompt)
            shared, cuts = self._cuts(request, full)
            self._remember(key, (array("i", full), shared, cuts))
        return TokenizedRequest(
            request=request,
            prefix_tokens=full[:shared],
            prompt_tokens=full[shared:],
            prefix_cuts=cuts,
        )

    def _cuts(self, request: GenerationRequest, full: list[int]) -> tuple[int, tuple[int, ...]]:
        """How many tokens of `full` are shared, and the cut after each prefix segment."""
        cuts: list[int] = []
        text = ""
        for segment in request.prefix_segments:
            text += segment
            if not segment:
                continue
            cut = split_shared_prefix(self._tokenize_prefix(text), full)
            if cut > (cuts[-1] if cuts else 0):
                cuts.append(cut)
        return (cuts[-1] if cuts else 0), tuple(cuts)

    def _remember(self, key: tuple, value: tuple[array, int, tuple[int, ...]]) -> None:
        size = len(value[0])
        if size > self.max_seen_tokens:
            return
        with self._seen_lock:
            if key in self._seen:
                return
            self._seen[key] = value
            self._seen_tokens += size
            while self._seen_tokens > self.max_seen_tokens:
                _, (dropped, _, _) = self._seen.popitem(last=False)
                self._seen_tokens -= len(dropped)

    def _tokenize_prefix(self, text: str) -> list[int]:
        """Prefix texts repeat for every request that shares them: tokenize each once."""
        tokens = self._prefix_tokens.get(text)
        if tokens is None:
            if len(self._prefix_tokens) >= 256:
                self._prefix_tokens.clear()
            tokens = self._prefix_tokens[text] = self._tokenize(text)
        return tokens

    def submit(self, request: GenerationRequest) -> Future:
        """Queue a request; the future resolves to a `GenerationResult` or raises its error.
        Cancelling the future (directly, or by cancelling an asyncio task awaiting it)
        takes the request out of the scheduler."""
        return self.submit_many([request])[0]

    def submit_many(self, requests: Sequence[GenerationRequest]) -> list[Future]:
        """Queue requests together, so the scheduler admits them in the same step."""
        futures: list[Future] = []
        items: list[TokenizedRequest] = []
        for request in requests:
            future: Future = Future()
            futures.append(future)
            if self._stopping:
                future.set_exception(GenerationError("the judge is closed"))
                continue
            try:
                items.append(self.tokenize_request(request))
            except LocalJudgeError as error:
                future.set_exception(error)
                continue
            except Exception as error:  # a text the tokenizer cannot take
                future.set_exception(GenerationError(f"tokenization failed: {error}"))
                continue
            self._futures[request.request_id] = future
            future.add_done_callback(self._on_done(request.request_id))
        if not items:
            return futures
        with self._state_lock:
            if self._stopping:  # closed while tokenizing: the worker will not see these
                for item in items:
                    self._settle(
                        self._futures.pop(item.request.request_id, None),
                        error=GenerationError("the judge is closed"),
                    )
                return futures
            with self._idle_changed:  # the worker sees the put before it can call itself idle
                self._idle = False
                self._inbox.put(("add", items))
            self._ensure_worker()
        self._wakeup.set()
        return futures

    def _on_done(self, request_id: str) -> Callable[[Future], None]:
        def done(future: Future) -> None:
            if future.cancelled():
                self.cancel(request_id)

        return done

    def cancel(self, request_id: str) -> None:
        """Cancel a request wherever it is; its future raises `RequestCancelled`."""
        self._inbox.put(("cancel", request_id))  # the worker is idle only once it is read
        self._wakeup.set()

    def run(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult | Exception]:
        """Submit all, wait for all; each entry is a result or the error of that request."""
        futures = self.submit_many(requests)
        outcomes: list[GenerationResult | Exception] = []
        for future in futures:
            try:
                outcomes.append(future.result())
            except Exception as error:
                outcomes.append(error)
        return outcomes

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until everything submitted so far is done and so are the steps it left
        behind (removals, trims, saves): the scheduler holds nothing but idle groups and
        the worker waits for work. False if `timeout` (seconds) passed first."""
        with self._idle_changed:
            return self._idle_changed.wait_for(lambda: self._idle, timeout)

    def _note_idle(self) -> None:
        """Called by the worker when the scheduler has no work: idle unless a submission
        is waiting in the inbox."""
        with self._idle_changed:
            if self._inbox.empty():
                self._idle = True
                self._idle_changed.notify_all()

    # -- worker ---------------------------------------------------------------------------

    def _ensure_worker(self) -> None:
        """Start the worker (again, should it ever have died); called under `_state_lock`."""
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._loop, name="localjudge-scheduler", daemon=True
            )
            self._thread.start()

    @staticmethod
    def _settle(
        future: Future | None, *, result: Any = None, error: BaseException | None = None
    ) -> None:
        """Resolve a future unless it is already done (a caller may cancel it any time)."""
        if future is None or future.done():
            return
        with contextlib.suppress(InvalidStateError):
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

    def _drain_inbox(self) -> None:
        while True:
            try:
                kind, payload = self._inbox.get_nowait()
            except queue.Empty:
                return
            if kind == "add":
                for item in payload:
                    self.scheduler.add(item)
            elif kind == "cancel" and not self.scheduler.cancel(payload):
                self._settle(
                    self._futures.pop(payload, None),
                    error=RequestCancelled(f"request {payload} was cancelled"),
                )

    def _resolve(self) -> None:
        for finished in self.scheduler.take_finished():
            self._settle(
                self._futures.pop(finished.request_id, None),
                result=finished.result,
                error=finished.error,
            )

    def _step(self) -> None:
        scheduler = self.scheduler
        step = scheduler.schedule()
        try:
            output = self.engine.execute(step.plan)
            scheduler.update_from_output(step, output)
        except Exception as error:  # the engine broke: its cache is lost, start over
            self.num_step_failures += 1
            failure = GenerationError(f"engine step failed: {error}")
            try:
                self.engine.clear()
            except Exception:
                scheduler.fail_all(failure)  # the engine cannot even be reset
                return
            scheduler.requeue_running(failure, self.max_attempts)

    def _loop(self) -> None:
        try:
            while not self._stopping:
                try:
                    self._drain_inbox()
                    self._resolve()
                    if not self.scheduler.has_work():
                        self._note_idle()
                        self._wakeup.wait(timeout=0.5)
                        self._wakeup.clear()
                        continue
                    self._step()
                    self._resolve()
                except Exception as error:  # a scheduler bug must not strand the callers
                    self.scheduler.fail_all(GenerationError(f"scheduler failed: {error}"))
                    self._resolve()
                    with contextlib.suppress(Exception):
                        self.engine.clear()
        finally:
            with self._state_lock:  # a submission now starts a new worker, after this cleanup
                if self._thread is threading.current_thread():
                    self._thread = None
                self._shutdown_worker()

    def _shutdown_worker(self) -> None:
        """Fail whatever is left, so no caller ever waits on a worker that is gone.
        Called under `_state_lock`."""
        error = GenerationError(
            "the judge was closed" if self._stopping else "the scheduler worker stopped"
        )
        with contextlib.suppress(Exception):
            self._drain_inbox()
            self.scheduler.fail_all(error)
            self._resolve()
        for request_id in list(self._futures):
            self._settle(self._futures.pop(request_id, None), error=error)
        with self._idle_changed:  # nothing left to wait for
            self._idle = True
            self._idle_changed.notify_all()

    def close(self) -> None:
        """Stop the worker; requests still queued or running fail with a clear error."""
        with self._state_lock:
            self._stopping = True
            thread = self._thread
        self._wakeup.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        with self._state_lock:
            self._shutdown_worker()
