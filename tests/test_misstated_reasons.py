"""A judge's reason for a score that states a score, a count, or an "all"/"none" of the
judged claims or statements that the verdicts contradict is never shown as the judge's: the
reason built from the verdicts is shown instead, and the result says why."""

from __future__ import annotations

import itertools

import pytest

from localjudge.prompts.toxicity import toxicity_reason_prompt
from localjudge.scorers import create_hallucination_scorer, create_toxicity_scorer
from localjudge.scorers.hallucination import hallucination_score, hallucination_template_reason
from localjudge.scorers.reasons import cut_short
from localjudge.scorers.tally import CLAIM_WORDS, MISSTATED, STATEMENT_WORDS, Tally, misstates
from localjudge.scorers.toxicity import toxicity_score, toxicity_template_reason
from localjudge.testing import FakeJudge, rule_script


def claims_tally(score: float, verdicts: list[dict]) -> Tally:
    return Tally.of(score, verdicts, CLAIM_WORDS)


def statements_tally(score: float, verdicts: list[dict]) -> Tally:
    return Tally.of(score, verdicts, STATEMENT_WORDS)


def claims(*verdicts: str) -> list[dict]:
    return [{"statement": f"Claim {n}.", "verdict": v} for n, v in enumerate(verdicts, 1)]


def statements(*verdicts: str) -> list[dict]:
    return [
        {"statement": f"Statement {n}.", "verdict": v, "category": "none", "severity": "none"}
        if v == "no"
        else {
            "statement": f"Statement {n}.",
            "verdict": v,
            "category": "personal_attack",
            "severity": "mild",
        }
        for n, v in enumerate(verdicts, 1)
    ]


def test_a_score_reason_that_inverts_its_verdicts_misstates_them():
    # what the 1.5B wrote under "Score: 1 of 1" with every claim unsupported (RESULTS.md,
    # session 81's design set)
    unsupported = claims_tally(1.0, claims("yes", "yes"))
    for written in (
        "The score is 1 because all claims are supported: the context names the series.",
        "The score is 1 because both unsupported claims are supported by the context.",
        "The score is 1 because both claims are supported.",
        "The score is 1 because the context supports every claim.",
        "The score is 1 because one of the two claims is unsupported.",
        "The score is 0 because there are no unsupported claims.",
        "The score is 0.5 because the claims are not supported.",
    ):
        assert misstates(written, unsupported), written
    for written in (
        "The score is 1 because both claims are unsupported: the context names no price.",
        "The score is 1 because the context does not support the claims.",
        "The score is 1 because 2 of 2 claims are not supported by the context.",
        "The score is 1 because not all claims are supported; none is.",
    ):
        assert not misstates(written, unsupported), written
    single = claims_tally(1.0, claims("yes"))
    assert misstates("The score is 1 because the context directly supports the claim.", single)
    assert not misstates("The score is 1 because the context does not support the claim.", single)
    # one of two supported: counts and "all" are read against the verdicts
    half = claims_tally(0.5, claims("yes", "no"))
    assert not misstates("The score is 0.5 because one of two claims is unsupported.", half)
    assert misstates("The score is 0.5 because two of two claims are unsupported.", half)
    assert misstates("The score is 0.5 because one of three claims is unsupported.", half)
    assert misstates("The score is 0.5 because all claims are supported.", half)


def test_a_stated_score_is_read_as_rounded_to_the_decimals_it_gives():
    third = statements_tally(2 / 3, statements("yes"))
    assert not misstates("The score is 0.67 because the reply insults the user.", third)
    assert not misstates("The score is 0.7 because the reply insults the user.", third)
    assert misstates("The score is 1 because the reply insults the user.", third)
    assert misstates("The score is 0.6 because the reply insults the user.", third)
    # the rubric scorer's tally holds the score alone
    assert misstates("The score is 0.2 out of 1.", Tally(0.5))
    assert not misstates("The score is 0.5 out of 1: half the sentences pass.", Tally(0.5))


def test_counts_of_statements_are_read_against_the_verdicts():
    one = statements_tally(1.0, statements("yes"))
    assert misstates(
        "The score is 1 because the reply insults the user in one of its two statements.", one
    )
    assert not misstates("The score is 1 because its one statement insults the user.", one)
    civil = statements_tally(0.0, statements("no", "no"))
    assert not misstates("The score is 0 because there are no toxic statements.", civil)
    assert not misstates("The score is 0 because both statements are civil.", civil)
    mixed = statements_tally(0.17, statements("yes", "no"))
    assert misstates("The score is 0.17 because there are no toxic statements.", mixed)
    assert misstates("The score is 0.17 because all statements are civil.", mixed)
    assert not misstates("The score is 0.17 because one of its two statements is toxic.", mixed)


def test_a_phrase_the_judged_text_holds_is_not_read_as_the_reasons_own():
    # the reply itself says "all claims are supported": a reason may quote it
    verdicts = statements("yes")
    verdicts[0]["statement"] = "Stop asking, all claims are supported, idiot."
    tally = statements_tally(1.0, verdicts)
    parts = toxicity_reason_prompt(1.0, 1, verdicts, "as weighed")
    quoting = 'The score is 1 because the reply says "all claims are supported, idiot".'
    assert not misstates(quoting, tally, parts)
    assert misstates("The score is 1 because there are no toxic statements.", tally, parts)


@pytest.mark.parametrize("total", [1, 2, 3, 4])
def test_the_reasons_built_from_the_verdicts_never_misstate_them(total):
    for pattern in itertools.product(("yes", "no"), repeat=total):
        found = claims(*pattern)
        score = hallucination_score(found, 1)
        built = hallucination_template_reason(score, 1, found)
        assert not misstates(built, claims_tally(score, found)), built
        said = statements(*pattern)
        score = toxicity_score(said, 1, "severity")
        built = toxicity_template_reason(score, 1, said, "severity")
        assert not misstates(built, statements_tally(score, said)), built


def _inverting_script(prompt: str) -> str:
    """rule_script's verdicts, with a score reason that says the opposite of them."""
    if prompt.endswith("Explanation: ") and "Unsupported claims:" in prompt:
        return '{"reason":"The score is 1 because all claims are supported by the context."}'
    if prompt.endswith("Explanation: "):
        return '{"reason":"The score is 0 because there are no toxic statements."}'
    return rule_script(prompt)


def test_a_score_reason_that_contradicts_the_verdicts_gets_the_built_reason(tmp_home):
    with FakeJudge(_inverting_script) as judge:
        hallucination = create_hallucination_scorer(
            judge, context=["The shop opens at nine."], reason="judge"
        ).run({"output": "The shop opens at ten."})
        civil = create_toxicity_scorer(judge, reason="judge").run(
            {"output": "The shop opens at nine."}
        )
    assert hallucination.score == 1
    assert hallucination.details["judgeReasonDropped"] == MISSTATED
    assert hallucination.reason.startswith("The score is 1 out of 1 because its one claim is not")
    # the same words under the verdicts they state are the judge's, and shown
    assert civil.score == 0 and "judgeReasonDropped" not in civil.details
    assert civil.reason == "The score is 0 because there are no toxic statements."
    for result in (hallucination, civil):
        verdicts = result.analyze_step_result["verdicts"]
        tally = (claims_tally if result is hallucination else statements_tally)(
            result.score, verdicts
        )
        assert not misstates(result.reason, tally)


@pytest.mark.real
def test_no_score_reason_the_real_judge_writes_is_shown_cut_short_or_against_its_verdicts(
    real_judge,
):
    import json
    from pathlib import Path

    from localjudge import run_evals

    sample = Path(__file__).resolve().parents[1] / "examples" / "sample.jsonl"
    items = [json.loads(line) for line in sample.read_text().splitlines()]
    scorers = {
        "hallucination": create_hallucination_scorer(real_judge, reason="judge"),
        "toxicity": create_toxicity_scorer(real_judge, reason="judge"),
    }
    evals = run_evals(items, list(scorers.values()))
    assert all(item.ok for item in evals.items)
    tallies = {"hallucination": claims_tally, "toxicity": statements_tally}
    checked = 0
    for item in evals.items:
        for name, result in item.scorer_results.items():
            verdicts = result.analyze_step_result["verdicts"]
            if not verdicts:
                continue
            tally = tallies[name.removesuffix("-scorer")](result.score, verdicts)
            assert not misstates(result.reason, tally), (name, result.reason)
            assert not cut_short(result.reason), (name, result.reason)
            if result.details.get("judgeReasonDropped") == MISSTATED:
                assert result.reason.startswith(f"The score is {result.score:g}")
            checked += 1
    assert checked >= 10  # every item but the empty one, by both scorers
