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
    allowed_hosts: tuple[str, ...] = (),
    cors_origins: tuple[str, ...] = (),
):
    """The ASGI app over one judge. `close_judge`: close it when the app shuts down.
    `body_timeout`: seconds a request body may take to arrive (408 past it).
    `allowed_hosts`: Host names a keyless server answers besides the loopback ones.
    `cors_origins`: origins whose pages may call it (CORS; none by default)."""
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
    app.state.pool, app.state.counters, app.state.server = pool, server.counters, server
    app.add_middleware(
        Guard,
        api_key=api_key,
        max_body_bytes=max_body_bytes,
        counters=server.counters,
        allowed_hosts=tuple(allowed_hosts),
        cors_origins=tuple(cors_origins),
    )
    if cors_origins:  # outside the guard: it answers the preflights the guard lets through
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["authorization", "content-type"],
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
