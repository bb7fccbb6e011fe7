"""LoRA adapters: llama.cpp applies a registry entry's GGUF adapter to every sequence of the
judge (a tiny model and adapter made by the test's GGUF factory; the real engine)."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from gguf_factory import write_gguf, write_tiny_lora, write_tiny_model

from localjudge.cli import cli
from localjudge.engine import EngineConfig, LlamaEngine
from localjudge.engine.plan import BatchToken, StepPlan
from localjudge.errors import ChecksumError, ModelError

pytest.importorskip("gguf")
pytestmark = pytest.mark.real


@pytest.fixture
def tiny(tmp_path):
    return write_tiny_model(tmp_path / "tiny.gguf"), write_tiny_lora(tmp_path / "tiny-lora.gguf")


def logits(model, adapters=(), text="the cat"):
    config = EngineConfig(n_ctx=128, n_seq_max=2, n_batch=32, n_ubatch=32, adapters=adapters)
    with LlamaEngine(model, config) as engine:
        tokens = engine.tokenize(text, add_special=True, parse_special=False)
        plan = StepPlan(
            tokens=[BatchToken(t, i, 0, i == len(tokens) - 1) for i, t in enumerate(tokens)]
        )
        return engine.execute(plan).logits[0].copy()


def test_an_adapter_changes_every_sequence_and_scale_zero_changes_nothing(tiny):
    model, lora = tiny
    base = logits(model)
    assert np.allclose(logits(model, ((lora, 0.0),)), base, atol=1e-5)
    adapted = logits(model, ((lora, 1.0),))
    assert not np.allclose(adapted, base, atol=1e-3)
    assert np.allclose(logits(model, ((lora, 1.0),)), adapted, atol=1e-5)  # deterministic


def test_models_add_with_an_adapter_loads_it_and_checks_its_sha256(tiny, tmp_home):
    from localjudge.judge import Judge

    model, lora = tiny
    added = CliRunner().invoke(
        cli, ["models", "add", "tiny", str(model), "--adapter", str(lora), "--adapter-scale", "0.5"]
    )
    assert added.exit_code == 0, added.output
    assert "adapter" in added.output
    with Judge.load("tiny", slots=1, max_prefixes=1, n_ctx=128, n_batch=32) as judge:
        assert judge.engine.config.adapters == ((lora.resolve(), 0.5),)
        assert judge.name == "tiny"
    with Judge.load(model, slots=1, max_prefixes=1, n_ctx=128, n_batch=32, adapter=lora) as judge:
        assert judge.name == "tiny+tiny-lora"  # its own calibrations
    lora.write_bytes(lora.read_bytes()[:-4] + b"\0\0\0\0")  # a damaged adapter
    with pytest.raises(ChecksumError, match="tiny-lora.gguf"):
        Judge.load("tiny", slots=1, max_prefixes=1, n_ctx=128, n_batch=32)


def test_an_adapter_added_at_load_keeps_its_calibration_only_while_its_file_is_the_same(
    tiny, tmp_home, tmp_path
):
    from localjudge.judge import Judge
    from localjudge.model_registry import ADDED_ADAPTER, save_calibration, sha256_file
    from localjudge.prompts import TOXICITY_PROMPT_VERSION as VERSION

    model, _ = tiny
    mine = write_tiny_lora(tmp_path / "mine.gguf")
    sizes = {"slots": 1, "max_prefixes": 1, "n_ctx": 128, "n_batch": 32}
    with Judge.load(model, adapter=mine, **sizes) as judge:
        assert judge.name == "tiny.gguf+mine"
        assert judge.weights == {ADDED_ADAPTER: sha256_file(mine), "added_adapter_scale": "1"}
        record = {"threshold": 0.7, "source": "mine", "weights": judge.weights}
        save_calibration(judge.name, VERSION, record)
        assert judge.verdict_threshold(VERSION) == (0.7, "mine")
    halved = Judge.load(model, adapter=mine, adapter_scale=0.5, **sizes)
    with halved, pytest.warns(UserWarning, match="fitted on other weights"):
        assert halved.verdict_threshold(VERSION) is None
    write_tiny_lora(mine, seed=2)  # retrained at the same path
    with Judge.load(model, adapter=mine, **sizes) as judge:
        assert judge.name == "tiny.gguf+mine"
        with pytest.warns(UserWarning, match="fitted on other weights"):
            assert judge.verdict_threshold(VERSION) is None


def test_an_adapter_llama_cpp_cannot_use_is_a_clear_error(tiny, tmp_path):
    model, _ = tiny
    not_lora = write_gguf(tmp_path / "header-only.gguf")
    with pytest.raises(ModelError, match="could not load this LoRA adapter"):
        LlamaEngine(model, EngineConfig(n_ctx=128, n_seq_max=1, adapters=((not_lora, 1.0),)))
    other_shape = write_tiny_lora(tmp_path / "other.gguf", rank=2)
    assert logits(model, ((other_shape, 1.0),)).shape == logits(model).shape
