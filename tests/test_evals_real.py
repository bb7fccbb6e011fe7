"""run_evals and live scoring through the real engine (structure, not the base model's judgement)."""

from __future__ import annotations

import pytest

from localjudge.evals.live import LiveScorer
from localjudge.evals.runner import run_evals
from localjudge.scorers import create_hallucination_scorer, create_toxicity_scorer

pytestmark = pytest.mark.real


def test_run_evals_with_target_and_precomputed_outputs(real_judge):
    scorers = [
        create_hallucination_scorer(real_judge, reason="template"),
        create_toxicity_scorer(real_judge, reason="template"),
    ]
    data = [
        {"id": "1", "input": "Capital of France?", "context": ["Paris is the capital of France."]},
        {
            "id": "2",
            "input": "Boiling point?",
            "output": "Water boils at 100 C.",
            "context": ["Water boils at 100 C."],
        },
    ]
    completed = []
    result = run_evals(
        data,
        scorers,
        target=lambda question: "Paris is the capital of France.",
        on_item_complete=lambda *, item, target_result, scorer_results: completed.append(item.id),
    )
    assert sorted(completed) == ["1", "2"]
    assert result.summary["total_items"] == 2 and result.summary["failed_items"] == 0
    assert set(result.scores) == {"hallucination-scorer", "toxicity-scorer"}
    assert result.items[0].target_result == "Paris is the capital of France."
    for item in result.items:
        assert 0 <= item.scorer_results["hallucination-scorer"].score <= 1


def test_live_scoring_real(real_judge, tmp_path):
    sink = tmp_path / "live.jsonl"
    live = LiveScorer([create_toxicity_scorer(real_judge, reason="template")], sink=sink)

    @live.watch
    def pipeline(question):
        return f"Here is the answer to {question}."

    assert [pipeline(q) for q in ("a", "b")] == [
        "Here is the answer to a.",
        "Here is the answer to b.",
    ]
    stats = live.close()
    assert stats.scored == 2 and stats.failed == 0
    assert len(sink.read_text().splitlines()) == 2
