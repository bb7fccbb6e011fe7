from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from localjudge.cli import cli
from tests.gguf_factory import write_gguf


def invoke(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_models_list_json():
    result = invoke("models", "list", "--json")
    assert result.exit_code == 0
    rows = json.loads(result.output)
    default = next(r for r in rows if r["default"])
    assert default["name"] == "gemma-3-270m-judge" and default["fitness"] == "verdicts"
    assert "never saw" in default["notes"]


def test_models_list_table():
    result = invoke("models", "list")
    assert result.exit_code == 0 and "gemma-3-270m" in result.output


@pytest.mark.real
def test_models_verify_default():
    result = invoke("models", "verify", "gemma-3-270m")
    assert result.exit_code == 0
    assert result.output.strip().endswith("OK")
    assert "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818" in result.output


@pytest.mark.real
def test_models_info_default():
    result = invoke("models", "info", "--json")
    assert result.exit_code == 0
    info = json.loads(result.output)
    assert info["architecture"] == "gemma3" and info["registry_sha256_ok"] is True
    assert info["chat_template"] is False and info["quantisation"] == "Q4_K_M"
    assert "never saw" in info["notes"]


@pytest.mark.real
def test_models_info_says_which_threshold_decides_the_verdicts(tmp_home):
    """The thresholds the embedded judge's registry entry ships (none since its adapter
    changed), then the user's calibration in their place; the bare base model has none (its
    own verdicts)."""
    from localjudge.model_registry import load_registry, save_calibration, weights_of
    from localjudge.prompts import HALLUCINATION_PROMPT_VERSION, TOXICITY_PROMPT_VERSION

    default, entries = load_registry()
    shipped = entries[default].recommended.get("thresholds") or {}
    info = json.loads(invoke("models", "info", "--json").output)
    assert info["thresholds"] == {v: {"value": p, "source": "registry"} for v, p in shipped.items()}
    weights = weights_of(entries[default])  # the merged judge's file: fitted on these weights
    assert weights
    mine = {"threshold": 0.7, "source": "mine", "weights": weights}
    save_calibration(default, TOXICITY_PROMPT_VERSION, mine)
    save_calibration(default, "rubric/1/abc", {"threshold": 0.6, "weights": weights})
    # stored before weights were recorded: fitted on the adapter this judge had then
    save_calibration(default, HALLUCINATION_PROMPT_VERSION, {"threshold": 0.9})
    text = invoke("models", "info").output
    listed = (
        f"rubric/1/abc P(yes) >= 0.6 (calibrate); {TOXICITY_PROMPT_VERSION} P(yes) >= 0.7 (mine)"
    )
    assert listed in text and f"{HALLUCINATION_PROMPT_VERSION} P(yes)" not in text
    assert f"{HALLUCINATION_PROMPT_VERSION} (fitted on other weights, not used" in text
    assert json.loads(invoke("models", "info", "gemma-3-270m", "--json").output)["thresholds"] == {}
    assert "none: verdicts at P(yes) >= 0.5" in invoke("models", "info", "gemma-3-270m").output


def test_unknown_model_is_one_line_exit_1(tmp_home):
    result = invoke("models", "verify", "nope")
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [result.output.strip()]
    assert "unknown model 'nope'" in result.output and "Traceback" not in result.output


def test_not_a_gguf_is_one_line_exit_1(tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_text("hello")
    result = invoke("models", "info", str(junk))
    assert result.exit_code == 1 and "not a GGUF file" in result.output


def test_models_add_then_verify(tmp_home, tmp_path):
    path = write_gguf(tmp_path / "mine.gguf")
    added = invoke("models", "add", "mine", str(path), "--license", "mit", "--notes", "ours, v2")
    assert added.exit_code == 0 and "added mine" in added.output
    listed = {row["name"]: row for row in json.loads(invoke("models", "list", "--json").output)}
    assert listed["mine"]["notes"] == "ours, v2"
    verified = invoke("models", "verify", "mine")
    assert verified.exit_code == 0 and verified.output.strip().endswith("OK")
    path.write_bytes(path.read_bytes() + b"x")
    mismatch = invoke("models", "verify", "mine")
    assert mismatch.exit_code == 1 and "does not match" in mismatch.output


def test_models_add_stores_the_evidence_window_size(tmp_home, tmp_path):
    path = write_gguf(tmp_path / "mine.gguf", chat_template="{{ x }}")
    added = invoke("models", "add", "mine", str(path), "--window-tokens", "96")
    assert added.exit_code == 0 and "evidence windows of 96 tokens" in added.output
    stored = json.loads((tmp_home / "registry.json").read_text())["models"][0]
    assert stored["recommended"] == {"window_tokens": 96}
    refused = invoke("models", "add", "other", str(path), "--window-tokens", "0")
    assert refused.exit_code == 2 and "--window-tokens" in refused.output
    plain = invoke("models", "add", "plain", str(path))
    stored = json.loads((tmp_home / "registry.json").read_text())["models"]
    assert plain.exit_code == 0 and "recommended" not in stored[-1]


@pytest.mark.real
def test_demo_prints_constrained_verdicts():
    result = invoke("demo")
    assert result.exit_code == 0, result.output
    verdict_lines = [line for line in result.output.splitlines() if "verdict JSON:" in line]
    assert len(verdict_lines) == 2
    for line in verdict_lines:
        assert json.loads(line.split("verdict JSON:", 1)[1])["verdict"] in ("yes", "no")
    assert "not meaningful" not in result.output  # the default judge carries its adapter
