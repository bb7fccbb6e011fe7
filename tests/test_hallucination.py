"""Hallucination scorer logic on the fake judge: exact arithmetic, hooks, shapes."""

from __future__ import annotations

import json

import pytest

from localjudge.errors import PromptTooLongError, ScorerError, ScorerInputError
from localjudge.scorers import (
    create_hallucination_scorer,
    extract_tool_results,
    hallucination_score,
    round_half_up,
    split_sentences,
)
from localjudge.testing import FakeJudge


def verdict_json(verdict: str, reason: str = "r") -> str:
    return json.dumps({"verdict": verdict, "reason": reason}, separators=(",", ":"))


def make_script(claims=None, hallucinated=("moon",), reason="Explained."):
    """Claims come from `claims` (or the output's sentences); a claim containing one of the
    `hallucinated` words gets "yes"."""

    def script(prompt: str) -> str:
        if prompt.endswith("Claims: "):
            text = prompt.rsplit("Text: ", 1)[1].rsplit("\nClaims: ", 1)[0]
            found = claims if claims is not None else [s for s in text.split(". ") if s]
            return json.dumps({"claims": found}, separators=(",", ":"))
        if prompt.endswith("Explanation: "):
            return json.dumps({"reason": reason}, separators=(",", ":"))
        claim = prompt.rsplit("Claim: ", 1)[1].split("\n")[0]
        return verdict_json("yes" if any(w in claim for w in hallucinated) else "no")

    return script


@pytest.fixture
def judge(tmp_home):
    judge = FakeJudge(make_script())
    yield judge
    judge.close()


def verdicts(*flags):
    return [{"statement": str(i), "verdict": f, "reason": ""} for i, f in enumerate(flags)]


# -- arithmetic --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.125, 0.13),
        (0.375, 0.38),
        (0.625, 0.63),
        (1.005, 1.01),
        (0.1 + 0.2, 0.3),
        (2 / 3, 0.67),
        (0.5, 0.5),
        (0, 0),
    ],
)
def test_round_half_up_matches_javascript(value, expected):
    assert round_half_up(value) == expected


def test_python_round_would_be_wrong_here():
    assert round(0.125, 2) == 0.12 and round_half_up(0.125) == 0.13


def test_score_arithmetic():
    assert hallucination_score([]) == 0
    assert hallucination_score(verdicts("yes", *["no"] * 7)) == 0.13  # 1/8 = 0.125 rounds up
    assert hallucination_score(verdicts("yes", "yes", "yes", *["no"] * 5)) == 0.38
    assert hallucination_score(verdicts("yes", "yes")) == 1
    assert hallucination_score(verdicts("yes", "no"), scale=0) == 0.5  # 0 means 1
    assert hallucination_score(verdicts("yes", "no"), scale=None) == 0.5
    assert hallucination_score(verdicts("yes", "yes", "yes", *["no"] * 4), scale=10) == 4.29
    assert hallucination_score(verdicts("yes", "yes"), scale=10) == 10


# -- the pipeline ------------------------------------------------------------------------


def test_end_to_end_with_judge_extraction(judge):
    scorer = create_hallucination_scorer(judge, context=["The sky is blue."], extraction="judge")
    result = scorer.run({"output": "The sky is blue. The moon is cheese", "input": "Tell me."})
    assert result.preprocess_step_result == {"claims": ["The sky is blue", "The moon is cheese"]}
    assert [v["verdict"] for v in result.analyze_step_result["verdicts"]] == ["no", "yes"]
    assert [
        v["statement"] for v in result.analyze_step_result["verdicts"]
    ] == result.preprocess_step_result["claims"]
    assert all(v["confidence"] > 0.99 for v in result.analyze_step_result["verdicts"])
    assert result.score == 0.5
    assert result.reason == "Explained."
    assert result.preprocess_prompt.endswith("Text: The sky is blue. The moon is cheese\nClaims: ")
    assert "Context: The sky is blue." in result.analyze_prompt and result.analyze_prompt.endswith(
        "Claim: The sky is blue\nAnswer: "
    )
    assert result.generate_reason_prompt.endswith("Explanation: ")
    assert set(result.usage) == {"preprocess", "analyze", "generateReason"}
    assert result.usage["analyze"].requests == 2
    assert result.usage["analyze"].prefix_reused > 0  # the claims shared the context prefix


def test_claims_that_fell_apart_into_single_words_are_judged_as_sentences(tmp_home):
    from localjudge.scorers.hallucination import fell_apart

    # what the 1.5B extracted from a Q² reply (training/RESULTS.md, session 81)
    assert fell_apart(["well", "it's", "about", "scarlett", "o", "hara", "a", "strong-willed"])
    assert not fell_apart(["Yes", "It opened in 1889."])  # a one-word answer beside a claim
    assert not fell_apart(["yes", "no"])
    assert fell_apart(["the", "sky", "is blue"])
    # a script written without spaces: every claim is one "word" to str.split
    assert not fell_apart(["東京は日本の首都です。", "人口は約1400万人です。", "富士山は高い。"])

    words = ["The", "sky", "is", "blue", "moon"]
    with FakeJudge(make_script(claims=words)) as judge:
        result = create_hallucination_scorer(
            judge, context=["The sky is blue."], extraction="judge", reason="template"
        ).run({"output": "The sky is blue. The moon is cheese."})
    claims = ["The sky is blue.", "The moon is cheese."]  # the output's sentences
    assert result.preprocess_step_result == {"claims": claims}
    assert [v["verdict"] for v in result.analyze_step_result["verdicts"]] == ["no", "yes"]
    assert result.score == 0.5
    assert result.details["extraction"] == "sentences"
    assert result.details["extractionFallback"] == "the judge's claims were single words"
    assert result.preprocess_prompt.endswith("Claims: ")  # the judge was asked first
    assert result.usage["preprocess"].requests == 1


def test_a_judges_claims_with_a_one_word_answer_are_kept(tmp_home):
    with FakeJudge(make_script(claims=["Yes", "The moon is cheese"])) as judge:
        result = create_hallucination_scorer(judge, extraction="judge", reason="template").run(
            {"output": "Yes, the moon is cheese."}
        )
    assert result.preprocess_step_result == {"claims": ["Yes", "The moon is cheese"]}
    assert result.details["extraction"] == "judge" and "extractionFallback" not in result.details


def test_all_claims_hallucinated_with_scale(judge):
    scorer = create_hallucination_scorer(judge, scale=10, extraction="judge")
    result = scorer.run({"output": "The moon is cheese. The moon is near"})
    assert result.score == 10


def test_empty_output_asks_nothing(judge):
    scorer = create_hallucination_scorer(judge, context=["x"], extraction="judge")
    for output in ("", "   \n\t", [{"role": "assistant", "content": ""}]):
        result = scorer.run({"output": output})
        assert result.score == 0 and result.preprocess_step_result == {"claims": []}
        assert result.analyze_step_result == {"verdicts": []}
        assert result.usage == {}  # no claim extraction, no verdicts, no reason request


def test_empty_output_makes_no_claim_requests(tmp_home):
    judge = FakeJudge(make_script())
    scorer = create_hallucination_scorer(judge, extraction="judge", reason="template")
    result = scorer.run({"output": ""})
    judge.close()
    assert judge.engine.plans == []
    assert result.reason == "The score is 0 because the output makes no claims to check."


def test_sentence_extraction_and_auto_mode(tmp_home):
    base = FakeJudge(make_script(), meaningful=False)
    scorer = create_hallucination_scorer(base)  # auto: a base-model judge splits sentences
    result = scorer.run({"output": "The sky is blue. The moon is cheese!"})
    base.close()
    assert result.details["extraction"] == "sentences" and result.preprocess_prompt is None
    assert result.preprocess_step_result["claims"] == ["The sky is blue.", "The moon is cheese!"]
    assert result.to_dict()["judgedBy"]["meaningful"] == {"verdicts": False, "reasons": False}
    assert "not meaningful" in result.to_dict()["judgedBy"]["note"]


def test_auto_extraction_splits_sentences_for_a_verdicts_only_judge(tmp_home):
    """A judge tuned for verdicts alone (registry fitness "verdicts") is meaningful, but its
    free text is not trusted: "auto" splits sentences; "judge" still asks it."""
    tuned = FakeJudge(make_script(), extracts_claims=False)
    auto = create_hallucination_scorer(tuned).run({"output": "The sky is blue. It is day."})
    asked = create_hallucination_scorer(tuned, extraction="judge").run(
        {"output": "The sky is blue. It is day."}
    )
    tuned.close()
    assert auto.details["extraction"] == "sentences" and auto.preprocess_prompt is None
    # its reasons are built from the verdicts and their evidence, so they are meaningful too
    assert auto.to_dict()["judgedBy"]["meaningful"] == {"verdicts": True, "reasons": True}
    assert auto.analyze_step_result["verdicts"][0]["reasonBy"] == "template"
    assert asked.details["extraction"] == "judge" and asked.preprocess_prompt is not None
    plain = FakeJudge(make_script())
    assert create_hallucination_scorer(plain).extraction_mode() == "judge"
    plain.close()


def test_template_reason_skips_the_judge(judge):
    scorer = create_hallucination_scorer(judge, extraction="sentences", reason="template")
    result = scorer.run({"output": "The sky is blue. The moon is cheese."})
    assert result.generate_reason_prompt is None and "generateReason" not in result.usage
    assert result.reason == (
        'The score is 0.5 out of 1 because 1 of 2 claims is not supported by the context: "The moon is cheese.".'
    )


# -- context -----------------------------------------------------------------------------


def context_seen(result) -> str:
    return result.analyze_prompt.rsplit("Context: ", 1)[1].split("\n")[0]


def test_get_context_beats_static_even_when_empty(judge):
    calls = []

    def get_context(*, run, results, score, step):
        calls.append((step, score, run.output, json.dumps(results)))
        return []

    scorer = create_hallucination_scorer(
        judge,
        context=["static"],
        get_context=get_context,
        extraction="sentences",
        reason="template",
    )
    result = scorer.run({"output": "The moon is cheese."})
    assert context_seen(result) == "(no context given)"
    assert [c[0] for c in calls] == ["analyze", "generateReason"]
    assert calls[0][1] is None and calls[1][1] == result.score == 1
    assert '"claims"' in calls[0][3] and '"verdicts"' in calls[1][3]


def test_async_get_context(judge):
    async def get_context(*, run, results, score, step):
        return ["from the hook"]

    scorer = create_hallucination_scorer(
        judge, get_context=get_context, extraction="sentences", reason="template"
    )
    assert context_seen(scorer.run({"output": "The sky is blue."})) == "from the hook"


def test_get_context_takes_any_subset_of_its_keywords(judge):
    # Mastra passes {run, results, step}; a function may read any subset, as the seed's own
    # `lambda *, run, step: ...` does, or take **kwargs
    hooks = [
        lambda *, run, step: [f"subset at {step}"],
        lambda run, **rest: [f"kwargs {sorted(rest)}"],
        lambda: ["none at all"],
    ]
    seen = []
    for hook in hooks:
        scorer = create_hallucination_scorer(
            judge, get_context=hook, extraction="sentences", reason="template"
        )
        seen.append(context_seen(scorer.run({"output": "The sky is blue."})))
    assert seen == ["subset at analyze", "kwargs ['results', 'score', 'step']", "none at all"]


def test_run_context_beats_static_and_hook_beats_both(judge):
    static = create_hallucination_scorer(
        judge, context=["static"], extraction="sentences", reason="template"
    )
    assert context_seen(static.run({"output": "x.", "context": ["item"]})) == "item"
    assert context_seen(static.run({"output": "x."})) == "static"
    hooked = create_hallucination_scorer(
        judge,
        context=["static"],
        get_context=lambda **_: ["hook"],
        extraction="sentences",
        reason="template",
    )
    assert context_seen(hooked.run({"output": "x.", "context": ["item"]})) == "hook"


def test_get_context_that_raises(judge):
    def broken(**_):
        raise KeyError("tool_results")

    scorer = create_hallucination_scorer(judge, get_context=broken, extraction="sentences")
    with pytest.raises(ScorerError, match="get_context raised KeyError"):
        scorer.run({"output": "x."})


def test_bad_context_entries(judge):
    with pytest.raises(ScorerInputError, match="entry 1 is int"):
        create_hallucination_scorer(judge, context=["ok", 3])
    with pytest.raises(ScorerInputError, match="list of strings"):
        create_hallucination_scorer(judge, context="a string")
    scorer = create_hallucination_scorer(
        judge, get_context=lambda **_: [None], extraction="sentences"
    )
    with pytest.raises(ScorerInputError, match="get_context's result: entry 0 is NoneType"):
        scorer.run({"output": "x."})


def test_context_larger_than_the_window(tmp_home):
    # judged in evidence windows; judged whole (windows="off"), it cannot fit
    judge = FakeJudge(n_ctx=2000)  # rule_script: supported when a window holds the claim
    context = ["word " * 1000, "The sky is blue."]
    scorer = create_hallucination_scorer(judge, context=context, extraction="sentences")
    (verdict,) = scorer.run({"output": "The sky is blue."}).analyze_step_result["verdicts"]
    assert verdict["evidence"]["text"].endswith("The sky is blue.")
    whole = create_hallucination_scorer(
        judge, context=context, extraction="sentences", windows="off"
    )
    with pytest.raises(PromptTooLongError, match="judge context of 2000 tokens"):
        whole.run({"output": "The sky is blue."})
    judge.close()


# -- runs and results --------------------------------------------------------------------


def test_missing_and_malformed_output(judge):
    scorer = create_hallucination_scorer(judge)
    with pytest.raises(ScorerInputError, match="no 'output'"):
        scorer.run({"input": "hi"})
    with pytest.raises(ScorerInputError, match="not bytes"):
        scorer.run({"output": b"\x00\xff"})
    for unreadable in (
        {"data": "a dict without content or text"},
        ["plain", "strings"],
        [{"role": "user", "content": "no assistant turn"}],
        [],
        {"role": "user", "content": "a user message"},
    ):
        with pytest.raises(ScorerInputError, match="no assistant text"):
            scorer.run({"output": unreadable})
    kept = create_hallucination_scorer(judge, extraction="sentences", reason="template").run(
        {"output": "x.", "metadata": {"a": 1}, "runtimeContext": {"b": 2}}
    )
    assert kept.score >= 0


def test_message_shapes_and_camel_case(judge):
    scorer = create_hallucination_scorer(judge, extraction="sentences", reason="template")
    openai_run = {
        "input": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Sky?"}],
        "output": [{"role": "assistant", "content": "The sky is blue."}],
        "runId": "run-1",
        "groundTruth": "blue",
        "requestContext": {"user": "u1"},
    }
    data = scorer.run(openai_run).to_dict()
    assert (
        data["runId"] == "run-1"
        and data["groundTruth"] == "blue"
        and data["requestContext"] == {"user": "u1"}
    )
    assert data["preprocessStepResult"] == {"claims": ["The sky is blue."]}
    # Mastra omits the prompt of a step that ran none; "judge" is @mastra/core's key
    assert "preprocessPrompt" not in data and "judge" not in data
    assert data["judgedBy"]["model"] == "fake-judge"
    for key in (
        "analyzeStepResult",
        "analyzePrompt",
        "generateReasonPrompt",
        "scorerId",
        "usage",
    ):
        assert key in data
    mastra_run = {
        "input": {
            "inputMessages": [
                {"role": "user", "content": {"parts": [{"type": "text", "text": "Sky?"}]}}
            ]
        },
        "output": [
            {
                "id": "m1",
                "role": "assistant",
                "content": {"format": 2, "parts": [{"type": "text", "text": "Grass is green."}]},
            }
        ],
    }
    result = scorer.run(mastra_run)
    assert result.preprocess_step_result == {"claims": ["Grass is green."]}
    assert len(result.run_id) == 36  # a uuid when none is given
    json.loads(result.to_json())


def test_extract_tool_results_mastra_and_openai():
    mastra = [
        {
            "role": "assistant",
            "content": {
                "toolInvocations": [
                    {
                        "state": "result",
                        "toolName": "weather",
                        "toolCallId": "c1",
                        "args": {"city": "Oslo"},
                        "result": {"t": 3},
                    },
                    {"state": "call", "toolName": "weather", "toolCallId": "c2", "args": {}},
                ]
            },
        },
        {
            "role": "assistant",
            "content": {
                "parts": [
                    {"type": "text", "text": "hi"},
                    {
                        "type": "tool-invocation",
                        "toolInvocation": {
                            "state": "result",
                            "toolName": "time",
                            "toolCallId": "c3",
                            "result": "noon",
                        },
                    },
                ]
            },
        },
    ]
    assert extract_tool_results(mastra) == [
        {
            "tool_name": "weather",
            "tool_call_id": "c1",
            "args": {"city": "Oslo"},
            "result": {"t": 3},
        },
        {"tool_name": "time", "tool_call_id": "c3", "args": {}, "result": "noon"},
    ]
    openai = [
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "news", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"t": 3}'},
        {"role": "assistant", "content": "It is 3 degrees."},
    ]
    assert extract_tool_results(openai) == [
        {
            "tool_name": "weather",
            "tool_call_id": "call_1",
            "args": {"city": "Oslo"},
            "result": {"t": 3},
        }
    ]
    assert extract_tool_results("not a transcript") == []


def test_tool_results_as_context(judge):
    output = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "function": {"name": "w", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c", "content": '{"sky": "blue"}'},
        {"role": "assistant", "content": "The sky is blue."},
    ]

    def get_context(*, run, **_):
        return [
            json.dumps({"tool": t["tool_name"], "result": t["result"]})
            for t in extract_tool_results(run.output)
        ]

    scorer = create_hallucination_scorer(
        judge, get_context=get_context, extraction="sentences", reason="template"
    )
    result = scorer.run({"output": output})
    assert context_seen(result) == '{"tool": "w", "result": {"sky": "blue"}}'
    assert result.preprocess_step_result == {"claims": ["The sky is blue."]}


def test_sentence_splitter_languages():
    assert split_sentences("Dr. Smith came at 3.5 p.m. today. He left! Did he?\nYes") == [
        "Dr. Smith came at 3.5 p.m. today.",
        "He left!",
        "Did he?",
        "Yes",
    ]
    assert split_sentences("東京は首都です。人口は多い！「はい。」と彼は言った。") == [
        "東京は首都です。",
        "人口は多い！",
        "「はい。」と彼は言った。",
    ]
    assert split_sentences("  ") == []
    # a list's number is part of its item; a number ending a sentence still ends it
    assert split_sentences(
        "I found:\n1. It opens at 9. 2. Entry is free.\nBuilt in 1990. Next."
    ) == [
        "I found:",
        "1. It opens at 9.",
        "2. Entry is free.",
        "Built in 1990.",
        "Next.",
    ]
    # a.m., p.m. and etc. end a sentence when a capital follows; a title never does
    assert split_sentences("It opens at 9 a.m. It shuts at 5 p.m. Ask Dr. Who, etc. Then go.") == [
        "It opens at 9 a.m.",
        "It shuts at 5 p.m.",
        "Ask Dr. Who, etc.",
        "Then go.",
    ]


@pytest.mark.parametrize(
    ("sentence", "why"),
    [
        ("Is there anything else I can help with?", "courtesy"),
        ("Have you ever been to Paris?", "question"),
        ("Do you know what time it opens?", "question"),
        ("富士山は高いですか？", "question"),
        ("Thanks for waiting!", "courtesy"),
        ("Thank you so much.", "courtesy"),
        ("Sorry for the delay.", "courtesy"),
        ("Have a nice day!", "courtesy"),
        ("Let me know if you have any other questions.", "courtesy"),
        ("Hope this helps!", "courtesy"),
        ("ありがとうございます。", "courtesy"),
        ("## Return policy", "heading"),
        ("#hashtag facts are claims", None),
        ("😊", "no words"),
        ("...", "no words"),
        # claims, judged as before
        ("Did you know it opened in 1990?", None),
        ("It opens at 9, right?", None),
        ("Yeah, it was a big cliché, right?", None),
        ("It opens at 9; would you like directions?", None),
        ("Thanks, it arrives on Thursday.", None),
        ("Sure, the store opens at 9.", None),
        ("Let me know if the 5 pm slot works.", None),
        ("Yes.", None),
        ("I love dogs!", None),
        ("It was a pioneering device.", None),
        ("Maybe read the tracking page before bothering us.", None),
    ],
)
def test_what_states_nothing_is_not_a_claim(sentence, why):
    from localjudge.scorers.claims import why_not_a_claim

    assert why_not_a_claim(sentence) == why


def test_sentence_claims_leave_out_what_states_nothing_and_say_so(judge):
    output = "Thanks for waiting! The sky is blue. The moon is cheese. Anything else?"
    result = create_hallucination_scorer(
        judge, context=["The sky is blue."], extraction="sentence-claims", reason="template"
    ).run({"output": output})
    assert result.preprocess_step_result == {
        "claims": ["The sky is blue.", "The moon is cheese."],
        "skipped": [
            {"sentence": "Thanks for waiting!", "why": "courtesy"},
            {"sentence": "Anything else?", "why": "courtesy"},
        ],
    }
    assert result.score == 0.5  # 1 of 2 claims, not 1 of 4 sentences
    private = result.to_dict(store_text=False)
    assert private["preprocessStepResult"] == {
        "numClaims": 2,
        "skipped": [{"why": "courtesy"}, {"why": "courtesy"}],
    }
    assert "Thanks" not in json.dumps(private)
    assert result.reason.endswith("(2 sentences state nothing to check: 2 courtesies).")
    every = create_hallucination_scorer(
        judge, context=["The sky is blue."], extraction="sentences", reason="template"
    ).run({"output": output})
    assert every.preprocess_step_result == {"claims": split_sentences(output)}  # the default
    assert every.details["extraction"] == "sentences"
    nothing = create_hallucination_scorer(
        judge, context=["The sky is blue."], extraction="sentence-claims", reason="template"
    ).run({"output": "Hello! How can I help?"})
    assert nothing.score == 0 and nothing.analyze_step_result == {"verdicts": []}
    assert nothing.reason == (
        "The score is 0 because the output makes no claims to check"
        " (2 sentences state nothing to check: 1 question, 1 courtesy)."
    )


def test_run_inside_an_event_loop_works_like_jupyter(judge):
    import asyncio

    scorer = create_hallucination_scorer(judge, extraction="sentences", reason="template")

    async def inside():
        blocking = scorer.run({"output": "The sky is blue."})  # runs in a helper thread
        awaited = await scorer.run_async({"output": "The sky is blue."})
        return blocking, awaited

    blocking, awaited = asyncio.run(inside())
    assert blocking.score == awaited.score == 0


def test_claim_reasons_flagged_explains_only_hallucinated_claims(tmp_home):
    from localjudge.testing import FakeJudge

    with FakeJudge() as judge:
        scorer = create_hallucination_scorer(
            judge, context=["The sky is blue."], extraction="sentences", claim_reasons="flagged"
        )
        result = scorer.run({"output": "The sky is blue. The moon is cheese."})
        everything = create_hallucination_scorer(
            judge, context=["The sky is blue."], extraction="sentences"
        ).run({"output": "The sky is blue. The moon is cheese."})
    supported, invented = result.analyze_step_result["verdicts"]
    assert (supported["verdict"], supported["reasonBy"]) == ("no", "template")
    assert supported["reason"] == 'Supported by the context: "The sky is blue."'
    assert (invented["verdict"], invented["reasonBy"]) == ("yes", "judge")
    assert invented["reason"] == "Checked."
    assert result.score == everything.score and result.to_dict()["claimReasons"] == "flagged"
    assert everything.analyze_step_result["verdicts"][0]["reasonBy"] == "judge"
    assert result.usage["analyze"].generated_tokens < everything.usage["analyze"].generated_tokens
    with pytest.raises(ValueError, match="claim_reasons"):
        create_hallucination_scorer(judge, claim_reasons="some")


def test_template_reasons_count_one_claim_in_the_singular():
    from localjudge.scorers.hallucination import hallucination_template_reason

    one = [{"statement": "The moon is cheese.", "verdict": "yes", "evidence": None}]
    assert hallucination_template_reason(1, 1, one) == (
        "The score is 1 out of 1 because its one claim is not supported by the context: "
        '"The moon is cheese.".'
    )
    fine = [{**one[0], "verdict": "no"}]
    assert hallucination_template_reason(0, 1, fine) == (
        "The score is 0 because the context supports its one claim."
    )
    both = [one[0], {**one[0], "statement": "Mars is cheese."}]
    assert "because 2 of 2 claims are not supported" in hallucination_template_reason(1, 1, both)
