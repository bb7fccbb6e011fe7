"""A judge with a chat template is asked whether the context supports a claim; the caller
still reads Mastra's verdict (yes = hallucinated). A completion judge, such as the embedded
one its adapter was trained for, is asked as before."""

from __future__ import annotations

import json

import pytest

from localjudge import create_hallucination_scorer
from localjudge.engine.template import render_completion
from localjudge.prompts import claim_verdict_prompt
from localjudge.scheduler import ChoicePoint, Reread
from localjudge.testing import FakeJudge, rule_script

REREAD = Reread("supported", "verdict", {"yes": "no", "no": "yes"})
CONTEXT = ["The first iPhone was announced on January 9, 2007."]


def test_reread_reads_a_reply_in_the_callers_terms():
    assert REREAD.value({"supported": "no", "reason": "Not stated."}) == {
        "verdict": "yes",
        "reason": "Not stated.",
    }
    choice = REREAD.choice(ChoicePoint("supported", {"yes": 0.2, "no": 0.8}, chosen="no"))
    assert choice == ChoicePoint("verdict", {"no": 0.2, "yes": 0.8}, chosen="yes")
    other = ChoicePoint("severity", {"low": 1.0}, chosen="low")
    assert REREAD.choice(other) is other


def support_script(prompt: str) -> str:
    """Answers the question the prompt asks: "supported" when it asks that (by the fake
    judge's rule, the context holding the claim word for word), else as `rule_script`."""
    if '"supported":"yes" or "no"' not in prompt:
        return rule_script(prompt)
    verdict = json.loads(rule_script(prompt))["verdict"]
    supported = "no" if verdict == "yes" else "yes"
    reason = "In the context." if supported == "yes" else "Not in the context."
    return json.dumps({"supported": supported, "reason": reason}, separators=(",", ":"))


def chat_judge() -> FakeJudge:
    """The fake judge with a chat template: its messages rendered as plain text that ends
    at the answer cue, where the fake engine starts its scripted reply."""
    judge = FakeJudge(support_script)
    judge.chat_template = "{{ messages }}"
    judge.engine.render_chat = lambda messages: render_completion(messages).rstrip("\n")
    return judge


def test_a_chat_judge_is_asked_the_support_question_and_read_back_as_a_verdict():
    with chat_judge() as judge:
        parts = claim_verdict_prompt(CONTEXT, "It rained.")
        request = judge.prompt_request(parts, "hallucination_verdict", 192)
        assert '"supported":"yes" or "no"' in request.prompt
        assert request.decision_field == "supported" and request.reread == REREAD
        result = judge.generate_many([request])[0]
    assert json.loads(result.text)["supported"] == "no"  # what the judge wrote
    assert result.value == {"verdict": "yes", "reason": "Not in the context."}
    assert result.choice("verdict").chosen == "yes" and result.choice("supported") is None


def test_reasons_asked_for_hallucinated_verdicts_are_asked_for_unsupported_answers():
    with chat_judge() as judge:
        parts = claim_verdict_prompt(CONTEXT, "It rained.")
        request = judge.prompt_request(
            parts, "hallucination_verdict", 192, reasons_for=frozenset({"yes"})
        )
    assert request.reasons_for == frozenset({"no"})


def test_the_hallucination_scorer_on_a_chat_judge_scores_as_mastra_does():
    with chat_judge() as judge:
        scorer = create_hallucination_scorer(judge)
        result = scorer.run(
            {
                "output": "The first iPhone was announced on January 9, 2007. It was blue.",
                "context": CONTEXT,
            }
        )
    verdicts = result.analyze_step_result["verdicts"]
    assert [v["verdict"] for v in verdicts] == ["no", "yes"]
    assert result.score == 0.5
    assert "decide whether the context supports the claim" in result.analyze_prompt
    assert result.prompt_version == "hallucination/3"


def test_a_completion_judge_is_asked_as_before():
    with FakeJudge() as judge:
        parts = claim_verdict_prompt(CONTEXT, "It rained.")
        request = judge.prompt_request(parts, "hallucination_verdict", 192)
    assert request.reread is None and request.decision_field == "verdict"
    assert request.prompt.startswith(parts.instructions)
    assert "supported" not in parts.instructions


@pytest.mark.parametrize(
    "claim", ["It rained.", "The first iPhone was announced on January 9, 2007."]
)
def test_both_ways_give_the_same_verdict_on_the_fake_judges_rule(claim):
    with FakeJudge() as plain, chat_judge() as chat:
        parts = claim_verdict_prompt(CONTEXT, claim)
        asked = [j.prompt_request(parts, "hallucination_verdict", 192) for j in (plain, chat)]
        values = [
            j.generate_many([r])[0].value["verdict"]
            for j, r in zip((plain, chat), asked, strict=True)
        ]
    assert values[0] == values[1]
