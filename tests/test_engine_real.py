"""The real llama.cpp engine on the embedded default model."""

from __future__ import annotations

import pytest

from localjudge.engine import EngineConfig, LlamaEngine
from localjudge.engine.template import render_messages
from localjudge.errors import ModelError
from localjudge.registry import resolve

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def engine():
    with LlamaEngine(
        resolve().path, EngineConfig(n_ctx=1024, n_seq_max=2, n_batch=128, n_ubatch=128)
    ) as engine:
        yield engine


def test_describe(engine):
    info = engine.describe()
    assert info["architecture"] == "gemma3"
    assert info["quantisation"] == "Q4_K_M"
    assert 200_000_000 < info["parameters"] < 300_000_000
    assert info["chat_template"] is False  # base model: plain completion format
    assert info["n_vocab"] == 262144


@pytest.mark.parametrize(
    "text",
    [
        "Hello, world!",
        "東京は日本の首都です。",
        "tabs\tand\nnewlines",
        '{"verdict": "yes"}',
        "émoji 🚀 mix",
    ],
)
def test_tokenize_round_trip(engine, text):
    tokens = engine.tokenize(text, add_special=False)
    assert tokens and engine.detokenize(tokens) == text


def test_bos_is_added(engine):
    with_bos = engine.tokenize("hi", add_special=True)
    assert len(with_bos) == len(engine.tokenize("hi", add_special=False)) + 1


def test_control_tokens_are_not_parsed_from_user_text(engine):
    tokens = engine.tokenize("<end_of_turn>", add_special=False, parse_special=False)
    assert len(tokens) > 1 and not (set(tokens) & engine.eog_ids)


def test_completion_rendering_for_base_model(engine):
    text = engine.render_chat(
        [{"role": "system", "content": "Rules."}, {"role": "user", "content": "Claim."}]
    )
    assert text == "Rules.\n\nClaim.\n"


def test_chat_template_rendering():
    template = (
        "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    text = render_messages(template, [{"role": "user", "content": "hi"}], bos_token="<s>")
    assert text == "<|user|>hi<|end|><|assistant|>"


def test_close_is_idempotent_and_final():
    engine = LlamaEngine(
        resolve().path, EngineConfig(n_ctx=256, n_seq_max=1, n_batch=64, n_ubatch=64)
    )
    engine.close()
    engine.close()
    assert engine.closed
    with pytest.raises(ModelError, match="closed"):
        engine.tokenize("x")


def test_truncated_gguf_is_a_clear_error(tmp_path):
    source = resolve().path
    cut = tmp_path / "cut.gguf"
    with source.open("rb") as handle:
        cut.write_bytes(handle.read(20_000_000))
    with pytest.raises(ModelError, match="could not load"):
        LlamaEngine(cut, EngineConfig(n_ctx=256, n_seq_max=1))
