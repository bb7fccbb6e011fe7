"""Bootstrap intervals of quality figures: exact checks against a plain bootstrap on the same
draw, the cases whose interval is known, and the report, CLI and page that show them."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from click.testing import CliRunner

from localjudge.cli import cli
from localjudge.quality.intervals import (
    CELLS,
    Interval,
    aurocs,
    balanced_accuracies,
    draw,
    interval,
    intervals,
)
from localjudge.quality.labelled import Agreement, auroc, measure, report_text
from localjudge.quality.pictures import page
from localjudge.quality.rows import read_rows
from localjudge.testing import FakeJudge


def noisy(n: int = 120, seed: int = 3):
    """Labels, scores with ties and the verdicts at 0.5."""
    r = random.Random(seed)
    labels = [r.random() < 0.35 for _ in range(n)]
    scores = [round(min(1.0, max(0.0, (0.65 if y else 0.35) + r.gauss(0, 0.3))), 1) for y in labels]
    return labels, scores, [s >= 0.5 for s in scores]


def test_each_resample_keeps_the_count_of_each_class():
    labels, _, _ = noisy()
    sample = draw(labels, resamples=50)
    assert sample.positive.shape == (50, sum(labels))
    assert sample.negative.shape == (50, len(labels) - sum(labels))
    assert all(labels[i] for i in sample.positive.ravel())
    assert not any(labels[i] for i in sample.negative.ravel())


@pytest.mark.parametrize("cells", [CELLS, 1000])  # one chunk of resamples, or many
def test_the_figures_are_those_of_a_plain_bootstrap_on_the_same_draw(cells, monkeypatch):
    monkeypatch.setattr("localjudge.quality.intervals.CELLS", cells)
    labels, scores, said = noisy()
    sample = draw(labels, resamples=200, seed=11)
    plain_bacc, plain_auroc = [], []
    for pos, neg in zip(sample.positive, sample.negative, strict=True):
        rows = [*pos, *neg]
        picked = [labels[i] for i in rows]
        plain_bacc.append(
            Agreement.of(
                picked, [said[i] for i in rows], [scores[i] for i in rows]
            ).balanced_accuracy
        )
        plain_auroc.append(auroc(picked, [scores[i] for i in rows]))
    assert balanced_accuracies(sample, said) == pytest.approx(plain_bacc, abs=1e-12)
    assert aurocs(sample, scores) == pytest.approx(plain_auroc, abs=1e-12)

    spread = intervals(labels, [("judge", scores, said)], resamples=200, seed=11)
    judge = spread.ways["judge"]
    assert judge.balanced_accuracy.value == pytest.approx(
        Agreement.of(labels, said, scores).balanced_accuracy, abs=1e-12
    )
    assert judge.auroc.value == pytest.approx(auroc(labels, scores), abs=1e-12)
    low, high = np.percentile(plain_auroc, [2.5, 97.5])
    assert (judge.auroc.low, judge.auroc.high) == pytest.approx((low, high), abs=1e-12)


def test_differences_are_paired_on_the_same_resampled_rows():
    labels, scores, said = noisy()
    perfect = [float(y) for y in labels]
    spread = intervals(
        labels,
        [
            ("judge", perfect, list(labels)),
            ("constant", [0.5] * len(labels), [False] * len(labels)),
            ("itself", perfect, list(labels)),
            ("noisy", scores, said),
        ],
    )
    judge = spread.ways["judge"]
    assert (judge.balanced_accuracy.low, judge.balanced_accuracy.high) == (1.0, 1.0)
    assert (judge.auroc.low, judge.auroc.high) == (1.0, 1.0)
    constant = spread.ways["constant"].balanced_accuracy
    assert (constant.low, constant.high) == (0.5, 0.5)
    # a perfect judge is exactly 0.5 above a constant and 0 above itself in every resample
    assert (spread.differences["constant"].balanced_accuracy.low,
            spread.differences["constant"].balanced_accuracy.high) == (0.5, 0.5)  # fmt: skip
    assert spread.differences["itself"].auroc.low == spread.differences["itself"].auroc.high == 0
    # paired: in each resample, a perfect judge minus the noisy way is 1 minus the noisy
    # way's figure on the same rows (independent draws per way would not give this)
    noisy_way = spread.ways["noisy"].balanced_accuracy
    gap = spread.differences["noisy"].balanced_accuracy
    assert gap.low == pytest.approx(1 - noisy_way.high, abs=1e-12)
    assert gap.high == pytest.approx(1 - noisy_way.low, abs=1e-12)
    assert set(spread.differences) == {"constant", "itself", "noisy"}


def test_the_same_seed_gives_the_same_interval_and_the_level_widens_it():
    labels, scores, said = noisy()
    one = intervals(labels, [("judge", scores, said)], seed=5).ways["judge"].auroc
    again = intervals(labels, [("judge", scores, said)], seed=5).ways["judge"].auroc
    other = intervals(labels, [("judge", scores, said)], seed=6).ways["judge"].auroc
    assert one == again and one != other
    wide = intervals(labels, [("judge", scores, said)], seed=5, level=0.99).ways["judge"].auroc
    assert wide.low <= one.low and wide.high >= one.high
    assert interval(0.7, np.array([0.2, 0.9]), level=0.0) == interval(
        0.7, np.array([0.9, 0.2]), level=0.0
    )


def test_the_console_says_when_the_judge_is_not_surely_better_than_a_baseline():
    from localjudge.quality.intervals import Interval, Intervals, WayIntervals
    from localjudge.quality.labelled import interval_lines

    def way(low: float, high: float) -> WayIntervals:
        return WayIntervals(Interval(0.0, low, high), Interval(0.0, low, high))

    spread = Intervals(
        ways={"judge": way(0.6, 0.8)},
        differences={"better": way(0.01, 0.2), "level": way(-0.05, 0.1), "worse": way(-0.3, -0.1)},
        resamples=1000, level=0.95, seed=0,
    )  # fmt: skip
    text = "\n".join(interval_lines(spread))
    assert "not surely better than level's" in text and "surely worse than worse's" in text
    assert "better's" not in text and "not surely better than worse's" not in text


def test_no_interval_without_both_classes_or_resamples():
    assert intervals([True, True], [("judge", [0.9, 0.8], [True, True])]) is None
    assert intervals([True, False], [("judge", [0.9, 0.1], [True, False])], resamples=0) is None


def tox_rows(tmp_path):
    lines = []
    for i in range(24):
        toxic = i % 3 == 0
        text = f"You are an idiot, number {i}." if toxic else f"Thanks for the note {i}."
        lines.append(json.dumps({"text": text, "label": toxic}))
    path = tmp_path / "tox.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_report_the_command_and_the_page_show_the_intervals(tmp_path, tmp_home, monkeypatch):
    data = tox_rows(tmp_path)
    rows, _ = read_rows(data, "toxicity")
    with FakeJudge() as judge:
        report = measure(judge, rows, "toxicity", source="tox.jsonl", resamples=300)
    out = report.to_dict()
    spread = out["intervals"]
    assert spread["resamples"] == 300 and spread["level"] == 0.95
    assert set(spread["ways"]) == set(out["agreement"])
    assert set(spread["judge_minus"]) == set(out["agreement"]) - {"judge"}
    for name, figures in spread["ways"].items():
        bacc = figures["balanced_accuracy"]
        assert bacc["value"] == pytest.approx(out["agreement"][name]["balanced_accuracy"])
        assert 0 <= bacc["low"] <= bacc["high"] <= 1
    text = report_text(report)
    assert "judge minus word-list baseline: balanced accuracy" in text
    lead = report.intervals.differences["word-list baseline"].balanced_accuracy
    said = "the judge's verdicts are not surely better than word-list baseline's" in text
    assert said == (lead.low <= 0 <= lead.high)
    assert "id='intervals'" in page([report])

    monkeypatch.setenv("LOCALJUDGE_ENGINE", "fake")
    base = ["quality", "--data", str(data), "--task", "toxicity"]
    shown = CliRunner().invoke(cli, base)
    assert shown.exit_code == 0 and "95% intervals (1000 stratified" in shown.output
    off = CliRunner().invoke(cli, [*base, "--resamples", "0", "--json"])
    assert off.exit_code == 0 and json.loads(off.output)["reports"][0]["intervals"] is None
    bad = CliRunner().invoke(cli, [*base, "--resamples", "-1"])
    assert bad.exit_code == 2 and "--resamples" in bad.output


def test_an_interval_formats_its_value_and_bounds_alike():
    figure = Interval(0.125, -0.0504, 0.25)
    assert f"{figure:.2f}" == "0.12 [-0.05, 0.25]"
    assert f"{figure:+.3f}" == "+0.125 [-0.050, +0.250]"
