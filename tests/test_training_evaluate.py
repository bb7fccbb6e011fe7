"""training/evaluate.py's reading of held-out sources: with more than one source held out for
a task, each source is measured alone and the ship rule is read on each, not on their pool."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from localjudge.quality.labelled import QualityReport, Row, Way, baselines

ROOT = Path(__file__).resolve().parents[1]


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "training" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def evaluate():
    return load("evaluate")


def report_of(rows: list[Row], scores: list[float]) -> QualityReport:
    judge = Way("judge", scores, [s >= 0.5 for s in scores])
    return QualityReport(
        task="toxicity",
        source="held-out sources",
        model="tiny",
        rows=rows,
        ways=[judge, *baselines("toxicity", rows)],
        threshold=0.5,
        resamples=0,
    )


# Two sources pooled: the judge is right on every toxigen row and wrong on every convabuse one.
ROWS = [
    Row(1, True, "they are all criminals", group="toxigen/hate"),
    Row(2, False, "they came here in 1990", group="toxigen/neutral"),
    Row(3, True, "you are a useless bot", group="convabuse/test/abusive"),
    Row(4, False, "what is the weather", group="convabuse/test/not"),
    Row(5, False, "tell me a joke", group="convabuse/test/not"),
    Row(6, True, "those people should leave", group="toxigen/hate"),
]
SCORES = [0.9, 0.1, 0.2, 0.8, 0.7, 0.95]


def test_each_pooled_source_is_measured_on_its_own_rows(evaluate):
    parts = evaluate.by_source(report_of(ROWS, SCORES))
    assert list(parts) == ["held-out source convabuse", "held-out source toxigen"]
    toxigen, convabuse = parts["held-out source toxigen"], parts["held-out source convabuse"]
    assert [r.number for r in toxigen.rows] == [1, 2, 6]
    assert toxigen.ways[0].scores == [0.9, 0.1, 0.95]
    assert toxigen.agreement()["judge"].balanced_accuracy == 1.0
    assert convabuse.agreement()["judge"].balanced_accuracy == 0.0
    # the baselines are worked out again on each source's rows: majority class by its own rate
    assert convabuse.ways[1].name == "majority class"
    assert convabuse.ways[1].predictions == [False, False, False]
    assert toxigen.ways[1].predictions == [True, True, True]
    assert [w.name for w in toxigen.ways] == [w.name for w in report_of(ROWS, SCORES).ways]


def test_a_set_of_one_source_is_not_split(evaluate):
    toxigen = [r for r in ROWS if r.group.startswith("toxigen")]
    assert evaluate.by_source(report_of(toxigen, [0.9, 0.1, 0.95])) == {}


def test_the_ship_rule_is_read_on_each_source_not_on_their_pool(evaluate):
    pooled = report_of(ROWS, SCORES)
    entries = [evaluate.entry_of("tuned", "held-out sources", pooled)]
    entries += [
        evaluate.entry_of("tuned", name, part) for name, part in evaluate.by_source(pooled).items()
    ]
    decision = evaluate.ship_decision(entries)
    assert decision["ship"] is False
    lines = {line.split(":")[1].strip(): line for line in decision["lines"][:-1]}
    assert lines["toxicity held-out source convabuse"].startswith("FAIL")
    assert lines["toxicity held-out source toxigen"].startswith("pass")
    assert lines["toxicity held-out sources"].endswith("[reported, not deciding]")
    # with the failing source gone, toxicity passes on the one left; the adapter ships only
    # when hallucination is decided too
    kept = [e for e in entries if e["set"] != "held-out source convabuse"]
    alone = evaluate.ship_decision(kept)
    assert alone["ship"] is False
    assert alone["lines"][-2:] == ["not decided: no held-out set of hallucination", "ship: no"]
    begin = {"way": "tuned", "task": "hallucination", "set": "held-out sources", "errors": 0}
    begin["agreement"] = {
        "judge": {"balanced_accuracy": 0.9},
        "word-overlap baseline": {"balanced_accuracy": 0.8},
    }
    assert evaluate.ship_decision([*kept, begin])["ship"] is True
    begin["agreement"]["judge"]["balanced_accuracy"] = 0.7
    assert evaluate.ship_decision([*kept, begin])["ship"] is False


def test_spread_finds_a_pooled_sources_rows_for_its_baselines(tmp_path):
    spread = load("spread")
    lines = [{"text": r.text, "label": r.label, "group": r.group} for r in ROWS]
    (tmp_path / "held-out-sources_toxicity.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lines)
    )
    rows = spread.set_rows(tmp_path, "toxicity", "held-out source convabuse")
    assert [r.text for r in rows] == [ROWS[2].text, ROWS[3].text, ROWS[4].text]
    assert len(spread.set_rows(tmp_path, "toxicity", "held-out sources")) == len(ROWS)
    assert spread.set_rows(tmp_path, "toxicity", "dev set") is None


def test_shipping_a_new_adapter_drops_the_thresholds_fitted_on_the_old_one():
    """A shipped threshold was fitted on one adapter's P(yes); ship.py must not let it decide
    the next adapter's verdicts."""
    ship = load("ship")
    entry = {"name": "j", "recommended": {"n_ctx": 8192, "thresholds": {"toxicity/2": 0.443}}}
    assert ship.forget_thresholds(entry) == {"toxicity/2": 0.443}
    assert entry["recommended"] == {"n_ctx": 8192}
    assert ship.forget_thresholds(entry) == {} and ship.forget_thresholds({"name": "k"}) == {}


def test_spread_reads_the_other_run_at_its_shipped_threshold(tmp_path):
    """A judge shipped with a threshold is compared as users get it: its verdicts at that
    threshold, the other run's at 0.5."""
    spread = load("spread")

    def saved(path: Path, scores: list[float]) -> Path:
        entry = {"way": "tuned", "task": "toxicity", "set": "held-out", "scores": scores}
        entry |= {"labels": [True, True, False, False], "row_groups": ["a"] * 4}
        path.write_text(json.dumps({"sets": [entry]}))
        return path

    mine = saved(tmp_path / "mine.json", [0.9, 0.9, 0.1, 0.1])
    other = saved(tmp_path / "other.json", [0.46, 0.46, 0.1, 0.1])

    def lead(cuts: dict | None) -> float:
        ((_, _, found),) = spread.rows_of(mine, against=other, against_threshold=cuts)
        return found.differences["other"].balanced_accuracy.value

    assert lead(None) == pytest.approx(0.5)  # at 0.5 the other run says no to both toxic rows
    assert lead({"toxicity": 0.443}) == pytest.approx(0.0)
    assert lead({"hallucination": 0.443}) == pytest.approx(0.5)  # another task's cut: unused
    assert spread.task_threshold("toxicity=0.443") == ("toxicity", 0.443)
    with pytest.raises(Exception, match="TASK=P"):
        spread.task_threshold("toxicity=high")


def test_spread_reads_the_shipped_threshold_from_the_registry_not_by_hand(tmp_path):
    """`toxicity=shipped` is the threshold the measured judge's registry entry ships for the
    toxicity prompt; a run with an adapter of its own, or a task its entry ships none for,
    is an error, never a silent 0.5."""
    from localjudge.model_registry import load_registry
    from localjudge.scorers.registry import task_names, verdict_task

    spread = load("spread")
    judge = load_registry()[1]["gemma-3-270m-judge"]
    shipped = judge.recommended.get("thresholds") or {}
    run = tmp_path / "run.json"

    def measured(model: str, adapter: str | None) -> Path:
        run.write_text(json.dumps({"model": model, "adapter": adapter, "sets": []}))
        return run

    assert spread.task_threshold("toxicity=shipped") == ("toxicity", "shipped")
    for task in task_names():
        version = verdict_task(task).prompt_version
        if version in shipped:
            found = spread.shipped_threshold(measured("gemma-3-270m-judge", None), task)
            assert found == shipped[version]
        else:
            with pytest.raises(ValueError, match="ships no threshold"):
                spread.shipped_threshold(measured("gemma-3-270m-judge", None), task)
    with pytest.raises(ValueError, match="ships no threshold"):
        spread.shipped_threshold(measured("gemma-3-270m", None), "toxicity")  # the base
    with pytest.raises(ValueError, match="as it is"):
        spread.shipped_threshold(measured("gemma-3-270m", "out/judge-lora.gguf"), "toxicity")


def test_without_an_adapter_the_model_itself_is_measured_and_no_base_is_asked(evaluate, capsys):
    """`--model gemma-3-270m-judge` without `--adapter` measures the shipped judge; there is no
    separate base to measure then, so the command says to give --no-base, before any load."""
    with pytest.raises(SystemExit):
        evaluate.main(["--model", "gemma-3-270m-judge", "--data", "nowhere"])
    assert "give --no-base" in capsys.readouterr().err


def test_an_adapter_scale_without_an_adapter_is_refused(evaluate, capsys):
    """`--adapter-scale` weakens an adapter; a registry judge measured as it is has none to
    weaken, so the flag is refused before any load instead of being ignored."""
    argv = ["--model", "gemma-3-270m-judge", "--no-base", "--adapter-scale", "0.5"]
    with pytest.raises(SystemExit):
        evaluate.main([*argv, "--data", "nowhere"])
    assert "--adapter-scale goes with --adapter" in capsys.readouterr().err


def test_a_threshold_fitted_under_a_false_positive_cap_is_read_on_other_runs(tmp_path, capsys):
    """thresholds.py --cap: the threshold that catches the most flagged rows while flagging
    no larger share of the others than 0.5 does; --check reads other runs at it against 0.5."""
    thresholds = load("thresholds")

    def saved(path: Path, scores: list[float], labels: list[bool], name: str) -> Path:
        entry = {"way": "tuned", "task": "toxicity", "set": name, "scores": scores}
        entry |= {"labels": labels, "row_groups": ["conan/x"] * len(labels)}
        path.write_text(json.dumps({"sets": [entry]}))
        return path

    # 0.5 flags one of four others and catches one of six flagged rows. The best balanced
    # accuracy (all six caught) flags two others; under the cap the cut falls between the
    # other at 0.3 and the flagged row at 0.45, and catches two.
    fit = saved(
        tmp_path / "fit.json",
        [0.9, 0.45, 0.28, 0.27, 0.26, 0.25, 0.7, 0.3, 0.1, 0.05],
        [True] * 6 + [False] * 4,
        "held-out sources",
    )
    check = saved(
        tmp_path / "check.json",
        [0.4, 0.2, 0.9, 0.1, 0.3, 0.05],
        [True, True, True, False, False, False],
        "held-out sources",
    )
    assert thresholds.main([str(fit), "--cap", "--check", str(check)]) == 0
    out = capsys.readouterr().out
    found = json.loads(out.rsplit("recommended.thresholds:", 1)[1])
    assert found["toxicity/2"] == pytest.approx(0.375)
    assert thresholds.main([str(fit)]) == 0  # without the cap, balanced accuracy alone
    plain = json.loads(capsys.readouterr().out.rsplit("recommended.thresholds:", 1)[1])
    assert plain["toxicity/2"] == pytest.approx(0.175)
    # the check run at the fitted cut: two of three flagged rows caught, no other flagged
    row = next(line for line in out.splitlines() if line.startswith("| check |"))
    assert "| 6 | 0.833 / 0.667 |" in row and "| 0 / 0 of 3 |" in row
    # two folds: each source read at the threshold fitted on the other alone, against 0.5
    assert thresholds.main([str(fit), str(check)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| conan | 6 |"))
    assert "| 0.667 | 0.833 (0.175) | +0.167 [" in row and "| 1 / 0 of 3 |" in row


def test_the_windows_option_is_checked_as_the_scorers_check_theirs(evaluate):
    import argparse

    assert [evaluate.windows_option(v) for v in ("all", "off", "8")] == ["all", "off", 8]
    for bad in ("0", "some", "-1"):
        with pytest.raises(argparse.ArgumentTypeError, match="windows must be"):
            evaluate.windows_option(bad)


def test_a_statements_prior_reads_it_against_a_window_of_another_document():
    prior = load("prior")
    rows = [
        Row(1, False, "a", context=("doc one",)),
        Row(2, True, "b", context=("doc one",)),
        Row(3, False, "c", context=("doc two",)),
    ]
    assert prior.unrelated_contexts(rows) == [("doc two",), ("doc two",), ("doc one",)]
    with pytest.raises(SystemExit):
        prior.unrelated_contexts(rows[:2])
    # a statement its best window clears (0.2) that a window about something else clears
    # almost as well (0.25) counts as barely supported (3 / 7, near 0.5); one that its window
    # clears far below its prior (0.3 against 0.99) counts as well supported
    scores = prior.row_scores([{"p": [0.6, 0.2], "p0": 0.25}, {"p": [0.3], "p0": 0.99}])
    assert scores["plain"] == pytest.approx(0.3)
    assert scores["contrast"] == pytest.approx(3 / 7)  # odds (0.2 / 0.8) / (0.25 / 0.75) = 3 / 4
    assert scores["share"] == 0.0
    assert prior.row_scores([]) == {"plain": 0.0, "contrast": 0.0, "share": 0.0}


def test_antecedent_reads_a_flagged_statement_with_a_supported_one_before_it():
    antecedent = load("antecedent")
    # the text as written: no space added between Japanese sentences, the original spacing kept
    text = "富士山は高い。静岡県にあります。"
    assert antecedent.joined_texts(text, ["富士山は高い。", "静岡県にあります。"]) == [None, text]
    assert antecedent.joined_texts("A b.  It c.", ["A b.", "It c."]) == [None, "A b.  It c."]
    assert antecedent.joined_texts("A b. It c.", ["A b.", "Z"]) == [None, "A b. Z"]
    assert antecedent.joined_texts("?", []) == []  # nothing to check, nothing to join
    after = antecedent.antecedent_scores
    # flagged after a supported one, and cleared clearly together: the joined P(yes)
    assert after([0.1, 0.9], [None, 0.05]) == [0.1, 0.05]
    # cleared, but not clearly (0.46): stays flagged, as a wrong sentence carried by a right one
    assert after([0.1, 0.9], [None, 0.46]) == [0.1, 0.9]
    # the one before is flagged: no antecedent to lean on
    assert after([0.9, 0.9], [None, 0.05]) == [0.9, 0.9]
    # a chain: the second mended by the first, the third by the mended second
    assert after([0.1, 0.9, 0.8], [None, 0.1, 0.2]) == [0.1, 0.1, 0.2]
    # a statement that passes alone keeps its own P(yes); nothing to check scores 0
    assert after([0.1, 0.3], [None, None]) == [0.1, 0.3]
    record = {"plain": [0.1, 0.9], "joined": [None, 0.05]}
    assert antecedent.row_scores(record) == {"plain": 0.9, "antecedent": 0.1}
    assert antecedent.row_scores({"plain": [], "joined": []}) == {"plain": 0.0, "antecedent": 0.0}


def test_training_and_evaluation_use_the_windows_the_shipped_judge_reads():
    from localjudge.model_registry import load_registry

    _, entries = load_registry()
    shipped = entries["gemma-3-270m-judge"].recommended["window_tokens"]
    assert shipped == load("evaluate").WINDOW_TOKENS
    assert shipped == load("make_data").WINDOW_TOKENS


def test_leaks_finds_judged_texts_in_training_once_each():
    leaks = load("leaks")
    premise = "Two wrestlers jump in a ring while an official watches the crowd."
    claim = "A claim that was judged and sits inside a longer training text here."
    train = [
        ("context", premise, "snli/entailment"),
        ("text", f"Before it. {claim} After it.", "toxigen/hate"),
    ]
    judged = [
        ("context", premise.upper(), "snli/neutral"),
        ("context", premise, "snli/entailment"),  # the same text again: counted once
        ("text", claim, "toxigen/hate"),
        ("context", f"{claim} More.", "q2/consistent"),  # a context only counts when whole
        ("text", "too short", "q2/consistent"),
    ]
    found = leaks.leaks(train, judged)
    assert found == {("snli", "context"): [premise.upper()], ("toxigen", "text"): [claim]}


def test_leaks_says_so_when_ethos_csv_is_not_under_sources(tmp_path, capsys):
    leaks = load("leaks")
    train = tmp_path / "train"
    train.mkdir()
    (train / "train_toxicity.jsonl").write_text(
        json.dumps({"text": "a training text long enough to be compared here", "label": True})
        + "\n"
    )
    assert leaks.main(["--train", str(train), "--judged", str(tmp_path)]) == 0
    args = ["--train", str(train), "--judged", str(tmp_path), "--sources", str(tmp_path)]
    assert leaks.main(args) == 2  # never a check made without ETHOS
    assert "leaks: missing source file" in capsys.readouterr().err


def test_a_one_task_reading_judges_that_tasks_sets_only(evaluate, tmp_path):
    toxic = {"text": "you are a useless bot", "label": True, "group": "convabuse/test/abusive"}
    claim = {"context": ["The cello player sat down."], "claim": "A cellist sat.", "label": False}
    (tmp_path / "heldout_toxicity.jsonl").write_text(json.dumps(toxic) + "\n")
    (tmp_path / "held-out-sources_hallucination.jsonl").write_text(json.dumps(claim) + "\n")
    (tmp_path / "heldout_hallucination.jsonl").write_text(json.dumps(claim) + "\n")
    every = [(task, name) for task, name, _ in evaluate.sets(tmp_path)]
    assert every == [
        ("toxicity", "held-out"),
        ("toxicity", "dev set"),
        ("hallucination", "held-out sources"),
        ("hallucination", "held-out"),
        ("hallucination", "dev set"),
    ]
    one = evaluate.sets(tmp_path, False, ("hallucination",))
    assert [(task, name) for task, name, _ in one] == every[2:4]
    assert [len(rows) for _, _, rows in one] == [1, 1]


def test_the_shipped_adapter_unpacks_to_a_gguf_lora_that_packs_back_the_same(tmp_path):
    """`ship.py --unpack` writes the committed `.npz` back as a GGUF LoRA adapter (for
    `evaluate.py --adapter`): the same tensor names, dtypes, shapes, values and alpha, so that
    packing it again gives the committed arrays."""
    import numpy as np

    from localjudge.merge import lora_tensors

    ship = load("ship")
    rng = np.random.default_rng(0)
    arrays = {
        "blk.0.attn_q.weight.lora_a": rng.standard_normal((4, 8)).astype(np.float16),
        "blk.0.attn_q.weight.lora_b": rng.standard_normal((6, 4)).astype(np.float16),
    }
    npz = tmp_path / "adapter.npz"
    np.savez(npz, alpha=np.array(8.0), **arrays)
    gguf_file = tmp_path / "adapter.gguf"
    ship.write_gguf(npz, gguf_file, "gemma3")
    alpha, tensors = lora_tensors(gguf_file)
    assert alpha == 8.0
    assert [name for name, _ in tensors] == list(arrays)
    for name, data in tensors:
        back = np.asarray(data)
        assert back.dtype == np.float16 and back.shape == arrays[name].shape
        assert np.array_equal(back, arrays[name])
    again = tmp_path / "again.npz"
    ship.write_npz(gguf_file, again)
    with np.load(again) as packed:
        assert float(packed["alpha"]) == 8.0
        assert all(np.array_equal(packed[name], arrays[name]) for name in arrays)
