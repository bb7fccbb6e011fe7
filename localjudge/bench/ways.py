"""Our ways: the scheduler (one slot, N slots cold or warm, lazy or no reasons, verdicts
only, evidence windows) and the whole hallucination scorer; peak memory and validity."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import jsonschema
import psutil

from localjudge.bench.replay import EngineReplay
from localjudge.bench.results import WayResult, median
from localjudge.grammar import load_schema
from localjudge.judge import Judge
from localjudge.prompts import PromptParts, claim_verdict_prompt
from localjudge.scheduler.stats import SchedulerStats
from localjudge.scorers.evidence import claim_contexts, plan_windows

SCHEMA = "hallucination_verdict"


class PeakRss:
    """Samples this process's resident memory in the background; `peak` in MiB."""

    def __init__(self, interval: float = 0.02) -> None:
        self._process = psutil.Process()
        self._interval = interval
        self._stop = threading.Event()
        self.peak = 0

    def __enter__(self) -> PeakRss:
        self.peak = self._process.memory_info().rss
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.peak = max(self.peak, self._process.memory_info().rss)

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._process.memory_info().rss)

    @property
    def peak_mib(self) -> float:
        return self.peak / (1 << 20)


def is_valid(text: str, schema: dict) -> bool:
    try:
        jsonschema.validate(json.loads(text), schema)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


def verdict_prompt(context: list[str], claim: str) -> PromptParts:
    """The hallucination prompt as every judge is asked it in the verdict grammar (`SCHEMA`):
    bench times that one question, also on a chat judge, which the scorers ask whether the
    context supports the claim (a prompt of the same shape and about the same length)."""
    return replace(claim_verdict_prompt(context, claim), chat=None)


def claim_prompts(judge: Judge, items) -> list[tuple[str, str]]:
    return [
        judge.split_prompt(verdict_prompt(context, claim))
        for context, claims in items
        for claim in claims
    ]


def _window_prompts(judge: Judge, items, windows: int | str) -> list[list[tuple[str, str]]]:
    """Each claim's prompts against its evidence windows, as the hallucination scorer
    judges it (`plan_windows`): one list per claim."""
    out = []
    for context, claims in items:
        cut, chosen, _ = plan_windows(judge, context, claims, mode=windows)
        for claim, mine in zip(claims, chosen, strict=True):
            texts = claim_contexts(context, cut, mine)
            out.append([judge.split_prompt(verdict_prompt(t, claim)) for t in texts])
    return out


def round_shares(stats: SchedulerStats, replay: EngineReplay) -> dict[str, float | None]:
    """One round's shares of the bare engine's replay of it: its prompt-only steps' tokens/s
    over the replay's prefill of that prompt phase in its shape ("prefill") and over the
    replay's prefill of the workload's first prompt alone ("prefill_alone"); for
    generation, the time the replay's steps took over the time the round's steps of the
    same batch sizes took (the same steps, in number and shape). None where the round had
    no such steps."""
    prefill = alone = None
    if stats.prompt_phase_seconds:
        ours = stats.prompt_phase_tokens_per_s
        prefill = ours / replay.prefill_tok_s if replay.prefill_tok_s else None
        alone = ours / replay.prefill_alone_tok_s if replay.prefill_alone_tok_s else None
    ours = sum(seconds for _, seconds in stats.generation_by_batch.values())
    bare = sum(
        seconds for n, (_, seconds) in replay.by_batch.items() if n in stats.generation_by_batch
    )
    return {"prefill": prefill, "prefill_alone": alone, "generation": bare / ours if ours else None}


def _measured(
    label: str,
    units: int,
    walls: list[float],
    valid: int,
    stats,
    peak_rss_mib: float,
    replays: list[tuple[SchedulerStats, EngineReplay]] = (),
) -> WayResult:
    """A way of ours from its rounds' wall times and the judge's counters over them
    (token counts per round), with the bare engine's replays of its rounds: (the round's
    counters, the replay)."""
    rounds = len(walls)
    engine = EngineReplay(0.0, {})  # all replays' generation steps together
    for _, replay in replays:
        for n, (steps, seconds) in replay.by_batch.items():
            steps_before, seconds_before = engine.by_batch.get(n, (0, 0.0))
            engine.by_batch[n] = (steps_before + steps, seconds_before + seconds)
    return WayResult(
        way=label,
        claims=units,
        wall_s=median(walls),
        prompt_tokens_evaluated=stats.num_prompt_tokens // rounds,
        tokens_generated=stats.num_generated_tokens // rounds,
        peak_rss_mib=peak_rss_mib,
        valid=valid,
        gen_phase_tok_s=stats.generation_tokens_per_s,
        tokens_forced=stats.num_forced_tokens // rounds,
        prefill_tok_s=stats.prefill_tokens_per_s,
        prompt_phase_tok_s=stats.prompt_phase_tokens_per_s,
        engine_busy=stats.decode_seconds / sum(walls) if sum(walls) else None,
        gen_tok_s_by_batch={
            n: stats.generation_tokens_per_s_at(n) for n in sorted(stats.generation_by_batch)
        },
        gen_steps_by_batch={
            n: steps for n, (steps, _) in sorted(stats.generation_by_batch.items())
        },
        engine_prefill_tok_s=(
            median([replay.prefill_tok_s for _, replay in replays]) if replays else None
        ),
        engine_tok_s_by_batch=engine.tok_s_by_batch(),
        engine_steps_by_batch={n: steps for n, (steps, _) in sorted(engine.by_batch.items())},
        engine_rounds=[round_shares(stats, replay) for stats, replay in replays],
        rounds=walls,
    )


def run_scheduler_way(
    model: str | Path,
    items,
    *,
    slots: int,
    threads: int | None,
    max_tokens: int,
    n_ctx: int,
    label: str,
    gpu_layers: int | None = None,
    reasons_for: frozenset[str] | None = None,
    rounds: int = 1,
    warm: bool = False,
    reference: Callable[[SchedulerStats], EngineReplay] | None = None,
    prefill_cells: int = 0,
    windows: int | str | None = None,
) -> WayResult:
    """Our scheduler on the workload's claims (`model`: a registry name keeps the entry's
    LoRA adapters); the median of `rounds` rounds, each on an idle judge (nothing kept
    between rounds: no prompt cache, no kept prompts). `warm`: as llama-server is measured,
    one warm-up round is not counted and the judge has its default options: the prompt
    cache keeps the prefixes that round evaluated in host memory, and kept prompts (one per
    slot) keep its requests' prompts in the KV cache while they fit. `reference`: called
    right after each round with its counters, while the judge idles: the bare engine
    replaying that round (in a process of its own: its memory is not the way's).
    `windows`: each claim judged against its evidence windows best first until one
    supports it (the way "e", as the scorer judges), a claim counting as valid when all
    its replies are."""
    schema = load_schema(SCHEMA)
    with (
        PeakRss() as rss,
        Judge.load(
            model,
            slots=slots,
            max_prefixes=len(items) + 1,
            n_ctx=n_ctx,
            n_threads=threads,
            n_gpu_layers=gpu_layers,
            prompt_cache_mib=None if warm else 0,  # None: the default
            keep_prompts=None if warm else 0,  # None: the default
            prefill_cells=prefill_cells,
        ) as judge,
    ):
        grammar = judge.grammar(SCHEMA)

        per_claim = (
            _window_prompts(judge, items, windows)
            if windows is not None
            else [[pair] for pair in claim_prompts(judge, items)]
        )

        def request(pair):
            prefix, suffix = pair
            return judge.request(
                suffix, grammar, prefix=prefix, max_tokens=max_tokens, reasons_for=reasons_for
            )

        def one_round() -> list[list]:
            """Each claim's outcomes: against its one prompt, or (windows) against its
            windows best first, all claims of a level in one batch, until one supports it,
            as the hallucination scorer judges."""
            outcomes: list[list] = [[] for _ in per_claim]
            pending, level = list(range(len(per_claim))), 0
            while pending:
                done = judge.generate_many([request(per_claim[c][level]) for c in pending])
                for c, outcome in zip(pending, done, strict=True):
                    outcomes[c].append(outcome)
                pending = [
                    c
                    for c, outcome in zip(pending, done, strict=True)
                    if level + 1 < len(per_claim[c])
                    and (isinstance(outcome, Exception) or outcome.value.get("verdict") != "no")
                ]
                level += 1
            return outcomes

        if warm:  # the warm-up round: not counted
            one_round()
        before = judge.runtime.stats
        walls, valid, replays = [], [], []
        for _ in range(rounds):
            round_before = judge.runtime.stats
            start = time.perf_counter()
            outcomes = one_round()
            walls.append(time.perf_counter() - start)
            if reference is not None:
                round_stats = judge.runtime.stats.since(round_before)
                replays.append((round_stats, reference(round_stats)))
            valid.append(
                sum(
                    all(not isinstance(o, Exception) and is_valid(o.text, schema) for o in mine)
                    for mine in outcomes
                )
            )
        stats = judge.runtime.stats.since(before)
    return _measured(label, len(per_claim), walls, min(valid), stats, rss.peak_mib, replays)


def run_scorer_way(
    model: str | Path,
    items,
    *,
    slots: int,
    threads: int | None,
    n_ctx: int,
    label: str,
    gpu_layers: int | None = None,
    claim_reasons: str = "all",
    rounds: int = 1,
    prefill_cells: int = 0,
) -> WayResult:
    """The whole hallucination scorer with its defaults (claims extracted as the judge's
    fitness allows: by the judge, or sentences for a verdicts-only judge; a verdict per
    claim; a judge-written reason) over items whose output states the workload's claims;
    the unit is the item. Nothing is kept between rounds (no prompt cache, no kept prompts)."""
    from localjudge.evals.runner import run_evals
    from localjudge.scorers import create_hallucination_scorer

    data = [{"output": " ".join(claims), "context": context} for context, claims in items]
    with (
        PeakRss() as rss,
        Judge.load(
            model,
            slots=slots,
            max_prefixes=2 * len(items) + 2,
            n_ctx=n_ctx,
            n_threads=threads,
            n_gpu_layers=gpu_layers,
            prompt_cache_mib=0,
            keep_prompts=0,
            prefill_cells=prefill_cells,
        ) as judge,
    ):
        scorer = create_hallucination_scorer(judge, claim_reasons=claim_reasons)
        walls, scored = [], []
        for _ in range(rounds):
            start = time.perf_counter()
            result = run_evals(data, [scorer])
            walls.append(time.perf_counter() - start)
            scored.append(sum(1 for item in result.items if item.ok))
        stats = judge.runtime.stats
    # valid: the items scored in the worst round (an error is not a score)
    return _measured(label, len(data), walls, min(scored), stats, rss.peak_mib)
