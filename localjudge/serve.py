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
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from localjudge.errors import GenerationError, LocalJudgeError, error_kind
from localjudge.evals.run import run_evals_async
from localjudge.grammar.compiled import disk_cache_bytes
from localjudge.judge import Judge
from localjudge.scheduler import GenerationRequest, GenerationResult
from localjudge.scorers import Scorer, make_scorer, scorer_names, scorer_options
from localjudge.scorers.registry import SCORERS
from localjudge.scorers.steps import submit_off_loop

DEFAULT_MAX_BODY_BYTES = 8 << 20
MAX_IN_FLIGHT = 256  # requests judged at once; more get 503
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
_FIELDS = ("context", "output", "input", "groundTruth", "requestContext")  # named in errors


MAX_SCHEMA_BYTES = 32 << 10  # a client's JSON schema, as JSON text
MAX_ENUM_VALUES = 1024  # enum and const values in one schema, all together


def check_schema_size(schema: dict) -> None:
    """Refuse (422) a schema too large to compile within a request: over `MAX_SCHEMA_BYTES`
    as JSON, or with more than `MAX_ENUM_VALUES` enum values."""
    size = len(json.dumps(schema, ensure_ascii=False).encode())
    if size > MAX_SCHEMA_BYTES:
        raise ServeError(
            422, "schema_too_large", f"the schema is {size} bytes; at most {MAX_SCHEMA_BYTES}",
            field="response_format",
        )  # fmt: skip
    count, stack = 0, [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("enum"), list):
                count += len(node["enum"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    if count > MAX_ENUM_VALUES:
        raise ServeError(
            422, "schema_too_large", f"the schema has {count} enum values; at most {MAX_ENUM_VALUES}",
            field="response_format",
        )  # fmt: skip


def store_text_of(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ServeError(400, "invalid_input", "storeText must be true or false", field="storeText")
    return value


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


ROUTES = (
    "/health", "/metrics", "/v1/scorers", "/v1/evals", "/v1/models",
    "/v1/chat/completions", "/v1/completions",
)  # fmt: skip
LOOPBACK_NAMES = (*LOOPBACK_HOSTS, "[::1]")  # as a Host header writes them too


def route_label(path: str) -> str:
    """The route a path is counted under in /metrics: a known route, "/v1/scorers/run"
    for any scorer's run, else "other" (a client's path never becomes a label)."""
    if path in ROUTES:
        return path
    parts = path.split("/")
    if len(parts) == 5 and parts[:3] == ["", "v1", "scorers"] and parts[4] == "run":
        return "/v1/scorers/run"
    return "other"


def _host_name(value: str) -> str:
    """The host of a Host header or an Origin's authority, without its port."""
    value = value.strip().lower()
    if value.startswith("["):  # [::1]:8080
        return value[: value.find("]") + 1]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class Guard:
    """Pure ASGI middleware in front of every route: the bearer key (constant-time), and
    without a key the browser checks (a Host that is not a loopback name, as DNS rebinding
    sends, and a cross-site Origin get 403), and a declared body over the limit (413). It
    passes `receive` through untouched, so handlers see the client's disconnect (Starlette's
    BaseHTTPMiddleware would hide it, and abandoned requests would run on)."""

    def __init__(
        self,
        app: Any,
        *,
        api_key: str | None,
        max_body_bytes: int,
        counters: "Counters",
        allowed_hosts: tuple[str, ...] = LOOPBACK_NAMES,
    ) -> None:
        self.app, self.api_key, self.max_body_bytes = app, api_key, max_body_bytes
        self.counters, self.allowed_hosts = counters, allowed_hosts

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        error = self.refusal(scope)
        if error is None:
            await self.app(scope, receive, send)
            return
        self.counters.count(route_label(scope.get("path", "")), error.status)
        body = json.dumps(error.body()).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": error.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def refusal(self, scope: dict) -> "ServeError | None":
        headers = {k.decode("latin-1").lower(): v for k, v in scope.get("headers", [])}
        path = scope.get("path", "")
        if self.api_key is not None:
            given = headers.get("authorization", b"")
            if path != "/health" and not hmac.compare_digest(
                given, f"Bearer {self.api_key}".encode()
            ):
                return ServeError(401, "unauthorized", "missing or wrong bearer key")
        else:
            host = _host_name(headers.get("host", b"").decode("latin-1"))
            if host and host not in self.allowed_hosts:
                return ServeError(
                    403, "forbidden_host", "a keyless server answers loopback host names only"
                )
            origin = headers.get("origin", b"").decode("latin-1")
            if origin and _host_name(origin.split("://", 1)[-1]) not in self.allowed_hosts:
                # "null" (a sandboxed page, a file) is no loopback name either
                return ServeError(
                    403, "forbidden_origin", "a keyless server refuses cross-site requests"
                )
        length = headers.get("content-length", b"").decode("latin-1")
        if length.isdigit() and int(length) > self.max_body_bytes:
            return ServeError(413, "too_large", f"request body over {self.max_body_bytes} bytes")
        return None


MAX_POOLED_SCORERS = 64  # distinct option sets kept built; the least recently used go first
MAX_POOLED_OPTIONS_BYTES = 64 << 10  # larger options (a long static context): not kept


class ScorerPool:
    """Scorers by (name, options), built once and shared by the requests that name the same
    options, at most `MAX_POOLED_SCORERS` of them (least recently used out first); a scorer
    whose options are larger than `MAX_POOLED_OPTIONS_BYTES` is built for its request only."""

    def __init__(self, judge: Judge, capacity: int = MAX_POOLED_SCORERS) -> None:
        self.judge = judge
        self.capacity = capacity
        self._scorers: OrderedDict[str, Scorer] = OrderedDict()

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
        if scorer is not None:
            self._scorers.move_to_end(key)
            return scorer
        try:
            scorer = make_scorer(name, self.judge, **options)
        except (ValueError, TypeError, LocalJudgeError) as error:
            raise ServeError(422, "invalid_options", str(error), field="options") from None
        if len(key) <= MAX_POOLED_OPTIONS_BYTES:
            self._scorers[key] = scorer
            while len(self._scorers) > self.capacity:
                self._scorers.popitem(last=False)
        return scorer

    def __len__(self) -> int:
        return len(self._scorers)


class Counters:
    """Request counts for /metrics."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, int], int] = {}
        self.in_flight = 0
        self.started = time.time()

    def count(self, route: str, status: int) -> None:
        self.requests[(route, status)] = self.requests.get((route, status), 0) + 1

    def enter(self, limit: int) -> None:
        """Count a request in flight, or refuse it (503) when `limit` are already."""
        if self.in_flight >= limit:
            raise ServeError(503, "overloaded", f"{limit} requests already in flight")
        self.in_flight += 1


def metrics_text(judge: Judge, counters: Counters) -> str:
    """Prometheus exposition text of the scheduler and the server."""
    scheduler = judge.scheduler
    stats = scheduler.stats
    cache = scheduler.prompt_cache
    lines = [
        "# TYPE localjudge_queue_depth gauge",
        f"localjudge_queue_depth {len(scheduler.waiting)}",
        "# TYPE localjudge_running_sequences gauge",
        f"localjudge_running_sequences {len(scheduler.running)}",
        "# TYPE localjudge_kv_cells_reserved gauge",
        f"localjudge_kv_cells_reserved {scheduler.num_reserved_cells}",
        "# TYPE localjudge_prefixes_cached gauge",
        f"localjudge_prefixes_cached {scheduler.num_cached_prefixes}",
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
        "# TYPE localjudge_prompt_cache_bytes gauge",
        f"localjudge_prompt_cache_bytes {cache.num_bytes if cache is not None else 0}",
        "# TYPE localjudge_prompt_cache_restored_total counter",
        f"localjudge_prompt_cache_restored_total {stats.num_states_restored}",
        "# TYPE localjudge_prompt_cache_restored_tokens_total counter",
        f"localjudge_prompt_cache_restored_tokens_total {stats.num_tokens_restored}",
        "# TYPE localjudge_kept_prompts_used_total counter",
        f"localjudge_kept_prompts_used_total {stats.num_kept_prompts_used}",
        "# TYPE localjudge_kept_prompts_restored_total counter",
        f"localjudge_kept_prompts_restored_total {stats.num_kept_prompts_restored}",
        "# TYPE localjudge_prompt_tokens_apart_total counter",
        f"localjudge_prompt_tokens_apart_total {stats.num_tokens_apart}",
        "# TYPE localjudge_grammars_in_memory gauge",
        f"localjudge_grammars_in_memory {judge.grammars_in_memory}",
        "# TYPE localjudge_grammar_cache_disk_bytes gauge",
        f"localjudge_grammar_cache_disk_bytes {disk_cache_bytes()}",
        "# TYPE localjudge_requests_in_flight gauge",
        f"localjudge_requests_in_flight {counters.in_flight}",
        "# TYPE localjudge_requests_total counter",
    ]
    for (route, status), count in sorted(counters.requests.items()):
        lines.append(f'localjudge_requests_total{{route="{route}",status="{status}"}} {count}')
    return "\n".join(lines) + "\n"


def create_app(
    judge: Judge,
    *,
    api_key: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    request_timeout: float = 600.0,
    max_in_flight: int = MAX_IN_FLIGHT,
    close_judge: bool = True,
    body_timeout: float = 30.0,
):
    """The ASGI app over one judge. `close_judge`: close it when the app shuts down.
    `body_timeout`: seconds a request body may take to arrive (408 past it)."""
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
    app.state.pool, app.state.counters = pool, counters

    def reply(route: str, error: ServeError) -> JSONResponse:
        counters.count(route, error.status)
        return JSONResponse(error.body(), status_code=error.status)

    app.add_middleware(Guard, api_key=api_key, max_body_bytes=max_body_bytes, counters=counters)

    async def read_body(request: Request) -> bytearray:
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > max_body_bytes:
                raise ServeError(413, "too_large", f"request body over {max_body_bytes} bytes")
        return body

    async def read_json(request: Request) -> dict[str, Any]:
        try:  # a client that sends half a body and waits holds no slot for ever
            body = await asyncio.wait_for(read_body(request), timeout=body_timeout)
        except asyncio.TimeoutError:
            raise ServeError(
                408, "body_timeout", f"the request body did not arrive within {body_timeout:g} s"
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

    async def until_disconnect(request: Request) -> None:
        """Returns when the client goes away. Called once the body is read: the next
        message the server sends the app is then the disconnect (no polling, so judge work
        stops within a step of it)."""
        while (await request.receive())["type"] != "http.disconnect":
            pass

    async def guarded(request: Request, work: Callable[[], Awaitable[Any]]) -> Any:
        """Run `work()` within the timeout; cancel it (its requests leave the scheduler) when
        the client goes away."""
        counters.enter(max_in_flight)
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
            store_text = store_text_of(body.pop("storeText", True))
            scorer = pool.get(name, options)
            if "output" not in body:
                raise ServeError(400, "invalid_input", "the run has no 'output'", field="output")
            result = await guarded(request, lambda: scorer.run_async(body))
        except Exception as error:
            return reply(route, _error_of(error))
        counters.count(route, 200)
        return JSONResponse(json.loads(result.to_json(store_text=store_text)))

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
            if len(set(names)) != len(names):
                raise ServeError(
                    400, "invalid_input", "scorers must name each scorer once", field="scorers"
                )
            scorers = [pool.get(n, options.get(n)) for n in names]
            store_text = store_text_of(body.get("storeText", True))
        except Exception as error:
            return reply(route, _error_of(error))
        if counters.in_flight >= max_in_flight:
            return reply(
                route, ServeError(503, "overloaded", f"{max_in_flight} requests in flight")
            )
        # bounded: a client that reads slowly pauses the scoring instead of piling up lines
        queue: asyncio.Queue = asyncio.Queue(maxsize=64)

        async def produce() -> None:
            try:
                result = await run_evals_async(
                    items,
                    scorers,
                    on_item_result=lambda r: queue.put(("item", r)),
                    keep_items=False,  # each item is let go once its line is queued
                )
                await queue.put(("done", result))
            except asyncio.CancelledError:  # the client went away: nobody reads the queue
                raise
            except BaseException as error:
                await queue.put(("error", error))
                raise

        async def stream() -> AsyncIterator[bytes]:
            counters.in_flight += 1
            task = asyncio.ensure_future(produce())
            try:
                while True:
                    kind, value = await asyncio.wait_for(queue.get(), timeout=request_timeout)
                    if kind == "item":
                        yield (
                            json.dumps(
                                {"index": value.index, **value.fields(store_text=store_text)},
                                default=str,
                            )
                            + "\n"
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

    # -- OpenAI-compatible API -------------------------------------------------------------

    @app.get("/v1/models")
    async def models():
        counters.count("/v1/models", 200)
        return {
            "object": "list",
            "data": [{"id": judge.name, "object": "model", "owned_by": "localjudge"}],
        }

    async def prepare(
        body: dict[str, Any],
        prompt: str,
        prompt_schema: dict | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> GenerationRequest:
        """The generation an OpenAI request asks for. Without a response_format, a schema the
        client put in the prompt (`prompt_schema`) constrains the reply."""
        schema = _response_schema(body.get("response_format"))
        if schema is None and body.get("response_format") is None:
            schema = prompt_schema
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        if max_tokens is None:
            max_tokens = DEFAULT_JSON_TOKENS if schema is not None else DEFAULT_TEXT_TOKENS
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise ServeError(
                400, "invalid_input", "max_tokens must be a positive integer", field="max_tokens"
            )
        grammar = None
        if schema is not None:
            check_schema_size(schema)
            try:
                grammar = await asyncio.to_thread(judge.grammar, schema)
            except LocalJudgeError as error:
                raise ServeError(
                    422, "schema_not_supported", str(error), field="response_format"
                ) from None
        try:
            return judge.request(
                prompt,
                grammar,
                max_tokens=max_tokens,
                temperature=body.get("temperature") or 0.0,
                seed=body.get("seed"),
                on_text=on_text,
            )
        except (ValueError, TypeError) as error:
            raise ServeError(400, "invalid_input", str(error)) from None

    async def submit_one(gen_request: GenerationRequest):
        (future,) = await submit_off_loop(lambda: [judge.submit(gen_request)])
        return future

    def generation_error(error: Exception) -> Exception:
        if isinstance(error, GenerationError) and "max_tokens=" in str(error):
            return ServeError(400, "invalid_input", str(error), field="max_tokens")
        return error

    async def complete(
        kind: str, request: Request, body: dict[str, Any], prompt: str, prompt_schema=None
    ):
        """An OpenAI completion, whole or streamed as the tokens are chosen."""
        if body.get("stream"):
            return await stream_completion(kind, request, body, prompt, prompt_schema)

        async def work():  # the schema compiles inside the request's admission and timeout
            gen_request = await prepare(body, prompt, prompt_schema)
            return await asyncio.wrap_future(await submit_one(gen_request))

        try:
            result = await guarded(request, work)
        except LocalJudgeError as error:
            raise generation_error(error) from None
        reply_ = OpenAIReply(kind, judge.name, result)
        return JSONResponse(reply_.whole())

    async def stream_completion(kind, request, body, prompt, prompt_schema):
        """Server-sent events, one per piece of text as the scheduler chooses it. Errors
        before the first piece are plain JSON errors with their status; later ones are an
        error event. A client that goes away cancels the generation."""
        loop = asyncio.get_running_loop()
        pieces: asyncio.Queue[str] = asyncio.Queue()
        counters.enter(max_in_flight)  # admitted before its schema is compiled
        try:
            gen_request = await asyncio.wait_for(
                prepare(
                    body,
                    prompt,
                    prompt_schema,
                    on_text=lambda text: loop.call_soon_threadsafe(pieces.put_nowait, text),
                ),
                timeout=request_timeout,
            )
        except asyncio.TimeoutError:
            counters.in_flight -= 1
            raise ServeError(504, "timeout", f"no result within {request_timeout:g} s") from None
        except BaseException:
            counters.in_flight -= 1
            raise
        try:
            future = asyncio.wrap_future(await submit_one(gen_request))
        except BaseException:
            counters.in_flight -= 1
            raise
        deadline = loop.time() + request_timeout

        async def next_piece(watcher: asyncio.Future | None = None) -> str | None:
            """The next piece of text; None once the generation is over."""
            if not pieces.empty():
                return pieces.get_nowait()
            if future.done():
                return None
            getter = asyncio.ensure_future(pieces.get())
            waited = {getter, future} | ({watcher} if watcher is not None else set())
            done, _ = await asyncio.wait(
                waited,
                timeout=max(0.0, deadline - loop.time()),
                return_when=asyncio.FIRST_COMPLETED,
            )
            if getter in done:
                return getter.result()
            getter.cancel()
            if future in done:
                return pieces.get_nowait() if not pieces.empty() else None
            if watcher is not None and watcher in done:
                raise ServeError(499, "client_closed", "the client went away")
            raise ServeError(504, "timeout", f"no result within {request_timeout:g} s")

        def settle() -> None:
            if not future.done():
                future.cancel()  # the request leaves the scheduler
            counters.in_flight -= 1

        watcher = asyncio.ensure_future(until_disconnect(request))
        try:
            first = await next_piece(watcher)
            if first is None:
                future.result()  # failed before any text: a plain error reply
        except BaseException as error:
            settle()
            if isinstance(error, LocalJudgeError):
                raise generation_error(error) from None
            raise
        finally:
            watcher.cancel()
        reply_ = OpenAIReply(kind, judge.name)

        async def events() -> AsyncIterator[bytes]:
            try:
                if kind == "chat":
                    yield reply_.event({"role": "assistant", "content": ""})
                piece = first
                while piece is not None:
                    yield reply_.event({"content": piece})
                    piece = await next_piece()
                reply_.result = future.result()
                yield reply_.event({}, last=True)
            except Exception as error:  # after the headers: an error event
                yield f"data: {json.dumps(_error_of(generation_error(error)).body())}\n\n".encode()
            finally:
                settle()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        route = "/v1/chat/completions"
        try:
            body = await read_json(request)
            messages = _messages(body.get("messages"))
            # no explicit prefix: the judge shares the longest common token prefix with the
            # requests before it (the same system prompt, the same context) by itself
            prompt = judge.render(messages)
            reply_ = await complete("chat", request, body, prompt, _schema_in_prompt(messages))
        except Exception as error:
            return reply(route, _error_of(error))
        counters.count(route, 200)
        return reply_

    @app.post("/v1/completions")
    async def completions(request: Request):
        route = "/v1/completions"
        try:
            body = await read_json(request)
            prompt = body.get("prompt")
            if isinstance(prompt, list) and len(prompt) == 1:
                prompt = prompt[0]
            if not isinstance(prompt, str) or not prompt:
                raise ServeError(
                    400, "invalid_input", "prompt must be a non-empty string", field="prompt"
                )
            reply_ = await complete("text", request, body, prompt)
        except Exception as error:
            return reply(route, _error_of(error))
        counters.count(route, 200)
        return reply_

    return app


class OpenAIReply:
    """The OpenAI shapes of one completion ("chat" or "text"): whole, or as stream events."""

    def __init__(self, kind: str, model: str, result: GenerationResult | None = None) -> None:
        self.kind = kind
        self.model = model
        self.result = result
        self.created = int(time.time())
        self.id = ("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex

    def _ending(self) -> tuple[str, dict[str, int], dict[str, Any]]:
        result = self.result
        # JSON the budget closed is complete and valid: "stop", with the closing on record
        # (clients such as Mastra reject a structured reply whose finish reason is "length")
        finish = "length" if result.finish_reason == "length" else "stop"
        extra = {"x_closed_by_budget": True} if result.finish_reason == "budget" else {}
        prompt = result.counts.prefix_reused + result.counts.prompt_evaluated
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": result.counts.generated,
            "total_tokens": prompt + result.counts.generated,
            "prompt_tokens_details": {"cached_tokens": result.counts.prefix_reused},
        }
        return finish, usage, extra

    def whole(self) -> dict[str, Any]:
        finish, usage, extra = self._ending()
        if self.kind == "chat":
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": self.result.text},
                "finish_reason": finish,
            }
        else:
            choice = {"index": 0, "text": self.result.text, "finish_reason": finish}
            choice["logprobs"] = None
        return {
            "id": self.id,
            "object": "chat.completion" if self.kind == "chat" else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [choice | extra],
            "usage": usage,
        }

    def event(self, delta: dict[str, Any], *, last: bool = False) -> bytes:
        """One server-sent event; `last` carries the finish reason and the usage."""
        finish, usage, extra = self._ending() if last else (None, None, {})
        if self.kind == "chat":
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": delta.get("content", ""), "finish_reason": finish}
        data = {
            "id": self.id,
            "object": "chat.completion.chunk" if self.kind == "chat" else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [choice | extra],
        }
        if last:
            data["usage"] = usage
        return f"data: {json.dumps(data)}\n\n".encode()


DEFAULT_JSON_TOKENS = 256  # max_tokens when a request sets none: JSON closes within it
DEFAULT_TEXT_TOKENS = 128

# Clients that cannot send response_format put the schema in the prompt instead: Mastra's
# judges ("jsonPromptInjection", the default for a model Mastra does not know) end the user
# message with this line, the schema, and a request for JSON only.
_PROMPT_SCHEMA_CUES = ("Return your response as JSON matching this schema:", "JSON schema:")


def _schema_in_prompt(messages: list[dict[str, str]]) -> dict | None:
    """The JSON Schema a chat prompt asks the reply to match, when it states one after a
    known cue (in the last user or system message); None otherwise."""
    decoder = json.JSONDecoder()
    for message in reversed(messages):
        if message["role"] not in ("user", "system"):
            continue
        content = message["content"]
        for cue in _PROMPT_SCHEMA_CUES:
            at = content.rfind(cue)
            if at < 0:
                continue
            rest = content[at + len(cue) :].lstrip()
            try:
                schema, _ = decoder.raw_decode(rest)
            except ValueError:
                continue
            if isinstance(schema, dict) and schema.get("type") == "object":
                return {k: v for k, v in schema.items() if k != "$schema"}
        return None
    return None


def _response_schema(response_format: Any) -> dict | None:
    """The JSON Schema a response_format asks for (None: free text)."""
    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        raise ServeError(
            400, "invalid_input", "response_format must be an object", field="response_format"
        )
    kind = response_format.get("type")
    if kind in (None, "text"):
        return None
    if kind == "json_object":
        return {"type": "object"}
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise ServeError(
                400,
                "invalid_input",
                "json_schema.schema must be an object",
                field="response_format",
            )
        if schema.get("type") != "object":
            raise ServeError(
                422,
                "schema_not_supported",
                "the schema must describe an object (type: object)",
                field="response_format",
            )
        return {k: v for k, v in schema.items() if k != "$schema"}
    raise ServeError(
        400, "invalid_input", f"unknown response_format type {kind!r}", field="response_format"
    )


def _messages(value: Any) -> list[dict[str, str]]:
    """Chat messages as {role, content} with text content (text parts joined)."""
    if not isinstance(value, list) or not value:
        raise ServeError(
            400, "invalid_input", "messages must be a non-empty list", field="messages"
        )
    messages = []
    for index, message in enumerate(value):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ServeError(
                400, "invalid_input", f"messages[{index}] needs a role", field="messages"
            )
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(
                part.get("text", "")
                for part in content
                if isinstance(part, dict) and part.get("type") == "text"
            )
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise ServeError(
                400, "invalid_input", f"messages[{index}].content must be text", field="messages"
            )
        messages.append({"role": message["role"], "content": content})
    return messages


def check_binding(host: str, api_key: str | None) -> None:
    """Other machines may reach a server bound beyond loopback: require a key then."""
    if host not in LOOPBACK_HOSTS and not api_key:
        raise ValueError(
            f"binding {host} exposes the judge beyond this machine: give --api-key (or bind 127.0.0.1)"
        )
