from __future__ import annotations

import json
import os

import pytest

from localjudge import model_registry as registry
from localjudge.errors import ChecksumError, ModelError, RegistryError
from localjudge.model_registry import add_model, load_registry
from tests.gguf_factory import write_gguf


def test_builtin_default_is_the_embedded_model(tmp_home):
    default, entries = registry.load_registry()
    entry = entries[default]
    assert default == "gemma-3-270m-judge"
    assert entry.fitness == "verdicts" and entry.meaningful and not entry.extracts_claims
    assert len(entry.sha256) == 64
    # the judge adapter ships in models/ with its sha256 and is merged into the base model's
    # weights (no run-time adapter); the bare base model stays listed
    merge = entry.source["merge"]
    adapter = registry.models_dir() / merge["adapter"]
    assert registry.sha256_file(adapter) == merge["adapter_sha256"] and entry.adapter is None
    base = entries["gemma-3-270m"]
    assert merge["base"] == base.name and base.adapter is None and not base.meaningful


@pytest.fixture
def empty_home(tmp_path, monkeypatch):
    """A really empty LOCALJUDGE_HOME (no linked model files): for tests that assemble and
    merge them."""
    monkeypatch.setenv("LOCALJUDGE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_unknown_name_lists_known_ones(tmp_home):
    with pytest.raises(RegistryError, match="unknown model 'nope'.*gemma-3-270m"):
        registry.resolve("nope")


def test_missing_path(tmp_home, tmp_path):
    with pytest.raises(ModelError, match="not found"):
        registry.resolve(str(tmp_path / "absent.gguf"))


def test_add_resolve_and_verify_user_model(tmp_home, tmp_path):
    path = write_gguf(tmp_path / "mine.gguf", chat_template="{{ x }}")
    entry = registry.add_model("mine", path, license="mit")
    assert entry.prompt_format == "chat-template"
    resolved = registry.resolve("mine")
    assert resolved.path == path.resolve() and resolved.entry.name == "mine"
    assert registry.resolve(str(path)).entry.name == "mine"  # a path finds its entry
    assert registry.verify("mine").ok
    stored = json.loads((tmp_home / "registry.json").read_text())
    assert [m["name"] for m in stored["models"]] == ["mine"]


def test_a_user_model_carries_its_evidence_window_size(tmp_home, tmp_path):
    path = write_gguf(tmp_path / "mine.gguf")
    registry.add_model("mine", path, window_tokens=128)
    assert registry.resolve("mine").entry.recommended == {"window_tokens": 128}
    with pytest.raises(RegistryError, match="window_tokens"):
        registry.add_model("other", path, window_tokens=0)


def test_sha256_mismatch_is_reported(tmp_home, tmp_path):
    path = write_gguf(tmp_path / "mine.gguf")
    registry.add_model("mine", path)
    path.write_bytes(path.read_bytes() + b"tampered")
    with pytest.raises(ChecksumError, match="does not match"):
        registry.verify("mine")


def test_add_rejects_non_gguf_and_bad_names(tmp_home, tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_text("hello")
    with pytest.raises(ModelError, match="not a GGUF"):
        registry.add_model("junk", junk)
    with pytest.raises(RegistryError, match="invalid model name"):
        registry.add_model("a/b", write_gguf(tmp_path / "ok.gguf"))


def test_malformed_user_registry(tmp_home):
    tmp_home.mkdir(parents=True, exist_ok=True)
    (tmp_home / "registry.json").write_text("{not json")
    with pytest.raises(RegistryError, match="malformed"):
        registry.load_registry()


def test_missing_package_model_file_is_assembled(empty_home):
    resolved = registry.resolve("gemma-3-270m")
    assert resolved.path.exists() and resolved.path.parent == empty_home / "models"
    assert registry.verify("gemma-3-270m").ok


def test_the_judge_is_merged_from_the_base_model_and_its_adapter(empty_home):
    resolved = registry.resolve("gemma-3-270m-judge")  # assembles the base, then merges
    assert resolved.path.exists() and resolved.path.parent == empty_home / "models"
    assert resolved.adapters == ()  # merged: nothing is applied at run time
    assert registry.verify("gemma-3-270m-judge").ok  # the same bytes on every machine
    assert not list((empty_home / "models").glob("*.partial"))

    # a merge left from before an upgrade that shipped another adapter: loading refuses it,
    # and `models assemble` (run by `make install`) merges it again from models/
    resolved.path.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(ChecksumError, match="models assemble gemma-3-270m-judge"):
        registry.check_checksum(registry.resolve("gemma-3-270m-judge"))
    assert registry.assemble("gemma-3-270m-judge").path == resolved.path
    assert registry.verify("gemma-3-270m-judge").ok


def test_a_tampered_adapter_is_refused_before_merging(empty_home, tmp_path, monkeypatch):
    models = tmp_path / "models"
    models.mkdir()
    (models / "registry.json").write_bytes((registry.models_dir() / "registry.json").read_bytes())
    (models / "gemma-3-270m-judge-lora.npz").write_bytes(b"PK not the adapter")
    monkeypatch.setattr(registry, "models_dir", lambda: models)
    with pytest.raises(ChecksumError, match="does not match its sha256"):
        registry.resolve("gemma-3-270m-judge")
    assert not (empty_home / "models" / "gemma-3-270m-judge-q8-merged.gguf").exists()


@pytest.mark.hostile
def test_verify_refuses_a_file_that_is_not_a_gguf(tmp_home, tmp_path):
    from click.testing import CliRunner

    from localjudge.cli import cli

    text = tmp_path / "hostname"
    text.write_text("a-machine-name\n")
    result = CliRunner().invoke(cli, ["models", "verify", str(text)], catch_exceptions=False)
    assert result.exit_code == 1 and "not a GGUF file" in result.output
    assert "Traceback" not in result.output


def test_a_registry_model_is_checked_against_its_sha256_on_first_load(
    tmp_home, tmp_path, monkeypatch
):
    from localjudge import Judge

    path = write_gguf(tmp_path / "mine.gguf")
    add_model("mine", path)
    path.write_bytes(path.read_bytes() + b"tampered")
    with pytest.raises(ChecksumError, match="does not match the registry"):
        Judge.load("mine")  # refused before llama.cpp ever reads the file
    path.write_bytes(path.read_bytes()[: -len(b"tampered")])
    resolved = registry.resolve("mine")
    registry.check_checksum(resolved)  # hashes once, remembers (path, size, mtime)
    monkeypatch.setattr(registry, "sha256_file", lambda p: pytest.fail("hashed again"))
    registry.check_checksum(resolved)
    os.utime(path, ns=(1, 1))  # a changed file is hashed again
    monkeypatch.undo()
    registry.check_checksum(resolved)


def test_slots_beyond_llama_cpp_sequences_are_refused_up_front(tmp_home):
    from click.testing import CliRunner

    from localjudge import Judge
    from localjudge.cli import cli

    with pytest.raises(ModelError, match="exceed llama.cpp's 256 sequences"):
        Judge.load(slots=256)
    result = CliRunner().invoke(
        cli, ["eval", "x.jsonl", "--scorer", "toxicity", "--out", "o.jsonl", "--slots", "256"]
    )
    assert result.exit_code == 2 and "--slots" in result.output


def test_models_default_and_localjudge_model(tmp_home, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from localjudge.cli import cli

    path = write_gguf(tmp_path / "mine.gguf")
    add_model("mine", path)
    runner = CliRunner()
    assert runner.invoke(cli, ["models", "default", "mine"]).exit_code == 0
    assert load_registry()[0] == "mine"
    monkeypatch.setenv("LOCALJUDGE_MODEL", "gemma-3-270m")
    assert load_registry()[0] == "gemma-3-270m"
    monkeypatch.setenv("LOCALJUDGE_MODEL", "nope")
    with pytest.raises(RegistryError, match="default model 'nope' is not in the registry"):
        load_registry()
    monkeypatch.delenv("LOCALJUDGE_MODEL")
    bad = runner.invoke(cli, ["models", "default", "missing"])
    assert bad.exit_code == 1 and "unknown model 'missing'" in bad.output


@pytest.mark.hostile
def test_a_malformed_user_registry_is_one_clear_line_and_a_non_gguf_file_is_refused(tmp_home):
    from click.testing import CliRunner

    from localjudge.cli import cli

    registry = tmp_home / "registry.json"
    for text, says in (
        ('{"models": [{"name": 5}]}', "models[0]: name must be str"),
        ('{"models": "x"}', 'not an object with a "models" list'),
        ("[1]", 'not an object with a "models" list'),
        ('{"models": [{"name": "a", "file": 3}]}', "file must be str"),
        ('{"models": [{"name": "a", "colour": "red"}]}', "unknown field 'colour'"),
        ('{"models": [{"name": "a", "recommended": {"slots": "x"}}]}', "recommended.slots"),
        ('{"models": [{"name": "a", "recommended": {"thresholds": {"t/1": 2}}}]}', "thresholds"),
        ('{"default": 3}', "default must be a string"),
        ("{", "malformed registry"),
    ):
        registry.write_text(text)
        result = CliRunner().invoke(cli, ["models", "list"])
        assert result.exit_code == 1 and says in result.output, (text, result.output)
        assert "Traceback" not in result.output
    registry.unlink()
    not_a_model = tmp_home / "passwd"
    not_a_model.write_text("root:x:0:0:root:/root:/bin/bash\n")
    for command in (
        ["models", "default", str(not_a_model)],
        ["models", "assemble", str(not_a_model)],
    ):
        result = CliRunner().invoke(cli, command)
        assert result.exit_code == 1 and "not a GGUF file" in result.output, result.output
    assert not registry.exists()  # nothing was stored


def test_only_a_judge_marked_fit_for_free_text_writes_its_reasons_by_default(tmp_home, tmp_path):
    path = write_gguf(tmp_path / "mine.gguf")
    assert add_model("mine", path).fitness == "unknown"  # not assessed unless told
    unassessed = registry.resolve("mine")
    assert unassessed.extracts_claims and not unassessed.writes_reasons
    for fitness, writes in (("judge", True), ("verdicts", False), ("mechanics-only", False)):
        add_model(f"as-{fitness}", path, fitness=fitness)
        assert registry.resolve(f"as-{fitness}").writes_reasons is writes
    bare = registry.resolve(str(write_gguf(tmp_path / "other.gguf")))  # in no registry
    assert bare.entry is None and bare.extracts_claims and not bare.writes_reasons


@pytest.mark.real
def test_a_judge_added_without_a_fitness_gives_reasons_built_from_its_verdicts(tmp_home):
    from click.testing import CliRunner

    from localjudge import Judge, create_toxicity_scorer
    from localjudge.cli import cli

    base = tmp_home / "models" / "gemma-3-270m-q4_k_m.gguf"
    if not base.exists():
        registry.assemble("gemma-3-270m")
    added = CliRunner().invoke(cli, ["models", "add", "mine", str(base)])
    assert added.exit_code == 0, added.output
    with Judge.load("mine", slots=2, max_prefixes=2, n_ctx=2048) as judge:
        scorer = create_toxicity_scorer(judge)
        assert (scorer.reason_mode, scorer.claim_reasons) == ("template", "none")
        result = scorer.run({"output": "The shop opens at nine."})
        written = create_toxicity_scorer(judge, reason="judge", claim_reasons="all")
        opted_in = written.run({"output": "The shop opens at nine."})
    (verdict,) = result.analyze_step_result["verdicts"]
    assert verdict["reasonBy"] == "template" and result.reasons_meaningful
    assert verdict["reason"].startswith("Judged ")
    assert not opted_in.reasons_meaningful  # its own text, asked for: not vouched for
