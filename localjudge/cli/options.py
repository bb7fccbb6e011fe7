"""Options and helpers the commands share: how the judge is loaded, how scorers are
configured, exit codes, one-line errors."""

from __future__ import annotations

import click

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


def exit_with(code: int, message: str) -> None:
    click.echo(f"Error: {message}", err=True)
    raise click.exceptions.Exit(code)


def load_judge(model, slots=None, gpu_layers=None, n_ctx=None, threads=None):
    """The judge the command runs on (`LOCALJUDGE_ENGINE=fake`: the scripted fake judge)."""
    from localjudge.loading import load_judge as load

    return load(model, slots=slots, n_gpu_layers=gpu_layers, n_ctx=n_ctx, n_threads=threads)


def known_scorers() -> list[str]:
    from localjudge.scorers import scorer_names

    return scorer_names()


def _windows_value(ctx, param, value: str | None) -> str | int | None:
    """`--windows`: k, "all" or "off", checked as the scorer checks it."""
    from localjudge.scorers.evidence import windows_from_text

    if value is None:
        return None
    try:
        return windows_from_text(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


def windows_options(what: str, *, size_only: bool = False):
    """`--windows` and `--window-tokens`, the hallucination scorer's evidence window
    options, said of `what` ("hallucination", "Hallucination rows"); `size_only`: the size
    alone (`models add`)."""
    window_tokens = click.option(
        "--window-tokens",
        type=click.IntRange(min=1),
        default=None,
        help=f"{what}: evidence windows' size in tokens (default: "
        + ("" if size_only else "the judge's registry entry, else ")
        + "as much of the context as fits).",
    )
    windows = click.option(
        "--windows",
        default=None,
        callback=_windows_value,
        help=f"{what}: evidence windows judged per claim in a long context: k best by BM25 "
        '(default 4), "all" (at most 32), or "off" (the whole context at once).',
    )

    def decorate(function):
        function = window_tokens(function)
        return function if size_only else windows(function)

    return decorate


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
                type=click.Choice(["auto", "judge", "sentences", "sentence-claims"]),
                default=None,
                help="hallucination: how claims are found (default auto; sentence-claims: "
                "sentences less questions and courtesies).",
            ),
            windows_options("hallucination"),
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


def scorer_settings(
    names,
    *,
    scale,
    reason_mode,
    score_mode,
    extraction,
    claim_reasons=None,
    context=None,
    windows=None,
    window_tokens=None,
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
        "windows": windows,
        "window_tokens": window_tokens,
    }
    flags = {
        "score_mode": "--score-mode",
        "extraction": "--extraction",
        "context": "--context",
        "windows": "--windows",
        "window_tokens": "--window-tokens",
    }
    for key, flag in flags.items():
        if settings[key] is not None and not any(key in scorer_options(n) for n in names):
            raise click.UsageError(f"{flag} does not apply to {', '.join(names)}")
    return settings


def read_contexts(contexts: tuple[str, ...], context_files: tuple[str, ...]) -> list[str]:
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
