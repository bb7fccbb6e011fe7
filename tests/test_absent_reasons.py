"""A judge's reason that says the context lacks something the context holds is never shown
as the judge's: the verdict gets the reason built from it and its evidence, and says why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localjudge.scorers import create_hallucination_scorer
from localjudge.scorers.absent import HELD, says_held_absent
from localjudge.scorers.reasons import cut_short
from localjudge.testing import FakeJudge, rule_script

HALO = "Cortana is an AI who gives Master Chief Petty Officer John-117 tactical information."


def test_a_reason_that_says_the_context_lacks_a_thing_it_holds_is_told_apart():
    # what the 1.5B wrote of contexts that hold the thing (RESULTS.md, session 81)
    assert says_held_absent("The context does not mention Cortana or Master Chief.", HALO)
    assert says_held_absent("The context doesn't mention John-117.", HALO)
    assert says_held_absent(
        "The context does not provide any information about the tactical information.", HALO
    )
    food = "A burrito is a dish in Mexican and Tex-Mex cuisine."
    assert says_held_absent("The context does not mention burritos or any other food.", food)
    assert says_held_absent("The context does not mention Tex-Mex cuisine.", food)
    # what the context does not hold, or holds only in other words or another order
    assert not says_held_absent("The context does not mention the Covenant.", HALO)
    assert not says_held_absent("The context does not mention Mexican burritos.", food)
    drinks = "Starbucks serves hot and cold drinks."
    assert not says_held_absent("The context does not mention cold coffee.", drinks)
    assert not says_held_absent("It mentions hot drinks, not cold coffee.", drinks)
    # a proposition is not a thing whose words settle it
    assert not says_held_absent("The context does not mention that Cortana is an AI.", HALO)
    assert not says_held_absent("The context does not say whether Cortana is kind.", HALO)
    assert not says_held_absent("", HALO)


def _absent_script(prompt: str) -> str:
    """rule_script's verdicts, with "does not mention the shop" as every flagged claim's
    reason, true of some contexts and false of others."""
    reply = rule_script(prompt)
    if '"verdict":"yes"' in reply:
        return '{"verdict":"yes","reason":"The context does not mention the shop."}'
    return reply


def test_a_flagged_claims_reason_that_denies_the_context_gets_its_built_reason(tmp_home):
    with FakeJudge(_absent_script) as judge:
        denied = create_hallucination_scorer(
            judge, context=["The shop opens at nine."], reason="template", claim_reasons="all"
        ).run({"output": "The shop opens at ten."})
        true = create_hallucination_scorer(
            judge, context=["The bakery opens at nine."], reason="template", claim_reasons="all"
        ).run({"output": "The shop opens at ten."})
    (claim,) = denied.analyze_step_result["verdicts"]
    assert claim["verdict"] == "yes" and claim["judgeReasonDropped"] == HELD
    assert claim["reasonBy"] == "template"
    assert claim["reason"].startswith("No part of the context states this")
    (claim,) = true.analyze_step_result["verdicts"]  # no shop in this context: kept
    assert (claim["reason"], claim["reasonBy"]) == (
        "The context does not mention the shop.",
        "judge",
    )
    assert "judgeReasonDropped" not in claim


def test_quality_reports_the_built_reason_where_the_judge_denied_the_context(tmp_home):
    from localjudge.quality.labelled import Row, judge_rows

    rows = [
        Row(
            number=1,
            text="The shop opens at ten.",
            label=True,
            context=("The shop opens at nine.",),
        ),
        Row(
            number=2,
            text="The shop opens at ten.",
            label=True,
            context=("The bakery opens at nine.",),
        ),
    ]
    with FakeJudge(_absent_script) as judge:  # writes reasons, as fitness "judge" does
        denied, true = judge_rows(judge, rows, "hallucination")
    assert denied.p_yes > 0.5 and denied.reason.startswith("No part of the context states this")
    assert true.p_yes > 0.5 and true.reason == "The context does not mention the shop."


@pytest.mark.real
def test_no_claim_reason_the_real_judge_writes_is_shown_cut_short_or_denying_its_context(
    real_judge,
):
    from localjudge import run_evals

    sample = Path(__file__).resolve().parents[1] / "examples" / "sample.jsonl"
    items = [json.loads(line) for line in sample.read_text().splitlines()]
    scorer = create_hallucination_scorer(real_judge, claim_reasons="all")
    evals = run_evals(items, [scorer])
    assert all(item.ok for item in evals.items)
    checked = 0
    for item in evals.items:
        (result,) = item.scorer_results.values()
        context = "\n".join(items[item.index]["context"])
        for verdict in result.analyze_step_result["verdicts"]:
            assert not says_held_absent(verdict["reason"], context), verdict["reason"]
            assert not cut_short(verdict["reason"]), verdict["reason"]
            if verdict.get("judgeReasonDropped") == HELD:
                assert verdict["reasonBy"] == "template"
            checked += 1
    assert checked >= 8  # the claims of every item with an output
