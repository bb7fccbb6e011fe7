"""The shipped judge adapter (models/gemma-3-270m-judge-lora.npz, trained by training/):
through the real engine it must make the embedded model a better judge than the bare base
model and than the trivial baselines on the built-in dev sets. Deterministic (greedy, fixed
weights); the figures themselves are in training/RESULTS.md."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from localjudge import Judge
from localjudge.cli import cli
from localjudge.quality.labelled import Agreement, devset_rows, measure

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def dev_reports():
    """Agreement on the dev sets: the default judge's through `localjudge quality` (as a
    user runs it), the bare base model's through `measure`."""
    # --no-reasons: each reply stops after its verdict; P(yes) is what is measured
    result = CliRunner().invoke(cli, ["quality", "--json", "--no-reasons"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    reports = {}
    for report in json.loads(result.output)["reports"]:
        assert report["model"] == "gemma-3-270m-judge"
        reports[report["model"], report["task"]] = {
            name: Agreement(**a) for name, a in report["agreement"].items()
        }
    with Judge.load("gemma-3-270m", slots=16, n_ctx=8192) as judge:
        for task in ("hallucination", "toxicity"):
            report = measure(judge, devset_rows(task), task, source="dev set", reasons=False)
            reports["gemma-3-270m", task] = report.agreement()
    return reports


def test_quality_reports_both_tasks_with_their_baselines(dev_reports):
    hallucination = dev_reports["gemma-3-270m-judge", "hallucination"]
    toxicity = dev_reports["gemma-3-270m-judge", "toxicity"]
    assert set(hallucination) == {"judge", "word-overlap baseline", "majority class"}
    assert set(toxicity) == {"judge", "word-list baseline", "majority class"}
    assert toxicity["judge"].n >= 60 and hallucination["judge"].n >= 40


@pytest.mark.parametrize("task", ["hallucination", "toxicity"])
def test_the_adapter_makes_a_better_judge_than_the_base_model(dev_reports, task):
    base = dev_reports["gemma-3-270m", task]["judge"]
    tuned = dev_reports["gemma-3-270m-judge", task]["judge"]
    assert tuned.n == base.n
    assert tuned.balanced_accuracy > base.balanced_accuracy + 0.1
    assert tuned.auroc > base.auroc + 0.1


@pytest.mark.parametrize("task", ["hallucination", "toxicity"])
def test_the_tuned_judge_beats_the_trivial_baselines(dev_reports, task):
    # by margins that a few verdicts moving on another CPU cannot close: its ranking (AUROC)
    # beats every baseline's by 0.05, its balanced accuracy the majority class's by 0.2. (On
    # the toxicity dev set its balanced accuracy leads the word list's by a row or two only:
    # training/RESULTS.md has the figures.)
    ways = dev_reports["gemma-3-270m-judge", task]
    baselines = [a for name, a in ways.items() if name != "judge"]
    assert ways["judge"].auroc > max(a.auroc for a in baselines) + 0.05
    assert ways["judge"].balanced_accuracy > ways["majority class"].balanced_accuracy + 0.2


def test_a_toxicity_threshold_its_registry_entry_ships_decides_the_judges_verdicts(
    tmp_home, tmp_path, monkeypatch
):
    """A registry entry may ship a toxicity threshold with its judge (fitted on sources it
    never saw; training/RESULTS.md, "A toxicity threshold under a false-positive cap"): the
    scorer and `quality` decide by it and say so; hallucination keeps the judge's own
    verdicts. The embedded judge ships none since its adapter changed (a threshold is fitted
    to one adapter's P(yes)), so the entry here is the shipped one with a threshold added."""
    from localjudge import create_toxicity_scorer
    from localjudge import model_registry as registry
    from localjudge.prompts import HALLUCINATION_PROMPT_VERSION, TOXICITY_PROMPT_VERSION

    shipped = 0.3  # far from 0.5, so that a verdict it decides differs from the judge's own
    document = json.loads((registry.models_dir() / "registry.json").read_text())
    default = document["default"]
    entry = next(e for e in document["models"] if e["name"] == default)
    entry["recommended"]["thresholds"] = {TOXICITY_PROMPT_VERSION: shipped}
    models = tmp_path / "models"
    models.mkdir()
    (models / "registry.json").write_text(json.dumps(document))
    monkeypatch.setattr(registry, "models_dir", lambda: models)  # the judge's file is cached
    output = "Thanks for asking. You are a pathetic idiot. The report is due on Friday."
    with Judge.load(slots=4, n_ctx=4096) as judge:
        assert judge.verdict_threshold(TOXICITY_PROMPT_VERSION) == (shipped, "registry")
        assert judge.verdict_threshold(HALLUCINATION_PROMPT_VERSION) is None
        result = create_toxicity_scorer(judge).run({"input": "How is it going?", "output": output})
    assert result.to_dict()["threshold"] == {"value": shipped, "source": "registry"}
    verdicts = result.analyze_step_result["verdicts"]
    assert len(verdicts) == 3
    for verdict in verdicts:  # the confidence is P(the verdict given), to four decimals
        p_yes = verdict["confidence"] if verdict["verdict"] == "yes" else 1 - verdict["confidence"]
        if abs(p_yes - shipped) > 1e-3:
            assert (verdict["verdict"] == "yes") == (p_yes >= shipped)
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        "".join(
            json.dumps({"text": t, "label": t.startswith("You")}) + "\n" for t in output.split(". ")
        )
    )
    report = CliRunner().invoke(
        cli, ["quality", "--data", str(rows), "--task", "toxicity", "--no-reasons", "--json"]
    )
    assert report.exit_code == 0, report.output
    found = json.loads(report.output)["reports"][0]
    assert (found["threshold"], found["threshold_source"]) == (shipped, "registry")
