"""`localjudge score` (one output) and `localjudge eval` (a dataset, resumable)."""

from __future__ import annotations

import os

import click

from localjudge.cli.group import cli
from localjudge.cli.options import (
    BASE_MODEL_WARNING,
    EXIT_GATE,
    EXIT_ITEMS,
    engine_options,
    exit_with,
    known_scorers,
    load_judge,
    read_contexts,
    scorer_settings,
    scoring_options,
)


@cli.command()
@click.argument("scorer")
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
@scoring_options
@engine_options()
@click.option("--json", "as_json", is_flag=True, help="Print Mastra's camelCase result JSON.")
@click.option(
    "--no-store-text",
    is_flag=True,
    help="With --json: leave the input, output and other texts out of the result.",
)
def score(
    scorer,
    output_text,
    input_text,
    contexts,
    context_files,
    scale,
    reason_mode,
    score_mode,
    extraction,
    windows,
    window_tokens,
    claim_reasons,
    model,
    gpu_layers,
    n_ctx,
    threads,
    as_json,
    no_store_text,
) -> None:
    """Score one output with SCORER (hallucination, toxicity, or a registered scorer)."""
    from localjudge.scorers import make_scorer

    if scorer not in known_scorers():
        raise click.BadParameter(
            f"unknown scorer {scorer!r}; known: {', '.join(known_scorers())}", param_hint="SCORER"
        )
    if output_text == "-":
        with click.open_file("-", encoding="utf-8") as stdin:
            output_text = stdin.read()
    context = read_contexts(contexts, context_files)
    settings = scorer_settings(
        [scorer],
        scale=scale,
        reason_mode=reason_mode,
        score_mode=score_mode,
        extraction=extraction,
        claim_reasons=claim_reasons,
        windows=windows,
        window_tokens=window_tokens,
        context=context or None,
    )
    with load_judge(model, gpu_layers=gpu_layers, n_ctx=n_ctx, threads=threads) as judge:
        result = make_scorer(scorer, judge, **settings).run(
            {"output": output_text, "input": input_text}
        )
    if as_json:
        click.echo(result.to_json(store_text=not no_store_text, indent=2))
        return
    click.echo(f"{result.scorer_id}: {result.score:g} (of {result.details.get('scale', 1):g})")
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


def _parse_fields(values: tuple[str, ...]) -> dict[str, str]:
    """--field input=question: the item field `input` is read from the key `question`."""
    from localjudge.evals.runner import ITEM_FIELDS

    fields: dict[str, str] = {}
    for value in values:
        name, sep, source = value.partition("=")
        if not sep or not source or name not in ITEM_FIELDS:
            raise click.BadParameter(
                f"use FIELD=KEY with FIELD one of {', '.join(ITEM_FIELDS)}", param_hint="--field"
            )
        fields[name] = source
    return fields


@cli.command("eval")
@click.argument("data", type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--scorer",
    "scorer_names",
    multiple=True,
    required=True,
    help="A scorer name: hallucination or toxicity (repeatable).",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Results JSONL (appended; resumable), or - for stdout.",
)
@engine_options(slots=True)
@scoring_options
@click.option(
    "--context-file",
    "context_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="One context for every item (hallucination); an item's own context still wins.",
)
@click.option(
    "--field",
    "field_maps",
    multiple=True,
    help="FIELD=KEY: read item FIELD from KEY of each record, e.g. --field input=question.",
)
@click.option(
    "--limit", default=None, type=click.IntRange(1), help="Only the first N items of DATA."
)
@click.option(
    "--fail-above",
    "fail_above",
    multiple=True,
    help="SCORER=THRESHOLD: exit 3 when the mean is above.",
)
@click.option(
    "--retry-errors",
    is_flag=True,
    help="Score again the items whose record holds an input error too (transient errors are "
    "always retried).",
)
@click.option(
    "--no-store-text",
    is_flag=True,
    help="Leave the input, output and other texts out of the records (ids, scores, verdicts "
    "and reasons stay).",
)
@click.option(
    "--ray",
    "ray_address",
    is_flag=False,
    flag_value="local",
    default=None,
    help="Score on a Ray cluster: --ray alone starts a local one, --ray ADDRESS joins one "
    "(needs localjudge[ray]).",
)
@click.option(
    "--actors",
    default=1,
    show_default=True,
    type=click.IntRange(1),
    help="--ray: actors, one judge each.",
)
@click.option(
    "--actor-cpus",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0),
    help="--ray: CPUs per actor.",
)
@click.option(
    "--actor-gpus",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0),
    help="--ray: GPUs per actor.",
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
def eval_command(
    data,
    scorer_names,
    out,
    model,
    gpu_layers,
    n_ctx,
    threads,
    slots,
    scale,
    reason_mode,
    score_mode,
    extraction,
    windows,
    window_tokens,
    claim_reasons,
    context_file,
    field_maps,
    limit,
    fail_above,
    retry_errors,
    no_store_text,
    ray_address,
    actors,
    actor_cpus,
    actor_gpus,
    quiet,
) -> None:
    """Score every item of DATA (JSONL, CSV, or - for JSONL on stdin) with each --scorer,
    appending one record per item to --out.

    Each item is one JSON object with "input" and/or "output", and optionally "context"
    (a list of strings), "ground_truth", "request_context", "id" and "metadata" (other
    keys are kept). Rerunning the same command skips the items --out already holds (by
    id, else by content), and retries those that failed for a transient reason.

    Exit codes: 0 ok, 1 error, 2 usage, 3 a --fail-above gate was breached, 4 some items
    could not be used or failed.
    """
    from rich.console import Console

    from localjudge.evals.progress import ItemBar
    from localjudge.scorers.registry import is_rubric_file

    known = known_scorers()
    unknown = [n for n in scorer_names if n not in known and not is_rubric_file(n)]
    if unknown:
        raise click.ClickException(f"unknown scorer {unknown[0]!r}; known: {', '.join(known)}")
    names = tuple(dict.fromkeys(scorer_names))
    thresholds = _parse_thresholds(fail_above, names)
    fields = _parse_fields(field_maps)
    if data != "-" and not os.path.isfile(data):
        raise click.ClickException(f"dataset not found: {data}")
    context = read_contexts((), (context_file,)) if context_file else None
    settings = scorer_settings(
        names,
        scale=scale,
        reason_mode=reason_mode or "template",
        score_mode=score_mode,
        extraction=extraction,
        claim_reasons=claim_reasons,
        windows=windows,
        window_tokens=window_tokens,
        context=context,
    )
    to_stdout = out == "-"
    console = Console(stderr=True)
    progress = ItemBar(not quiet, console=console)
    options = {
        "limit": limit,
        "fields": fields,
        "retry_errors": retry_errors,
        "store_text": not no_store_text,
        "on_start": progress.start,
        "on_item": lambda record: progress.advance(),
    }
    engine = {"slots": slots, "n_gpu_layers": gpu_layers, "n_ctx": n_ctx, "n_threads": threads}
    with progress:
        if ray_address is None:
            report, judge_name, meaningful = _eval_here(
                data, out, names, model, engine, settings, options
            )
        else:
            ray = {"address": ray_address, "actors": actors, "cpus": actor_cpus, "gpus": actor_gpus}
            report, judge_name, meaningful = _eval_on_ray(
                data, out, names, model, engine, settings, options, ray
            )
    for row in report.bad_rows:
        click.echo(f"skipped {row.error}", err=True)
    click.echo(report.summary_line("stdout" if to_stdout else out), err=to_stdout)
    (console if to_stdout else Console()).print(report.table(judge_name))
    if not meaningful:
        click.echo(BASE_MODEL_WARNING.format(name=judge_name), err=to_stdout)
    if breached := report.breaches(thresholds):
        exit_with(EXIT_GATE, "; ".join(breached))
    if problem := report.unusable():
        exit_with(EXIT_ITEMS, problem)


def _eval_here(data, out, names, model, engine, settings, options):
    """`eval` on a judge loaded here: the report, the judge's name, whether it is meaningful."""
    from localjudge.evals.batch import evaluate_file
    from localjudge.scorers import make_scorer

    slots, gpu_layers, n_ctx, threads = engine.values()
    with load_judge(model, slots, gpu_layers, n_ctx, threads) as judge:
        try:
            scorers = {name: make_scorer(name, judge, **settings) for name in names}
        except (ValueError, TypeError) as error:  # e.g. a rubric file that is not there
            raise click.ClickException(str(error)) from None
        return evaluate_file(data, out, scorers, **options), judge.name, judge.meaningful


def _eval_on_ray(data, out, names, model, engine, settings, options, ray):
    """`eval` on Ray actors, each loading its judge: the report, and the judge its records
    name."""
    from localjudge.distributed import run_evals_ray

    report = run_evals_ray(
        data,
        out,
        names,
        address=None if ray["address"] == "local" else ray["address"],
        model=model,
        engine_options=engine,
        scorer_settings=settings,
        num_actors=ray["actors"],
        num_cpus=ray["cpus"],
        num_gpus=ray["gpus"],
        **options,
    )
    judge = report.judge or {}
    meaningful = judge.get("meaningful", True)
    if isinstance(meaningful, dict):  # {"verdicts": ..., "reasons": ...}
        meaningful = meaningful.get("verdicts", True)
    return report, judge.get("model", model or "the default model"), meaningful
