"""`Server`: what every route shares: the judge, the counters, the limits; reading a JSON
body within its time; running a request's work under the timeout while the client stays."""

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from localjudge.judge import Judge
from localjudge.serve.errors import ServeError
from localjudge.serve.metrics import Counters

DEFAULT_MAX_BODY_BYTES = 8 << 20
MAX_IN_FLIGHT = 256  # requests judged at once; more get 503


class Server:
    def __init__(
        self,
        judge: Judge,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        request_timeout: float = 600.0,
        max_in_flight: int = MAX_IN_FLIGHT,
        body_timeout: float = 30.0,
    ) -> None:
        self.judge = judge
        self.counters = Counters()
        self.max_body_bytes = max_body_bytes
        self.request_timeout = request_timeout
        self.max_in_flight = max_in_flight
        self.body_timeout = body_timeout
        self.stop_at: float | None = None  # set by shutdown: when work still running is cut

    # -- shutdown ---------------------------------------------------------------------------

    def stop_in(self, seconds: float) -> None:
        """Shutdown began (SIGTERM): work still running `seconds` from now is cut, a stream
        with a final error line, a request with a 503. Safe from a signal handler."""
        self.stop_at = time.monotonic() + max(0.0, seconds)

    def stopping(self) -> bool:
        return self.stop_at is not None and time.monotonic() >= self.stop_at

    def shutdown_error(self) -> ServeError:
        return ServeError(503, "shutting_down", "the server is shutting down")

    async def wait_any(self, futures: set, timeout: float) -> set:
        """Wait until one of `futures` is done or `timeout` passes, as `asyncio.wait` does,
        but return early (an empty set) once shutdown cuts running work: waits are taken in
        slices of a second, so a signal is noticed within one."""
        deadline = time.monotonic() + timeout
        while True:
            if self.stopping():
                return set()
            left = deadline - time.monotonic()
            if left <= 0:
                return set()
            done, _ = await asyncio.wait(
                futures, timeout=min(left, 1.0), return_when=asyncio.FIRST_COMPLETED
            )
            if done:
                return done

    def reply(self, route: str, error: ServeError):
        """The JSON error reply, counted under `route`."""
        from fastapi.responses import JSONResponse

        self.counters.count(route, error.status)
        return JSONResponse(error.body(), status_code=error.status)

    async def read_body(self, request) -> bytearray:
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > self.max_body_bytes:
                raise ServeError(413, "too_large", f"request body over {self.max_body_bytes} bytes")
        return body

    async def read_json(self, request) -> dict[str, Any]:
        """The body as a JSON object; a client that sends half a body and waits holds no slot
        for ever (408 after `body_timeout`)."""
        try:
            body = await asyncio.wait_for(self.read_body(request), timeout=self.body_timeout)
        except asyncio.TimeoutError:
            raise ServeError(
                408,
                "body_timeout",
                f"the request body did not arrive within {self.body_timeout:g} s",
            ) from None
        try:
            value = json.loads(body)
        except ValueError as error:
            raise ServeError(400, "invalid_json", f"the body is not JSON: {error}") from None
        except RecursionError:
            raise ServeError(400, "invalid_json", "the body's JSON is nested too deeply") from None
        if not isinstance(value, dict):
            raise ServeError(400, "invalid_input", "the body must be a JSON object")
        return value

    @staticmethod
    async def until_disconnect(request) -> None:
        """Returns when the client goes away. Called once the body is read: the next
        message the server sends the app is then the disconnect (no polling, so judge work
        stops within a step of it)."""
        while (await request.receive())["type"] != "http.disconnect":
            pass

    async def guarded(self, request, work: Callable[[], Awaitable[Any]]) -> Any:
        """Run `work()` within the timeout; cancel it (its requests leave the scheduler) when
        the client goes away."""
        self.counters.enter(self.max_in_flight)
        task = asyncio.ensure_future(work())
        watcher = asyncio.ensure_future(self.until_disconnect(request))
        try:
            done = await self.wait_any({task, watcher}, self.request_timeout)
            if task in done:
                return task.result()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            if watcher in done:
                raise ServeError(499, "client_closed", "the client went away")
            if self.stopping():
                raise self.shutdown_error()
            raise ServeError(504, "timeout", f"no result within {self.request_timeout:g} s")
        finally:
            watcher.cancel()
            self.counters.in_flight -= 1
