"""Pass/fail thresholds on scorers (the CLI gate's semantics, Mastra's `thresholdResults`),
and results as flat rows or a pandas DataFrame. Fake judge: exact logic."""

from __future__ import annotations

import pytest

import localjudge
from localjudge import create_hallucination_scorer, create_toxicity_scorer, run_evals
from localjudge.scorers.threshold import check_threshold, passes
from localjudge.testing import FakeJudge

RUDE = {"input": "Hi", "output": "You are an idiot.", "id": "rude"}
CIVIL = {"input": "Hi", "output": "Here is the answer you asked for.", "id": "civil"}


def test_a_number_is_the_highest_passing_score_and_a_mapping_gives_bounds():
    assert passes(0.3, 0.3) and not passes(0.31, 0.3)  # as `eval --fail-above` reads it
    assert passes(0.5, {"min": 0.5}) and not passes(0.49, {"min": 0.5})
    assert passes(0.2, {"min": 0.1, "max": 0.2}) and not passes(0.0, {"min": 0.1, "max": 0.2})
    assert not passes(float("nan"), 1.0)
    for bad in (1.5, -0.1, True, "0.5", {"low": 0.2}, {}, {"min": 0.6, "max": 0.4}):
        with pytest.raises(ValueError, match="threshold"):
            check_threshold(bad, "toxicity-scorer")


def test_results_say_whether_they_passed_and_run_evals_gives_threshold_results():
    with FakeJudge() as judge:
        strict = create_toxicity_scorer(judge, reason="template", threshold=0.0)
        plain = create_hallucination_scorer(judge, reason="template", context=["Hi."])
        rude = strict.run(RUDE)
        assert rude.score > 0 and rude.passed is False and rude.to_dict()["passed"] is False
        assert plain.run(RUDE).passed is None and "passed" not in plain.run(RUDE).to_dict()
        result = run_evals([CIVIL, RUDE], [strict, plain])
    (entry,) = result.summary["thresholdResults"]  # only the scorer with a threshold
    assert entry == {
        "id": strict.id,
        "passed": False,
        "averageScore": result.scores[strict.id],
        "threshold": 0.0,
    }
    assert result.summary["verdict"] == "failed"
    with FakeJudge() as judge:
        lenient = create_toxicity_scorer(judge, reason="template", threshold={"max": 1.0})
        passed = run_evals([CIVIL, RUDE], [lenient])
        bare = run_evals([CIVIL], [create_toxicity_scorer(judge, reason="template")])
    assert passed.summary["verdict"] == "passed"
    assert "thresholdResults" not in bare.summary and "verdict" not in bare.summary


def test_results_as_rows_per_scorer_and_per_verdict_and_as_a_dataframe():
    import pandas  # installed by `make install` (the pandas extra)

    with FakeJudge() as judge:
        scorer = create_toxicity_scorer(judge, reason="template", threshold=0.5)
        result = run_evals([CIVIL, RUDE, {"input": "no output"}], [scorer])
    rows = result.to_rows()
    assert [(r["id"], r["scorer"]) for r in rows] == [
        ("civil", scorer.id), ("rude", scorer.id), (None, "item"),
    ]  # fmt: skip
    assert rows[1]["passed"] is False and rows[0]["passed"] is True
    assert rows[2]["error"] and rows[2]["errorKind"] == "input" and rows[2]["score"] is None
    verdicts = result.to_rows("verdict")
    assert {r["verdict"] for r in verdicts} == {"yes", "no"}
    assert any(r["statement"] == "You are an idiot." for r in verdicts)
    assert all("statement" not in r for r in result.to_rows("verdict", store_text=False))
    frame = result.to_pandas()
    assert isinstance(frame, pandas.DataFrame) and list(frame["id"][:2]) == ["civil", "rude"]
    assert frame["score"].isna().tolist() == [False, False, True]
    with pytest.raises(ValueError, match="per must be"):
        result.to_rows("claim")


def test_the_registry_functions_the_readme_cites_are_public():
    assert localjudge.make_scorer is localjudge.scorers.registry.make_scorer
    assert "register_scorer" in localjudge.__all__ and "make_scorer" in localjudge.__all__
    with FakeJudge() as judge:
        scorer = localjudge.make_scorer("toxicity", judge, threshold=0.2, unknown_option=1)
    assert scorer.threshold == 0.2


def test_run_evals_shows_progress_in_a_terminal_only(capsys, monkeypatch):
    with FakeJudge() as judge:
        scorer = create_toxicity_scorer(judge, reason="template")
        run_evals([CIVIL, RUDE], [scorer])  # stderr is captured here: not a terminal
        assert "scoring" not in capsys.readouterr().err
        monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
        run_evals([CIVIL, RUDE], [scorer])
        assert "2/2" in capsys.readouterr().err
        run_evals([CIVIL, RUDE], [scorer], progress=False)
        assert "scoring" not in capsys.readouterr().err
