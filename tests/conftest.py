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


def link_assembled_models(new_home) -> None:
    """Link the model files already assembled in the real LOCALJUDGE_HOME (`make install`)
    into `new_home`, so that a test or a subprocess that loads the default judge there does
    not merge its adapter again (~20 s; tests/test_registry.py tests the merge)."""
    from localjudge.paths import home

    models = home() / "models"
    if not models.is_dir():
        return
    (new_home / "models").mkdir(parents=True, exist_ok=True)
    for model in models.glob("*.gguf"):
        try:
            os.link(model, new_home / "models" / model.name)
        except OSError:  # another file system: a symbolic link does as well
            (new_home / "models" / model.name).symlink_to(model)


@pytest.fixture
def tmp_home(tmp_path, monkeypatch):
    """An empty LOCALJUDGE_HOME (user registry, caches), except for the assembled model
    files (`link_assembled_models`)."""
    link_assembled_models(tmp_path / "home")
    monkeypatch.setenv("LOCALJUDGE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"
