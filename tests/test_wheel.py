"""The wheel, as an air-gapped user installs it: built from the tracked files, installed with
--no-index into a fresh venv outside the checkout, then used from another folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import link_assembled_models

REPO = Path(__file__).resolve().parents[1]
WHEELHOUSE = REPO / ".localjudge" / "wheelhouse"  # filled by `make test` (see the Makefile)

QUICK_START = """
from localjudge import create_hallucination_scorer, create_toxicity_scorer, run_evals

hallucination = create_hallucination_scorer(context=["The Eiffel Tower was completed in 1889."])
toxicity = create_toxicity_scorer(reason="template")
result = hallucination.run({"output": "The Eiffel Tower was completed in 1889."})
print("hallucination", result.score, len(result.analyze_step_result["verdicts"]))
summary = run_evals([{"id": 1, "output": "Thanks for asking. Here it is."}], [toxicity])
print("evals", summary.summary["failed_items"], sorted(summary.scores))
"""


WHERE = """
import json
import localjudge.paths as p
models = p.models_dir()
(merged,) = [m for m in json.loads((models / "registry.json").read_text())["models"] if "merge" in m["source"]]
print(p.grammars_dir(), models / merged["source"]["merge"]["adapter"])
"""


def run(command, **kwargs):
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, **kwargs)
    assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.mark.wheel
@pytest.mark.real
@pytest.mark.timeout(1200)
def test_wheel_installs_and_works_outside_the_checkout(tmp_path):
    if not (WHEELHOUSE / ".stamp").exists():
        message = f"{WHEELHOUSE} is missing: `make test` builds it"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    source = tmp_path / "source"  # exactly the tracked files: no stale build/ output
    tracked = run(["git", "ls-files", "-z"], cwd=REPO).stdout.split("\0")
    for name in filter(None, tracked):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    dist = tmp_path / "dist"
    run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
        + ["--wheel-dir", str(dist), str(source)]
    )
    (wheel,) = dist.glob("localjudge-*.whl")
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-compile", "--no-index"]
        + ["--find-links", str(WHEELHOUSE), str(wheel)]
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # the assembled model is linked in (the merge is tests/test_registry.py's); the wheel
    # must carry what assembling needs: the schemas, the registry and the adapter
    link_assembled_models(tmp_path / "home")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))},
        "LOCALJUDGE_HOME": str(tmp_path / "home"),
    }
    localjudge = venv / "bin" / "localjudge"
    where = run([str(python), "-c", WHERE], cwd=elsewhere, env=env)
    grammars, adapter = where.stdout.split()
    assert str(venv) in grammars  # the schemas come from the installed package
    assert str(venv) in adapter and Path(adapter).is_file()
    scored = run(
        [str(localjudge), "score", "toxicity", "--output", "Thanks. Here it is.", "--json"]
        + ["--reason", "template"],
        cwd=elsewhere,
        env=env,
    )
    assert json.loads(scored.stdout)["scorerId"] == "toxicity-scorer"
    data = elsewhere / "data.jsonl"
    data.write_text(
        json.dumps({"id": "a", "output": "The sky is blue.", "context": ["The sky is blue."]})
        + "\n"
    )
    run(
        [str(localjudge), "eval", "data.jsonl", "--scorer", "hallucination", "--out", "out.jsonl"]
        + ["--quiet"],
        cwd=elsewhere,
        env=env,
    )
    record = json.loads((elsewhere / "out.jsonl").read_text())
    assert record["errors"] == {} and "hallucination" in record["scores"]
    quick = run([str(python), "-c", QUICK_START], cwd=elsewhere, env=env)
    assert "hallucination" in quick.stdout and "evals 0 ['toxicity-scorer']" in quick.stdout
    doctor = run([str(localjudge), "doctor"], cwd=elsewhere, env=env)
    assert "no network attempt" in doctor.stdout
