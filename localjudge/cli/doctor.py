"""`localjudge doctor` (check the installation) and `localjudge demo` (one verdict)."""

from __future__ import annotations

import click

from localjudge.cli.group import cli
from localjudge.cli.options import engine_options


@cli.command()
@engine_options()
def doctor(model, gpu_layers, n_ctx, threads) -> None:
    """Check the installation: llama.cpp build, threads, the model (default one unless
    --model), cache, offline."""
    from localjudge.doctor import run_checks

    failures = 0
    for check in run_checks(model, n_gpu_layers=gpu_layers, n_ctx=n_ctx, n_threads=threads):
        mark = "ok  " if check.ok else "FAIL"
        click.echo(f"[{mark}] {check.name}: {check.detail}")
        failures += not check.ok
    if failures:
        raise click.ClickException(f"{failures} check(s) failed")


@cli.command()
@click.option(
    "--model", default=None, help="Registry name or .gguf path (default: the default model)."
)
def demo(model: str | None) -> None:
    """Load the judge and print a grammar-constrained verdict for a sample claim."""
    from localjudge.demo import run_demo

    run_demo(model, echo=click.echo)
