"""`create_app`: the FastAPI app over one judge: `Guard` in front, `/health` and
`/metrics`, the scorer API and the OpenAI-compatible API."""

import asyncio
import contextlib

from localjudge.judge import Judge
from localjudge.serve.guard import Guard
from localjudge.serve.metrics import metrics_text
from localjudge.serve.openai_api import openai_routes
from localjudge.serve.scorer_api import ScorerPool, scorer_routes
from localjudge.serve.server import DEFAULT_MAX_BODY_BYTES, MAX_IN_FLIGHT, Server


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
    from fastapi import FastAPI
    from fastapi.responses import PlainTextResponse

    server = Server(
        judge,
        max_body_bytes=max_body_bytes,
        request_timeout=request_timeout,
        max_in_flight=max_in_flight,
        body_timeout=body_timeout,
    )
    pool = ScorerPool(judge)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        if close_judge:  # requests still running fail cleanly ("the judge is closed")
            await asyncio.to_thread(judge.close)

    app = FastAPI(title="localjudge", version="0.2.0", lifespan=lifespan)
    app.state.pool, app.state.counters = pool, server.counters
    app.add_middleware(
        Guard, api_key=api_key, max_body_bytes=max_body_bytes, counters=server.counters
    )

    @app.get("/health")
    async def health():
        server.counters.count("/health", 200)
        return {"status": "ok", "model": judge.name, "meaningful": judge.meaningful}

    @app.get("/metrics")
    async def metrics():
        server.counters.count("/metrics", 200)
        return PlainTextResponse(metrics_text(judge, server.counters))

    app.include_router(scorer_routes(server, pool))
    app.include_router(openai_routes(server))
    return app
