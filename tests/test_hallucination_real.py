"""The hallucination scorer end to end on the real engine and the embedded model.

The 270M base model's judgements are not asserted: structure, validity and accounting are.
"""

from __future__ import annotations

import json

import pytest

from localjudge.errors import PromptTooLongError
from localjudge.scorers import create_hallucination_scorer, extract_tool_results
from localjudge.scorers.evidence import quote
from localjudge.scorers.hallucination import fell_apart

pytestmark = pytest.mark.real

IPHONE = [
    "The first iPhone was announced on January 9, 2007.",
    "It was released on June 29, 2007.",
    "Steve Jobs introduced it at Macworld.",
]


def check_structure(result, scale=1, meaningful=True):
    claims = result.preprocess_step_result["claims"]
    verdicts = result.analyze_step_result["verdicts"]
    assert [v["statement"] for v in verdicts] == claims  # one verdict per claim, in order
    for verdict in verdicts:
        assert verdict["verdict"] in ("yes", "no")
        assert isinstance(verdict["reason"], str)
        assert 0.0 <= verdict["confidence"] <= 1.0
    hallucinated = sum(v["verdict"] == "yes" for v in verdicts)
    expected = round(hallucinated / len(verdicts) * scale + 1e-9, 2) if verdicts else 0
    assert result.score == pytest.approx(expected, abs=0.006)
    assert 0 <= result.score <= scale
    assert isinstance(result.reason, str) and result.reason.strip()
    assert not result.reason.lstrip().startswith("{")  # the sentence itself, not JSON
    data = json.loads(result.to_json())
    # the embedded default carries the judge adapter; the bare base model is mechanics-only
    assert data["judgedBy"]["meaningful"]["verdicts"] is meaningful


def test_static_context_with_judge_extraction():
    from localjudge import Judge

    # the mechanics of judge-extracted claims, on the bare base model: the default judge is
    # tuned for verdicts only (fitness "verdicts"), and its free text may not close within
    # the claims budget (then the output is judged sentence by sentence, and details say so)
    with Judge.load("gemma-3-270m", slots=4, max_prefixes=4, n_ctx=4096) as base:
        scorer = create_hallucination_scorer(
            base, context=IPHONE, extraction="judge", reason="judge"
        )
        result = scorer.run(
            {
                "input": "When was the iPhone released?",
                "output": "The iPhone was announced in 2007 and released in June 2008.",
            }
        )
    check_structure(result, meaningful=False)
    assert result.preprocess_prompt and result.generate_reason_prompt
    # claims that fell apart into single words are never judged word by word
    assert not fell_apart(result.preprocess_step_result["claims"])
    fell_back = "extractionFallback" in result.details
    assert result.details["extraction"] == ("sentences" if fell_back else "judge")
    assert result.usage["analyze"].requests == len(result.preprocess_step_result["claims"])


def test_judge_extraction_past_its_budget_is_judged_by_sentences():
    from localjudge import Judge

    output = "The iPhone was announced in 2007. It was released in June 2008."
    with Judge.load("gemma-3-270m", slots=2, max_prefixes=2, n_ctx=4096) as base:
        # the fewest tokens that close `{"claims":[]}`: a list with a claim in it cannot
        # close in them, so a judge that opens one runs past the budget
        budget = base.grammar("claims").min_tokens
        scorer = create_hallucination_scorer(
            base, context=IPHONE, extraction="judge", reason="template", claims_max_tokens=budget
        )
        result = scorer.run({"output": output})
    check_structure(result, meaningful=False)
    assert result.preprocess_prompt  # the judge was asked
    claims = result.preprocess_step_result["claims"]
    if "extractionFallback" in result.details:  # it opened a claim (what a base model does)
        assert claims == ["The iPhone was announced in 2007.", "It was released in June 2008."]
        assert result.details["extraction"] == "sentences"
        assert result.details["extractionFallback"] == (
            f"the judge's claims ran past claims_max_tokens={budget}"
        )
    else:  # it closed the list at once: nothing to judge, and nothing made up
        assert claims == [] and result.details["extraction"] == "judge"


def test_sentence_extraction_scale_and_template_reason(real_judge):
    scorer = create_hallucination_scorer(real_judge, context=IPHONE, scale=10, reason="template")
    result = scorer.run(
        {"output": "The iPhone was announced in 2007. It was pioneering. It may have been blue."}
    )
    check_structure(result, scale=10)
    assert result.details["extraction"] == "sentences"
    assert len(result.analyze_step_result["verdicts"]) == 3
    assert result.usage["analyze"].prefix_reused > 0


def test_sentence_claims_send_no_question_or_courtesy_to_the_judge(real_judge):
    scorer = create_hallucination_scorer(
        real_judge, context=IPHONE, extraction="sentence-claims", reason="template"
    )
    result = scorer.run(
        {
            "output": "Thanks for asking! The iPhone was announced in 2007. "
            "Is there anything else I can help with?"
        }
    )
    check_structure(result)
    assert result.preprocess_step_result["claims"] == ["The iPhone was announced in 2007."]
    assert [s["why"] for s in result.preprocess_step_result["skipped"]] == ["courtesy"] * 2
    assert result.usage["analyze"].requests == 1  # one claim, one window: one verdict
    assert "2 sentences state nothing to check" in result.reason


def test_tool_result_context(real_judge):
    output = [
        {
            "id": "m1",
            "role": "assistant",
            "content": {
                "format": 2,
                "parts": [{"type": "text", "text": "It is 3 degrees and cloudy in Oslo."}],
                "toolInvocations": [
                    {
                        "state": "result",
                        "toolName": "weather",
                        "toolCallId": "call-1",
                        "args": {"city": "Oslo"},
                        "result": {"temperature": 3, "sky": "cloudy"},
                    }
                ],
            },
        }
    ]

    def get_context(*, run, results, score, step):
        return [
            json.dumps({"tool": t["tool_name"], "result": t["result"]})
            for t in extract_tool_results(run.output)
        ]

    scorer = create_hallucination_scorer(real_judge, get_context=get_context, reason="template")
    result = scorer.run({"input": "Weather in Oslo?", "output": output})
    check_structure(result)
    assert '"temperature": 3' in result.analyze_prompt


def test_empty_output(real_judge):
    result = create_hallucination_scorer(real_judge, context=IPHONE).run({"output": "  "})
    assert result.score == 0 and result.analyze_step_result == {"verdicts": []}
    assert result.reason.strip()


def test_japanese_item(real_judge):
    scorer = create_hallucination_scorer(
        real_judge,
        context=["富士山の標高は3776メートルです。", "静岡県と山梨県にまたがっています。"],
    )
    result = scorer.run({"output": "富士山の高さは約3800メートルです。富士山は北海道にあります。"})
    check_structure(result)
    assert result.preprocess_step_result["claims"] == [
        "富士山の高さは約3800メートルです。",
        "富士山は北海道にあります。",
    ]
    assert "富士山" in result.analyze_prompt


def test_a_context_larger_than_the_judge_is_judged_in_evidence_windows(real_judge):
    sentences = [f"Room {n} of the museum opens at nine." for n in range(400)]
    sentences[250] = "The roof café closes at six."
    context = [" ".join(sentences[:200]), " ".join(sentences[200:])]  # ~4,800 tokens
    claims = "The roof café closes at six. Room 12 opens at nine."
    whole = create_hallucination_scorer(real_judge, context=context, windows="off")
    with pytest.raises(PromptTooLongError, match="judge context of 4096 tokens"):
        whole.run({"output": claims})
    result = create_hallucination_scorer(real_judge, context=context).run({"output": claims})
    check_structure(result)
    text = "\n".join(context)
    cafe, room = result.analyze_step_result["verdicts"]
    for verdict in (cafe, room):  # the deciding window, within the judge's window size
        evidence = verdict["evidence"]
        assert text[evidence["start"] : evidence["end"]] == evidence["text"]
        assert len(real_judge.tokenize(evidence["text"])) <= real_judge.window_tokens
        assert 0 <= evidence["pYes"] <= 1
    # each claim against its 4 best windows, best first, until one supports it
    judged = result.usage["analyze"].requests
    assert 2 <= judged <= 2 * 4
    flagged = sum(v["verdict"] == "yes" for v in (cafe, room))  # judged against all 4
    assert judged >= 4 * flagged + (2 - flagged)
    # the judge's reasons are built from the verdict and the window that decided it
    assert cafe["reason"].endswith(f'"{quote(cafe["evidence"]["text"])}"')


def test_claim_reasons_none_keeps_the_verdicts_and_skips_the_reasons(real_judge):
    run = {"output": "It was announced in 2007. It was released in 1999. It was blue."}
    options = {"context": IPHONE, "extraction": "sentences", "reason": "template"}
    every = {**options, "claim_reasons": "all"}  # the judge's own words, asked for
    create_hallucination_scorer(real_judge, **every).run(run)  # its prompts are kept
    # both runs start from the kept prompts, so their verdicts are read from the same
    # numbers (bit for bit: the kept logits at each prompt's last token)
    full = create_hallucination_scorer(real_judge, **every).run(run)
    lazy = create_hallucination_scorer(real_judge, claim_reasons="none", **options).run(run)
    check_structure(lazy)
    pairs = zip(
        full.analyze_step_result["verdicts"], lazy.analyze_step_result["verdicts"], strict=True
    )
    for a, b in pairs:
        assert a["verdict"] == b["verdict"] and b["reasonBy"] == "template"
        assert b["confidence"] == a["confidence"]
    assert lazy.usage["analyze"].generated_tokens < full.usage["analyze"].generated_tokens
