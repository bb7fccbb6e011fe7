"""training/train.py split into sittings ends with the adapter an unbroken run makes.

Needs the training toolchain (torch, transformers, peft): run it with training/.venv's python
(`make test-training`); skipped in localjudge's own venv, which has none of them. The model is
a tiny Gemma 3 with random weights, so the test reads nothing from disk but its own files.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import signal
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("peft")
safetensors = pytest.importorskip("safetensors.torch")

# the pinned toolchain's own deprecation notices (peft 0.21 reads transformers 5.24's
# `is_gradient_checkpointing`; train.py passes `past_key_values`, which 5.40 renames)
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")
ROOT = Path(__file__).resolve().parents[1]
VOCAB = 64
YES, NO = [5, 6], [7]


def load_train(monkeypatch):
    spec = importlib.util.spec_from_file_location("train", ROOT / "training" / "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def tiny_base(model_dir, gguf, device):
        torch.manual_seed(0)
        config = transformers.Gemma3TextConfig(
            vocab_size=VOCAB,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=16,
            max_position_embeddings=256,
            sliding_window=256,
        )
        return transformers.Gemma3ForCausalLM(config).eval()

    monkeypatch.setattr(module, "load_base", tiny_base)
    return module


def unloadable(model_dir, gguf, device):
    raise AssertionError("the model was loaded for a run that is refused")


def write_data(folder: Path) -> None:
    draw = random.Random(3)
    folder.mkdir()
    for name, count in (("train", 48), ("heldout", 8)):
        rows = []
        for i in range(count):
            task = ("hallucination", "toxicity")[i % 2]
            prefix = [10, 11, 12, 13] if task == "hallucination" else [20, 21, 22]
            own = [draw.randrange(30, VOCAB) for _ in range(draw.randrange(3, 7))]
            label = "yes" if own[0] % 2 else "no"
            rows.append({"task": task, "ids": prefix + own, "yes": YES, "no": NO, "label": label})
        text = "".join(json.dumps(r) + "\n" for r in rows)
        (folder / f"{name}.tokens.jsonl").write_text(text)


def argv(data: Path, out: Path, *more: str) -> list[str]:
    common = ["--data", str(data), "--model-dir", str(data), "--out", str(out)]
    return common + ["--batch", "4", "--epochs", "2", "--seed", "5", *more]


def adapter(out: Path) -> dict:
    return safetensors.load_file(str(out / "adapter_model.safetensors"))


def test_a_run_paused_and_resumed_ends_with_the_adapter_of_an_unbroken_run(tmp_path, monkeypatch):
    train = load_train(monkeypatch)
    data = tmp_path / "data"
    write_data(data)
    whole, split = tmp_path / "whole", tmp_path / "split"

    assert train.main(argv(data, whole)) == 0  # 24 steps, a checkpoint every 20
    assert not (whole / "checkpoint.pt").exists()

    assert train.main(argv(data, split, "--pause-at", "7")) == 75
    assert (split / "checkpoint.pt").exists()
    assert not (split / "adapter_model.safetensors").exists()
    with pytest.MonkeyPatch.context() as patch:  # each refusal comes before the model loads
        patch.setattr(train, "load_base", unloadable)
        assert train.main(argv(data, split)) == 2  # a paused run is never started over
        assert train.main(argv(data, split, "--seed", "6", "--resume")) == 2  # another recipe
        assert train.main(argv(data, split, "--pause-at", "7", "--resume")) == 2  # already past
        assert train.main(argv(data, split, "--pause-at", "24", "--resume")) == 2  # the end
    assert train.main(argv(data, split, "--pause-at", "15", "--resume")) == 75
    assert train.main(argv(data, split, "--resume")) == 0
    assert not (split / "checkpoint.pt").exists()

    a, b = adapter(whole), adapter(split)
    assert a.keys() == b.keys() and a
    for name in a:
        assert torch.equal(a[name], b[name]), name
    first = json.loads((whole / "training_summary.json").read_text())
    second = json.loads((split / "training_summary.json").read_text())
    assert [(e["step"], e["loss"]) for e in first["log"]] == [
        (e["step"], e["loss"]) for e in second["log"]
    ]
    assert [s["steps"] for s in second["sittings"]] == [[0, 7], [7, 15], [15, 24]]
    assert first["heldout_after"] == second["heldout_after"]


def test_sigterm_stops_after_the_step_under_way_and_the_run_goes_on(tmp_path, monkeypatch):
    train = load_train(monkeypatch)
    data = tmp_path / "data"
    write_data(data)
    whole, split = tmp_path / "whole", tmp_path / "split"
    assert train.main(argv(data, whole)) == 0

    labelled = []
    label_index = train.label_index

    def label_and_signal(example):  # four examples a step: the 19th is in step 5
        labelled.append(example)
        if len(labelled) == 19:
            os.kill(os.getpid(), signal.SIGTERM)
        return label_index(example)

    monkeypatch.setattr(train, "label_index", label_and_signal)
    before = signal.getsignal(signal.SIGTERM)
    assert train.main(argv(data, split)) == 75
    assert signal.getsignal(signal.SIGTERM) is before  # the caller's handler is back
    assert torch.load(split / "checkpoint.pt", weights_only=False)["run"]["step"] == 5
    monkeypatch.setattr(train, "label_index", label_index)
    assert train.main(argv(data, split, "--resume")) == 0
    a, b = adapter(whole), adapter(split)
    assert all(torch.equal(a[name], b[name]) for name in a)


def test_resume_without_a_checkpoint_is_refused(tmp_path, monkeypatch):
    train = load_train(monkeypatch)
    data = tmp_path / "data"
    write_data(data)
    assert train.main(argv(data, tmp_path / "out", "--resume")) == 2
    assert not (tmp_path / "out").exists()


def test_a_soft_target_is_fitted_and_a_hard_one_trains_as_a_label(monkeypatch):
    train = load_train(monkeypatch)
    log_p = torch.log_softmax(torch.tensor([[0.3, -1.2], [2.0, 0.1], [-0.4, 0.9]]), dim=-1)
    hard = [{"label": "yes"}, {"label": "no"}, {"label": "no"}]
    labels = torch.tensor([train.label_index(e) for e in hard])
    yes = torch.tensor([train.target_yes(e) for e in hard])
    assert torch.allclose(train.soft_nll(log_p, yes), torch.nn.functional.nll_loss(log_p, labels))
    soft = [{"label": "yes", "target": 0.7}, {"label": "no", "target": 0.2}, {"label": "no"}]
    yes = torch.tensor([train.target_yes(e) for e in soft])
    assert yes.tolist() == pytest.approx([0.7, 0.2, 0.0])
    wanted = [(0.7, 0.3), (0.2, 0.8), (0.0, 1.0)]  # (yes, no) of each example's target
    expected = -sum(y * log_p[i, 0] + n * log_p[i, 1] for i, (y, n) in enumerate(wanted)) / 3
    assert torch.allclose(train.soft_nll(log_p, yes), expected)
    # the loss is least where the model's P(yes) is the target
    logits = torch.zeros(1, 2, requires_grad=True)
    optimiser = torch.optim.SGD([logits], lr=1.0)
    for _ in range(500):
        optimiser.zero_grad()
        train.soft_nll(torch.log_softmax(logits, -1), torch.tensor([0.7])).backward()
        optimiser.step()
    assert torch.softmax(logits, -1)[0, 0].item() == pytest.approx(0.7, abs=1e-3)


def test_a_one_task_run_trains_and_checks_that_tasks_examples_only(tmp_path, monkeypatch):
    train = load_train(monkeypatch)
    data = tmp_path / "data"
    write_data(data)  # 48 training rows and 8 held-out ones, the tasks alternating
    labelled = []
    label_index = train.label_index

    def record(example):
        labelled.append(example["task"])
        return label_index(example)

    monkeypatch.setattr(train, "label_index", record)
    out = tmp_path / "out"
    assert train.main(argv(data, out, "--task", "hallucination", "--eval-limit", "6")) == 0
    summary = json.loads((out / "training_summary.json").read_text())
    assert summary["task"] == "hallucination" and summary["examples"] == 24
    assert summary["steps"] == 12  # 24 examples in batches of 4, two epochs
    assert set(labelled) == {"hallucination"}
    # the first 6 held-out rows, then that task's 3 among them
    assert summary["heldout_after"].keys() == {"hallucination"}
    assert summary["heldout_after"]["hallucination"]["rows"] == 3

    only_toxicity = tmp_path / "toxicity"
    only_toxicity.mkdir()
    rows = (data / "train.tokens.jsonl").read_text().splitlines()
    (only_toxicity / "train.tokens.jsonl").write_text(
        "".join(line + "\n" for line in rows if '"toxicity"' in line)
    )
    (only_toxicity / "heldout.tokens.jsonl").write_text("")
    monkeypatch.setattr(train, "load_base", unloadable)
    assert train.main(argv(only_toxicity, tmp_path / "none", "--task", "hallucination")) == 2
