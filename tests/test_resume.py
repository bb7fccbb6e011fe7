"""Resume and batch integrity of `eval` results files: keys, odd line breaks, transient
errors, and `kill -9` at random moments."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localjudge.evals.batch import evaluate_file
from localjudge.evals.dataset import ResultsFile, json_line, read_dataset
from localjudge.scorers import create_toxicity_scorer
from localjudge.testing import FakeJudge

REPO = Path(__file__).resolve().parents[1]


def script(prompt: str) -> str:
    if "Statement: " in prompt.rsplit("\n\n", 1)[-1]:
        return '{"verdict":"no","category":"none","severity":"none","reason":"civil"}'
    return '{"reason":"ok"}'


def write_jsonl(path: Path, rows) -> Path:
    with path.open("wb") as handle:
        for row in rows:
            handle.write(row.encode() + b"\n" if isinstance(row, str) else json_line(row))
    return path


def test_keys_tell_1_from_quoted_1_and_hash_items_without_id(tmp_path):
    rows = [
        {"id": 1, "output": "a"},
        {"id": "1", "output": "b"},
        {"output": "no id"},
        {"output": "no id"},  # the same item twice: kept apart by occurrence
        {"id": 1, "output": "c"},  # a repeated id is refused on the later line
        {"id": {"nested": True}, "output": "d"},
    ]
    found = list(read_dataset(write_jsonl(tmp_path / "d.jsonl", rows)))
    keys = [row.key for row in found]
    assert keys[0] == "id:1" and keys[1] == 'id:"1"'
    assert keys[2].startswith("sha:") and keys[3] == keys[2] + "#2"
    assert found[4].error == "line 5: duplicate id 1 (first on line 1)"
    assert keys[5] == 'id:{"nested": true}'


def test_inserting_a_line_does_not_shift_items_without_id(tmp_path):
    before = [{"output": f"item {i}"} for i in range(4)]
    after = [before[0], {"output": "a new first line"}, *before[1:]]
    keys_before = [r.key for r in read_dataset(write_jsonl(tmp_path / "a.jsonl", before))]
    keys_after = [r.key for r in read_dataset(write_jsonl(tmp_path / "b.jsonl", after))]
    assert set(keys_before) < set(keys_after) and len(keys_after) == 5


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085", "\x0c", "\x1c"])
def test_results_with_unicode_line_separators_survive_a_reload(tmp_path, separator):
    path = tmp_path / "out.jsonl"
    results = ResultsFile(path)
    results.append({"key": "id:1", "output": f"one{separator}two", "errors": {}})
    results.append({"key": "id:2", "output": "three", "errors": {}})
    reloaded = ResultsFile(path)
    assert set(reloaded.records) == {"id:1", "id:2"}
    assert reloaded.records["id:1"]["output"] == f"one{separator}two"
    assert reloaded.is_done("id:1") and reloaded.is_done("id:2")


def test_lone_surrogates_round_trip_through_the_results_file(tmp_path):
    path = tmp_path / "out.jsonl"
    ResultsFile(path).append({"key": "k", "output": "broken \ud800 utf-16", "errors": {}})
    assert ResultsFile(path).records["k"]["output"] == "broken \ud800 utf-16"


def test_a_line_cut_by_a_kill_is_dropped(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_bytes(json_line({"key": "a", "errors": {}}) + b'{"key": "b", "err')
    results = ResultsFile(path)
    assert set(results.records) == {"a"} and path.read_bytes().endswith(b"}\n")


def test_transient_errors_are_retried_and_input_errors_are_not(tmp_path):
    path = tmp_path / "out.jsonl"
    results = ResultsFile(path)
    results.append({"key": "ok", "errors": {}})
    results.append(
        {"key": "bad", "errors": {"t": "no assistant text"}, "errorKinds": {"t": "input"}}
    )
    results.append(
        {"key": "flaky", "errors": {"t": "engine step failed"}, "errorKinds": {"t": "transient"}}
    )
    results.append({"key": "old", "errors": {"t": "from an older version"}})
    reloaded = ResultsFile(path)
    assert [reloaded.is_done(k) for k in ("ok", "bad", "flaky", "old")] == [
        True,
        True,
        False,
        False,
    ]
    everything = ResultsFile(path, retry_errors=True)
    assert [everything.is_done(k) for k in ("ok", "bad", "flaky")] == [True, False, False]


def test_evaluate_file_retries_an_engine_failure_on_resume(tmp_path, tmp_home):
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": i, "output": f"Fine {i}."} for i in range(4)])
    out = tmp_path / "out.jsonl"
    judge = FakeJudge(script)
    scorer = create_toxicity_scorer(judge, reason="template")
    judge.close()  # every request now fails: a transient error
    first = evaluate_file(data, out, {"toxicity": scorer})
    assert first.processed == 4 and first.failed == 4
    record = json.loads(out.read_text().splitlines()[0])
    assert record["errorKinds"] == {"toxicity": "transient"}
    judge = FakeJudge(script)
    second = evaluate_file(
        data, out, {"toxicity": create_toxicity_scorer(judge, reason="template")}
    )
    judge.close()
    assert second.processed == 4 and second.failed == 0 and second.total == 4
    third = evaluate_file(data, out, {"toxicity": scorer})
    assert third.processed == 0 and third.skipped == 4


def test_metadata_and_extra_keys_reach_the_record_and_store_text_false(tmp_path, tmp_home):
    rows = [
        {
            "id": "m",
            "input": "secret question",
            "output": "A secret answer.",
            "metadata": {"team": "a"},
            "tags": ["x"],
            "runtimeContext": {"user": "u"},
        }
    ]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    out = tmp_path / "out.jsonl"
    judge = FakeJudge(script)
    report = evaluate_file(
        data,
        out,
        {"toxicity": create_toxicity_scorer(judge, reason="template")},
        store_text=False,
    )
    judge.close()
    assert report.failed == 0
    text = out.read_text()
    assert "secret" not in text
    record = json.loads(text)
    assert record["metadata"] == {"team": "a"} and record["scores"] == {"toxicity": 0}
    result = record["results"]["toxicity"]
    assert result["textsStored"] is False and result["analyzeStepResult"]["verdicts"][0] == {
        "verdict": "no",
        "category": "none",
        "severity": "none",
        # the judge's own words may quote the text: rebuilt from the verdict instead
        "reason": "Judged civil: no attack, mockery, hate, dismissal or threat.",
        "reasonBy": "template",
        "confidence": result["analyzeStepResult"]["verdicts"][0]["confidence"],
    }


KILLABLE_EVAL = """
import sys
from localjudge.evals.batch import evaluate_file
from localjudge.scorers import create_toxicity_scorer
from localjudge.testing import FakeJudge

def script(prompt):
    if "Statement: " in prompt.rsplit("\\n\\n", 1)[-1]:
        return '{"verdict":"no","category":"none","severity":"none","reason":"civil"}'
    return '{"reason":"ok"}'

judge = FakeJudge(script, slots=2, step_seconds=0.004)
report = evaluate_file(
    sys.argv[1], sys.argv[2], {"toxicity": create_toxicity_scorer(judge, reason="template")},
    scoring_concurrency=2,
)
judge.close()
print("done", report.processed, report.skipped, flush=True)
"""


def test_kill_9_at_random_moments_then_resume_scores_every_item_once(tmp_path, tmp_home):
    rows = []
    for i in range(40):
        row = {"output": f"Sentence {i}\u2028with a line separator. And\u2029another {i}."}
        if i % 3:
            row["id"] = i if i % 2 else str(i)  # ints and strings, never equal as keys
        rows.append(row)
    rows.append({"id": 1, "output": "a duplicate id: reported, not scored"})
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    out = tmp_path / "out.jsonl"
    runner = tmp_path / "run.py"
    runner.write_text(KILLABLE_EVAL)
    command = [sys.executable, str(runner), str(data), str(out)]
    env = {**os.environ, "LOCALJUDGE_HOME": str(tmp_home)}
    rng = random.Random(7)
    kills = 0
    for _ in range(12):
        process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        time.sleep(rng.uniform(0.3, 1.2))
        if process.poll() is not None:
            break
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        kills += 1
    finished = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert kills >= 2  # the run really was interrupted
    keys = [json.loads(line)["key"] for line in out.read_bytes().split(b"\n") if line]
    expected = {row.key for row in read_dataset(data) if row.item is not None}
    assert len(keys) == len(set(keys)) == len(expected) == 40  # every item exactly once
    assert set(keys) == expected
