"""What one bench run measured: each way's result on each workload, and the ratios
between ways."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# every way, by its letter (the CLI's shorthand): what it runs
WAYS = {
    "a": "outlines' own llama.cpp integration, one claim at a time",
    "b": "our scheduler, one slot",
    "c": "our scheduler, N slots, cold (no prompt cache, no kept prompts)",
    "w": "the judge's default options, warm (a warm-up round not counted, as for s)",
    "f": "w, explaining only flagged (yes) verdicts",
    "n": "w, no reasons",
    "v": "c, verdicts only (each reply closed after its verdict)",
    "e": "v, each claim against its best evidence windows (as for long contexts)",
    "s": "llama.cpp's llama-server, tuned (needs --llama-server)",
}
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
            k: median(shares)
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


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


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
            "prefill": median([e["prefill"] / t["prefill"] for e, t in pairs]),
            "generation": {
                n: median([e["generation"][n] / t["generation"][n] for e, t in pairs])
                for n in self.batch_sizes
            },
        }
        if self.engine_contexts:
            shares["prefill_contexts"] = median(
                [e / t for e, t in zip(self.engine_contexts, self.tool_contexts, strict=True)]
            )
        return shares

    def to_dict(self) -> dict:
        return asdict(self) | {"engine_shares": self.engine_shares()}
