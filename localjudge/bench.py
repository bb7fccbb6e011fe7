"""`localjudge bench`: judge workloads run several ways in one run, reported as ratios.

(a) outlines' own llama.cpp integration (`outlines.from_llamacpp` + `outlines.Generator`),
    one claim at a time: the path a user would write with the same packages;
(b) our scheduler with one slot;
(c) our scheduler with N slots, cold: no prompt cache, no kept prompts (each round starts
    from an empty KV cache);
(w) the judge with its default options, measured as (s) is, warm: one warm-up round not
    counted, its prompt cache and kept prompts keeping what that round evaluated
    (llama-server keeps it in its slots and its own prompt cache);
(f) (w) with verdict-first lazy reasons: only "yes" verdicts are explained;
(n) (w) with no reason at all: the verdict alone (the ceiling of lazy reasons);
(s) llama.cpp's own `llama-server` (given with --llama-server), tuned: N parallel slots,
    unified KV cache, full SWA cache, prompt caching, its own JSON-schema grammar, N
    requests in flight; one warm-up round is not counted.
Every way gets the same prompt texts, schema, token budget and greedy decoding. Right after
each measured round of a way of ours, the bare engine (`LlamaEngine` without the scheduler)
replays it: the round's prompt phase in its shape (its contexts, each after the shared
instructions, and its claims), the workload's first prompt alone, then the round's
generation steps, as many at each batch size. The way reports its prompt phase and its
generation steps as shares of the bare engine's, as llama-batched-bench would count them:
the median over rounds of each round's share of its own replay. Workloads:
`single` (one context, many claims), `multi` (a few contexts), `rag` (24+ long contexts of
~1,500 tokens, 6 claims each) and `scorer` (the whole hallucination scorer, with its
defaults, over items: claims, verdicts and a reason; ways c and f; its unit is the item).
"""

from __future__ import annotations

import gc
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import jsonschema
import psutil

from localjudge.bench_workloads import workload_items
from localjudge.grammar import load_schema
from localjudge.judge import Judge
from localjudge.prompts import claim_verdict_prompt
from localjudge.registry import resolve
from localjudge.scheduler.stats import SchedulerStats
from localjudge.scorers.evidence import DEFAULT_TOP_K, claim_contexts, plan_windows

SCHEMA = "hallucination_verdict"
# the ways compared, (a) over (b), in the CLI's table and the JSON report
RATIO_PAIRS = (("c", "a"), ("c", "b"), ("c", "s"), ("w", "s"), ("f", "s"), ("n", "s"), ("f", "w"))


@dataclass
class WayResult:
    """One way of running one workload."""

    way: str  # "a: outlines", "b: scheduler x1", "c: scheduler xN"
    claims: int
    wall_s: float
    prompt_tokens_evaluated: int
    tokens_generated: int
    peak_rss_mib: float
    valid: int  # replies that parse and match the schema
    gen_phase_tok_s: float | None = None  # output tokens/s in steps without prompt tokens
    tokens_forced: int | None = None  # output tokens appended by jump-forward (no logits)
    prefill_tok_s: float | None = None  # prompt tokens/s in steps that evaluated prompts
    prompt_phase_tok_s: float | None = None  # prompt tokens/s in steps of prompt tokens only
    # the share of the rounds' wall time spent in the engine's decode calls (the rest is
    # the scheduler's own work between them: grammar masks, choices, planning)
    engine_busy: float | None = None
    # n -> output tokens/s of generation steps in which n sequences fed one token each
    gen_tok_s_by_batch: dict[int, float] = field(default_factory=dict)
    gen_steps_by_batch: dict[int, int] = field(default_factory=dict)  # n -> how many such steps
    # the bare engine replaying each measured round right after it (`bare_engine_replay`):
    # its prefill (median over rounds), its generation steps (all replays together), and
    # each round's shares of it: {"prefill": ..., "generation": ...}
    engine_prefill_tok_s: float | None = None
    engine_tok_s_by_batch: dict[int, float] = field(default_factory=dict)
    engine_steps_by_batch: dict[int, int] = field(default_factory=dict)
    engine_rounds: list[dict[str, float | None]] = field(default_factory=list)
    rounds: list[float] = field(default_factory=list)  # wall seconds of each measured round
    errors: list[str] = field(default_factory=list)  # the first few failed replies

    @property
    def claims_per_s(self) -> float:
        return self.claims / self.wall_s if self.wall_s else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_generated / self.wall_s if self.wall_s else 0.0

    @property
    def share_valid(self) -> float:
        return self.valid / self.claims if self.claims else 0.0

    def against_engine(
        self, key: str | None = None
    ) -> tuple[float | None, float | None] | float | None:
        """(prefill, generation) as shares of the bare engine's in the same shapes: the
        median over rounds of each round against its replay, measured right after it (see
        `round_shares`). None where there is nothing to compare. With `key`, that share
        alone ("prefill_alone": against the workload's first prompt alone)."""
        medians = {
            k: _median(shares)
            if (shares := [r[k] for r in self.engine_rounds if r.get(k)])
            else None
            for k in ("prefill", "prefill_alone", "generation")
        }
        return medians[key] if key else (medians["prefill"], medians["generation"])

    def to_dict(self) -> dict:
        prefill, generation = self.against_engine()
        return asdict(self) | {
            "against_engine": {
                "prefill": prefill,
                "prefill_alone": self.against_engine("prefill_alone"),
                "generation": generation,
            },
            "claims_per_s": round(self.claims_per_s, 3),
            "tokens_per_s": round(self.tokens_per_s, 2),
            "share_valid": round(self.share_valid, 4),
        }


@dataclass
class WorkloadReport:
    workload: str
    ways: list[WayResult] = field(default_factory=list)
    engine_prompt_tokens: int = 0  # the bare engine's prompt: the workload's first claim's
    batched_bench: BatchedBenchCheck | None = None  # with --llama-batched-bench

    def ratio(self, a: str, b: str) -> float | None:
        by_key = {w.way[0]: w for w in self.ways}
        if a in by_key and b in by_key and by_key[b].claims_per_s:
            return by_key[a].claims_per_s / by_key[b].claims_per_s
        return None


class _PeakRss:
    """Samples this process's resident memory in the background; `peak` in MiB."""

    def __init__(self, interval: float = 0.02) -> None:
        self._process = psutil.Process()
        self._interval = interval
        self._stop = threading.Event()
        self.peak = 0

    def __enter__(self) -> _PeakRss:
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


def _is_valid(text: str, schema: dict) -> bool:
    try:
        jsonschema.validate(json.loads(text), schema)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


def _prompts(judge: Judge, items) -> list[tuple[str, str]]:
    return [
        judge.split_prompt(claim_verdict_prompt(context, claim))
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
            out.append([judge.split_prompt(claim_verdict_prompt(t, claim)) for t in texts])
    return out


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


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
        wall_s=_median(walls),
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
            _median([replay.prefill_tok_s for _, replay in replays]) if replays else None
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
    `windows`: each claim judged against its evidence windows (the way "e"), a claim
    counting as valid when all its replies are."""
    schema = load_schema(SCHEMA)
    with (
        _PeakRss() as rss,
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
            else [[pair] for pair in _prompts(judge, items)]
        )

        def round_requests():
            return [
                judge.request(s, grammar, prefix=p, max_tokens=max_tokens, reasons_for=reasons_for)
                for pairs in per_claim
                for p, s in pairs
            ]

        if warm:  # the warm-up round: not counted
            judge.generate_many(round_requests())
        before = judge.runtime.stats
        walls, valid, replays = [], [], []
        for _ in range(rounds):
            requests = round_requests()
            round_before = judge.runtime.stats
            start = time.perf_counter()
            outcomes = judge.generate_many(requests)
            walls.append(time.perf_counter() - start)
            if reference is not None:
                round_stats = judge.runtime.stats.since(round_before)
                replays.append((round_stats, reference(round_stats)))
            good = iter(
                not isinstance(o, Exception) and _is_valid(o.text, schema) for o in outcomes
            )
            valid.append(sum(all([next(good) for _ in pairs]) for pairs in per_claim))
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
    from localjudge.evals.run import run_evals
    from localjudge.scorers import create_hallucination_scorer

    data = [{"output": " ".join(claims), "context": context} for context, claims in items]
    with (
        _PeakRss() as rss,
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


def server_ctx(slots: int, prompts: list[str], max_tokens: int, n_ctx: int) -> int:
    """KV cells for llama-server: every slot keeps its own prompt cached, so room for all
    of them (ours admits by the cells it has instead); ~3 characters a token, generously."""
    return max(n_ctx, slots * (max(len(p) for p in prompts) // 3 + max_tokens + 64))


def _llama_tool_options(
    threads: int | None, gpu_layers: int | None, adapters: tuple[tuple[Path, float], ...]
) -> list[str]:
    """The options that give a llama.cpp tool (llama-server, llama-batched-bench) our
    engine's settings: the unified KV cache with the full SWA cache, micro-batches of 256,
    the judge's threads, GPU layers and LoRA adapters (as our engine applies them)."""
    from localjudge.engine.llama import default_threads

    options = ["-ub", "256", "-kvu", "--swa-full", "-t", str(threads or default_threads())]
    if gpu_layers is not None:
        options += ["-ngl", str(gpu_layers)]
    if adapters:
        options += ["--lora-scaled", ",".join(f"{path}:{scale:g}" for path, scale in adapters)]
    return options


def run_llama_server_way(
    binary: Path,
    model_path: Path,
    prompts: list[str],
    *,
    slots: int,
    threads: int | None,
    max_tokens: int,
    n_ctx: int,
    rounds: int = 1,
    gpu_layers: int | None = None,
    adapters: tuple[tuple[Path, float], ...] = (),
) -> WayResult:
    """llama.cpp's own server, tuned as its users would: `slots` parallel slots over one
    unified KV cache with the full SWA cache (so prompt caching works on Gemma 3), prompt
    caching on, its JSON-schema grammar, `slots` requests in flight. One warm-up round
    (not counted), then the median of `rounds` rounds."""
    import socket
    import subprocess
    import tempfile
    import urllib.error
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    schema = load_schema(SCHEMA)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [
        str(binary),
        "-m", str(model_path),
        "--host", "127.0.0.1",
        "--port", str(port),
        "-np", str(slots),
        "-c", str(server_ctx(slots, prompts, max_tokens, n_ctx)),
        "--no-webui",
    ]  # fmt: skip
    command += _llama_tool_options(threads, gpu_layers, adapters)
    log = tempfile.TemporaryFile()  # noqa: SIM115 (closed below); a file never blocks the server
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)
    base = f"http://127.0.0.1:{port}"

    def post(prompt: str) -> dict:
        body = {
            "prompt": prompt,
            "n_predict": max_tokens,
            "temperature": 0.0,
            "json_schema": schema,
            "cache_prompt": True,
        }
        request = urllib.request.Request(
            f"{base}/completion",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=1800) as reply:
                return json.loads(reply.read())
        except urllib.error.HTTPError as error:  # counted as an invalid reply, kept on record
            return {"error": f"HTTP {error.code}: {error.read().decode(errors='replace')[:300]}"}

    try:
        deadline = time.monotonic() + 300
        while True:  # wait for the model to load
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=5) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                error = log.read().decode(errors="replace")[-2000:]
                raise RuntimeError(f"llama-server did not start: {error}")
            time.sleep(0.5)
        with ThreadPoolExecutor(slots) as pool, _PeakRss() as rss:
            list(pool.map(post, prompts))  # warm-up: not counted
            walls, valid, evaluated, generated, errors = [], [], 0, 0, []
            for _ in range(rounds):
                start = time.perf_counter()
                replies = list(pool.map(post, prompts))
                walls.append(time.perf_counter() - start)
                valid.append(sum(_is_valid(r.get("content", ""), schema) for r in replies))
                errors += [r["error"] for r in replies if "error" in r]
                evaluated += sum(r.get("timings", {}).get("prompt_n", 0) for r in replies)
                generated += sum(r.get("timings", {}).get("predicted_n", 0) for r in replies)
        server_rss = psutil.Process(server.pid).memory_info().rss / (1 << 20)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
    del rss
    return WayResult(
        way=f"s: llama-server -np {slots}",
        claims=len(prompts),
        wall_s=_median(walls),
        prompt_tokens_evaluated=evaluated // rounds,
        tokens_generated=generated // rounds,
        peak_rss_mib=server_rss,
        valid=min(valid),
        rounds=walls,
        errors=errors[:3],
    )


def run_outlines_way(
    model_path: Path,
    prompts: list[str],
    *,
    threads: int | None,
    max_tokens: int,
    n_ctx: int,
    gpu_layers: int | None = None,
    adapters: tuple[tuple[Path, float], ...] = (),
) -> WayResult:
    """The baseline: outlines' llama.cpp integration, one claim at a time, greedy (with the
    judge's LoRA adapter: llama-cpp-python's `Llama` takes one)."""
    import outlines
    from outlines.types import JsonSchema

    from localjudge.engine.llama import open_llama

    schema = load_schema(SCHEMA)
    with _PeakRss() as rss:
        llm = open_llama(
            model_path,
            n_ctx=n_ctx,
            n_threads=threads,
            n_gpu_layers=gpu_layers,
            adapter=adapters[0] if adapters else None,
        )
        try:
            generator = outlines.Generator(
                outlines.from_llamacpp(llm, chat_mode=False), JsonSchema(json.dumps(schema))
            )
            evaluated = generated = valid = 0
            start = time.perf_counter()
            for prompt in prompts:
                text = generator(prompt, max_tokens=max_tokens, temperature=0.0)
                evaluated += len(
                    llm.tokenize(prompt.encode("utf-8"), add_bos=True)
                )  # outlines resets the cache each call
                generated += len(llm.tokenize(text.encode("utf-8"), add_bos=False))
                valid += _is_valid(text, schema)
            wall = time.perf_counter() - start
        finally:
            llm.close()
    return WayResult(
        way="a: outlines 1-by-1",
        claims=len(prompts),
        wall_s=wall,
        prompt_tokens_evaluated=evaluated,
        tokens_generated=generated,
        peak_rss_mib=rss.peak_mib,
        valid=valid,
    )


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
                pairs = [("".join(prefix), own) for prefix, own in _prompts(judge, items_of[name])]
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
                # the same speed (this VM's drifts by 20% within minutes)
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


@dataclass
class EngineReplay:
    """What the bare engine measured replaying one round of a way."""

    prefill_tok_s: float  # the round's prompt phase, in its shape (see `bare_engine_replay`)
    by_batch: dict[int, tuple[int, float]]  # n -> (steps, seconds) of its generation steps
    # the workload's first prefix alone from position 0, then claims after it
    prefill_alone_tok_s: float | None = None

    def tok_s_by_batch(self) -> dict[int, float]:
        """n -> output tokens/s of its generation steps at n."""
        return {n: n * steps / seconds for n, (steps, seconds) in sorted(self.by_batch.items())}


@dataclass(frozen=True)
class PromptPart:
    """One sequence's prompt tokens in a replayed prompt phase: `tokens` at positions
    `start`, `start + 1`, ... of sequence `seq`, which first gets a copy of the cells of
    `parent`'s positions [0, start) (None: from position 0, no parent)."""

    seq: int
    parent: int | None
    start: int
    tokens: tuple[int, ...]
    prefix: bool  # a shared prefix (instructions, a context), not a claim's own prompt


def prompt_phase_parts(
    pairs: list[tuple[list[int], list[int]]], num_tokens: int
) -> list[PromptPart]:
    """The prompt phase of a round, in its shape, for the bare engine to replay: `pairs`
    are the round's prompts as (prefix, own) tokens, in the order requested. As the
    scheduler does, the prefixes' common part (the instructions) is evaluated once, each
    distinct prefix after it in a sequence of its own, then the claims' own prompts each
    after its prefix, prefixes before claims; so that the tokens of each attend over what
    ours did, with the other contexts' cells in the cache. The pairs are taken in order
    until their tokens reach `num_tokens` (the round's prompt-phase tokens), and the last
    part is cut so that exactly `num_tokens` are evaluated."""
    distinct = list(dict.fromkeys(tuple(prefix) for prefix, _ in pairs))
    shared = len(os.path.commonprefix(distinct))  # element by element, any sequences
    prefixes: list[PromptPart] = []
    owns: list[PromptPart] = []
    seq_of: dict[tuple[int, ...], int] = {}
    total = 0
    for prefix, own in pairs:
        if total >= num_tokens:
            break
        key = tuple(prefix)
        if not prefixes:  # the common part, from position 0
            prefixes.append(PromptPart(0, None, 0, key[:shared], True))
            total += shared
        if key not in seq_of:
            seq_of[key] = 0
            if len(key) > shared:  # a context after the instructions
                seq_of[key] = len(prefixes)
                prefixes.append(PromptPart(len(prefixes), 0, shared, key[shared:], True))
                total += len(key) - shared
        owns.append(PromptPart(-1, seq_of[key], len(key), tuple(own), False))
        total += len(own)
    parts, left = [], num_tokens
    for seq, part in enumerate(prefixes + owns):  # the claims' sequences follow the prefixes'
        if left <= 0:
            break
        parts.append(replace(part, seq=seq, tokens=part.tokens[:left]))
        left -= len(parts[-1].tokens)
    return [p for p in parts if p.tokens]


def replayed_contexts(parts: list[PromptPart]) -> int:
    """How many distinct prefixes (contexts) a replayed prompt phase evaluates."""
    prefixes = sum(part.prefix for part in parts)
    return prefixes - 1 if prefixes > 1 else prefixes


def _replay_prompt(engine, parts: list[PromptPart], n_batch: int) -> float:
    """Evaluate `parts` in `n_batch`-token steps, packed in order as the scheduler packs its
    steps: a part whose parent is not complete yet starts a new step. Engine seconds."""
    from localjudge.engine import BatchToken, SeqCopy, StepPlan

    done: set[int] = set()  # sequences whose every token has been evaluated
    ending: list[int] = []  # sequences whose last token is in `plan`
    seconds, plan = 0.0, StepPlan()

    def flush() -> None:
        nonlocal seconds, plan
        if plan.tokens or plan.copies:
            seconds += engine.execute(plan).seconds
        done.update(ending)
        ending.clear()
        plan = StepPlan()

    for part in parts:
        if part.parent is not None:
            if part.parent not in done:
                flush()
            plan.copies.append(SeqCopy(part.parent, part.seq, 0, part.start))
        for i, token in enumerate(part.tokens, start=part.start):
            plan.tokens.append(BatchToken(token, i, part.seq, False))
            if len(plan.tokens) == n_batch:
                if i == part.start + len(part.tokens) - 1:
                    ending.append(part.seq)
                flush()
        if plan.tokens:  # its last token is in the step being packed
            ending.append(part.seq)
    flush()
    return seconds


def bare_engine_replay(
    model_path: Path,
    tokens: list[int],
    own_tokens: list[int],
    steps_by_batch: dict[int, int],
    *,
    widest: int,
    max_tokens: int,
    threads: int | None,
    gpu_layers: int | None = None,
    adapters: tuple[tuple[Path, float], ...] = (),
    parts: list[PromptPart] = (),
) -> EngineReplay:
    """The bare engine (`LlamaEngine`, no scheduler) doing what one round of ours did, as
    llama-batched-bench counts it. The prompt phase: `parts` (`prompt_phase_parts`: the
    round's own, in its shape) in `n_batch` chunks, without logits; its rate is
    `prefill_tok_s`. Then, from an empty cache, the workload's first prompt alone: `tokens`
    (a prefix: instructions and context) decoded once from position 0 in `n_batch` chunks
    and copied to the widest batch's sequences, each of which evaluates `own_tokens` (a
    claim's own prompt) after it in `n_batch` chunks without logits (the head follows, as
    in ours); its rate is `prefill_alone_tok_s` (and `prefill_tok_s` too, when no `parts`
    are given). Then the round's generation steps on those sequences: for each batch size
    n, `steps_by_batch[n]` steps in which n sequences feed one token each with logits, a
    sequence going back to the end of its prompt after `max_tokens` outputs, as a request
    of ours ends within its budget. `widest`: the most sequences the prompt is copied to (at
    least the widest batch)."""
    from localjudge.engine import BatchToken, EngineConfig, LlamaEngine, SeqTrim, StepPlan

    widest = max([widest, *steps_by_batch])  # a round may have had no generation steps
    prompt_len = len(tokens) + len(own_tokens)
    config = EngineConfig(
        n_ctx=max(
            len(tokens) + widest * (len(own_tokens) + max_tokens + 1),
            sum(len(part.tokens) for part in parts),
        )
        + 256,
        n_seq_max=max(widest + 1, len(parts)),
        n_threads=threads,
        n_gpu_layers=gpu_layers,
        adapters=adapters,
    )
    with LlamaEngine(model_path, config) as engine:
        phase_tok_s = None
        if parts:
            seconds = _replay_prompt(engine, parts, config.n_batch)
            phase_tok_s = sum(len(part.tokens) for part in parts) / seconds
            engine.clear()
        shared = widest
        alone = [PromptPart(shared, None, 0, tuple(tokens), True)] + [
            PromptPart(seq, shared, len(tokens), tuple(own_tokens), False) for seq in range(widest)
        ]
        alone_tok_s = sum(map(len, (tokens, *[own_tokens] * widest))) / _replay_prompt(
            engine, alone, config.n_batch
        )
        token = engine.tokenize(" the", add_special=False)[0]
        positions = [prompt_len] * widest

        def step(n_seqs: int) -> float:
            plan = StepPlan()
            for seq in range(n_seqs):
                if positions[seq] == prompt_len + max_tokens:  # the budget is spent
                    plan.trims.append(SeqTrim(seq, prompt_len))
                    positions[seq] = prompt_len
                plan.tokens.append(BatchToken(token, positions[seq], seq, True))
                positions[seq] += 1
            return engine.execute(plan).seconds

        step(widest)  # a warm-up, not counted
        by_batch = {}
        for n_seqs, steps in sorted(steps_by_batch.items(), reverse=True):
            by_batch[n_seqs] = (steps, sum(step(n_seqs) for _ in range(steps)))
    return EngineReplay(phase_tok_s or alone_tok_s, by_batch, alone_tok_s)


def bare_engine_replay_apart(
    model_path: Path,
    tokens: list[int],
    own_tokens: list[int],
    steps_by_batch: dict[int, int],
    *,
    adapters: tuple[tuple[Path, float], ...] = (),
    parts: list[PromptPart] = (),
    **options,
) -> EngineReplay:
    """`bare_engine_replay` in a Python process of its own, so that its memory (which the
    allocator may keep after the engine closes) is not counted in a way's peak RSS.
    `options`: its other keyword arguments."""
    import subprocess
    import sys

    call = {
        "model_path": str(model_path),
        "tokens": tokens,
        "own_tokens": own_tokens,
        "steps_by_batch": sorted(steps_by_batch.items()),
        "adapters": [(str(path), scale) for path, scale in adapters],
        "parts": [asdict(part) for part in parts],
        "options": options,
    }
    run = subprocess.run(
        [sys.executable, "-c", "from localjudge.bench import _replay_main; _replay_main()"],
        input=json.dumps(call),
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if run.returncode != 0:
        raise RuntimeError(f"the bare engine's replay failed: {run.stderr[-1000:]}")
    result = json.loads(run.stdout.splitlines()[-1])
    by_batch = {int(n): (steps, seconds) for n, (steps, seconds) in result["by_batch"].items()}
    return EngineReplay(result["prefill_tok_s"], by_batch, result["prefill_alone_tok_s"])


def _replay_main() -> None:
    """The child process of `bare_engine_replay_apart`: the call as JSON on stdin, the
    replay as JSON on the last line of stdout."""
    import sys

    call = json.loads(sys.stdin.read())
    replay = bare_engine_replay(
        Path(call["model_path"]),
        call["tokens"],
        call["own_tokens"],
        {n: steps for n, steps in call["steps_by_batch"]},
        adapters=tuple((Path(path), scale) for path, scale in call["adapters"]),
        parts=[PromptPart(**(part | {"tokens": tuple(part["tokens"])})) for part in call["parts"]],
        **call["options"],
    )
    print(json.dumps(asdict(replay)))


@dataclass
class BatchedBenchCheck:
    """llama.cpp's `llama-batched-bench` and the bare engine in its shape, run alternately:
    its shared prompt (`-pps`: the workload's first prefix from position 0, copied to every
    sequence), then `steps` generation steps at each batch size. Shows that the bare engine,
    the reference of each way's shares, runs at llama-batched-bench's speed."""

    prompt_tokens: int
    steps: int
    batch_sizes: list[int]
    # one entry per run of each, in the order run: {"prefill": tok/s, "generation": {n: tok/s}}
    tool: list[dict] = field(default_factory=list)
    engine: list[dict] = field(default_factory=list)
    # contexts > 1 (a cold round's prompt phase held that many): also the prompt alone in
    # each of `contexts` sequences, one after the other in one unified KV cache (no `-pps`),
    # as those contexts are evaluated; S_PP of each run of each, in the order run
    contexts: int = 1
    tool_contexts: list[float] = field(default_factory=list)
    engine_contexts: list[float] = field(default_factory=list)

    def engine_shares(self) -> dict:
        """The bare engine's rates over llama-batched-bench's, run by run (each run against
        the one right before it), median over runs."""
        pairs = list(zip(self.engine, self.tool, strict=True))
        shares = {
            "prefill": _median([e["prefill"] / t["prefill"] for e, t in pairs]),
            "generation": {
                n: _median([e["generation"][n] / t["generation"][n] for e, t in pairs])
                for n in self.batch_sizes
            },
        }
        if self.engine_contexts:
            shares["prefill_contexts"] = _median(
                [e / t for e, t in zip(self.engine_contexts, self.tool_contexts, strict=True)]
            )
        return shares

    def to_dict(self) -> dict:
        return asdict(self) | {"engine_shares": self.engine_shares()}


def parse_batched_bench(output: str) -> dict:
    """llama-batched-bench's `--output-format jsonl` rows (one per batch size, among log
    lines) as {"prefill": median S_PP, "generation": {n: S_TG}}."""
    rows = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    if not rows:
        raise RuntimeError(f"llama-batched-bench printed no results: {output[-500:]}")
    return {
        "prefill": _median([row["speed_pp"] for row in rows]),
        "generation": {int(row["pl"]): row["speed_tg"] for row in rows},
    }


def check_against_batched_bench(
    binary: Path,
    model_path: Path,
    tokens: list[int],
    batch_sizes: list[int],
    *,
    threads: int | None,
    gpu_layers: int | None = None,
    adapters: tuple[tuple[Path, float], ...] = (),
    steps: int = 32,
    repeats: int = 2,
    contexts: int = 1,
) -> BatchedBenchCheck:
    """`repeats` runs of llama-batched-bench, each followed by the bare engine in the same
    shape (`bare_engine_replay` with no claims), with the engine's settings: unified KV cache,
    full SWA cache, n_batch 512, n_ubatch 256, the judge's threads and LoRA adapters. With
    `contexts` > 1, each run also evaluates the prompt in that many sequences, one after
    the other (`-npl contexts` without `-pps`), and the bare engine likewise."""
    import subprocess

    widest = max(batch_sizes)
    base = [
        str(binary),
        "-m", str(model_path),
        "-b", "512",
        "-npp", str(len(tokens)),
        "--output-format", "jsonl",
    ]  # fmt: skip
    base += _llama_tool_options(threads, gpu_layers, adapters)
    command = base + [
        "-c", str(len(tokens) + widest * steps + 512),
        "-ntg", str(steps),
        "-npl", ",".join(map(str, sorted(batch_sizes))),
        "-pps",
    ]  # fmt: skip
    # one output token each: the tool measures its prompt phase apart from it
    contexts_command = base + ["-c", str(contexts * (len(tokens) + 1) + 512), "-ntg", "1"]
    contexts_command += ["-npl", str(contexts)]

    def tool(command: list[str]) -> dict:
        run = subprocess.run(command, capture_output=True, text=True, timeout=1800)
        if run.returncode != 0:
            raise RuntimeError(f"llama-batched-bench failed: {run.stderr[-1000:]}")
        return parse_batched_bench(run.stdout)

    check = BatchedBenchCheck(len(tokens), steps, sorted(batch_sizes), contexts=contexts)
    for _ in range(repeats):
        if contexts > 1:
            check.tool_contexts.append(tool(contexts_command)["prefill"])
            apart = bare_engine_replay_apart(
                model_path,
                tokens,
                [],
                {},
                parts=[PromptPart(seq, None, 0, tuple(tokens), True) for seq in range(contexts)],
                widest=1,
                max_tokens=1,
                threads=threads,
                gpu_layers=gpu_layers,
                adapters=adapters,
            )
            check.engine_contexts.append(apart.prefill_tok_s)
        check.tool.append(tool(command))
        replay = bare_engine_replay_apart(
            model_path,
            tokens,
            [],
            {n: steps for n in batch_sizes},
            widest=widest,
            max_tokens=steps,
            threads=threads,
            gpu_layers=gpu_layers,
            adapters=adapters,
        )
        check.engine.append(
            {
                "prefill": replay.prefill_tok_s,
                "generation": replay.tok_s_by_batch(),
            }
        )
    return check


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
