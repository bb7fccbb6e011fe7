"""`localjudge score`, `eval` and `doctor` through click, and a real kill -9 resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from localjudge.cli import cli

REPO = Path(__file__).resolve().parents[1]


def invoke(*args, input=None):
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def write_jsonl(path: Path, rows) -> Path:
    path.write_text(
        "".join(
            (r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows
        )
    )
    return path


ITEMS = [
    {"id": "a", "input": "Sky?", "output": "The sky is blue.", "context": ["The sky is blue."]},
    {
        "id": "b",
        "input": "Help?",
        "output": "You idiot. The answer is 4.",
        "context": ["The answer is 4."],
    },
    {"input": "No id here", "output": "Grass is green.", "context": ["Grass is green."]},
]


# -- errors need no model ----------------------------------------------------------------


def test_unknown_scorer_lists_known_ones(tmp_path):
    data = write_jsonl(tmp_path / "d.jsonl", ITEMS)
    result = invoke("eval", str(data), "--scorer", "bias", "--out", str(tmp_path / "o.jsonl"))
    assert result.exit_code == 1
    assert "unknown scorer 'bias'; known: hallucination, toxicity" in result.output


def test_missing_dataset(tmp_path):
    result = invoke(
        "eval",
        str(tmp_path / "nope.jsonl"),
        "--scorer",
        "toxicity",
        "--out",
        str(tmp_path / "o.jsonl"),
    )
    assert result.exit_code == 1 and "dataset not found" in result.output


def test_bad_fail_above(tmp_path):
    data = write_jsonl(tmp_path / "d.jsonl", ITEMS)
    result = invoke(
        "eval", str(data), "--scorer", "toxicity", "--out", str(tmp_path / "o"), "--fail-above", "x"
    )
    assert result.exit_code == 2 and "SCORER=THRESHOLD" in result.output


def test_score_rejects_context_for_toxicity():
    result = invoke("score", "toxicity", "--output", "hi", "--context", "c")
    assert result.exit_code == 2 and "--context does not apply to toxicity" in result.output


# -- the real engine ---------------------------------------------------------------------


@pytest.mark.real
def test_score_hallucination_json_with_context_file(tmp_path):
    context_file = tmp_path / "ctx.txt"
    context_file.write_text("The museum opens at 9 a.m.")
    result = invoke(
        "score", "hallucination", "--output", "The museum opens at 10 a.m.", "--context-file", str(context_file),
        "--reason", "template", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert (
        data["scorerId"] == "hallucination-scorer"
        and len(data["analyzeStepResult"]["verdicts"]) == 1
    )
    assert "The museum opens at 9 a.m." in data["analyzePrompt"]


@pytest.mark.real
def test_score_toxicity_readable_from_stdin():
    result = invoke(
        "score", "toxicity", "--output", "-", "--reason", "template", input="Thanks. You idiot."
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith("toxicity-scorer: ")
    assert "not meaningful" not in result.output  # the default judge carries its adapter


@pytest.mark.real
def test_eval_resume_malformed_lines_and_limit(tmp_path):
    rows = [ITEMS[0], "{not json", {"id": "x", "context": ["c"]}, ITEMS[1], ITEMS[2]]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    out = tmp_path / "out.jsonl"
    first = invoke(
        "eval", str(data), "--scorer", "toxicity", "--out", str(out), "--limit", "4", "--quiet"
    )
    assert first.exit_code == 4  # unusable lines make the run fail, after scoring the rest
    assert "line 2: malformed JSON" in first.output
    assert "line 3: missing field 'input'" in first.output
    assert "2 item(s) scored" in first.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["key"] for r in lines) == ['id:"a"', 'id:"b"']
    second = invoke("eval", str(data), "--scorer", "toxicity", "--out", str(out), "--quiet")
    assert "1 item(s) scored, 2 already in" in second.output
    keys = [json.loads(line)["key"] for line in out.read_text().splitlines()]
    assert sorted(keys)[:2] == ['id:"a"', 'id:"b"']  # each item once; no id -> content hash
    assert len(keys) == 3 and keys[2].startswith("sha:")


@pytest.mark.real
def test_eval_fail_above_gates_ci(tmp_path):
    data = write_jsonl(tmp_path / "d.jsonl", ITEMS)
    out = tmp_path / "out.jsonl"
    result = invoke(
        "eval", str(data), "--scorer", "hallucination", "--scorer", "toxicity", "--out", str(out),
        "--fail-above", "toxicity=-1", "--quiet",
    )  # fmt: skip
    assert (
        result.exit_code == 3
        and "toxicity mean" in result.output
        and "is above -1" in result.output
    )
    record = json.loads(out.read_text().splitlines()[0])
    assert set(record["scores"]) == {"hallucination", "toxicity"}
    assert record["results"]["hallucination"]["runId"] in {"a", "b"} or record["key"].startswith(
        "sha:"
    )
    ok = invoke(
        "eval",
        str(data),
        "--scorer",
        "toxicity",
        "--out",
        str(out),
        "--fail-above",
        "toxicity=1",
        "--quiet",
    )
    assert ok.exit_code == 0, ok.output


@pytest.mark.real
def test_csv_input(tmp_path):
    data = tmp_path / "d.csv"
    data.write_text('id,input,output,context\nc1,Sky?,The sky is blue.,"[""The sky is blue.""]"\n')
    out = tmp_path / "out.jsonl"
    result = invoke("eval", str(data), "--scorer", "hallucination", "--out", str(out), "--quiet")
    assert result.exit_code == 0, result.output
    record = json.loads(out.read_text())
    assert (
        record["key"] == 'id:"c1"'
        and "The sky is blue." in record["results"]["hallucination"]["analyzePrompt"]
    )


@pytest.mark.real
def test_doctor():
    result = invoke("doctor")
    assert result.exit_code == 0, result.output
    for name in ("llama.cpp", "GPU offload", "threads", "cache folder", "default model", "offline"):
        assert f"] {name}:" in result.output
    assert "no network attempt" in result.output


@pytest.mark.real
def test_kill_9_midway_then_resume_loses_and_duplicates_nothing(tmp_path):
    items = [
        {"id": f"i{n}", "input": "Q?", "output": f"Answer number {n} is fine."} for n in range(24)
    ]
    data = write_jsonl(tmp_path / "d.jsonl", items)
    out = tmp_path / "out.jsonl"
    command = [
        sys.executable,
        "-m",
        "localjudge",
        "eval",
        str(data),
        "--scorer",
        "toxicity",
        "--out",
        str(out),
    ]
    command += ["--quiet", "--slots", "2"]
    process = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if out.exists() and len(out.read_bytes().splitlines()) >= 3:
            break
        if process.poll() is not None:
            pytest.fail("the eval finished before it could be killed")
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    written = len(out.read_bytes().splitlines())
    assert 3 <= written < len(items)
    resumed = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    keys = [json.loads(line)["key"] for line in out.read_text().splitlines()]
    assert sorted(keys) == sorted(f'id:"i{n}"' for n in range(24))  # every item exactly once
