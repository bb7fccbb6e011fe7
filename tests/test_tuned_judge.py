"""The shipped judge adapter (models/gemma-3-270m-judge-lora.npz, trained by training/):
through the real engine it must make the embedded model a better judge than the bare base
model and than the trivial baselines on the built-in dev sets. Deterministic (greedy, fixed
weights); the figures themselves are in training/RESULTS.md."""

from __future__ import annotations

import pytest

from localjudge import Judge
from localjudge.quality.labelled import devset_rows, measure

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def dev_reports():
    reports = {}
    for model in ("gemma-3-270m", "gemma-3-270m-judge"):
        with Judge.load(model, slots=16, n_ctx=8192) as judge:
            for task in ("hallucination", "toxicity"):
                report = measure(judge, devset_rows(task), task, source="dev set", reasons=False)
                reports[model, task] = report.agreement()
    return reports


@pytest.mark.parametrize("task", ["hallucination", "toxicity"])
def test_the_adapter_makes_a_better_judge_than_the_base_model(dev_reports, task):
    base = dev_reports["gemma-3-270m", task]["judge"]
    tuned = dev_reports["gemma-3-270m-judge", task]["judge"]
    assert tuned.n == base.n
    assert tuned.balanced_accuracy > base.balanced_accuracy + 0.1
    assert tuned.auroc > base.auroc + 0.1


@pytest.mark.parametrize("task", ["hallucination", "toxicity"])
def test_the_tuned_judge_beats_the_trivial_baselines(dev_reports, task):
    ways = dev_reports["gemma-3-270m-judge", task]
    best = max(a.balanced_accuracy for name, a in ways.items() if name != "judge")
    assert ways["judge"].balanced_accuracy > best
    assert ways["judge"].auroc > max(a.auroc for name, a in ways.items() if name != "judge")
