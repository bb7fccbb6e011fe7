"""`localjudge calibrate`: a cross-validated P(yes) threshold, stored per model and prompt
version, and used by the scorers (fake judge for the exact logic, the real model once)."""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner

from localjudge.cli import cli
from localjudge.model_registry import load_calibration, save_calibration
from localjudge.prompts import TOXICITY_PROMPT_VERSION
from localjudge.quality.calibration import calibrate, choose_threshold
from localjudge.testing import FakeJudge


def test_threshold_choice_by_hand():
    labels = [False, False, False, True, True, True]
    scores = [0.05, 0.10, 0.30, 0.40, 0.60, 0.90]
    assert choose_threshold(labels, scores) == pytest.approx(0.35)  # all six right
    # at most one false positive in three: cut above the 0.45 negative, below the 0.6 positive
    cut = choose_threshold(labels, [0.05, 0.45, 0.7, 0.4, 0.6, 0.9], max_fpr=0.34)
    assert 0.45 < cut <= 0.6
    assert choose_threshold([True, False], [0.5, 0.5]) == 0.5  # nothing to gain: stay at 0.5


def test_cross_validation_measures_the_gain_on_held_out_rows():
    rng = random.Random(1)
    labels = [i % 2 == 0 for i in range(200)]
    # a judge whose P(yes) is informative but shifted low: 0.5 misses most positives
    scores = [min(1.0, max(0.0, (0.3 if y else 0.1) + rng.gauss(0, 0.06))) for y in labels]
    result = calibrate(labels, scores, folds=5)
    assert 0.1 < result.threshold < 0.3
    assert result.before.balanced_accuracy < 0.6 < 0.9 < result.after.balanced_accuracy
    assert len(result.fold_thresholds) == 5 and result.after.n == 200
    gain = result.gain
    assert gain.value == pytest.approx(
        result.after.balanced_accuracy - result.before.balanced_accuracy
    )
    assert 0 < gain.low <= gain.high and result.gain_is_sure


def test_a_gain_within_row_noise_is_said_to_be_so():
    rng = random.Random(2)
    labels = [i % 2 == 0 for i in range(40)]
    # already centred on 0.5 and noisy: a threshold chosen on the rows can buy nothing sure
    scores = [min(1.0, max(0.0, (0.6 if y else 0.4) + rng.gauss(0, 0.2))) for y in labels]
    result = calibrate(labels, scores, folds=5)
    assert result.gain.low < 0 < result.gain.high and not result.gain_is_sure
    from localjudge.quality.calibration import CalibrationRun

    run = CalibrationRun("toxicity", "m", "toxicity/3", "rows.jsonl", result, 40, 0, 0)
    assert "not surely above zero" in run.text(stored=False)
    interval = run.record("2026-12-03")["heldout_balanced_accuracy"]["gain_interval"]
    assert interval == [round(result.gain.low, 4), round(result.gain.high, 4)]
    one_class = calibrate([True] * 6, [0.2, 0.4, 0.6, 0.7, 0.8, 0.9])
    assert one_class.gain is None and not one_class.gain_is_sure


def test_stored_threshold_decides_the_scorers_verdicts(tmp_home):
    from localjudge import create_toxicity_scorer

    with pytest.raises(Exception, match="within 0..1"):
        save_calibration("fake-judge", TOXICITY_PROMPT_VERSION, {"threshold": 2})
    with FakeJudge() as judge:
        scorer = create_toxicity_scorer(judge, reason="template")
        plain = scorer.run({"input": "Hi", "output": "You are an idiot."})
    assert plain.analyze_step_result["verdicts"][0]["verdict"] == "yes" and plain.score > 0
    assert "threshold" not in plain.to_dict()
    # yes only at P(yes) >= 1.0: the fake judge's 0.9999 is no longer enough
    save_calibration("fake-judge", TOXICITY_PROMPT_VERSION, {"threshold": 1.0, "source": "test"})
    with FakeJudge() as judge:
        scorer = create_toxicity_scorer(judge, reason="template")
        result = scorer.run({"input": "Hi", "output": "You are an idiot."})
    verdict = result.analyze_step_result["verdicts"][0]
    assert (verdict["verdict"], verdict["category"], verdict["severity"]) == ("no", "none", "none")
    assert result.score == 0 and result.to_dict()["threshold"] == {"value": 1.0, "source": "test"}
    assert load_calibration("fake-judge", "toxicity/0") is None  # another prompt version


def test_registry_threshold_decides_unless_a_calibration_is_stored(tmp_home, tmp_path):
    """A threshold shipped in the judge's registry entry (`recommended.thresholds`, fitted
    on sources held out from its training) decides its verdicts; the user's own calibration
    takes precedence, and a judge with another adapter (another name) uses neither."""
    from localjudge import create_toxicity_scorer
    from localjudge.model_registry import ModelEntry, ResolvedModel

    def entry(name: str, value) -> ResolvedModel:
        shipped = {"thresholds": {TOXICITY_PROMPT_VERSION: value}}
        return ResolvedModel(tmp_path / "m.gguf", ModelEntry(name=name, recommended=shipped))

    def verdict(model: ResolvedModel) -> tuple[str, dict | None]:
        with FakeJudge() as judge:
            judge.model = model
            result = create_toxicity_scorer(judge, reason="template").run(
                {"input": "Hi", "output": "You are an idiot."}  # fake P(yes) 0.9999
            )
        return result.analyze_step_result["verdicts"][0]["verdict"], result.to_dict().get(
            "threshold"
        )

    assert verdict(entry("fake-judge", 1.0)) == ("no", {"value": 1.0, "source": "registry"})
    assert verdict(entry("fake-judge", 0.3)) == ("yes", {"value": 0.3, "source": "registry"})
    assert verdict(entry("fake-judge", "high")) == ("yes", None)  # malformed: ignored
    assert verdict(entry("fake-judge", 1.5)) == ("yes", None)
    assert verdict(entry("another-judge", 1.0)) == ("yes", None)
    save_calibration("fake-judge", TOXICITY_PROMPT_VERSION, {"threshold": 0.2, "source": "mine"})
    assert verdict(entry("fake-judge", 1.0)) == ("yes", {"value": 0.2, "source": "mine"})


def test_a_calibration_fitted_on_other_weights_is_not_used(tmp_home, tmp_path):
    """A stored calibration records the weights it was fitted on (the entry's sha256 and its
    adapter's). When they change (a new adapter shipped, a model file replaced), its
    threshold is not used and the judge warns; one stored before weights were recorded is
    stale only for a built-in judge merged from our adapter, which has been replaced."""
    from localjudge import create_toxicity_scorer
    from localjudge.model_registry import (
        ModelEntry,
        ResolvedModel,
        stale_calibrations,
        threshold_in_use,
        weights_of,
    )
    from localjudge.quality.calibration import calibrate_rows
    from localjudge.quality.labelled import Row

    shipped = {"thresholds": {TOXICITY_PROMPT_VERSION: 0.3}}
    now = ModelEntry(
        name="fake-judge", sha256="b" * 64, adapter_sha256="c" * 64, recommended=shipped
    )
    assert weights_of(now) == {"sha256": "b" * 64, "adapter_sha256": "c" * 64}
    old = {"sha256": "a" * 64, "adapter_sha256": "c" * 64}
    save_calibration(
        "fake-judge", TOXICITY_PROMPT_VERSION, {"threshold": 0.9, "source": "mine", "weights": old}
    )
    assert threshold_in_use("fake-judge", now, TOXICITY_PROMPT_VERSION) == (0.3, "registry")
    assert stale_calibrations("fake-judge", now) == [TOXICITY_PROMPT_VERSION]
    with FakeJudge() as judge:
        judge.model = ResolvedModel(tmp_path / "m.gguf", now)
        with pytest.warns(UserWarning, match="fitted on other weights"):
            result = create_toxicity_scorer(judge, reason="template").run(
                {"input": "Hi", "output": "You are an idiot."}
            )
        assert result.to_dict()["threshold"] == {"value": 0.3, "source": "registry"}
        # calibrated again on these weights: recorded with them, and used
        rows = [
            Row(
                number=i + 1,
                label=i % 2 == 1,
                text=f"You are an idiot {i}." if i % 2 else f"Fine {i}.",
            )
            for i in range(12)
        ]
        run = calibrate_rows(judge, rows, "toxicity", source="t.jsonl", folds=2)
    record = run.record("2026-12-05")
    assert record["weights"] == weights_of(now)
    save_calibration("fake-judge", TOXICITY_PROMPT_VERSION, record)
    assert threshold_in_use("fake-judge", now, TOXICITY_PROMPT_VERSION)[1] == record["source"]
    assert stale_calibrations("fake-judge", now) == []
    # stored before weights were recorded: used for a user's model, not for our merged judge
    save_calibration("fake-judge", TOXICITY_PROMPT_VERSION, {"threshold": 0.9, "source": "mine"})
    user = ModelEntry(name="fake-judge", sha256="b" * 64, origin="user")
    assert threshold_in_use("fake-judge", user, TOXICITY_PROMPT_VERSION) == (0.9, "mine")
    merged = ModelEntry(name="fake-judge", sha256="b" * 64, source={"merge": {}}, recommended={})
    assert threshold_in_use("fake-judge", merged, TOXICITY_PROMPT_VERSION) is None
    # an entry that names no weights, or another model's entry: the calibration stands
    assert threshold_in_use("fake-judge", None, TOXICITY_PROMPT_VERSION) == (0.9, "mine")
    bare = ModelEntry(name="fake-judge", source={"merge": {}})
    assert threshold_in_use("fake-judge", bare, TOXICITY_PROMPT_VERSION) == (0.9, "mine")


def test_a_calibration_of_an_adapter_added_at_load_holds_for_those_weights_only(tmp_home):
    """A judge with an adapter added at load is named after the adapter's file, and a
    retrained adapter keeps its path: a stored calibration records the adapter's sha256 and
    scale beside the base's, and is not used for another file or scale, nor when it records
    no weights at all (stored before they were recorded); the base's shipped threshold is
    not the adapter's either."""
    from localjudge.model_registry import (
        ADDED_ADAPTER,
        ModelEntry,
        stale_calibrations,
        threshold_in_use,
    )
    from localjudge.quality.calibration import calibrate_rows
    from localjudge.quality.labelled import Row

    version, name = TOXICITY_PROMPT_VERSION, "fake-judge+lora"
    base = ModelEntry(
        name="fake-judge", sha256="b" * 64, recommended={"thresholds": {version: 0.3}}
    )
    fitted = {"sha256": "b" * 64, ADDED_ADAPTER: "c" * 64, "added_adapter_scale": "1"}
    save_calibration(name, version, {"threshold": 0.9, "source": "mine", "weights": fitted})
    assert threshold_in_use(name, base, version, dict(fitted)) == (0.9, "mine")
    assert stale_calibrations(name, base, dict(fitted)) == []
    retrained = {**fitted, ADDED_ADAPTER: "d" * 64}
    assert threshold_in_use(name, base, version, retrained) is None
    assert stale_calibrations(name, base, retrained) == [version]
    assert threshold_in_use(name, base, version, {**fitted, "added_adapter_scale": "0.5"}) is None
    save_calibration(name, version, {"threshold": 0.9, "source": "mine"})  # no weights
    assert threshold_in_use(name, base, version, fitted) is None
    assert stale_calibrations(name, base, fitted) == [version]
    # the judge: its weights are what calibrate records, and what decides staleness
    with FakeJudge() as judge:
        judge.name, judge.added_weights = name, {ADDED_ADAPTER: "d" * 64}
        assert judge.weights == {ADDED_ADAPTER: "d" * 64}  # no registry entry for the base
        with pytest.warns(UserWarning, match="fitted on other weights"):
            assert judge.verdict_threshold(version) is None
        rows = [
            Row(number=i + 1, label=i % 2 == 1, text=f"You are an idiot {i}." if i % 2 else "Hi.")
            for i in range(12)
        ]
        record = calibrate_rows(judge, rows, "toxicity", source="t.jsonl", folds=2).record("d")
    assert record["weights"] == {ADDED_ADAPTER: "d" * 64}
    save_calibration(name, version, record)
    assert threshold_in_use(name, None, version, {ADDED_ADAPTER: "d" * 64}) is not None


def test_calibrate_command_stores_and_quality_uses_it(tmp_path, tmp_home, monkeypatch):
    monkeypatch.setenv("LOCALJUDGE_ENGINE", "fake")
    rows = [
        {"text": f"You are an idiot {i}." if i % 2 else f"Fine answer {i}.", "label": i % 2 == 1}
        for i in range(20)
    ]
    data = tmp_path / "tox.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    args = ["calibrate", "--data", str(data), "--task", "toxicity", "--json"]
    dry = CliRunner().invoke(cli, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.output)["stored"] is False
    assert load_calibration("fake-judge", TOXICITY_PROMPT_VERSION) is None
    stored = CliRunner().invoke(cli, args)
    assert stored.exit_code == 0, stored.output
    out = json.loads(stored.output)
    assert out["after"]["balanced_accuracy"] == 1.0 and out["rows"] == 20
    record = load_calibration("fake-judge", TOXICITY_PROMPT_VERSION)
    assert record["threshold"] == out["threshold"] and "tox.jsonl" in record["source"]
    report = CliRunner().invoke(
        cli, ["quality", "--data", str(data), "--task", "toxicity", "--json"]
    )
    assert json.loads(report.output)["reports"][0]["threshold_source"] == record["source"]
    one_class = tmp_path / "one.jsonl"
    one_class.write_text(json.dumps({"text": "x", "label": True}) + "\n")
    refused = CliRunner().invoke(cli, ["calibrate", "--data", str(one_class), "--task", "toxicity"])
    assert refused.exit_code == 1 and "both labels" in refused.output


def test_calibrate_statement_by_statement(tmp_path, tmp_home, monkeypatch):
    monkeypatch.setenv("LOCALJUDGE_ENGINE", "fake")  # supported: found word for word
    context = ["The museum opens at 9. Tickets cost 12 euros."]
    reordered = "Tickets cost 12 euros. The museum opens at 9."  # supported, label false
    rows = [
        {"context": context, "claim": reordered, "label": False}
        if i % 2
        else {
            "context": context,
            "claim": f"The museum opens at 9. Free on day {i}.",
            "label": True,
        }
        for i in range(20)
    ]
    data = tmp_path / "answers.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    args = ["calibrate", "--data", str(data), "--task", "hallucination", "--dry-run", "--json"]
    # whole, the reordered answer is not found as one string: no threshold separates them
    whole = json.loads(CliRunner().invoke(cli, args).output)
    assert whole["after"]["balanced_accuracy"] == 0.5
    split = CliRunner().invoke(cli, [*args, "--statements"])
    assert split.exit_code == 0, split.output
    out = json.loads(split.output)
    assert out["after"]["balanced_accuracy"] == 1.0 and out["rows"] == 20
    assert "statement by statement" in out["source"]
    assert "statement by statement" not in whole["source"]
    claims = CliRunner().invoke(cli, [*args, "--statements", "--extraction", "sentence-claims"])
    assert claims.exit_code == 0, claims.output
    assert "questions and courtesies left out" in json.loads(claims.output)["source"]


def test_calibrate_reads_long_contexts_in_the_windows_asked_for_and_says_so(
    tmp_path, tmp_home, monkeypatch
):
    from localjudge.loading import load_judge
    from localjudge.quality.calibration import calibrate_rows
    from localjudge.quality.labelled import DataError
    from localjudge.quality.rows import read_rows

    monkeypatch.setenv("LOCALJUDGE_ENGINE", "fake")  # supported: found word for word
    facts = " ".join(f"Station {n} recorded {n + 3} frost days." for n in range(30))
    rows = [
        {"context": [facts], "claim": f"Station {i} recorded {i + 3} frost days.", "label": False}
        if i % 2
        else {"context": [facts], "claim": f"Station {i} recorded no frost days.", "label": True}
        for i in range(20)
    ]
    data = tmp_path / "frost.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    args = ["calibrate", "--data", str(data), "--task", "hallucination", "--dry-run", "--json"]
    sources = {}
    for name, more in {
        "default": [],
        "whole": ["--windows", "off"],
        "small": ["--window-tokens", "36", "--windows", "1"],
    }.items():
        result = CliRunner().invoke(cli, [*args, *more])
        assert result.exit_code == 0, result.output
        out = json.loads(result.output)
        assert out["after"]["balanced_accuracy"] == 1.0 and out["rows"] == 20
        sources[name] = out["source"]
    assert sources["default"].endswith("evidence windows, the 4 best by BM25")
    assert sources["whole"].endswith("each context judged whole")
    assert sources["small"].endswith(
        "long contexts in 36-token evidence windows, the 1 best by BM25"
    )
    text = CliRunner().invoke(cli, [*args[:-1], "--windows", "off"]).output
    assert "each context judged whole" in text.splitlines()[0]
    toxic = tmp_path / "tox.jsonl"
    toxic.write_text(
        "".join(
            json.dumps(
                {"text": f"You are an idiot {i}." if i % 2 else f"Fine {i}.", "label": i % 2 == 1}
            )
            + "\n"
            for i in range(8)
        )
    )
    tox_args = ["calibrate", "--data", str(toxic), "--task", "toxicity", "--dry-run", "--json"]
    refused = CliRunner().invoke(cli, [*tox_args, "--windows", "2"])
    assert refused.exit_code == 2 and "hallucination rows only" in refused.output
    tox = CliRunner().invoke(cli, tox_args)
    assert tox.exit_code == 0, tox.output
    assert "windows" not in json.loads(tox.output)["source"]  # a statement has no context
    with load_judge() as judge, pytest.raises(DataError, match="toxicity has none"):
        calibrate_rows(judge, read_rows(toxic, "toxicity")[0], "toxicity", source="t", windows=2)


@pytest.mark.real
def test_calibrate_on_the_real_model(tmp_path):
    from localjudge.quality.devsets import load_devset

    cases = load_devset("toxicity")[::4]  # 16 rows of both labels
    data = tmp_path / "tox.jsonl"
    data.write_text(
        "\n".join(
            json.dumps(
                {"text": c["statement"], "input": c["input"], "label": c["expected"] == "yes"}
            )
            for c in cases
        )
        + "\n"
    )
    result = CliRunner().invoke(
        cli, ["calibrate", "--data", str(data), "--task", "toxicity", "--dry-run", "--json"]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["stored"] is False and 0 <= out["threshold"] <= 1
    assert out["rows"] + out["judge_errors"] == len(cases)
    gain = out["heldout_balanced_accuracy"]["gain_interval"]
    assert gain is None or -1 <= gain[0] <= gain[1] <= 1


@pytest.mark.real
def test_calibrate_in_evidence_windows_on_the_real_model(tmp_path):
    from localjudge.quality.devsets import load_devset

    cases = load_devset("hallucination")[::4]  # 12 rows of both labels, four-sentence contexts
    data = tmp_path / "claims.jsonl"
    data.write_text(
        "".join(
            json.dumps(
                {"context": c["context"], "claim": c["claim"], "label": c["expected"] == "yes"}
            )
            + "\n"
            for c in cases
        )
    )
    result = CliRunner().invoke(
        cli,
        ["calibrate", "--data", str(data), "--task", "hallucination", "--dry-run", "--json",
         "--window-tokens", "24", "--windows", "2", "--folds", "2"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["rows"] + out["judge_errors"] == len(cases) and 0 <= out["threshold"] <= 1
    assert out["source"].endswith("long contexts in 24-token evidence windows, the 2 best by BM25")
