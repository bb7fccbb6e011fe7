"""`localjudge bench`: its workloads and a small run of its ways on the real model (the
speed figures live in the README, measured by the command; a test asserts no timing)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from localjudge.bench_workloads import rag_items, workload_items
from localjudge.cli import cli


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


@pytest.mark.real
def test_bench_ways_and_workloads_on_the_real_model():
    result = CliRunner().invoke(
        cli,
        ["bench", "--ways", "cfw", "--claims", "4", "--workload", "single", "--workload", "scorer"]
        + ["--slots", "4", "--max-tokens", "40", "--json"],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    single, scorer = report["workloads"]
    ways = {w["way"][0]: w for w in single["ways"]}
    assert set(ways) == {"c", "f", "w"} and all(w["valid"] == 4 for w in ways.values())
    # warm: the prompt cache gave back what the warm-up round evaluated (the instructions
    # and the context); only the claims' own tokens were evaluated
    assert ways["w"]["prompt_tokens_evaluated"] < ways["c"]["prompt_tokens_evaluated"] / 4
    # the default judge (its adapter merged into the weights) supports the first claim:
    # "flagged" skips that reason
    assert report["model"] == "gemma-3-270m-judge" and report["adapters"] == []
    assert ways["f"]["tokens_generated"] < ways["w"]["tokens_generated"]
    assert ways["c"]["prefill_tok_s"] > 0 and single["ratio_f_over_w"] > 0
    # llama-batched-bench's phases: steps of prompt tokens only, and generation steps by
    # their number of sequences; the bare engine's on the workload's first prompt
    assert ways["c"]["prompt_phase_tok_s"] > 0
    by_batch = ways["c"]["gen_tok_s_by_batch"]
    assert by_batch and all(1 <= int(n) <= 4 and rate > 0 for n, rate in by_batch.items())
    assert by_batch.keys() == ways["c"]["gen_steps_by_batch"].keys()
    assert single["engine_prompt_tokens"] > 300
    # the bare engine ran right after each way, at the batch sizes its generation steps had
    # 3 times or more (or at its slots)
    for way in ways.values():
        sizes = {n for n, steps in way["gen_steps_by_batch"].items() if steps >= 3} or {"4"}
        assert set(way["engine_tok_s_by_batch"]) == sizes and way["engine_prefill_tok_s"] > 0
        assert way["against_engine"]["generation"] > 0
    assert ways["c"]["against_engine"]["prefill"] > 0
    assert ways["w"]["against_engine"]["prefill"] is None  # a warm round evaluates no prompt
    # warm ways: the kept prompts (cells and logits) left nothing to evaluate
    assert ways["w"]["prompt_tokens_evaluated"] == ways["f"]["prompt_tokens_evaluated"] == 0
    assert {w["way"][0] for w in scorer["ways"]} == {"c", "f"}
    assert all(0 <= w["valid"] <= w["claims"] == 4 for w in scorer["ways"])


@pytest.mark.skipif(not os.environ.get("LLAMA_SERVER"), reason="LLAMA_SERVER names no binary")
@pytest.mark.real
def test_llama_server_way():
    binary = Path(os.environ["LLAMA_SERVER"])
    result = CliRunner().invoke(
        cli,
        ["bench", "--ways", "cs", "--claims", "4", "--workload", "single", "--slots", "4"]
        + ["--llama-server", str(binary), "--json"],
    )
    assert result.exit_code == 0, result.output
    (single,) = json.loads(result.output)["workloads"]
    server = next(w for w in single["ways"] if w["way"].startswith("s"))
    assert server["claims"] == 4 and single["ratio_c_over_s"] > 0
