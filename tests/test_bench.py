"""`localjudge bench`: its workloads and a small run of its ways on the real model (the
speed figures live in the README, measured by the command; a test asserts no timing)."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from localjudge.bench.external import parse_batched_bench
from localjudge.bench.replay import (
    EngineReplay,
    PromptPart,
    _replay_prompt,
    bare_engine_replay,
    bare_engine_replay_apart,
    prompt_phase_parts,
    replayed_contexts,
)
from localjudge.bench.results import BatchedBenchCheck, WayResult
from localjudge.bench.ways import round_shares
from localjudge.bench.workloads import rag_items, workload_items
from localjudge.cli import cli
from localjudge.engine import StepOutput
from localjudge.model_registry import resolve
from localjudge.scheduler.stats import SchedulerStats


def test_rag_workload_is_long_deterministic_and_half_unsupported():
    items = rag_items(24)
    assert items == rag_items(24) and len(items) == 24
    for context, claims in items:
        text = " ".join(context)
        assert len(text.split()) > 1000  # ~1,500 tokens
        assert len(claims) == 6
        assert sum(claim in context for claim in claims) >= 3  # copied sentences
        assert sum(claim not in text for claim in claims) >= 2  # a number changed
    assert len(workload_items("rag", 200)) == 34  # as many items as 200 claims need


def test_each_round_is_compared_with_its_own_replay_and_the_median_reported():
    stats = SchedulerStats(
        prompt_phase_tokens=1000,
        prompt_phase_seconds=2.0,
        generation_by_batch={32: (10, 1.0), 4: (5, 0.25)},
    )
    replay = EngineReplay(400.0, {32: (10, 0.9), 4: (5, 0.2)}, prefill_alone_tok_s=625.0)
    shares = round_shares(stats, replay)
    assert shares == {"prefill": 1.25, "prefill_alone": 0.8, "generation": pytest.approx(0.88)}
    # a round without prompt-only or generation steps has nothing to compare
    assert round_shares(SchedulerStats(), replay) == dict.fromkeys(shares)
    way = WayResult("c: scheduler x32", 32, 1.0, 0, 0, 0.0, 32)
    assert way.against_engine() == (None, None)
    way.engine_rounds = [
        {"prefill": 0.9, "prefill_alone": 0.8, "generation": 1.2},
        {"prefill": None, "prefill_alone": None, "generation": 0.8},
        {"prefill": 1.0, "prefill_alone": 0.9, "generation": 0.95},
    ]
    assert way.against_engine() == (pytest.approx(0.95), 0.95)
    assert way.against_engine("prefill_alone") == pytest.approx(0.85)
    assert way.to_dict()["against_engine"]["prefill_alone"] == pytest.approx(0.85)


def test_a_rounds_prompt_phase_is_replayed_in_its_shape():
    instructions = [1, 2, 3]
    a, b = instructions + [10, 11], instructions + [20, 21, 22]
    pairs = [(a, [30, 31]), (a, [32]), (b, [33, 34]), (b, [35]), (instructions + [40], [36])]
    # the instructions once, each context after them, then each claim after its context,
    # cut where the round's prompt phase ended (12 tokens: one claim token short)
    parts = prompt_phase_parts(pairs, 12)
    assert parts == [
        PromptPart(0, None, 0, (1, 2, 3), True),
        PromptPart(1, 0, 3, (10, 11), True),
        PromptPart(2, 0, 3, (20, 21, 22), True),
        PromptPart(3, 1, 5, (30, 31), False),
        PromptPart(4, 1, 5, (32,), False),
        PromptPart(5, 2, 6, (33,), False),
    ]
    assert replayed_contexts(parts) == 2
    # one prefix (a single-context workload): it is the shared part, and claims follow it
    single = prompt_phase_parts([(a, [30, 31]), (a, [32])], 100)
    assert single == [
        PromptPart(0, None, 0, tuple(a), True),
        PromptPart(1, 0, 5, (30, 31), False),
        PromptPart(2, 0, 5, (32,), False),
    ]
    assert replayed_contexts(single) == 1

    class Recorder:  # the engine's side of the replay: the plans it is given
        def __init__(self):
            self.plans = []

        def execute(self, plan):
            self.plans.append(plan)
            return StepOutput(logits=None, seconds=0.5)

    engine = Recorder()
    assert _replay_prompt(engine, parts, n_batch=4) == 0.5 * len(engine.plans)
    steps = [[(t.seq_id, t.pos) for t in plan.tokens] for plan in engine.plans]
    copies = [[(c.src, c.dst, c.p1) for c in plan.copies] for plan in engine.plans]
    # packed 4 to a step, in order; a part whose parent is not complete starts a new step:
    # the contexts wait for the instructions, the last claim for the second context
    assert steps == [
        [(0, 0), (0, 1), (0, 2)],
        [(1, 3), (1, 4), (2, 3), (2, 4)],
        [(2, 5), (3, 5), (3, 6), (4, 5)],
        [(5, 6)],
    ]
    assert copies == [[], [(0, 1, 3), (0, 2, 3)], [(1, 3, 5), (1, 4, 5)], [(2, 5, 6)]]
    assert not any(t.logits for plan in engine.plans for t in plan.tokens)


@pytest.mark.real
def test_the_bare_engine_replays_the_steps_it_is_given():
    replay = bare_engine_replay(
        resolve().path, list(range(100, 140)), list(range(200, 210)), {3: 7, 1: 4},
        widest=4, max_tokens=3, threads=None,
    )  # fmt: skip
    assert replay.prefill_tok_s == replay.prefill_alone_tok_s > 0  # no prompt phase given
    assert replay.by_batch.keys() == {3, 1}
    assert [steps for steps, _ in replay.by_batch.values()] == [7, 4]
    assert all(seconds > 0 for _, seconds in replay.by_batch.values())
    # in a process of its own, as bench runs it; a round without generation steps
    # a prompt phase in its shape: two contexts after shared instructions, a claim each
    pairs = [(list(range(100, 140)) + [c] * 30, [c + 1] * 8) for c in (300, 400)]
    apart = bare_engine_replay_apart(
        resolve().path, list(range(100, 140)), list(range(200, 210)), {},
        parts=prompt_phase_parts(pairs, 116), widest=2, max_tokens=3, threads=None,
    )  # fmt: skip
    assert apart.prefill_tok_s > 0 and apart.prefill_alone_tok_s > 0 and apart.by_batch == {}
    assert apart.prefill_tok_s != apart.prefill_alone_tok_s


@pytest.mark.real
def test_bench_ways_and_workloads_on_the_real_model():
    result = CliRunner().invoke(
        cli,
        ["bench", "--ways", "cf", "--claims", "4", "--workload", "single", "--workload", "scorer"]
        + ["--slots", "4", "--max-tokens", "40", "--json"],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    single, scorer = report["workloads"]
    ways = {w["way"][0]: w for w in single["ways"]}
    assert set(ways) == {"c", "f"} and all(w["valid"] == 4 for w in ways.values())
    # the default judge (its adapter merged into the weights) supports the first claim
    # clearly (P(yes) 0.16 here, far from where another CPU could move it): "flagged"
    # skips that reason
    assert report["model"] == "gemma-3-270m-judge" and report["adapters"] == []
    assert ways["f"]["tokens_generated"] < ways["c"]["tokens_generated"]
    assert ways["c"]["prefill_tok_s"] > 0
    # llama-batched-bench's phases: steps of prompt tokens only, and generation steps by
    # their number of sequences; the bare engine's on the workload's first prompt
    assert ways["c"]["prompt_phase_tok_s"] > 0
    by_batch = ways["c"]["gen_tok_s_by_batch"]
    assert by_batch and all(1 <= int(n) <= 4 and rate > 0 for n, rate in by_batch.items())
    assert by_batch.keys() == ways["c"]["gen_steps_by_batch"].keys()
    assert single["engine_prompt_tokens"] > 300
    # the bare engine replayed each way's one round right after it: the same generation
    # steps, as many at each batch size
    for way in ways.values():
        assert way["engine_steps_by_batch"] == way["gen_steps_by_batch"]
        assert 0 < way["engine_busy"] < 1
        assert way["engine_prefill_tok_s"] > 0 and len(way["engine_rounds"]) == 1
        assert way["against_engine"]["generation"] == way["engine_rounds"][0]["generation"] > 0
    assert ways["c"]["against_engine"]["prefill"] > 0
    assert ways["f"]["against_engine"]["prefill"] is None  # a warm round evaluates no prompt
    # a warm way: the kept prompts (cells and logits) left nothing to evaluate
    assert ways["f"]["prompt_tokens_evaluated"] == 0
    assert {w["way"][0] for w in scorer["ways"]} == {"c", "f"}
    assert all(0 <= w["valid"] <= w["claims"] == 4 for w in scorer["ways"])


def _bench_single(ways: str, *options: str) -> dict:
    """`bench --json` on 4 claims of the single workload with 4 slots: its one workload."""
    result = CliRunner().invoke(
        cli,
        ["bench", "--ways", ways, "--claims", "4", "--workload", "single", "--slots", "4"]
        + [*options, "--json"],
    )
    assert result.exit_code == 0, result.output
    (single,) = json.loads(result.output)["workloads"]
    return single


@pytest.mark.skipif(not os.environ.get("LLAMA_SERVER"), reason="LLAMA_SERVER names no binary")
@pytest.mark.real
def test_llama_server_way():
    single = _bench_single("cs", "--llama-server", os.environ["LLAMA_SERVER"])
    server = next(w for w in single["ways"] if w["way"].startswith("s"))
    assert server["claims"] == 4 and single["ratio_c_over_s"] > 0


def test_llama_batched_bench_rows_and_the_bare_engines_share_of_them():
    output = (
        "main: n_kv_max = 4096\n"
        '{"n_kv_max": 4096, "pp": 873, "tg": 32, "pl": 4, "speed_pp": 880.0, "speed_tg": 85.0}\n'
        '{"n_kv_max": 4096, "pp": 873, "tg": 32, "pl": 32, "speed_pp": 860.0, "speed_tg": 250.0}\n'
    )
    tool = parse_batched_bench(output)
    assert tool == {"prefill": 870.0, "generation": {4: 85.0, 32: 250.0}}
    with pytest.raises(RuntimeError, match="no results"):
        parse_batched_bench("error: failed to load model\n")
    check = BatchedBenchCheck(873, 32, [4, 32], tool=[tool, tool])
    check.engine = [
        {"prefill": 870.0, "generation": {4: 85.0, 32: 225.0}},  # each against the run before
        {"prefill": 783.0, "generation": {4: 93.5, 32: 250.0}},
    ]
    assert check.engine_shares() == {
        "prefill": pytest.approx(0.95),
        "generation": {4: pytest.approx(1.05), 32: pytest.approx(0.95)},
    }


@pytest.mark.skipif(
    not os.environ.get("LLAMA_BATCHED_BENCH"), reason="LLAMA_BATCHED_BENCH names no binary"
)
@pytest.mark.real
def test_llama_batched_bench_beside_the_bare_engine():
    single = _bench_single("c", "--llama-batched-bench", os.environ["LLAMA_BATCHED_BENCH"])
    check = single["llama_batched_bench"]
    assert len(check["tool"]) == len(check["engine"]) == 2
    assert check["prompt_tokens"] < single["engine_prompt_tokens"]  # the prefix alone
    assert 1 <= len(check["batch_sizes"]) <= 3
    assert set(check["engine_shares"]["generation"]) == {str(n) for n in check["batch_sizes"]}
    assert check["engine_shares"]["prefill"] > 0
