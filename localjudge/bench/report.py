"""A bench run as JSON and as console tables."""

from __future__ import annotations

from localjudge.bench.results import RATIO_PAIRS, WorkloadReport


def reports_to_json(reports: list[WorkloadReport], *, model: str, meta: dict) -> dict:
    return {
        "model": model,
        **meta,
        "workloads": [
            {
                "workload": r.workload,
                "ways": [w.to_dict() for w in r.ways],
                **{f"ratio_{a}_over_{b}": r.ratio(a, b) for a, b in RATIO_PAIRS},
                "engine_prompt_tokens": r.engine_prompt_tokens,
                "llama_batched_bench": r.batched_bench and r.batched_bench.to_dict(),
            }
            for r in reports
        ],
    }


def print_reports(reports: list[WorkloadReport], *, model: str, threads: int) -> None:
    """Each workload as a console table, its ratios, and each way against the bare engine."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    for report in reports:
        table = Table(title=f"{report.workload} workload, {model}, {threads} threads")
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
