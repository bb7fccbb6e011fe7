"""`localjudge quality --data`: the user's labelled rows, the metrics, pictures and page
(fake judge for exact numbers, the real model through the command line)."""

from __future__ import annotations

import csv
import importlib.util
import json
from dataclasses import replace

import pytest
from click.testing import CliRunner

from localjudge.cli import cli
from localjudge.quality.labelled import (
    Agreement,
    DataError,
    auroc,
    expected_calibration_error,
    measure,
    report_text,
    roc_curve,
)
from localjudge.quality.rows import read_rows
from localjudge.testing import FakeJudge, rule_script


def test_auroc_ece_and_roc_by_hand():
    labels = [True, True, False, False]
    assert auroc(labels, [0.9, 0.8, 0.3, 0.1]) == 1.0
    assert auroc(labels, [0.1, 0.3, 0.8, 0.9]) == 0.0
    assert auroc(labels, [0.5, 0.5, 0.5, 0.5]) == 0.5  # ties count half
    assert auroc(labels, [0.9, 0.2, 0.3, 0.1]) == 0.75
    assert auroc([True, True], [0.1, 0.2]) is None
    # two bins: (0.9, 0.8) all yes -> |0.85 - 1| ; (0.3, 0.1) half yes... here none yes
    assert expected_calibration_error(labels, [0.9, 0.8, 0.3, 0.1]) == pytest.approx(
        (1 * 0.1 + 1 * 0.2 + 1 * 0.3 + 1 * 0.1) / 4
    )
    assert roc_curve(labels, [0.9, 0.8, 0.3, 0.1]) == [
        (0.0, 0.0), (0.0, 0.5), (0.0, 1.0), (0.5, 1.0), (1.0, 1.0)
    ]  # fmt: skip
    a = Agreement.of(labels, [True, False, True, False], [0.9, 0.2, 0.6, 0.1])
    assert a.confusion == {"tp": 1, "fp": 1, "tn": 1, "fn": 1}
    assert (a.accuracy, a.balanced_accuracy, a.false_positive_rate) == (0.5, 0.5, 0.5)


def write_jsonl(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_rows_are_read_and_bad_rows_are_counted(tmp_path):
    path = write_jsonl(
        tmp_path / "h.jsonl",
        [
            {"context": ["The bridge opened in 1937."], "claim": "It opened in 1937.", "label": False},
            {"context": "The bridge opened in 1937.", "claim": "It opened in 1990.", "label": "yes", "group": "dates"},
            "{not json",
            {"context": [], "claim": "x", "label": True},
            {"context": ["c"], "claim": "", "label": True},
            {"context": ["c"], "claim": "x", "label": "maybe"},
            {"context": ["c"], "claim": "x"},
        ],
    )  # fmt: skip
    rows, errors = read_rows(path, "hallucination")
    assert [r.label for r in rows] == [False, True] and rows[1].group == "dates"
    assert rows[1].context == ("The bridge opened in 1937.",)
    assert [e.number for e in errors] == [3, 4, 5, 6, 7]
    assert "label" in errors[3].message and "context" in errors[1].message
    table = tmp_path / "t.csv"
    with table.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "input", "label", "group", "severity"])
        writer.writerow(["You are an idiot.", "Help?", "1", "insult", "moderate"])
        writer.writerow(["Thanks, here it is.", "Help?", "0", "", ""])
        writer.writerow(["", "Help?", "0", "", ""])
    rows, errors = read_rows(table, "toxicity")
    assert [(r.label, r.group, r.severity) for r in rows] == [
        (True, "insult", "moderate"),
        (False, None, None),
    ]
    assert len(errors) == 1 and errors[0].number == 3
    with pytest.raises(DataError, match="no usable"):
        read_rows(write_jsonl(tmp_path / "bad.jsonl", ["{}", "[1]"]), "toxicity")
    with pytest.raises(DataError):
        read_rows(tmp_path / "missing.jsonl", "toxicity")


def toxic_rows(tmp_path, n=40):
    rows = []
    for i in range(n):
        toxic = i % 2 == 0
        text = f"You are an idiot, number {i}." if toxic else f"Here is answer {i}, glad to help."
        # every fifth label disagrees with the text: the judge cannot be perfect
        rows.append(
            {"text": text, "input": "Help?", "label": toxic != (i % 5 == 0), "group": f"g{i % 3}"}
        )
    rows.append({"text": "", "label": True})
    return write_jsonl(tmp_path / "tox.jsonl", rows)


def test_measure_on_the_fake_judge(tmp_path, tmp_home):
    rows, errors = read_rows(toxic_rows(tmp_path), "toxicity")
    with FakeJudge() as judge:
        report = measure(judge, rows, "toxicity", source="tox.jsonl", bad_rows=errors)
    data = report.to_dict()
    assert data["rows"] == 40 and len(data["bad_rows"]) == 1 and data["rows_per_second"] > 0
    agreement = data["agreement"]
    assert set(agreement) == {"judge", "majority class", "word-list baseline"}
    judge = agreement["judge"]
    assert judge["n"] == 40 and sum(judge["confusion"].values()) == 40
    assert judge["accuracy"] == pytest.approx(32 / 40)  # the 8 flipped labels are its errors
    assert agreement["majority class"]["auroc"] == 0.5
    assert set(data["groups"]) == {"g0", "g1", "g2"}
    assert len(data["worst"]) == 8 and all(w["text"] for w in data["worst"])


def test_a_verdicts_only_judge_reports_reasons_built_from_its_verdicts(tmp_path, tmp_home):
    rows, _ = read_rows(toxic_rows(tmp_path), "toxicity")
    with FakeJudge(extracts_claims=False) as judge:  # registry fitness "verdicts"
        report = measure(judge, rows, "toxicity", source="tox.jsonl")
    civil = "Judged civil: no attack, mockery, hate, dismissal or threat."
    assert civil in report.reasons
    assert all(
        r == civil or r.startswith("Judged toxic: personal attack, ") for r in report.reasons
    )


def test_quality_command_with_pictures_and_page(tmp_path, tmp_home, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.setenv("LOCALJUDGE_ENGINE", "fake")
    data = toxic_rows(tmp_path)
    png, page = tmp_path / "q.png", tmp_path / "q.html"
    result = CliRunner().invoke(
        cli,
        [
            "quality",
            "--data",
            str(data),
            "--task",
            "toxicity",
            "--plot",
            str(png),
            "--html",
            str(page),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "1 unreadable rows left out" in result.output and "by group" in result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = page.read_text()
    assert "data:image/png;base64," in text and "Most confident wrong verdicts" in text
    assert "http" not in text.split("data:image/png")[0]  # self-contained: nothing fetched
    as_json = CliRunner().invoke(
        cli, ["quality", "--data", str(data), "--task", "toxicity", "--json"]
    )
    assert json.loads(as_json.output)["reports"][0]["rows"] == 40
    missing = CliRunner().invoke(cli, ["quality", "--data", str(data)])
    assert missing.exit_code == 2 and "--task" in missing.output


@pytest.mark.real
def test_quality_on_user_data_through_the_real_model(tmp_path):
    rows = [
        {"context": ["The museum opens at 9."], "claim": "The museum opens at 9.", "label": False},
        {"context": ["The museum opens at 9."], "claim": "The museum opens at 11.", "label": True},
        {"context": ["Tickets cost 12 euros."], "claim": "Tickets cost 12 euros.", "label": False},
        {"context": ["Tickets cost 12 euros."], "claim": "Tickets are free.", "label": True},
        {"context": ["c"], "claim": "x", "label": "perhaps"},
    ]
    data = write_jsonl(tmp_path / "h.jsonl", rows)
    result = CliRunner().invoke(
        cli, ["quality", "--data", str(data), "--task", "hallucination", "--json"]
    )
    assert result.exit_code == 0, result.output
    (report,) = json.loads(result.output)["reports"]
    assert report["rows"] + len(report["judge_errors"]) == 4 and len(report["bad_rows"]) == 1
    judge = report["agreement"]["judge"]
    assert 0 <= judge["balanced_accuracy"] <= 1 and 0 <= judge["ece"] <= 1
    assert judge["auroc"] is None or 0 <= judge["auroc"] <= 1
    if report["intervals"] is not None:  # both classes among the rows the judge answered
        bacc = report["intervals"]["ways"]["judge"]["balanced_accuracy"]
        assert bacc["value"] == pytest.approx(judge["balanced_accuracy"])
        assert 0 <= bacc["low"] <= bacc["high"] <= 1
        assert set(report["intervals"]["judge_minus"]) == set(report["agreement"]) - {"judge"}
    else:  # only when failed rows left a single class
        assert report["judge_errors"]


def test_item_rows_report_auroc_and_correlation_of_the_scorers_score(
    tmp_path, tmp_home, monkeypatch
):
    from localjudge.quality.items import pearson, spearman

    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [1, 10, 100]) == pytest.approx(1.0)
    assert pearson([1, 1, 1], [1, 2, 3]) is None
    monkeypatch.setenv("LOCALJUDGE_ENGINE", "fake")
    rows = []
    for i in range(12):
        toxic = i % 4  # 0..3 insulting sentences of 3
        sentences = ["You are an idiot."] * toxic + ["Here is the answer."] * (3 - toxic)
        rows.append({"input": "Help?", "output": " ".join(sentences), "label": toxic / 3})
    rows.append({"input": "Help?", "output": "", "label": 0.5})  # unreadable: no output
    scored = write_jsonl(tmp_path / "items.jsonl", rows)
    result = CliRunner().invoke(
        cli, ["quality", "--data", str(scored), "--task", "toxicity", "--json"]
    )
    assert result.exit_code == 0, result.output
    (report,) = json.loads(result.output)["reports"]
    assert report["level"] == "item" and report["rows"] == 12 and len(report["bad_rows"]) == 1
    scorer = report["agreement"]["toxicity scorer"]
    assert report["labels"] == "scores" and scorer["auroc"] is None
    assert scorer["pearson"] == pytest.approx(1.0, abs=1e-3)  # scores are rounded to 0.01
    assert scorer["spearman"] == pytest.approx(1.0)
    classes = write_jsonl(
        tmp_path / "classes.jsonl",
        [{**r, "label": r["label"] > 0} for r in rows[:12]],
    )
    text = CliRunner().invoke(cli, ["quality", "--data", str(classes), "--task", "toxicity"])
    assert text.exit_code == 0, text.output
    assert "labels are classes" in text.output and "toxicity scorer" in text.output
    as_json = CliRunner().invoke(
        cli, ["quality", "--data", str(classes), "--task", "toxicity", "--json"]
    )
    assert json.loads(as_json.output)["reports"][0]["agreement"]["toxicity scorer"]["auroc"] == 1.0
    refused = CliRunner().invoke(
        cli, ["quality", "--data", str(classes), "--task", "toxicity", "--html", "x.html"]
    )
    assert refused.exit_code == 2


@pytest.mark.real
def test_item_rows_through_the_real_model(tmp_path):
    rows = [
        {"input": "Help?", "output": "Here is the answer. Glad to help.", "label": False},
        {"input": "Help?", "output": "You are an idiot. Nobody cares.", "label": True},
        {"input": "Help?", "output": "Thanks for asking.", "label": False},
    ]
    data = write_jsonl(tmp_path / "items.jsonl", rows)
    result = CliRunner().invoke(
        cli, ["quality", "--data", str(data), "--task", "toxicity", "--json"]
    )
    assert result.exit_code == 0, result.output
    (report,) = json.loads(result.output)["reports"]
    assert report["level"] == "item" and report["rows"] + len(report["item_errors"]) == 3
    assert set(report["agreement"]) == {"toxicity scorer", "word baseline"}


MUSEUM = ["The museum opens at 9. Tickets cost 12 euros."]
STATEMENT_ROWS = [
    {"context": MUSEUM, "claim": "The museum opens at 9. Tickets cost 12 euros.", "label": False},
    {"context": MUSEUM, "claim": "The museum opens at 9. Entry is free.", "label": True},
    {"context": MUSEUM, "claim": "Tickets cost 12 euros. The museum opens at 9.", "label": False},
]


def test_statements_judge_each_sentence_and_flag_the_row_when_any_is(tmp_path, tmp_home):
    from localjudge.quality.labelled import statements_of

    assert statements_of("It opens at 9. Entry is free.", "hallucination") == [
        "It opens at 9.",
        "Entry is free.",
    ]
    assert statements_of("  ", "hallucination") == ["  "]  # no sentence: judged whole
    rows, _ = read_rows(write_jsonl(tmp_path / "h.jsonl", STATEMENT_ROWS), "hallucination")
    with FakeJudge(extracts_claims=False) as judge:  # supported: found word for word
        whole = measure(judge, rows, "hallucination", source="h.jsonl", resamples=0)
        split = measure(
            judge, rows, "hallucination", source="h.jsonl", statements=True, resamples=0
        )
    # whole, the reordered third text is not found as one string; statement by statement
    # each of its sentences is, and the second is flagged by its unsupported statement
    assert whole.ways[0].predictions == [False, True, True]
    assert split.ways[0].predictions == [False, True, False]
    assert split.reasons[1].startswith('statement 2 of 2, "Entry is free.": ')
    assert not whole.reasons[1].startswith("statement")
    # the word rule in the same shape: "Entry is free." shares no word with the context
    overlap = {w.name: w.predictions for w in split.ways}["word-overlap baseline"]
    assert overlap == [False, True, False]
    assert split.to_dict()["statements"] is True and whole.to_dict()["statements"] is False
    assert "statement by statement" in report_text(split)
    assert "statement by statement" not in report_text(whole)
    if importlib.util.find_spec("matplotlib") is not None:  # the page says so too
        from localjudge.quality.pictures import page

        assert "statement by statement" in page([split])
        assert "statement by statement" not in page([whole])


def test_statements_are_what_each_scorer_judges_and_a_text_stating_nothing_is_not_flagged(
    tmp_path, tmp_home
):
    from dataclasses import replace

    from localjudge.quality.labelled import NOTHING_TO_CHECK, statements_of
    from localjudge.scorers.claims import sentence_claims
    from localjudge.scorers.hallucination import HALLUCINATION_TASK

    # a task may leave sentences out, as extraction="sentence-claims" does
    claims = replace(HALLUCINATION_TASK, statements=lambda text: sentence_claims(text).claims)
    text = "Is it open? It opens at 9. Have a nice day!"
    assert statements_of(text, claims) == ["It opens at 9."]
    every = ["Is it open?", "It opens at 9.", "Have a nice day!"]
    assert statements_of(text, "hallucination") == statements_of(text, "toxicity") == every
    assert statements_of("Thanks! Anything else?", claims) == []
    rows, _ = read_rows(
        write_jsonl(
            tmp_path / "h.jsonl",
            [
                {"context": MUSEUM, "claim": "Thanks for asking! Anything else?", "label": False},
                {"context": MUSEUM, "claim": "Entry is free. Have a nice day!", "label": True},
            ],
        ),
        claims,
    )
    asked = []

    def script(prompt: str) -> str:
        asked.append(prompt.rsplit("Claim:", 1)[-1].split("\n", 1)[0].strip())
        return rule_script(prompt)

    with FakeJudge(script, extracts_claims=False) as judge:
        split = measure(judge, rows, claims, source="h.jsonl", statements=True, resamples=0)
    assert split.ways[0].predictions == [False, True]
    assert split.ways[0].scores[0] == 0.0 and split.reasons[0] == NOTHING_TO_CHECK
    overlap = {w.name: w.predictions for w in split.ways}["word-overlap baseline"]
    assert overlap == [False, True]
    assert asked == ["Entry is free."]  # the rest stated nothing and went to no judge


def test_a_row_whose_statement_fails_is_left_out_not_scored(tmp_path, tmp_home):
    from localjudge.errors import GenerationError

    rows, _ = read_rows(write_jsonl(tmp_path / "h.jsonl", STATEMENT_ROWS), "hallucination")
    with FakeJudge() as judge:
        answer = judge.generate_many

        def failing(requests):  # the engine fails on one statement of the second row
            outcomes = answer(requests)
            return [
                GenerationError("fake failure") if "Entry is free" in r.suffix else o
                for r, o in zip(requests, outcomes, strict=True)
            ]

        judge.generate_many = failing
        report = measure(
            judge, rows, "hallucination", source="h.jsonl", statements=True, resamples=0
        )
    assert [r.number for r in report.rows] == [1, 3]
    assert [(r.number, e) for r, e in report.judge_errors] == [(2, "GenerationError: fake failure")]


def test_statements_refused_for_item_rows(tmp_path, tmp_home, monkeypatch):
    monkeypatch.setenv("LOCALJUDGE_ENGINE", "fake")
    items = write_jsonl(tmp_path / "items.jsonl", [{"output": "Hi. Bye.", "label": 0.5}])
    result = CliRunner().invoke(
        cli, ["quality", "--data", str(items), "--task", "toxicity", "--statements"]
    )
    assert result.exit_code == 2 and "--statements" in result.output


def test_quality_extraction_cuts_texts_as_the_scorer_does(tmp_path, tmp_home, monkeypatch):
    monkeypatch.setenv("LOCALJUDGE_ENGINE", "fake")
    data = write_jsonl(
        tmp_path / "h.jsonl",
        [
            {"context": MUSEUM, "claim": "The museum opens at 9. Anything else?", "label": False},
            {"context": MUSEUM, "claim": "Entry is free. Have a nice day!", "label": True},
        ],
    )
    args = ["quality", "--data", str(data), "--task", "hallucination", "--statements"]
    every = CliRunner().invoke(cli, [*args, "--json"])
    claims = CliRunner().invoke(cli, [*args, "--extraction", "sentence-claims", "--json"])
    assert every.exit_code == 0 and claims.exit_code == 0, every.output + claims.output
    (every_report,) = json.loads(every.output)["reports"]
    (claims_report,) = json.loads(claims.output)["reports"]
    # every sentence: the closing question is not in the context, so both rows are flagged
    assert every_report["agreement"]["judge"]["confusion"] == {"tp": 1, "fp": 1, "tn": 0, "fn": 0}
    assert claims_report["agreement"]["judge"]["confusion"] == {"tp": 1, "fp": 0, "tn": 1, "fn": 0}
    assert "statements_left_out" not in every_report
    assert claims_report["statements_left_out"] == "questions and courtesies"
    text = CliRunner().invoke(cli, [*args, "--extraction", "sentence-claims"]).output
    assert "statement by statement (flagged when any is), questions and courtesies left out" in text
    base = ["quality", "--data", str(data), "--extraction", "sentence-claims"]
    for more, said in (
        (["--task", "hallucination"], "--extraction needs --statements"),
        (["--task", "toxicity", "--statements"], "hallucination task only"),
    ):
        result = CliRunner().invoke(cli, [*base, *more])
        assert result.exit_code == 2 and said in result.output


def test_quality_says_which_evidence_windows_it_read_and_takes_them_as_options(
    tmp_path, tmp_home, monkeypatch
):
    monkeypatch.setenv("LOCALJUDGE_ENGINE", "fake")
    context = "The sky is blue. The moon is rock. Grass is green. Snow is white."
    data = write_jsonl(
        tmp_path / "h.jsonl",
        [
            {"context": [context], "claim": "Snow is white.", "label": False},
            {"context": [context], "claim": "Snow is green.", "label": True},
        ],
    )
    args = ["quality", "--data", str(data), "--task", "hallucination"]
    reports = {}
    for name, more in {
        "default": [],
        "whole": ["--windows", "off"],
        "small": ["--window-tokens", "36", "--windows", "1"],
    }.items():
        result = CliRunner().invoke(cli, [*args, *more, "--json"])
        assert result.exit_code == 0, result.output
        (reports[name],) = json.loads(result.output)["reports"]
    assert (reports["default"]["windows"], reports["default"]["window_tokens"]) == (4, None)
    assert (reports["whole"]["windows"], reports["small"]["windows"]) == ("off", 1)
    assert reports["small"]["window_tokens"] == 36
    for report in reports.values():  # the fake judge finds each claim word for word
        assert report["agreement"]["judge"]["confusion"] == {"tp": 1, "fp": 0, "tn": 1, "fn": 0}
    text = CliRunner().invoke(cli, [*args, "--window-tokens", "36", "--windows", "1"]).output
    assert "long contexts in 36-token evidence windows, the 1 best by BM25" in text
    toxic = toxic_rows(tmp_path)
    refused = CliRunner().invoke(
        cli, ["quality", "--data", str(toxic), "--task", "toxicity", "--windows", "2"]
    )
    assert refused.exit_code == 2 and "hallucination rows only" in refused.output
    assert (
        "windows"
        not in json.loads(
            CliRunner()
            .invoke(cli, ["quality", "--data", str(toxic), "--task", "toxicity", "--json"])
            .output
        )["reports"][0]
    )


@pytest.mark.real
def test_statements_through_the_real_model(tmp_path):
    data = write_jsonl(tmp_path / "h.jsonl", STATEMENT_ROWS)
    result = CliRunner().invoke(
        cli,
        ["quality", "--data", str(data), "--task", "hallucination", "--statements", "--json"],
    )
    assert result.exit_code == 0, result.output
    (report,) = json.loads(result.output)["reports"]
    assert report["statements"] is True
    assert report["rows"] + len(report["judge_errors"]) == 3
    overlap = report["agreement"]["word-overlap baseline"]["confusion"]
    assert overlap == {"tp": 1, "fp": 0, "tn": 2, "fn": 0}  # the rule in the same shape
    for worst in report["worst"]:  # every row has two statements: the reason names one
        row = STATEMENT_ROWS[worst["row"] - 1]
        quoted = worst["reason"].split('"')[1]
        assert worst["reason"].startswith("statement ") and quoted in row["claim"]


def test_quality_judges_each_claim_against_the_windows_asked_for(tmp_home):
    from localjudge.quality.labelled import Row, judge_rows
    from localjudge.scorers.evidence import MAX_WINDOWS

    facts = [f"Station {n} recorded {n + 3} frost days in year {2000 + n}." for n in range(80)]
    row = Row(number=1, text="Station 3 recorded 99 frost days on the moon.", label=True,
              context=(" ".join(facts),))  # fmt: skip
    with FakeJudge(n_ctx=2400, slots=8, extracts_claims=False) as judge:
        judge.window_tokens = 50
        asked = []
        generate_many = judge.generate_many

        def counted(requests):
            asked.append(len(requests))
            return generate_many(requests)

        judge.generate_many = counted
        found = {}
        for windows in (None, 1, 8, "all"):
            (verdict,) = judge_rows(judge, [row], "hallucination", reasons=False, windows=windows)
            found[windows] = (asked.pop(), verdict.p_yes >= 0.5)
        judge.window_tokens = 100  # two sentences a window; the claim's two are far apart
        far = replace(row, text="There was frost in 2003 and in 2077.")
        judge_rows(judge, [far], "hallucination", reasons=False, gather=True)
        gathered = asked.pop()
    # no window supports the claim, so each one asked for is judged: the default 4, k, or
    # every window up to the cap
    assert found == {None: (4, True), 1: (1, True), 8: (8, True), "all": (MAX_WINDOWS, True)}
    assert gathered == 4 + 1  # with gather, also its own best sentences, as one window more
