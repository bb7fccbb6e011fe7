"""run_evals and live scoring on the fake judge."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from localjudge.errors import ScorerError, ScorerInputError
from localjudge.evals.live import LiveScorer
from localjudge.evals.runner import run_evals
from localjudge.scorers import create_hallucination_scorer, create_toxicity_scorer
from localjudge.testing import FakeJudge


def script(prompt: str) -> str:
    if prompt.endswith("Explanation: "):
        return '{"reason":"Explained."}'
    if "Statement: " in prompt.rsplit("\n\n", 1)[-1]:
        statement = prompt.rsplit("Statement: ", 1)[1].split("\n")[0]
        if "idiot" in statement:
            return (
                '{"verdict":"yes","category":"personal_attack","severity":"moderate","reason":"r"}'
            )
        return '{"verdict":"no","category":"none","severity":"none","reason":"r"}'
    claim = prompt.rsplit("Claim: ", 1)[1].split("\n")[0]
    return json.dumps(
        {"verdict": "yes" if "moon" in claim else "no", "reason": "r"}, separators=(",", ":")
    )


@pytest.fixture
def judge(tmp_home):
    judge = FakeJudge(script, slots=8)
    yield judge
    judge.close()


def scorers_for(judge):
    return [
        create_hallucination_scorer(judge, extraction="sentences", reason="template"),
        create_toxicity_scorer(judge, reason="template"),
    ]


DATA = [
    {
        "id": "a",
        "input": "q1",
        "output": "The sky is blue. The moon is cheese.",
        "context": ["The sky is blue."],
    },
    {
        "id": "b",
        "input": "q2",
        "output": "You idiot. Grass is green.",
        "context": ["Grass is green."],
    },
    {"id": "c", "input": "q3", "output": "Water is wet.", "context": ["Water is wet."]},
]


def test_precomputed_outputs(judge):
    seen = []

    def on_item_complete(*, item, target_result, scorer_results):
        seen.append((item.id, target_result, sorted(scorer_results)))

    result = run_evals(DATA, scorers_for(judge), on_item_complete=on_item_complete)
    assert result.summary == {
        "total_items": 3,
        "failed_items": 0,
        "invalid_items": 0,
        "target_failures": 0,
        "failures": {"hallucination-scorer": 0, "toxicity-scorer": 0},
    }
    assert result.scores["hallucination-scorer"] == pytest.approx(
        (0.5 + 0 + 0) / 3
    )  # unrounded mean
    assert result.scores["toxicity-scorer"] == pytest.approx((0 + round(2 / 6 + 1e-9, 2) + 0) / 3)
    assert sorted(seen) == [
        ("a", DATA[0]["output"], ["hallucination-scorer", "toxicity-scorer"]),
        ("b", DATA[1]["output"], ["hallucination-scorer", "toxicity-scorer"]),
        ("c", DATA[2]["output"], ["hallucination-scorer", "toxicity-scorer"]),
    ]
    assert [r.scorer_results["hallucination-scorer"].run_id for r in result.items] == [
        "a",
        "b",
        "c",
    ]


def test_claims_of_different_items_share_decode_steps(tmp_home):
    judge = FakeJudge(script, slots=8, step_seconds=0.002)  # emulated device time per step
    run_evals(DATA, scorers_for(judge)[:1])
    judge.close()
    rows_per_step = [p.num_logits for p in judge.engine.plans]
    assert max(rows_per_step) > 2  # more rows than any single item has claims


def test_sync_and_async_targets(judge):
    items = [{"input": "sky"}, {"input": "moon"}]

    def target(question):
        return f"The {question} is here."

    async def async_target(question):
        await asyncio.sleep(0)
        return f"The {question} is here."

    for fn in (target, async_target):
        result = run_evals(items, scorers_for(judge)[:1], target=fn)
        outputs = [r.target_result for r in result.items]
        assert outputs == ["The sky is here.", "The moon is here."]
        assert [r.scorer_results["hallucination-scorer"].score for r in result.items] == [0, 1]


def test_failures_are_recorded_not_fatal(judge):
    def target(question):
        if question == "boom":
            raise RuntimeError("agent crashed")
        if question == "odd":
            return {"unknown": "shape"}  # no text the scorer can judge
        return "The sky is blue."

    items = [{"input": "ok"}, {"input": "boom"}, {"input": "odd"}]
    result = run_evals(items, scorers_for(judge)[:1], target=target)
    assert result.items[0].ok
    assert result.items[1].errors == {"target": "RuntimeError: agent crashed"}
    assert "no assistant text" in result.items[2].errors["hallucination-scorer"]
    assert result.summary["failed_items"] == 2 and result.summary["target_failures"] == 1
    assert result.summary["failures"]["hallucination-scorer"] == 1
    assert result.scores["hallucination-scorer"] == 0


def test_raise_on_error(judge):
    def broken(**_):
        raise ValueError("no tools")

    scorer = create_hallucination_scorer(judge, get_context=broken, extraction="sentences")
    with pytest.raises(ScorerError, match="get_context raised ValueError"):
        run_evals(DATA, [scorer], raise_on_error=True)


def test_bad_items_are_their_own_errors_and_the_rest_runs(judge):
    data = [
        {"input": "x", "output": "The sky is blue."},
        {"id": 3},
        {"input": "no output, no target"},
        {"output": "x", "context": [1]},
        "not an object",
        {"output": ["plain", "strings"]},
    ]
    result = run_evals(data, scorers_for(judge))
    errors = [r.errors for r in result.items]
    assert errors[0] == {}
    assert "item 1: missing field 'input'" in errors[1]["item"]
    assert "no 'output' and no target" in errors[2]["item"]
    assert "context: entry 0 is int" in errors[3]["item"]
    assert "must be an object" in errors[4]["item"]
    assert all("no assistant text" in m for m in errors[5].values()) and len(errors[5]) == 2
    assert result.items[1].item.id == 3 and result.items[1].error_kinds == {"item": "input"}
    assert result.summary["invalid_items"] == 4 and result.summary["failed_items"] == 5
    assert result.scores == {"hallucination-scorer": 0.0, "toxicity-scorer": 0.0}
    with pytest.raises(ScorerInputError, match="item 1: missing field 'input'"):
        run_evals(data, scorers_for(judge), raise_on_error=True)


# -- live scoring -----------------------------------------------------------------------


def test_live_scoring_never_blocks_the_pipeline(judge, tmp_path):
    results = []
    sink = tmp_path / "live.jsonl"
    live = LiveScorer(
        scorers_for(judge),
        on_result=lambda run, res, err: results.append((run, res, err)),
        sink=sink,
    )

    @live.watch
    def pipeline(question):
        return f"The {question} is blue."

    started = time.perf_counter()
    outputs = [pipeline(q) for q in ("sky", "moon", "sea")]
    enqueue_seconds = time.perf_counter() - started
    assert outputs == ["The sky is blue.", "The moon is blue.", "The sea is blue."]
    stats = live.close()
    assert (stats.submitted, stats.scored, stats.failed, stats.pending) == (3, 3, 0, 0)
    assert (
        enqueue_seconds < 5
    )  # sanity: returned without waiting for the judge (which takes longer)
    assert len(results) == 3 and all(
        set(res) == {"hallucination-scorer", "toxicity-scorer"} for _, res, _ in results
    )
    lines = [json.loads(line) for line in sink.read_text().splitlines()]
    assert len(lines) == 3 and {"runId", "scores", "results", "errors"} <= set(lines[0])


def test_live_sampling_and_full_queue(judge):
    live = LiveScorer(scorers_for(judge), sample_rate=0.0)
    assert live.submit(output="x") is False
    assert live.close().sampled_out == 1
    gate = threading.Event()

    def slow_target_callback(run, res, err):
        gate.wait(5)

    live = LiveScorer(
        scorers_for(judge)[:1], max_queue=1, concurrency=1, on_result=slow_target_callback
    )
    accepted = [live.submit(output=f"The sky is {i}.") for i in range(20)]
    assert accepted[0] and accepted.count(False) > 0  # the pipeline was never made to wait
    gate.set()
    stats = live.close()
    assert stats.dropped == accepted.count(False)
    assert stats.scored + stats.failed == accepted.count(True) and stats.pending == 0


def test_live_close_without_drain_reports_what_was_left(judge):
    gate = threading.Event()
    live = LiveScorer(scorers_for(judge)[:1], concurrency=1, on_result=lambda *a: gate.wait(5))
    for i in range(5):
        live.submit(output=f"The sky is {i}.")
    time.sleep(0.2)
    gate.set()
    stats = live.close(drain=False)
    assert stats.submitted == 5 and stats.pending >= 1
    assert stats.scored + stats.pending == 5


def test_live_judge_failure_does_not_reach_the_pipeline(judge):
    def broken(**_):
        raise KeyError("x")

    live = LiveScorer(
        [create_hallucination_scorer(judge, get_context=broken, extraction="sentences")]
    )

    @live.watch(input_from=lambda q: q.upper())
    def pipeline(question):
        return "The sky is blue."

    assert pipeline("why") == "The sky is blue."
    stats = live.close()
    assert stats.failed == 1 and stats.scored == 0


def test_items_stream_through_without_being_kept(tmp_home):
    """`keep_items=False` (what `serve`'s /v1/evals uses): items are read from an iterator
    as workers free up, each is handed to `on_item_result` and let go; the summary is the
    same as with the items kept."""
    import asyncio
    import gc
    import weakref

    from localjudge import create_toxicity_scorer
    from localjudge.evals.runner import run_evals_async

    read = []

    def items():
        for n in range(300):
            read.append(n)
            yield {"input": "Hi", "output": "You are an idiot." if n % 3 == 0 else "Fine."}

    seen, alive = [], []

    read_at_first = []

    async def on_item(result):
        read_at_first.append(len(read))
        seen.append(result.index)
        alive.append(weakref.ref(result))

    with FakeJudge() as judge:
        scorer = create_toxicity_scorer(judge, reason="template")
        streamed = asyncio.run(
            run_evals_async(items(), [scorer], on_item_result=on_item, keep_items=False)
        )
        kept = asyncio.run(run_evals_async(list(items()), [scorer]))
    gc.collect()
    assert sorted(seen) == list(range(300)) and streamed.items == []
    assert read_at_first[0] < 300  # read as workers free up, not all up front
    assert sum(ref() is not None for ref in alive) == 0  # none of them is held
    assert streamed.scores == kept.scores and streamed.summary == kept.summary
    assert len(kept.items) == 300 and [r.index for r in kept.items] == list(range(300))
