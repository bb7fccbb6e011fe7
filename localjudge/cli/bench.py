"""`localjudge bench`: judge workloads run several ways in one run, compared."""

from __future__ import annotations

import json
from pathlib import Path

import click

from localjudge.bench.results import WAYS
from localjudge.cli.group import cli
from localjudge.cli.options import BASE_MODEL_WARNING, engine_options, prefill_cells_option


@cli.command()
@engine_options(slots=True, slots_default=32)
@click.option(
    "--claims",
    default=32,
    show_default=True,
    type=click.IntRange(1, 100_000),
    help="Claims per workload.",
)
@click.option(
    "--workload",
    "workloads",
    multiple=True,
    type=click.Choice(["single", "multi", "rag", "scorer"]),
    help="Workloads to run (default: single and multi).",
)
@click.option(
    "--ways",
    default="abc",
    show_default=True,
    help="Which ways to run, by letter: "
    + "; ".join(f"{letter} {meaning}" for letter, meaning in WAYS.items())
    + ".",
)
@click.option(
    "--llama-server",
    "llama_server",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="A llama-server binary for way s (../shared/tools/build_llama_server.sh builds one).",
)
@click.option(
    "--llama-batched-bench",
    "llama_batched_bench",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="A llama-batched-bench binary: after our ways of each workload, it runs alternately"
    " with the bare engine in its shape, to show the bare engine at its speed.",
)
@click.option(
    "--rounds",
    default=1,
    show_default=True,
    type=click.IntRange(1, 20),
    help="Measured rounds per way (c, f, s); the median is reported.",
)
@click.option(
    "--max-tokens",
    default=48,
    show_default=True,
    type=click.IntRange(8, 4096),
    help="Token budget per verdict.",
)
@prefill_cells_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def bench(
    model,
    gpu_layers,
    n_ctx,
    threads,
    slots,
    claims,
    workloads,
    ways,
    llama_server,
    llama_batched_bench,
    rounds,
    max_tokens,
    prefill_cells,
    as_json,
) -> None:
    """Run judge workloads several ways in one run and compare them.

    (a) outlines' own llama.cpp integration, one claim at a time; (b) our scheduler with one
    slot; (c) our scheduler with --slots slots, cold; (w) default options, warm (a
    warm-up round not counted, as for s); (f) (w) explaining only "yes" verdicts; (n) (w)
    with no reasons; (s) llama.cpp's llama-server, tuned. Same prompts, schema, budget, greedy. Workloads:
    single, multi, rag (24+ contexts of ~1,500 tokens), scorer (the whole hallucination
    scorer; ways c and f; per item).
    """
    from localjudge.bench import run_bench
    from localjudge.bench.report import print_reports, reports_to_json
    from localjudge.engine import llama_build_info
    from localjudge.model_registry import resolve

    if not ways or set(ways) - set(WAYS):
        raise click.BadParameter(f"use letters from {''.join(WAYS)!r}", param_hint="--ways")
    if "s" in ways and llama_server is None:
        raise click.BadParameter("way s needs --llama-server PATH", param_hint="--ways")
    resolved = resolve(model)
    progress = (lambda m: None) if as_json else (lambda m: click.echo(m, err=True))
    reports = run_bench(
        model,
        slots=slots,
        threads=threads,
        claims=claims,
        workloads=tuple(workloads) or ("single", "multi"),
        ways=ways,
        max_tokens=max_tokens,
        n_ctx=n_ctx or 8192,
        gpu_layers=gpu_layers,
        llama_server=Path(llama_server) if llama_server else None,
        llama_batched_bench=Path(llama_batched_bench) if llama_batched_bench else None,
        rounds=rounds,
        prefill_cells=prefill_cells,
        progress=progress,
    )
    info = llama_build_info()
    meta = {
        "threads": threads or info["physical_cores"],
        "slots": slots,
        "prefill_cells": prefill_cells,
        "max_tokens": max_tokens,
        "rounds": rounds,
        "adapters": [f"{path.name}:{scale:g}" for path, scale in resolved.adapters],
    }
    if as_json:
        click.echo(json.dumps(reports_to_json(reports, model=resolved.name, meta=meta), indent=2))
        return
    print_reports(reports, model=resolved.name, threads=meta["threads"])
    if resolved.entry is not None and not resolved.entry.meaningful:
        click.echo(BASE_MODEL_WARNING.format(name=resolved.name))
