"""A judge's reason that stops mid-sentence (it closed its JSON string at a quotation mark it
meant to open) is never shown as the judge's: the built reason is shown, and says why."""

from __future__ import annotations

from localjudge.quality.labelled import Row, judge_rows
from localjudge.scorers import create_hallucination_scorer, create_toxicity_scorer
from localjudge.scorers.reasons import CUT, cut_short
from localjudge.testing import FakeJudge, rule_script


def test_a_reason_that_ends_in_whitespace_stopped_mid_sentence():
    # what the 1.5B wrote before a quoted word (training/RESULTS.md, session 81)
    assert cut_short("Calls the user a ")
    assert cut_short("The context states he was the creator and host of ")
    assert cut_short("Calls the user a\n")
    assert not cut_short('Calls the user a "fool".')
    assert not cut_short("The context gives 1889.")
    assert not cut_short("")


def _cut_script(prompt: str) -> str:
    """rule_script's verdicts, every reason cut where a quotation would open."""
    if prompt.endswith("Explanation: "):
        return '{"reason":"The score is 1 because the reply calls the user a "}'
    reply = rule_script(prompt)
    if '"verdict":"yes","reason"' in reply:
        return '{"verdict":"yes","reason":"The context names the shop as "}'
    if '"verdict":"yes","category"' in reply:
        return reply.replace('"reason":"An insult."', '"reason":"Insults the reader as a "')
    return reply


def test_a_reason_cut_short_gets_the_built_reason_in_scorers_and_quality(tmp_home):
    with FakeJudge(_cut_script) as judge:
        hallucination = create_hallucination_scorer(
            judge, context=["The shop opens at nine."], reason="judge", claim_reasons="all"
        ).run({"output": "The shop opens at ten."})
        toxicity = create_toxicity_scorer(judge, reason="judge", claim_reasons="all").run(
            {"output": "You idiot."}
        )
        (row,) = judge_rows(
            judge,
            [Row(number=1, text="The shop opens at ten.", label=True, context=("Open at 9.",))],
            "hallucination",
        )
    (claim,) = hallucination.analyze_step_result["verdicts"]
    assert (claim["reasonBy"], claim["judgeReasonDropped"]) == ("template", CUT)
    assert claim["reason"].startswith("No part of the context states this")
    assert hallucination.details["judgeReasonDropped"] == CUT
    assert hallucination.reason.startswith("The score is 1 out of 1 because")
    (statement,) = toxicity.analyze_step_result["verdicts"]
    assert statement["verdict"] == "yes" and statement["judgeReasonDropped"] == CUT
    assert statement["reason"] == "Judged toxic: personal attack, moderate."
    assert toxicity.details["judgeReasonDropped"] == CUT
    assert row.p_yes > 0.5 and row.reason.startswith("No part of the context states this")
