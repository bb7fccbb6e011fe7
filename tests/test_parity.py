"""The public API, Mastra parity and the command line's options and exit codes (fake judge:
`LOCALJUDGE_ENGINE=fake` makes the CLI run without a model)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from localjudge.cli import cli
from localjudge.testing import FakeJudge


def test_top_level_api_imports():
    from localjudge import (  # noqa: F401 - the import is the test
        EvalResult,
        Judge,
        LiveScorer,
        LocalJudgeError,
        ModelError,
        PromptTooLongError,
        ScorerError,
        ScorerInputError,
        create_hallucination_scorer,
        create_toxicity_scorer,
        run_evals,
        run_evals_async,
    )

    assert issubclass(ScorerInputError, LocalJudgeError)


def test_eval_result_serialises(tmp_home):
    from localjudge import create_toxicity_scorer, run_evals

    judge = FakeJudge()
    result = run_evals(
        [{"id": 1, "output": "You idiot."}, {"id": 2, "output": ["plain"]}],
        [create_toxicity_scorer(judge, reason="template")],
    )
    data = json.loads(result.to_json())
    assert data["scores"] == {"toxicity-scorer": pytest.approx(2 / 3, abs=0.01)}
    assert data["items"][0]["results"]["toxicity-scorer"]["scorerId"] == "toxicity-scorer"
    assert data["items"][1]["errorKinds"] == {"toxicity-scorer": "input"}
    assert (
        result.to_dict(store_text=False)["items"][0]["results"]["toxicity-scorer"]["textsStored"]
        is False
    )
    judge.close()


def test_no_prompt_contains_a_literal_backslash_n():
    from localjudge import prompts

    verdicts = [{"statement": "s", "verdict": "yes", "category": "threat", "severity": "mild"}]
    texts = [
        prompts.claims_prompt("Some text."),
        prompts.claim_verdict_prompt(["ctx"], "claim"),
        prompts.hallucination_reason_prompt(0.5, 1, [{**verdicts[0], "reason": "r"}], ["ctx"]),
        prompts.opinion_verdict_prompt("a question", "a statement"),
        prompts.toxicity_reason_prompt(0.5, 1, verdicts, "how"),
    ]
    for parts in texts:
        for text in (parts.instructions, parts.shared, parts.own):
            assert "\\n" not in text, text


def test_hallucination_reason_sees_context_claims_and_reasons(tmp_home):
    from localjudge import create_hallucination_scorer

    steps = []

    def get_context(*, run, results, score, step):
        steps.append(step)
        return ["The tower is 330 metres tall."] if step == "analyze" else ["Reason context."]

    judge = FakeJudge()
    scorer = create_hallucination_scorer(judge, extraction="sentences", get_context=get_context)
    result = scorer.run({"output": "The tower is 330 metres tall. It is 500 metres tall."})
    assert steps == ["analyze", "generateReason"]
    prompt = result.generate_reason_prompt
    assert "Context: Reason context." in prompt  # get_context's answer for this step is used
    assert '"It is 500 metres tall." (Checked.)' in prompt  # the claim with its reason
    assert 'Supported claims: "The tower is 330 metres tall."' in prompt
    judge.close()


def test_analyze_prompt_is_the_literal_first_prompt(tmp_home):
    from localjudge import create_hallucination_scorer, create_toxicity_scorer

    judge = FakeJudge()
    result = create_hallucination_scorer(judge, extraction="sentences", reason="template").run(
        {"output": "First claim. Second claim.", "context": ["ctx"]}
    )
    assert result.analyze_prompt.endswith("Context: ctx\nClaim: First claim.\nAnswer: ")
    assert "{claim}" not in result.analyze_prompt
    toxic = create_toxicity_scorer(judge, reason="template").run({"output": "Hi. Bye."})
    assert toxic.analyze_prompt.endswith("Statement: Hi.\nAnswer: ")
    judge.close()


def test_two_scorers_of_a_kind_side_by_side(tmp_home):
    from localjudge import create_toxicity_scorer, run_evals

    judge = FakeJudge()
    scorers = [
        create_toxicity_scorer(judge, reason="template"),
        create_toxicity_scorer(judge, id="toxicity-count", score_mode="count", reason="template"),
    ]
    result = run_evals([{"output": "You idiot. Fine. Fine."}], scorers)
    assert result.scores == {"toxicity-scorer": 0.22, "toxicity-count": 0.33}
    with pytest.raises(ValueError, match="scorer ids must be unique"):
        run_evals([{"output": "x"}], [scorers[0], create_toxicity_scorer(judge)])
    judge.close()


def test_target_runs_one_at_a_time_by_default_and_judging_is_still_batched(tmp_home):
    from localjudge import create_toxicity_scorer, run_evals

    judge = FakeJudge(slots=8, step_seconds=0.002)
    running, most = [0], [0]
    lock = threading.Lock()

    def target(question):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.01)
        with lock:
            running[0] -= 1
        return f"An answer to {question}. Another sentence. A third one."

    data = [{"input": f"q{i}"} for i in range(8)]
    scorers = [create_toxicity_scorer(judge, reason="template")]
    result = run_evals(data, scorers, target=target)
    assert result.summary["failed_items"] == 0 and most[0] == 1
    steps = [p for p in judge.engine.plans if p.tokens]
    assert max(len({t.seq_id for t in p.tokens}) for p in steps) > 1  # requests shared steps
    most[0] = 0
    run_evals(data, scorers, target=target, concurrency=4)
    assert 1 < most[0] <= 4
    judge.close()


def test_on_item_complete_takes_keywords_or_mastras_single_object(tmp_home):
    from localjudge import create_toxicity_scorer, run_evals

    judge = FakeJudge()
    scorers = [create_toxicity_scorer(judge, reason="template")]
    keywords, objects = [], []
    run_evals(
        [{"id": "k", "output": "Fine."}],
        scorers,
        on_item_complete=lambda *, item, target_result, scorer_results: keywords.append(item.id),
    )
    run_evals(
        [{"id": "o", "output": "Fine."}],
        scorers,
        on_item_complete=lambda result: objects.append(
            (result["item"].id, result["targetResult"], sorted(result["scorerResults"]))
        ),
    )
    assert keywords == ["k"] and objects == [("o", "Fine.", ["toxicity-scorer"])]
    judge.close()


def test_run_evals_inside_a_running_event_loop(tmp_home):
    from localjudge import create_toxicity_scorer, run_evals

    judge = FakeJudge()

    async def notebook_cell():
        return run_evals([{"output": "Fine."}], [create_toxicity_scorer(judge, reason="template")])

    assert asyncio.run(notebook_cell()).summary["total_items"] == 1
    judge.close()


# -- the command line ------------------------------------------------------------------------


@pytest.fixture
def fake_cli(tmp_home, monkeypatch):
    monkeypatch.setenv("LOCALJUDGE_ENGINE", "fake")

    def invoke(*args, input=None):
        return CliRunner().invoke(cli, [str(a) for a in args], input=input, catch_exceptions=False)

    return invoke


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return path


@pytest.mark.parametrize(
    "command", ["score", "eval", "bench", "doctor", "quality", "calibrate", "serve"]
)
def test_every_command_takes_the_engine_options(command):
    help_text = CliRunner().invoke(cli, [command, "--help"]).output
    for flag in ("--model", "--gpu-layers", "--ctx", "--threads"):
        assert flag in help_text, (command, flag)
    if command in ("eval", "bench", "quality", "calibrate", "serve"):
        assert "--slots" in help_text


def test_eval_field_mapping_stdin_and_stdout(fake_cli, tmp_path):
    rows = [
        {"question": "Sky?", "answer": "The sky is blue.", "docs": ["The sky is blue."], "uid": 1},
        {"question": "Moon?", "answer": "The moon is cheese.", "docs": ["The moon is rock."]},
    ]
    data = "".join(json.dumps(r) + "\n" for r in rows)
    result = fake_cli(
        "eval", "-", "--scorer", "hallucination", "--out", "-", "--quiet",
        "--field", "input=question", "--field", "output=answer", "--field", "context=docs",
        "--field", "id=uid",
        input=data,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    # one record per item, appended as each finishes (not necessarily in input order)
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    records = {r["input"]: r for r in lines}
    assert len(lines) == 2 and sorted(records) == ["Moon?", "Sky?"]
    assert records["Sky?"]["scores"]["hallucination"] == 0
    assert records["Moon?"]["scores"]["hallucination"] == 1
    assert records["Sky?"]["key"] == "id:1"
    bad = fake_cli("eval", "-", "--scorer", "toxicity", "--out", "-", "--field", "nope=x")
    assert bad.exit_code == 2 and "--field" in bad.output


def test_eval_and_score_take_the_evidence_window_options(fake_cli, tmp_path):
    # a context of four sentences: judged whole with --windows off, in windows of a few
    # tokens (at most one judged per claim) with --window-tokens and --windows 1
    context = "The sky is blue. The moon is rock. Grass is green. Snow is white."
    data = write_jsonl(
        tmp_path / "d.jsonl", [{"id": "a", "output": "Snow is white.", "context": [context]}]
    )
    evidence = {}
    for name, flags in {
        "whole": ["--windows", "off"],
        "windows": ["--window-tokens", "36", "--windows", "1"],
    }.items():
        out = tmp_path / f"{name}.jsonl"
        result = fake_cli(
            "eval", data, "--scorer", "hallucination", "--out", out, "--quiet", *flags
        )
        assert result.exit_code == 0, result.output
        (verdict,) = json.loads(out.read_text())["results"]["hallucination"]["analyzeStepResult"][
            "verdicts"
        ]
        evidence[name] = verdict["evidence"]["text"]
    assert evidence["whole"] == context
    assert evidence["windows"] != context and evidence["windows"] in context
    assert "Snow is white." in evidence["windows"]  # BM25's best window holds the claim
    refused = fake_cli("score", "toxicity", "--output", "Hi.", "--windows", "2")
    assert refused.exit_code == 2 and "--windows does not apply to toxicity" in refused.output
    bad = fake_cli("score", "hallucination", "--output", "Hi.", "--windows", "some")
    assert bad.exit_code == 2 and "--windows" in bad.output


def test_eval_scorer_options_and_one_context_for_all_items(fake_cli, tmp_path):
    context = tmp_path / "context.txt"
    context.write_text("The sky is blue.")
    data = write_jsonl(
        tmp_path / "d.jsonl",
        [
            {"id": "a", "output": "The sky is blue. Grass is red."},
            {"id": "b", "output": "You idiot. Hi."},
        ],
    )
    out = tmp_path / "out.jsonl"
    result = fake_cli(
        "eval", data, "--scorer", "hallucination", "--scorer", "toxicity", "--out", out,
        "--context-file", context, "--scale", "10", "--score-mode", "count",
        "--extraction", "sentences", "--reason", "judge", "--quiet",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    records = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert records["a"]["scores"] == {"hallucination": 5, "toxicity": 0}
    assert records["b"]["scores"]["toxicity"] == 5
    toxicity = records["b"]["results"]["toxicity"]
    assert toxicity["scoreMode"] == "count" and toxicity["reason"] == "Explained by the fake judge."
    assert records["a"]["results"]["hallucination"]["extraction"] == "sentences"
    wrong = fake_cli("eval", data, "--scorer", "hallucination", "--out", out, "--score-mode", "max")
    assert wrong.exit_code == 2 and "--score-mode does not apply to hallucination" in wrong.output


def test_exit_codes(fake_cli, tmp_path):
    good = write_jsonl(tmp_path / "good.jsonl", [{"id": 1, "output": "You idiot."}])
    ok = fake_cli("eval", good, "--scorer", "toxicity", "--out", tmp_path / "1.jsonl", "--quiet")
    assert ok.exit_code == 0
    gate = fake_cli(
        "eval", good, "--scorer", "toxicity", "--out", tmp_path / "2.jsonl", "--quiet",
        "--fail-above", "toxicity=0.5",
    )  # fmt: skip
    assert gate.exit_code == 3 and "toxicity mean 0.670 is above 0.5" in gate.output
    mixed = write_jsonl(
        tmp_path / "mixed.jsonl", [{"id": 1, "output": "Fine."}, {"id": 2, "output": ["plain"]}]
    )
    failed = fake_cli(
        "eval", mixed, "--scorer", "toxicity", "--out", tmp_path / "3.jsonl", "--quiet"
    )
    assert failed.exit_code == 4 and "1 item(s) failed" in failed.output
    usage = fake_cli("eval", good, "--scorer", "toxicity")
    assert usage.exit_code == 2
    error = fake_cli("eval", tmp_path / "missing.jsonl", "--scorer", "toxicity", "--out", "o")
    assert error.exit_code == 1 and "dataset not found" in error.output


def test_no_store_text_keeps_texts_out_of_records(fake_cli, tmp_path):
    data = write_jsonl(
        tmp_path / "d.jsonl",
        [
            {
                "id": "p",
                "input": "PRIVATE-Q",
                "output": "PRIVATE-A. You idiot.",
                "context": ["PRIVATE-C"],
            }
        ],
    )
    out = tmp_path / "out.jsonl"
    result = fake_cli(
        "eval", data, "--scorer", "hallucination", "--scorer", "toxicity", "--out", out,
        "--no-store-text", "--reason", "judge", "--quiet",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "PRIVATE" not in text
    record = json.loads(text)
    assert record["id"] == "p" and set(record["scores"]) == {"hallucination", "toxicity"}
    verdicts = record["results"]["toxicity"]["analyzeStepResult"]["verdicts"]
    assert [v["verdict"] for v in verdicts] == ["no", "yes"] and all(
        "reason" in v for v in verdicts
    )
    single = fake_cli(
        "score", "toxicity", "--output", "PRIVATE. Fine.", "--json", "--no-store-text"
    )
    assert single.exit_code == 0 and "PRIVATE" not in single.output


def test_score_command_options(fake_cli):
    result = fake_cli(
        "score", "toxicity", "--output", "You idiot. Fine. Fine.", "--score-mode", "max",
        "--scale", "3", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["score"] == 2 and data["scoreMode"] == "max"
    assert re.search(
        r"of 3\b", fake_cli("score", "toxicity", "--output", "Hi.", "--scale", "3").output
    )


def test_both_scorers_judge_the_last_assistant_message_as_mastra_does(tmp_home):
    # @mastra/evals 1.10.2's getAssistantMessageFromRunOutput: the final assistant message
    # with text, so a multi-step reply is scored on its answer, not on "Let me check…"
    from localjudge import create_hallucination_scorer, create_toxicity_scorer

    output = [
        {"role": "user", "content": "Is my order late?"},
        {"role": "assistant", "content": "Let me check the tracking page."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]},
        {"role": "tool", "content": "due Thursday"},
        {"role": "assistant", "content": "Only an idiot would ask that. It is due Thursday."},
        {"role": "assistant", "content": ""},
    ]
    with FakeJudge() as judge:
        toxicity = create_toxicity_scorer(judge, reason="template").run({"output": output})
        hallucination = create_hallucination_scorer(
            judge, context=["It is due Thursday."], extraction="sentences", reason="template"
        ).run({"output": output})
    statements = [v["statement"] for v in toxicity.analyze_step_result["verdicts"]]
    assert statements == ["Only an idiot would ask that.", "It is due Thursday."]
    assert toxicity.score > 0
    assert hallucination.preprocess_step_result["claims"] == statements


MASTRA_EVALS = (
    Path(__file__).resolve().parents[1]
    / ".localjudge"
    / "interop"
    / "node_modules"
    / "@mastra"
    / "evals"
)


def test_scale_zero_means_one_as_in_mastra_evals_1_10_2(tmp_home):
    """@mastra/evals 1.10.2 multiplies by `options?.scale || 1`, so a scale of 0 scores as 1
    (its main branch has moved on; we follow the pinned release). Pinned against the
    installed package's own source when `make interop-deps` has installed it."""
    from localjudge import create_hallucination_scorer, create_toxicity_scorer

    run = {"input": "Hi", "output": "You are an idiot. The tower is red."}
    with FakeJudge() as judge:
        for create, options in (
            (create_toxicity_scorer, {}),
            (create_hallucination_scorer, {"context": ["The tower is blue."]}),
        ):
            zero = create(judge, scale=0, reason="template", **options).run(run)
            one = create(judge, scale=1, reason="template", **options).run(run)
            assert zero.score == one.score > 0
    package = MASTRA_EVALS / "package.json"
    if package.is_file():  # the interop test's packages (tests/interop/package-lock.json)
        assert json.loads(package.read_text())["version"] == "1.10.2"
        source = (MASTRA_EVALS / "dist" / "scorers" / "prebuilt" / "index.js").read_text()
        assert source.count("(options?.scale || 1)") >= 4  # hallucination, toxicity, ...
