from __future__ import annotations

import os

import pytest

from localjudge.testing import FakeTokenizer


@pytest.fixture(scope="session")
def real_judge():
    """One real judge on the embedded default model, shared by the real-model tests."""
    from localjudge import Judge

    judge = Judge.load(slots=4, max_prefixes=4, n_ctx=4096)
    yield judge
    judge.close()


@pytest.fixture(scope="session")
def fake_tokenizer() -> FakeTokenizer:
    return FakeTokenizer()


@pytest.fixture(scope="session")
def fake_vocabulary(fake_tokenizer):
    from localjudge.grammar import build_vocabulary
    from localjudge.testing import EOS_ID

    return build_vocabulary(
        fake_tokenizer.vocabulary_pieces(), eos_id=EOS_ID, n_vocab=fake_tokenizer.n_vocab
    )


@pytest.fixture
def tmp_home(tmp_path, monkeypatch):
    """An empty LOCALJUDGE_HOME (user registry, caches), except that the model files already
    assembled in the real one (`make install`) are linked in, so a test that loads the
    default judge does not merge its adapter again (tests/test_registry.py tests that)."""
    from localjudge.paths import home

    models = home() / "models"
    monkeypatch.setenv("LOCALJUDGE_HOME", str(tmp_path / "home"))
    if models.is_dir():
        (tmp_path / "home" / "models").mkdir(parents=True)
        for model in models.glob("*.gguf"):
            try:
                os.link(model, tmp_path / "home" / "models" / model.name)
            except OSError:  # another file system: a symbolic link does as well
                (tmp_path / "home" / "models" / model.name).symlink_to(model)
    return tmp_path / "home"
