"""`run_bench`: the chosen ways on the chosen workloads, ours first."""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path

from localjudge.bench.external import (
    check_against_batched_bench,
    run_llama_server_way,
    run_outlines_way,
)
from localjudge.bench.replay import (
    EngineReplay,
    bare_engine_replay_apart,
    prompt_phase_parts,
    replayed_contexts,
)
from localjudge.bench.results import WorkloadReport
from localjudge.bench.ways import claim_prompts, run_scheduler_way, run_scorer_way
from localjudge.bench.workloads import workload_items
from localjudge.judge import Judge
from localjudge.model_registry import resolve
from localjudge.scheduler.stats import SchedulerStats
from localjudge.scorers.evidence import DEFAULT_TOP_K


def run_bench(
    model: str | None = None,
    *,
    slots: int = 32,
    threads: int | None = None,
    claims: int = 32,
    workloads: tuple[str, ...] = ("single", "multi"),
    ways: str = "abc",
    max_tokens: int = 48,
    n_ctx: int = 8192,
    gpu_layers: int | None = None,
    llama_server: Path | None = None,
    llama_batched_bench: Path | None = None,
    rounds: int = 1,
    prefill_cells: int = 0,
    progress: Callable[[str], None] = lambda message: None,
) -> list[WorkloadReport]:
    """Run the chosen ways on the chosen workloads. Our ways run first and outlines' last,
    so memory or threads the baseline leaves behind cannot slow ours. `llama_batched_bench`:
    after our ways of each workload, llama-batched-bench and the bare engine in its shape,
    at the 3 batch sizes that took our generation steps the most time. `prefill_cells`: our
    ways' judges get a prefill context of that many cells (`Judge.load`)."""
    resolved = resolve(model)
    # our ways load the registry entry by name, so they apply its adapters as ways a and s do
    judge_model = resolved.name if resolved.entry is not None else resolved.path
    reports = [WorkloadReport(workload=name) for name in workloads]
    items_of = {
        name: workload_items("multi" if name == "scorer" else name, claims) for name in workloads
    }
    text_workloads = [w for w in workloads if w != "scorer"]
    texts_of: dict[str, list[str]] = {}  # each claim's whole prompt
    # each claim's (prefix, own) tokens, as the judge reads them, for the bare engine's
    # replays: the round's prompt phase in its shape, and the first claim's prompt alone
    tokens_of: dict[str, list[tuple[list[int], list[int]]]] = {}
    bare_prompt_of: dict[str, tuple[list[int], list[int]]] = {}
    contexts_of: dict[str, int] = {}  # the most contexts a cold round's prompt phase held
    if text_workloads:
        with Judge.load(
            resolved.path, slots=1, max_prefixes=2, n_ctx=2048, n_threads=threads
        ) as judge:
            for name in text_workloads:
                pairs = [
                    ("".join(prefix), own) for prefix, own in claim_prompts(judge, items_of[name])
                ]
                texts_of[name] = [prefix + own for prefix, own in pairs]
                prefix_tokens = {prefix: judge.tokenize(prefix) for prefix, _ in pairs}
                tokens_of[name] = [
                    (
                        prefix_tokens[prefix],
                        judge.engine.tokenize(
                            own, add_special=False, parse_special=judge.parse_special
                        ),
                    )
                    for prefix, own in pairs
                ]
                bare_prompt_of[name] = tokens_of[name][0]
    for report in reports:
        items = items_of[report.workload]
        if report.workload in bare_prompt_of:
            report.engine_prompt_tokens = sum(map(len, bare_prompt_of[report.workload]))
        if report.workload == "scorer":
            for way, mode in (("c", "all"), ("f", "flagged")):
                if way not in ways:
                    continue
                progress(f"scorer: ({way}) the hallucination scorer, claim_reasons={mode}")
                report.ways.append(
                    run_scorer_way(
                        judge_model,
                        items,
                        slots=slots,
                        threads=threads,
                        n_ctx=n_ctx,
                        label=f"{way}: scorer x{slots}" + (", flagged" if way == "f" else ""),
                        gpu_layers=gpu_layers,
                        claim_reasons=mode,
                        rounds=rounds,
                        prefill_cells=prefill_cells,
                    )
                )
                gc.collect()
            continue
        for way, num_slots, reasons_for in (
            ("c", slots, None),
            ("f", slots, frozenset({"yes"})),
            ("n", slots, frozenset()),
            ("w", slots, None),
            ("b", 1, None),
            ("v", slots, frozenset()),
            ("e", slots, frozenset()),
        ):
            if way not in ways:
                continue
            mode = {
                "f": ", warm, flagged",
                "n": ", warm, no reasons",
                "w": ", warm",
                "v": ", verdicts only",
                "e": f", verdicts only, evidence windows (the {DEFAULT_TOP_K} best)",
            }.get(way, "")
            label = f"{way}: scheduler x{num_slots}{mode}"
            progress(f"{report.workload}: ({way}) {label[3:]}; the bare engine after each round")

            def replay(
                stats: SchedulerStats, widest=num_slots, workload=report.workload, way=way
            ) -> EngineReplay:
                # the bare engine right after the round, so that both see the machine at
                # the same speed (a machine's speed drifts within minutes)
                parts = []
                if stats.prompt_phase_tokens:
                    parts = prompt_phase_parts(tokens_of[workload], stats.prompt_phase_tokens)
                if way == "c":
                    contexts_of[workload] = max(
                        contexts_of.get(workload, 1), replayed_contexts(parts)
                    )
                return bare_engine_replay_apart(
                    resolved.path,
                    *bare_prompt_of[workload],
                    {n: steps for n, (steps, _) in stats.generation_by_batch.items()},
                    parts=parts,
                    widest=widest,
                    max_tokens=max_tokens,
                    threads=threads,
                    gpu_layers=gpu_layers,
                    adapters=resolved.adapters,
                )

            result = run_scheduler_way(
                judge_model,
                items,
                slots=num_slots,
                threads=threads,
                max_tokens=max_tokens,
                n_ctx=n_ctx,
                label=label,
                gpu_layers=gpu_layers,
                reasons_for=reasons_for,
                rounds=rounds if way != "b" else 1,
                warm=way in "wfn",
                # the bare engine replays the whole-context prompts: not this way's shape
                reference=replay if way not in "ve" else None,
                prefill_cells=prefill_cells,
                windows=DEFAULT_TOP_K if way == "e" else None,
            )
            gc.collect()
            report.ways.append(result)
        if llama_batched_bench is not None and report.ways:
            seconds: dict[int, float] = {}  # n -> engine time of our ways' steps at n
            for result in report.ways:
                for n, steps in result.gen_steps_by_batch.items():
                    seconds[n] = seconds.get(n, 0.0) + n * steps / result.gen_tok_s_by_batch[n]
            sizes = sorted(seconds, key=seconds.__getitem__, reverse=True)[:3] or [slots]
            progress(f"{report.workload}: llama-batched-bench and the bare engine at {sizes}")
            report.batched_bench = check_against_batched_bench(
                llama_batched_bench,
                resolved.path,
                bare_prompt_of[report.workload][0],
                sizes,
                contexts=contexts_of.get(report.workload, 1),
                threads=threads,
                gpu_layers=gpu_layers,
                adapters=resolved.adapters,
            )
    if ("a" in ways or "s" in ways) and text_workloads:
        for report in reports:
            if report.workload == "scorer":
                continue
            if "s" in ways and llama_server is not None:
                progress(f"{report.workload}: (s) llama-server, {slots} slots")
                report.ways.append(
                    run_llama_server_way(
                        llama_server,
                        resolved.path,
                        texts_of[report.workload],
                        slots=slots,
                        threads=threads,
                        max_tokens=max_tokens,
                        n_ctx=n_ctx,
                        rounds=rounds,
                        gpu_layers=gpu_layers,
                        adapters=resolved.adapters,
                    )
                )
            if "a" in ways:
                progress(f"{report.workload}: (a) outlines, one claim at a time")
                report.ways.append(
                    run_outlines_way(
                        resolved.path,
                        texts_of[report.workload],
                        threads=threads,
                        max_tokens=max_tokens,
                        n_ctx=n_ctx,
                        gpu_layers=gpu_layers,
                        adapters=resolved.adapters,
                    )
                )
            gc.collect()
    for report in reports:
        report.ways.sort(key=lambda w: w.way)
    return reports
