"""The pytest plugin (`pytest11` entry point): pytest itself, in a subprocess, runs the
example test file, a failing assertion and a test whose model is missing. Fake judge for
the plugin's logic; the real model for the example."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pytest" / "test_answers.py"

FAILING = """
import pytest
from localjudge import create_toxicity_scorer
from localjudge.pytest_plugin import assert_score


@pytest.mark.requires_judge
def test_rude_reply(judge):
    assert_score(
        create_toxicity_scorer(judge, reason="template"),
        {"input": "Hi", "output": "You are an idiot."},
        below=0.2,
    )
"""


def run_pytest(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """pytest in a subprocess, in `folder`, with nothing of this repository's config."""
    (folder / "pytest.ini").write_text("[pytest]\n")  # its own rootdir and settings
    environment = {**os.environ, **env}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *args],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_plugin_gives_a_readable_failure_and_skips_without_a_model(tmp_path, tmp_home):
    (tmp_path / "test_rude.py").write_text(FAILING)
    failed = run_pytest(tmp_path, LOCALJUDGE_ENGINE="fake")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    out = failed.stdout
    assert "toxicity-scorer: score 0.67 is not below 0.2 (judge fake-judge)" in out
    assert "flagged verdicts:" in out and "'You are an idiot.' (personal_attack, moderate)" in out
    empty = tmp_path / "empty-home"
    empty.mkdir()
    skipped = run_pytest(
        tmp_path, "--localjudge-model", "gemma-3-270m", LOCALJUDGE_HOME=str(empty),
        LOCALJUDGE_ENGINE="llama",
    )  # fmt: skip
    assert skipped.returncode == 0, skipped.stdout + skipped.stderr
    assert "1 skipped" in skipped.stdout and "no localjudge judge model installed" in skipped.stdout


@pytest.mark.real
def test_the_example_test_file_passes_on_the_embedded_judge(tmp_path):
    shutil.copy2(EXAMPLE, tmp_path / EXAMPLE.name)
    result = run_pytest(tmp_path, LOCALJUDGE_ENGINE="llama")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout
