"""`localjudge serve`: the HTTP API on one loaded judge."""

from __future__ import annotations

import click

from localjudge.cli.group import cli
from localjudge.cli.options import engine_options, prefill_cells_option


@cli.command()
@engine_options(slots=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--api-key",
    envvar="LOCALJUDGE_API_KEY",
    default=None,
    help="Bearer key every request must carry (required beyond loopback; or $LOCALJUDGE_API_KEY).",
)
@click.option(
    "--max-body-mb",
    default=8.0,
    show_default=True,
    type=click.FloatRange(0.001),
    help="Largest request body.",
)
@click.option(
    "--timeout",
    "request_timeout",
    default=600.0,
    show_default=True,
    type=click.FloatRange(0.1),
    help="Seconds a request may take; past it, it is cancelled.",
)
@click.option(
    "--prompt-cache-mib",
    default=None,
    type=click.FloatRange(0),
    help="Host memory for saved prompt prefixes: a context sent again is restored, not "
    "evaluated again (default: 512 less the prefill context's KV cache; 0: off).",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    help="A Host name a keyless server answers besides the loopback ones (repeatable).",
)
@click.option(
    "--cors-origin",
    "cors_origins",
    multiple=True,
    help="An origin (https://app.example) whose pages may call the server (repeatable; "
    "default: none, no CORS).",
)
@click.option(
    "--shutdown-seconds",
    default=30.0,
    show_default=True,
    type=click.FloatRange(1),
    help="On SIGTERM: how long requests in flight may finish; a stream still running then "
    "ends with an error line.",
)
@prefill_cells_option
def serve(
    model,
    gpu_layers,
    n_ctx,
    threads,
    slots,
    host,
    port,
    api_key,
    max_body_mb,
    request_timeout,
    prompt_cache_mib,
    allowed_hosts,
    cors_origins,
    shutdown_seconds,
    prefill_cells,
):
    """Serve the scorers over HTTP on one loaded judge: GET /v1/scorers,
    POST /v1/scorers/{name}/run, POST /v1/evals (NDJSON), GET /health, GET /metrics.

    Binds 127.0.0.1 unless --host says otherwise (then --api-key is required). SIGTERM
    stops accepting requests and lets those in flight finish within --shutdown-seconds
    (streams still running then end with an error line), then closes the judge.
    """
    try:
        import uvicorn

        from localjudge.serve import MAX_IN_FLIGHT, check_binding, create_app
    except ImportError:
        raise click.ClickException(
            "the server needs its extra: pip install 'localjudge[serve]'"
        ) from None
    try:
        check_binding(host, api_key)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    from localjudge.judge import DEFAULT_SLOTS
    from localjudge.loading import load_judge

    judge = load_judge(
        model,
        slots=slots,
        # requests that share a token prefix split groups and keep their own prompts
        max_prefixes=2 * (slots or DEFAULT_SLOTS),
        n_gpu_layers=gpu_layers,
        n_ctx=n_ctx,
        n_threads=threads,
        cache_prefixes=True,  # requests that start with the same tokens skip that prefill
        prompt_cache_mib=prompt_cache_mib,  # None: the default
        prefill_cells=prefill_cells,
    )
    app = create_app(
        judge,
        api_key=api_key,
        max_body_bytes=int(max_body_mb * (1 << 20)),
        request_timeout=request_timeout,
        allowed_hosts=allowed_hosts,
        cors_origins=cors_origins,
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=shutdown_seconds,
        # connections beyond the requests it admits are refused (503) at once, and an idle
        # kept-alive connection is closed after 5 s: half-sent requests cannot pile up
        limit_concurrency=2 * MAX_IN_FLIGHT,
        timeout_keep_alive=5,
    )
    click.echo(f"localjudge serving {judge.name} on http://{host}:{port}", err=True)
    draining_server_class()(config, app.state.server, shutdown_seconds).run()


def draining_server_class():
    import uvicorn

    class DrainingServer(uvicorn.Server):
        """uvicorn's server that, on SIGTERM or Ctrl-C, tells the app when to cut the work
        still running: a little before uvicorn's own grace ends, so that every stream
        writes its final line, and the process exits 0."""

        def __init__(self, config, server, grace: float) -> None:
            super().__init__(config)
            self.app_server, self.grace = server, grace

        def handle_exit(self, sig, frame) -> None:
            if self.app_server.stop_at is None:
                self.app_server.stop_in(max(self.grace / 2, self.grace - 3))
            super().handle_exit(sig, frame)
            # a shutdown asked for is a clean exit (0): uvicorn would raise the signal again
            self._captured_signals.clear()

    return DrainingServer
