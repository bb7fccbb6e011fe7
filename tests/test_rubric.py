"""The rubric scorer (`create_rubric_scorer`, `eval --scorer rubric:FILE`, serve's
"rubric"): a user's criterion under the verdict grammar. Fake judge for the exact logic,
the real engine for the grammar and probabilities."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from click.testing import CliRunner

from localjudge import create_rubric_scorer, make_scorer
from localjudge.testing import FakeJudge

RUBRIC = "Does the text refuse the user's request?"


def refusal_script(prompt: str) -> str:
    texts = re.findall(r"Text: (.*)\nAnswer: ", prompt)
    if not texts:  # the reason step
        return '{"reason":"Explained."}'
    text = texts[-1]
    if " not " in f" {text} " or text.startswith("No"):
        return '{"verdict":"refuses","reason":"It declines."}'
    return '{"verdict":"complies","reason":"It helps."}'


ITEM = {"input": "Delete the database.", "output": "I will not do that. Here is a backup guide."}


def test_a_criterion_judged_per_sentence_with_its_own_verdicts_and_scores(tmp_home):
    with FakeJudge(refusal_script) as judge:
        scorer = create_rubric_scorer(
            judge, rubric=RUBRIC, verdicts=["refuses", "complies"], per="sentence",
            score={"refuses": 1, "complies": 0.25}, reason="template", threshold=0.5,
        )  # fmt: skip
        result = scorer.run(ITEM)
        whole = create_rubric_scorer(judge, rubric=RUBRIC, verdicts=["refuses", "complies"])
        one = whole.run(ITEM)
    verdicts = result.analyze_step_result["verdicts"]
    assert [v["verdict"] for v in verdicts] == ["refuses", "complies"]
    assert all(set(v["probabilities"]) == {"refuses", "complies"} for v in verdicts)
    assert result.score == pytest.approx((1 + 0.25) / 2) and result.passed is False
    assert "1 'refuses', 1 'complies'" in result.reason and '"I will not do that."' in result.reason
    private = result.to_dict(store_text=False)
    assert "I will not" not in json.dumps(private) and "sentence 1" in private["reason"]
    assert [v["reason"] for v in private["analyzeStepResult"]["verdicts"]] == [
        "Judged 'refuses' against the criterion.",
        "Judged 'complies' against the criterion.",
    ]  # a rubric verdict's reason, not a claim's "No context was given"
    assert result.prompt_version.startswith("rubric/1/") and result.to_dict()["per"] == "sentence"
    assert len(one.analyze_step_result["verdicts"]) == 1 and one.score == 1.0  # the whole output


def test_bad_rubric_options_are_clear_errors(tmp_home):
    with FakeJudge() as judge:
        for bad, says in (
            ({"rubric": " "}, "non-empty"),
            ({"rubric": RUBRIC, "verdicts": ["yes"]}, "two or more"),
            ({"rubric": RUBRIC, "verdicts": ["a", "a"]}, "distinct"),
            ({"rubric": RUBRIC, "verdicts": "yes,no"}, "list of strings"),
            ({"rubric": RUBRIC, "verdicts": ["a", 'b"']}, "plain"),
            ({"rubric": RUBRIC, "score": {"yes": 1}}, "every verdict"),
            ({"rubric": RUBRIC, "per": "word"}, "per"),
        ):
            with pytest.raises(ValueError, match=says):
                create_rubric_scorer(judge, **bad)


def test_rubric_files_in_eval_and_the_rubric_scorer_over_http(tmp_path, tmp_home, monkeypatch):
    from localjudge.cli import cli
    from localjudge.serve import create_app

    as_json = tmp_path / "refusal.json"
    as_json.write_text(json.dumps({"rubric": RUBRIC, "verdicts": ["refuses", "complies"]}))
    as_text = tmp_path / "refusal.txt"
    as_text.write_text(RUBRIC + "\n")
    with FakeJudge(refusal_script) as judge:
        from_json = make_scorer(f"rubric:{as_json}", judge)
        from_text = make_scorer(f"rubric:{as_text}", judge)
    assert from_json.verdicts == ("refuses", "complies") and from_json.id == f"rubric:{as_json}"
    assert from_text.rubric == RUBRIC and from_text.verdicts == ("yes", "no")
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": 1, **ITEM}) + "\n")
    out = tmp_path / "out.jsonl"
    monkeypatch.setenv("LOCALJUDGE_ENGINE", "fake")
    done = CliRunner().invoke(
        cli, ["eval", str(data), "--scorer", f"rubric:{as_json}", "--out", str(out), "--quiet"]
    )
    assert done.exit_code == 0, done.output
    record = json.loads(out.read_text())
    assert set(record["scores"]) == {f"rubric:{as_json}"}
    missing = CliRunner().invoke(cli, ["eval", str(data), "--scorer", "rubric:/no/such.json"])
    assert missing.exit_code != 0 and "Traceback" not in missing.output

    judge = FakeJudge(refusal_script)
    app = create_app(judge, close_judge=False)

    async def main():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            options = {"rubric": RUBRIC, "verdicts": ["refuses", "complies"], "reason": "template"}
            ok = await client.post("/v1/scorers/rubric/run", json={**ITEM, "options": options})
            assert ok.status_code == 200 and ok.json()["score"] == 1.0
            no_rubric = await client.post("/v1/scorers/rubric/run", json={"output": "x"})
            assert no_rubric.status_code == 422
            a_file = await client.post(f"/v1/scorers/rubric:{as_json}/run", json={"output": "x"})
            assert a_file.status_code == 404  # no reading the server's files

    import asyncio

    asyncio.run(main())
    judge.close()


def test_a_rubric_reaches_quality_on_labelled_rows(tmp_path, tmp_home, monkeypatch):
    """`quality --data ROWS --task rubric:FILE`: each row's text judged against the
    criterion; a true label is the rubric's first verdict."""
    from localjudge.cli import cli
    from localjudge.quality.labelled import measure
    from localjudge.quality.rows import read_rows

    rubric = tmp_path / "refusal.json"
    rubric.write_text(json.dumps({"rubric": RUBRIC, "verdicts": ["refuses", "complies"]}))
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"input": "Delete it.", "text": "I will not do that.", "label": True},
                {"input": "Delete it.", "text": "Done, it is deleted.", "label": False},
                {"input": "Help me.", "text": "No, I cannot.", "label": True},
                {"input": "Help me.", "text": "Here is how.", "label": True},  # judged wrong
            ]
        )
        + "\n"
    )
    task = f"rubric:{rubric}"
    read, bad = read_rows(rows, task)
    with FakeJudge(refusal_script, extracts_claims=False) as judge:  # verdicts only
        report = measure(judge, read, task, source="rows.jsonl", bad_rows=bad)
    data = report.to_dict()
    assert data["task"] == task and data["flagged"] == "refuses" and data["rows"] == 4
    assert data["agreement"]["judge"]["confusion"] == {"tp": 2, "fp": 0, "tn": 1, "fn": 1}
    assert set(data["agreement"]) == {"judge", "majority class"}
    assert report.reasons[1] == "Judged 'complies' against the criterion."  # built, not written

    monkeypatch.setenv("LOCALJUDGE_ENGINE", "fake")  # its rule script answers "yes" / "no"
    plain = tmp_path / "refusal.txt"
    plain.write_text(RUBRIC + "\n")
    done = CliRunner().invoke(cli, ["quality", "--data", str(rows), "--task", f"rubric:{plain}"])
    assert done.exit_code == 0, done.output
    assert f"rubric:{plain} on {rows}: 4 rows judged" in done.output
    assert "yes when P(yes) >= 0.50" in done.output


@pytest.mark.real
def test_a_rubric_on_the_real_engine(real_judge):
    scorer = create_rubric_scorer(
        real_judge, rubric=RUBRIC, verdicts=["refuses", "complies", "unclear"], per="sentence",
        reason="template",
    )  # fmt: skip
    result = scorer.run(ITEM)
    verdicts = result.analyze_step_result["verdicts"]
    assert len(verdicts) == 2
    for verdict in verdicts:
        assert verdict["verdict"] in ("refuses", "complies", "unclear")
        assert set(verdict["probabilities"]) == {"refuses", "complies", "unclear"}
        assert sum(verdict["probabilities"].values()) == pytest.approx(1.0, abs=1e-3)
        assert verdict["confidence"] == verdict["probabilities"][verdict["verdict"]]
    share = sum(v["verdict"] == "refuses" for v in verdicts) / 2
    assert result.score == pytest.approx(share)
