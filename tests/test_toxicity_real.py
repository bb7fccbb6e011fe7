"""The toxicity scorer end to end on the real engine and the embedded model.

Structure and validity are asserted, not the 270M base model's judgements.
"""

from __future__ import annotations

import json

import pytest

from localjudge.scorers import SEVERITY_WEIGHTS, create_toxicity_scorer

pytestmark = pytest.mark.real


def check(result, n_statements, scale=1):
    verdicts = result.analyze_step_result["verdicts"]
    assert len(verdicts) == n_statements
    for verdict in verdicts:
        assert verdict["verdict"] in ("yes", "no")
        if verdict["verdict"] == "yes":
            assert verdict["severity"] in SEVERITY_WEIGHTS and verdict["category"] != "none"
        else:
            assert verdict["severity"] == "none" and verdict["category"] == "none"
        assert 0 <= verdict["confidence"] <= 1
    weights = sum(SEVERITY_WEIGHTS[v["severity"]] for v in verdicts if v["verdict"] == "yes")
    expected = weights / (len(verdicts) * 3) * scale if verdicts else 0
    assert result.score == pytest.approx(expected, abs=0.006)
    assert result.reason.strip() and not result.reason.lstrip().startswith("{")
    data = json.loads(result.to_json())
    assert data["judgedBy"]["meaningful"] == {"verdicts": True, "reasons": True}
    assert "preprocessStepResult" not in data


def test_english_reply(real_judge):
    scorer = create_toxicity_scorer(real_judge)
    result = scorer.run(
        {
            "input": "Can you check my essay?",
            "output": "Sure. Only an idiot would write this. The second paragraph needs a clearer thesis.",
        }
    )
    check(result, 3)
    # the default judge is fit for verdicts only: every reason is built from its verdicts
    assert result.generate_reason_prompt is None and result.usage["analyze"].prefix_reused > 0
    assert all(v["reasonBy"] == "template" for v in result.analyze_step_result["verdicts"])


def test_japanese_reply_with_scale(real_judge):
    scorer = create_toxicity_scorer(real_judge, scale=10, reason="template")
    result = scorer.run({"input": "手伝って", "output": "お前の質問はくだらない。答えは42です。"})
    check(result, 2, scale=10)


def test_count_mode_and_empty(real_judge):
    scorer = create_toxicity_scorer(real_judge, score_mode="count", reason="template")
    result = scorer.run({"output": "Thanks for asking. You are wrong, and that's fine."})
    toxic = sum(v["verdict"] == "yes" for v in result.analyze_step_result["verdicts"])
    assert result.score == pytest.approx(
        toxic / len(result.analyze_step_result["verdicts"]), abs=0.006
    )
    empty = scorer.run({"output": ""})
    assert empty.score == 0 and empty.analyze_step_result == {"verdicts": []}


def test_control_characters_and_a_long_unpunctuated_output(real_judge):
    scorer = create_toxicity_scorer(real_judge, reason="template", max_statement_chars=400)
    result = scorer.run({"output": "ok \x00\x01 " + "word " * 300})
    verdicts = result.analyze_step_result["verdicts"]
    assert len(verdicts) >= 4  # split, not truncated
    assert sum(len(v["statement"].split()) for v in verdicts) == 301
