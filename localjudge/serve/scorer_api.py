"""The scorer API: `GET /v1/scorers`, `POST /v1/scorers/{name}/run` (Mastra's result
JSON), `POST /v1/evals` (many items, NDJSON lines as they finish); scorers pooled by
their options."""

import asyncio
import contextlib
import json
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

from localjudge.errors import LocalJudgeError
from localjudge.evals.runner import run_evals_async
from localjudge.judge import Judge
from localjudge.scorers import Scorer, make_scorer, scorer_names, scorer_options
from localjudge.scorers.registry import SCORERS
from localjudge.serve.errors import ServeError, error_of, store_text_of
from localjudge.serve.server import Server

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


def scorer_entry(name: str) -> dict[str, Any]:
    """A registered scorer as `GET /v1/scorers` lists it, with its verdict task if any."""
    cls = SCORERS[name][0]
    entry = {
        "name": name,
        "id": cls.id,
        "description": cls.description,
        "options": sorted(scorer_options(name)),
    }
    task = cls.verdict_task
    if task is not None:
        entry["verdictTask"] = {
            "promptVersion": task.prompt_version,
            "flagged": task.flagged,
            "textField": task.text_field,
            "context": task.context,
        }
    return entry


def scorer_routes(server: Server, pool: ScorerPool):
    """The scorer API's routes over `server`'s judge, scorers taken from `pool`."""
    from fastapi import APIRouter, Request
    from fastapi.responses import JSONResponse, StreamingResponse

    router = APIRouter()

    @router.get("/v1/scorers")
    async def list_scorers():
        server.counters.count("/v1/scorers", 200)
        return {"scorers": [scorer_entry(name) for name in scorer_names()]}

    @router.post("/v1/scorers/{name}/run")
    async def run_scorer(name: str, request: Request):
        route = "/v1/scorers/run"
        try:
            body = await server.read_json(request)
            options = body.pop("options", None)
            store_text = store_text_of(body.pop("storeText", True))
            scorer = pool.get(name, options)
            if "output" not in body:
                raise ServeError(400, "invalid_input", "the run has no 'output'", field="output")
            result = await server.guarded(request, lambda: scorer.run_async(body))
        except Exception as error:
            return server.reply(route, error_of(error))
        server.counters.count(route, 200)
        return JSONResponse(json.loads(result.to_json(store_text=store_text)))

    @router.post("/v1/evals")
    async def evals(request: Request):
        route = "/v1/evals"
        try:
            body = await server.read_json(request)
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
            return server.reply(route, error_of(error))
        if server.counters.in_flight >= server.max_in_flight:
            return server.reply(
                route, ServeError(503, "overloaded", f"{server.max_in_flight} requests in flight")
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
            server.counters.in_flight += 1
            task = asyncio.ensure_future(produce())
            try:
                while True:
                    getter = asyncio.ensure_future(queue.get())
                    if not await server.wait_any({getter}, server.request_timeout):
                        getter.cancel()
                        cut = server.shutdown_error() if server.stopping() else None
                        cut = cut or ServeError(504, "timeout", "no item finished in time")
                        yield (json.dumps(cut.body()) + "\n").encode()  # a final line
                        return
                    kind, value = getter.result()
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
                        yield (json.dumps(error_of(value).body()) + "\n").encode()
                        return
            finally:  # also when the client disconnects: the evaluation stops
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
                server.counters.in_flight -= 1

        server.counters.count(route, 200)
        return StreamingResponse(stream(), media_type="application/x-ndjson")

    return router
