"""`localjudge serve`: one loaded judge and one scheduler behind a local HTTP API, so
pipelines that are not Python (Mastra apps, shell scripts) use the scorers without reloading
the model per call. The optional extra `localjudge[serve]` (FastAPI + uvicorn).

Scorer API: `GET /v1/scorers`, `POST /v1/scorers/{name}/run` (the Mastra-shaped result
JSON), `POST /v1/evals` (many items, NDJSON streamed as they finish). Operations:
`GET /health`, `GET /metrics` (Prometheus text), a bearer key, a body size limit, a
per-request timeout, cancellation when the client goes away, JSON errors.
"""

import asyncio
import contextlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from localjudge.errors import LocalJudgeError, error_kind
from localjudge.evals.run import ItemResult, run_evals_async
from localjudge.judge import Judge
from localjudge.scorers import Scorer, make_scorer, scorer_names, scorer_options
from localjudge.scorers.registry import SCORERS

DEFAULT_MAX_BODY_BYTES = 8 << 20
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
_FIELDS = ("context", "output", "input", "groundTruth", "requestContext")  # named in errors


class ServeError(Exception):
    """An HTTP error with a JSON body: `{"error": {"type", "message", "field"?}}`."""

    def __init__(self, status: int, kind: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.field = status, kind, message, field

    def body(self) -> dict[str, Any]:
        error = {"type": self.kind, "message": self.message}
        if self.field is not None:
            error["field"] = self.field
        return {"error": error}


def _error_of(error: BaseException) -> ServeError:
    """The HTTP status of a library error: what the caller sent (400) or what we could not
    do (500)."""
    if isinstance(error, ServeError):
        return error
    if isinstance(error, LocalJudgeError) and error_kind(error) == "input":
        message = str(error)
        field = next((f for f in _FIELDS if f in message), None)
        return ServeError(400, "invalid_input", message, field=field)
    if isinstance(error, LocalJudgeError):
        return ServeError(500, "judge_error", str(error))
    return ServeError(500, "internal_error", f"{type(error).__name__}: {error}")


class ScorerPool:
    """Scorers by (name, options), built once and shared by every request."""

    def __init__(self, judge: Judge) -> None:
        self.judge = judge
        self._scorers: dict[str, Scorer] = {}

    def get(self, name: str, options: Any) -> Scorer:
        if name not in SCORERS:
            raise ServeError(
                404, "unknown_scorer", f"unknown scorer {name!r}; known: {', '.join(SCORERS)}"
            )
        if options is None:
            options = {}
        if not isinstance(options, dict):
            raise ServeError(422, "invalid_options", "options must be an object", field="options")
        accepted = scorer_options(name)
        unknown = sorted(set(options) - accepted - {"id"})
        if unknown:
            raise ServeError(
                422,
                "invalid_options",
                f"{name} does not take option(s) {', '.join(unknown)}; it takes {', '.join(sorted(accepted))}",
                field="options",
            )
        key = name + json.dumps(options, sort_keys=True, default=str)
        scorer = self._scorers.get(key)
        if scorer is None:
            try:
                scorer = make_scorer(name, self.judge, **options)
            except (ValueError, TypeError, LocalJudgeError) as error:
                raise ServeError(422, "invalid_options", str(error), field="options") from None
            self._scorers[key] = scorer
        return scorer


class Counters:
    """Request counts for /metrics."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, int], int] = {}
        self.in_flight = 0
        self.started = time.time()

    def count(self, route: str, status: int) -> None:
        self.requests[(route, status)] = self.requests.get((route, status), 0) + 1


def metrics_text(judge: Judge, counters: Counters) -> str:
    """Prometheus exposition text of the scheduler and the server."""
    scheduler = judge.scheduler
    stats = scheduler.stats
    lines = [
        "# TYPE localjudge_queue_depth gauge",
        f"localjudge_queue_depth {len(scheduler.waiting)}",
        "# TYPE localjudge_running_sequences gauge",
        f"localjudge_running_sequences {len(scheduler.running)}",
        "# TYPE localjudge_kv_cells_reserved gauge",
        f"localjudge_kv_cells_reserved {scheduler.num_reserved_cells}",
        "# TYPE localjudge_kv_cells gauge",
        f"localjudge_kv_cells {scheduler.n_ctx}",
        "# TYPE localjudge_steps_total counter",
        f"localjudge_steps_total {stats.num_steps}",
        "# TYPE localjudge_prompt_tokens_total counter",
        f"localjudge_prompt_tokens_total {stats.num_prompt_tokens}",
        "# TYPE localjudge_generated_tokens_total counter",
        f"localjudge_generated_tokens_total {stats.num_generated_tokens}",
        "# TYPE localjudge_decode_seconds_total counter",
        f"localjudge_decode_seconds_total {stats.decode_seconds:.6f}",
        "# TYPE localjudge_generation_tokens_per_second gauge",
        f"localjudge_generation_tokens_per_second {stats.generation_tokens_per_s:.3f}",
        "# TYPE localjudge_requests_in_flight gauge",
        f"localjudge_requests_in_flight {counters.in_flight}",
        "# TYPE localjudge_requests_total counter",
    ]
    for (route, status), count in sorted(counters.requests.items()):
        lines.append(f'localjudge_requests_total{{route="{route}",status="{status}"}} {count}')
    return "\n".join(lines) + "\n"


def _item_line(result: ItemResult, store_text: bool) -> dict[str, Any]:
    item = result.item
    line: dict[str, Any] = {"index": result.index, "id": item.id}
    if store_text:
        line["input"], line["output"] = item.input, result.target_result
    if item.metadata is not None:
        line["metadata"] = item.metadata
    line.update(
        {
            "scores": {k: r.score for k, r in result.scorer_results.items()},
            "results": {
                k: r.to_dict(store_text=store_text) for k, r in result.scorer_results.items()
            },
            "errors": result.errors,
            "errorKinds": result.error_kinds,
        }
    )
    return line


def create_app(
    judge: Judge,
    *,
    api_key: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    request_timeout: float = 600.0,
    max_in_flight: int = 256,
    close_judge: bool = True,
):
    """The ASGI app over one judge. `close_judge`: close it when the app shuts down."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

    pool = ScorerPool(judge)
    counters = Counters()

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        if close_judge:  # requests still running fail cleanly ("the judge is closed")
            await asyncio.to_thread(judge.close)

    app = FastAPI(title="localjudge", version="0.2.0", lifespan=lifespan)

    def reply(route: str, error: ServeError) -> JSONResponse:
        counters.count(route, error.status)
        return JSONResponse(error.body(), status_code=error.status)

    @app.middleware("http")
    async def guard(request: Request, call_next):
        route = request.url.path
        given = request.headers.get("authorization", "").encode()
        authorized = hmac.compare_digest(given, f"Bearer {api_key}".encode())
        if api_key is not None and route != "/health" and not authorized:
            return reply(route, ServeError(401, "unauthorized", "missing or wrong bearer key"))
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > max_body_bytes:
            return reply(
                route,
                ServeError(413, "too_large", f"request body over {max_body_bytes} bytes"),
            )
        return await call_next(request)

    async def read_json(request: Request) -> dict[str, Any]:
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > max_body_bytes:
                raise ServeError(413, "too_large", f"request body over {max_body_bytes} bytes")
        try:
            value = json.loads(body)
        except ValueError as error:
            raise ServeError(400, "invalid_json", f"the body is not JSON: {error}") from None
        if not isinstance(value, dict):
            raise ServeError(400, "invalid_input", "the body must be a JSON object")
        return value

    async def until_disconnect(request: Request) -> None:
        while not await request.is_disconnected():
            await asyncio.sleep(0.25)

    async def guarded(request: Request, work: Callable[[], Awaitable[Any]]) -> Any:
        """Run `work()` within the timeout; cancel it (its requests leave the scheduler) when
        the client goes away."""
        if counters.in_flight >= max_in_flight:
            raise ServeError(503, "overloaded", f"{max_in_flight} requests already in flight")
        counters.in_flight += 1
        task = asyncio.ensure_future(work())
        watcher = asyncio.ensure_future(until_disconnect(request))
        try:
            done, _ = await asyncio.wait(
                {task, watcher}, timeout=request_timeout, return_when=asyncio.FIRST_COMPLETED
            )
            if task in done:
                return task.result()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            if watcher in done:
                raise ServeError(499, "client_closed", "the client went away")
            raise ServeError(504, "timeout", f"no result within {request_timeout:g} s")
        finally:
            watcher.cancel()
            counters.in_flight -= 1

    @app.get("/health")
    async def health():
        counters.count("/health", 200)
        return {"status": "ok", "model": judge.name, "meaningful": judge.meaningful}

    @app.get("/metrics")
    async def metrics():
        counters.count("/metrics", 200)
        return PlainTextResponse(metrics_text(judge, counters))

    @app.get("/v1/scorers")
    async def list_scorers():
        counters.count("/v1/scorers", 200)
        return {
            "scorers": [
                {
                    "name": name,
                    "id": SCORERS[name][0].id,
                    "description": SCORERS[name][0].description,
                    "options": sorted(scorer_options(name)),
                }
                for name in scorer_names()
            ]
        }

    @app.post("/v1/scorers/{name}/run")
    async def run_scorer(name: str, request: Request):
        route = "/v1/scorers/run"
        try:
            body = await read_json(request)
            options = body.pop("options", None)
            store_text = body.pop("storeText", True)
            scorer = pool.get(name, options)
            if "output" not in body:
                raise ServeError(400, "invalid_input", "the run has no 'output'", field="output")
            result = await guarded(request, lambda: scorer.run_async(body))
        except Exception as error:
            return reply(route, _error_of(error))
        counters.count(route, 200)
        return JSONResponse(json.loads(result.to_json(store_text=bool(store_text))))

    @app.post("/v1/evals")
    async def evals(request: Request):
        route = "/v1/evals"
        try:
            body = await read_json(request)
            names = body.get("scorers")
            items = body.get("items")
            if (
                not isinstance(names, list)
                or not names
                or not all(isinstance(n, str) for n in names)
            ):
                raise ServeError(
                    400, "invalid_input", "scorers must be a list of names", field="scorers"
                )
            if not isinstance(items, list):
                raise ServeError(400, "invalid_input", "items must be a list", field="items")
            options = body.get("options") or {}
            if not isinstance(options, dict):
                raise ServeError(
                    422, "invalid_options", "options must be an object", field="options"
                )
            scorers = [pool.get(n, options.get(n)) for n in names]
            store_text = bool(body.get("storeText", True))
        except Exception as error:
            return reply(route, _error_of(error))
        if counters.in_flight >= max_in_flight:
            return reply(
                route, ServeError(503, "overloaded", f"{max_in_flight} requests in flight")
            )
        queue: asyncio.Queue = asyncio.Queue()

        async def produce() -> None:
            try:
                result = await run_evals_async(
                    items,
                    scorers,
                    on_item_result=lambda r: queue.put_nowait(("item", r)),
                )
                queue.put_nowait(("done", result))
            except BaseException as error:  # cancelled: the client went away
                queue.put_nowait(("error", error))
                raise

        async def stream() -> AsyncIterator[bytes]:
            counters.in_flight += 1
            task = asyncio.ensure_future(produce())
            try:
                while True:
                    kind, value = await asyncio.wait_for(queue.get(), timeout=request_timeout)
                    if kind == "item":
                        yield (
                            json.dumps(_item_line(value, store_text), default=str) + "\n"
                        ).encode()
                    elif kind == "done":
                        summary = {"summary": value.summary, "scores": value.scores}
                        yield (json.dumps(summary) + "\n").encode()
                        return
                    else:
                        yield (json.dumps(_error_of(value).body()) + "\n").encode()
                        return
            except asyncio.TimeoutError:
                yield (
                    json.dumps(ServeError(504, "timeout", "no item finished in time").body()) + "\n"
                ).encode()
            finally:  # also when the client disconnects: the evaluation stops
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
                counters.in_flight -= 1

        counters.count(route, 200)
        return StreamingResponse(stream(), media_type="application/x-ndjson")

    return app


def check_binding(host: str, api_key: str | None) -> None:
    """Other machines may reach a server bound beyond loopback: require a key then."""
    if host not in LOOPBACK_HOSTS and not api_key:
        raise ValueError(
            f"binding {host} exposes the judge beyond this machine: give --api-key (or bind 127.0.0.1)"
        )
