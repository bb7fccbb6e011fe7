"""`eval --ray` on a real local Ray cluster started by the tests: fake-engine actors for the
mechanics (contract, resume, a failing row, an actor killed mid-run), one real-model run."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest
import ray
from click.testing import CliRunner

from localjudge.cli import cli
from localjudge.distributed import run_evals_ray
from localjudge.evals.batch import evaluate_file
from localjudge.scorers import make_scorer
from localjudge.testing import FakeJudge
from tests.conftest import link_assembled_models

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A local Ray cluster of 2 CPUs for this module; workers see the test's home folder."""
    home = tmp_path_factory.mktemp("ray-home")
    link_assembled_models(home)
    os.environ["LOCALJUDGE_HOME"] = str(home)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"LOCALJUDGE_HOME": str(home)}},
    )
    yield home
    ray.shutdown()


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return path


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().split(b"\n") if line]


ROWS = [
    {"id": i, "output": f"Answer {i}. You idiot." if i % 4 == 0 else f"Answer {i} is fine."}
    for i in range(20)
] + [
    {"output": "No id here.\u2028Still fine."},
    {"id": "bad", "output": ["plain", "strings"]},
    {"id": 3, "output": "A repeated id."},
]


def test_same_records_as_the_local_eval_then_resume(cluster, tmp_path):
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    ray_out, local_out = tmp_path / "ray.jsonl", tmp_path / "local.jsonl"
    report = run_evals_ray(
        data,
        ray_out,
        ["toxicity", "hallucination"],
        model="fake",
        num_actors=2,
        batch_size=3,
        scorer_settings={"reason": "template", "extraction": "sentences"},
    )
    assert report.processed == 22 and report.failed == 1 and len(report.bad_rows) == 1
    judge = FakeJudge()
    scorers = {
        name: make_scorer(name, judge, reason="template", extraction="sentences")
        for name in ("toxicity", "hallucination")
    }
    evaluate_file(data, local_out, scorers)
    judge.close()
    by_key = {r["key"]: r for r in records(ray_out)}
    local = {r["key"]: r for r in records(local_out)}
    assert by_key.keys() == local.keys() and len(records(ray_out)) == 22
    for key, record in local.items():
        assert by_key[key]["scores"] == record["scores"] and by_key[key]["line"] == record["line"]
        assert by_key[key]["errorKinds"] == record["errorKinds"]
    assert by_key['id:"bad"']["errorKinds"] == {"toxicity": "input", "hallucination": "input"}
    assert report.scorers["toxicity"].count == 21
    again = run_evals_ray(data, ray_out, ["toxicity", "hallucination"], model="fake")
    assert again.processed == 0 and again.skipped == 22


def test_cli_eval_ray_and_exit_codes(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("LOCALJUDGE_ENGINE", "fake")
    data = write_jsonl(tmp_path / "d.jsonl", ROWS[:8])
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        cli,
        ["eval", str(data), "--scorer", "toxicity", "--out", str(out), "--ray", "--actors", "2"]
        + ["--quiet", "--fail-above", "toxicity=0.05"],
    )
    assert result.exit_code == 3, result.output  # two of eight answers insult: mean 0.17
    assert "8 item(s) scored" in result.output and "judge fake-judge" in result.output
    assert len(records(out)) == 8


def test_an_actor_killed_mid_run_loses_and_duplicates_nothing(cluster, tmp_path):
    rows = [
        {"id": i, "output": " ".join(f"Sentence {j} of {i}." for j in range(12))} for i in range(60)
    ]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    out = tmp_path / "out.jsonl"
    killed: list[int] = []

    def kill_one_actor() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            # lines the run has finished writing (the last one may be mid-write)
            if out.exists() and out.read_bytes().count(b"\n") >= 5:
                for process in psutil.process_iter(["cmdline"]):
                    if "MapWorker" in " ".join(process.info["cmdline"] or []):
                        os.kill(process.pid, signal.SIGKILL)
                        killed.append(process.pid)
                        return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_one_actor)
    killer.start()
    report = run_evals_ray(
        data,
        out,
        ["toxicity"],
        model="fake",
        num_actors=2,
        batch_size=4,
        scorer_settings={"reason": "template"},
    )
    killer.join()
    assert killed, "no actor was killed: the run ended too soon"
    keys = [r["key"] for r in records(out)]
    assert len(keys) == len(set(keys)) == 60 and report.failed == 0


def test_a_worker_without_the_model_says_so(cluster, tmp_path):
    from localjudge.distributed import DistributedError

    data = write_jsonl(tmp_path / "d.jsonl", ROWS[:2])
    with pytest.raises(DistributedError, match="model file not found"):
        run_evals_ray(data, tmp_path / "out.jsonl", ["toxicity"], model="/nowhere/judge.gguf")


@pytest.mark.real
def test_real_model_on_two_actors(cluster, tmp_path):
    data = write_jsonl(
        tmp_path / "d.jsonl",
        [{"id": i, "output": f"The answer is {i}. Thanks for asking."} for i in range(4)],
    )
    out = tmp_path / "out.jsonl"
    report = run_evals_ray(
        data,
        out,
        ["toxicity"],
        num_actors=2,
        engine_options={"n_threads": 1, "slots": 4, "n_ctx": 4096},
        scorer_settings={"reason": "template"},
    )
    assert report.processed == 4 and report.failed == 0
    record = records(out)[0]
    assert record["results"]["toxicity"]["judgedBy"]["model"] == "gemma-3-270m-judge"
    assert 0 <= record["scores"]["toxicity"] <= 1
