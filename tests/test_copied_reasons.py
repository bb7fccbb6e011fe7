"""A judge's reason that repeats its prompt's worked examples is never shown as the judge's:
the verdict's reason is built from the verdict and its evidence instead, and says so."""

from __future__ import annotations

from localjudge.prompts import claim_verdict_prompt, opinion_verdict_prompt
from localjudge.prompts.toxicity import toxicity_reason_prompt
from localjudge.scorers import create_hallucination_scorer, create_toxicity_scorer
from localjudge.scorers.reasons import (
    COPIED,
    copies_worked_examples,
    repeats_example_opening,
    repeats_example_words,
)
from localjudge.testing import FakeJudge, rule_script

COPIED_CIVIL = "Firm disagreement about an idea, not a person."  # the rubric's civil example
COPIED_CLAIM = "The context says 1889, not 1899."  # the hallucination prompt's first example


def test_a_reason_copied_from_the_worked_examples_is_told_from_one_that_quotes_the_text():
    fact = opinion_verdict_prompt("", "Bill Gates introduced the iPhone in 2008.")
    assert copies_worked_examples(COPIED_CIVIL, fact)
    assert not copies_worked_examples("States a date and a name; it attacks nobody.", fact)
    # the example's words are the judged statement's own: quoting them is true
    insult = opinion_verdict_prompt("", "Honestly, only an idiot would ask that.")
    assert not copies_worked_examples("Says only an idiot would ask that.", insult)
    claim = claim_verdict_prompt(["The tower opened in 1889."], "It opened in 1899.")
    assert copies_worked_examples(COPIED_CLAIM, claim)
    assert not copies_worked_examples("The context says 1889; the claim says 1899.", claim)
    # the score's reason: what it may state as fact besides the judged text
    civil = {"statement": "The shop opens at nine.", "verdict": "no", "category": "none"}
    explain = toxicity_reason_prompt(0.33, 1, [{**civil, "severity": "none"}], "as weighed")
    stated = "The score is 0.33 because one statement is rude."
    assert copies_worked_examples(stated, explain)
    assert not copies_worked_examples(stated, explain, also="The score is 0.33 because")
    copied = "The score is 0.33 because the reply insults the user."
    assert copies_worked_examples(copied, explain, also="The score is 0.33 because")


def test_a_reason_that_applies_one_examples_judgement_to_another_text_is_a_copy():
    # what the 1.5B wrote for a plain date (training/RESULTS.md, session 80)
    date = opinion_verdict_prompt("", "The first iPhone went on sale on June 29, 2007.")
    applied = "Firm disagreement about the release date of the iPhone."
    assert not repeats_example_words(applied, date)  # no five words of the example
    assert repeats_example_opening(applied, date) and copies_worked_examples(applied, date)
    assert not copies_worked_examples("States a release date; it attacks nobody.", date)
    # the judged text holds the opening: saying so is true of it
    quarrel = opinion_verdict_prompt("", "We had a firm disagreement about the budget.")
    assert not copies_worked_examples("Reports a firm disagreement about the budget.", quarrel)
    # an opening two examples share is the prompts' way of giving any reason
    claim = claim_verdict_prompt(["Order 1182 is due on Thursday."], "It arrives tomorrow.")
    assert not copies_worked_examples("The context says Thursday, not tomorrow.", claim)
    assert copies_worked_examples("1889 is in the 1880s, so it agrees.", claim)
    # the score's reason opens as its example does, with its own score stated
    civil = {"statement": "The shop opens at nine.", "verdict": "no", "category": "none"}
    explain = toxicity_reason_prompt(0, 1, [{**civil, "severity": "none"}], "as weighed")
    stated = "The score is 0 because the one statement is civil."
    assert not copies_worked_examples(stated, explain, also="The score is 0 because")


def _copying_script(prompt: str) -> str:
    """rule_script's verdicts, with the worked examples' reasons copied into every reply."""
    reply = rule_script(prompt)
    if prompt.endswith("Explanation: ") and "toxicity score" in prompt:
        return '{"reason":"The score is 0.33 because the reply insults the user."}'
    if prompt.endswith("Explanation: "):
        return '{"reason":"One claim is unsupported: the context gives about 330 metres, not 500."}'
    if '"verdict":"no","category"' in reply and "Statement: Thanks" not in prompt:
        return reply.replace('"reason":"Civil."', f'"reason":"{COPIED_CIVIL}"')
    if '"verdict":"yes","reason"' in reply:
        return '{"verdict":"yes","reason":"' + COPIED_CLAIM + '"}'
    return reply


def test_a_verdict_whose_reason_copies_the_examples_gets_its_built_reason(tmp_home):
    with FakeJudge(_copying_script) as judge:
        toxicity = create_toxicity_scorer(judge, reason="judge", claim_reasons="all").run(
            {"output": "The shop opens at nine. Thanks for asking."}
        )
        hallucination = create_hallucination_scorer(
            judge, context=["The shop opens at nine."], reason="judge", claim_reasons="all"
        ).run({"output": "The shop opens at ten."})
    copied, own = toxicity.analyze_step_result["verdicts"]
    assert copied["reason"] == "Judged civil: no attack, mockery, hate, dismissal or threat."
    assert (copied["reasonBy"], copied["judgeReasonDropped"]) == ("template", COPIED)
    assert (own["reason"], own["reasonBy"]) == ("Civil.", "judge")
    assert "judgeReasonDropped" not in own
    # the score's reason: the judge's copied explanation is replaced by the built one
    assert toxicity.score == 0 and "0.33" not in toxicity.reason
    assert toxicity.details["judgeReasonDropped"] == COPIED
    (claim,) = hallucination.analyze_step_result["verdicts"]
    assert claim["verdict"] == "yes" and claim["judgeReasonDropped"] == COPIED
    assert "1889" not in claim["reason"] and claim["reason"].startswith("No part of the context")
    assert hallucination.details["judgeReasonDropped"] == COPIED


def test_quality_reports_the_built_reason_where_the_judge_copied_the_examples(tmp_home):
    from localjudge.quality.labelled import Row, judge_rows

    shop = ("The shop opens at nine.",)
    rows = [
        Row(number=1, text="The shop opens at ten.", label=True, context=shop),
        Row(number=2, text="The shop opens at nine.", label=False, context=shop),
    ]
    with FakeJudge(_copying_script) as judge:  # writes reasons, as fitness "judge" does
        copied, own = judge_rows(judge, rows, "hallucination")
    assert copied.p_yes > 0.5 and copied.reason.startswith("No part of the context states this")
    assert own.p_yes < 0.5 and own.reason == "Checked."
