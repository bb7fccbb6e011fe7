"""`localjudge quality` (agreement with labelled rows) and `localjudge calibrate` (a
threshold chosen on them, stored with the model)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from localjudge.cli.group import cli
from localjudge.cli.options import BASE_MODEL_WARNING, engine_options, load_judge, windows_options
from localjudge.errors import LocalJudgeError
from localjudge.quality.intervals import RESAMPLES

# quality and calibrate: judge each row's text as the scorers judge an output
statements_option = click.option(
    "--statements",
    is_flag=True,
    help="Judge each text statement by statement (its sentences, as the scorers split an "
    "output without the judge), for labels given to whole answers: a row is flagged when "
    "any statement is, and quality applies the word rules in the same shape.",
)
extraction_option = click.option(
    "--extraction",
    type=click.Choice(["sentences", "sentence-claims"]),
    default=None,
    help="With --statements, hallucination: cut each text as the scorer's extraction does "
    "(default sentences; sentence-claims leaves out questions and courtesies, and a text "
    "left with none is not flagged).",
)


def _check_extraction(task: str | None, statements: bool, extraction: str | None) -> None:
    """`--extraction` goes with `--statements` and `--task hallucination`, before any row
    is read."""
    if extraction is None:
        return
    if not statements:
        raise click.UsageError("--extraction needs --statements")
    if task != "hallucination":
        raise click.UsageError("--extraction applies to the hallucination task only")


def _check_windows(tasks, windows, window_tokens) -> None:
    """`--windows` and `--window-tokens` go with tasks judged in a context's windows."""
    if (windows is not None or window_tokens is not None) and not all(t.windowed for t in tasks):
        raise click.UsageError("--windows and --window-tokens apply to hallucination rows only")


def _shaped(task, extraction: str | None):
    """The verdict task, its texts cut as `--extraction` says (`_check_extraction`)."""
    if extraction is None:
        return task
    from localjudge.scorers.hallucination import sentence_task

    return sentence_task(extraction)


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
@statements_option
@extraction_option
@windows_options("Hallucination rows")
@click.option(
    "--resamples",
    type=click.IntRange(0, 100_000),
    default=RESAMPLES,
    show_default=True,
    help="Stratified bootstrap resamples behind the 95% intervals of balanced accuracy and "
    "AUROC, and of the judge's difference from each baseline (0: no intervals).",
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
    statements,
    extraction,
    windows,
    window_tokens,
    resamples,
):
    """How well the judge agrees with labelled rows, beside trivial baselines on the same
    rows: accuracy, balanced accuracy, F1, false-positive rate, AUROC and calibration
    error from P(yes), confusion matrix and a table per group. Balanced accuracy and AUROC
    come with 95% intervals (a stratified bootstrap over the rows, fixed seed), and so does
    the judge's difference from each baseline on the same resampled rows.

    Without --data: the built-in dev sets of both tasks. Hallucination rows: context
    (list or string), claim, label (true = hallucinated); toxicity rows: text, optional
    input, label (true = toxic), optional severity; any row may have a group. Item rows
    (input, output, context, label: a score or a class) are scored whole by the scorer and
    reported as AUROC and correlation of its score with the label.
    """
    from localjudge.quality.labelled import DataError, measure, report_text

    if data is not None and task is None:
        raise click.UsageError("--data needs --task (hallucination, toxicity, rubric:FILE, ...)")
    _check_extraction(task, statements, extraction)
    sources = _sources(data, task)
    _check_windows([resolved for _, resolved, *_ in sources], windows, window_tokens)
    from localjudge.quality.items import ItemReport, ItemRow, measure_items

    if (plot or html_path) and isinstance(sources[0][2][0], ItemRow):
        raise click.UsageError("--plot and --html draw verdict rows; item rows report numbers only")
    if statements and isinstance(sources[0][2][0], ItemRow):
        raise click.UsageError(
            "--statements splits verdict rows; item rows are scored by the scorer, which "
            "splits each output itself"
        )
    sources = [(name, _shaped(resolved, extraction), *rest) for name, resolved, *rest in sources]
    reports = []
    with load_judge(model, slots, gpu_layers, n_ctx, threads) as judge:
        for name, resolved, rows, bad_rows, source in sources:
            cut, origin = _threshold(judge, resolved, threshold)
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
                        resolved,
                        source=str(source),
                        bad_rows=bad_rows,
                        threshold=cut,
                        threshold_source=origin,
                        reasons=reasons,
                        resamples=resamples,
                        statements=statements,
                        windows=windows,
                        window_tokens=window_tokens,
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


def _sources(data: str | None, task: str | None) -> list[tuple]:
    """(name, its verdict task, rows, unreadable rows, source) to measure: the rows of
    `data`, else the dev set of `task` or of every task that has one. Each task is resolved
    once ("rubric:FILE" reads its file)."""
    from localjudge.quality.labelled import DataError, as_task, devset_rows
    from localjudge.quality.rows import read_rows
    from localjudge.scorers import task_names, verdict_task

    try:
        if data is not None:
            resolved = as_task(task)
            return [(task, resolved, *read_rows(data, resolved), data)]
        names = [task] if task else [n for n in task_names() if verdict_task(n).devset]
        sources = []
        for name in names:
            resolved = as_task(name)
            sources.append((name, resolved, devset_rows(resolved), [], "dev set"))
        return sources
    except DataError as error:
        raise click.ClickException(str(error)) from None


def _threshold(judge, task, given: float | None) -> tuple[float, str]:
    """The P(yes) threshold for a task's verdicts (a `VerdictTask`) and where it came from."""
    if given is not None:
        return given, "given"
    return judge.verdict_threshold(task.prompt_version) or (0.5, "default")


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
@statements_option
@extraction_option
@windows_options("Hallucination rows")
@click.option("--dry-run", is_flag=True, help="Report, but store nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def calibrate(
    model, gpu_layers, n_ctx, threads, slots, data, task, max_fpr, folds, statements,
    extraction, windows, window_tokens, dry_run, as_json,
):  # fmt: skip
    """Choose the judge's P(yes) threshold on labelled rows (maximising balanced accuracy,
    or with --max-fpr the true-positive rate within that false-positive rate), with
    cross-validation for honest before/after figures, and store it with the model for
    this prompt version: scorers on this model then say yes exactly when P(yes) reaches it.
    Hallucination rows are judged in evidence windows as the scorer judges them (its
    default top-k and window size unless --windows and --window-tokens say otherwise), and
    the stored record says which.
    """
    import datetime

    from localjudge.model_registry import save_calibration
    from localjudge.quality.calibration import calibrate_rows
    from localjudge.quality.labelled import DataError, as_task
    from localjudge.quality.rows import read_rows

    _check_extraction(task, statements, extraction)
    try:
        task = _shaped(as_task(task), extraction)
        _check_windows([task], windows, window_tokens)
        rows, bad_rows = read_rows(data, task)
        with load_judge(model, slots, gpu_layers, n_ctx, threads) as judge:
            run = calibrate_rows(
                judge, rows, task, source=Path(data).name, unreadable=len(bad_rows),
                folds=folds, max_fpr=max_fpr, statements=statements, windows=windows,
                window_tokens=window_tokens,
            )  # fmt: skip
            meaningful = judge.meaningful
    except DataError as error:
        raise click.ClickException(str(error)) from None
    record = run.record(datetime.date.today().isoformat())
    if not dry_run:
        save_calibration(run.model, run.prompt_version, record)
    if as_json:
        click.echo(json.dumps(run.to_dict(record, stored=not dry_run), indent=2))
        return
    click.echo(run.text(stored=not dry_run))
    if not meaningful:
        click.echo(BASE_MODEL_WARNING.format(name=run.model))
