"""Train one multi-task LoRA adapter for the embedded judge, on CPU (or a GPU: `--device cuda`).

    training/.venv/bin/python training/train.py --data training/data --out training/out/adapter

Starts from the embedded GGUF itself (transformers dequantises it), so the adapter is trained
on the weights llama.cpp runs. Each example is the exact verdict prompt a scorer sends,
tokenized by llama.cpp, ending where the grammar reaches the verdict choice; the loss is the
cross-entropy of the labelled option with P(yes) read as the scheduler reads it: the
probability mass of the tokens committing to "yes" over that of the tokens committing to
either option.

Two things keep it affordable on two cores:
- logits are computed only at the verdict position and only for the verdict tokens (the
  262k-row head is never applied anywhere else);
- the instructions every example of a task shares (~85% of each prompt) are run once per
  step without gradients, with the current adapter, and their KV cache is shared by the
  batch; gradients flow through each example's own tokens. `--check` compares this with a
  plain full forward before training starts.

A long run can be split into sittings: every `--checkpoint-every` steps, and when the process
gets SIGINT or SIGTERM (after the step under way), it saves the adapter, the optimiser, the
schedule, the random state and its log to `OUT/checkpoint.pt`; the same command with `--resume`
goes on from there and ends with the adapter an unbroken run makes (tests/test_train_resume.py).
`--pause-at STEP` stops on purpose after that step.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import signal
import sys
import time
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict
from transformers import AutoModelForCausalLM

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_examples(path: Path, limit: int | None, task: str | None = None) -> list[dict]:
    """The file's first `limit` examples (all without one), then those of `task` among them."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    rows = rows[:limit] if limit else rows
    return [e for e in rows if task is None or e["task"] == task]


def shared_prefix(examples: list[dict]) -> int:
    """Token count every example of a task starts with, leaving each at least 2 own tokens."""
    first = examples[0]["ids"]
    n = min(len(e["ids"]) for e in examples) - 2
    for e in examples[1:]:
        ids = e["ids"]
        k = 0
        while k < n and ids[k] == first[k]:
            k += 1
        n = k
    return n


class VerdictModel:
    """The model with its adapter, and P(yes) at the verdict position of a batch."""

    def __init__(self, base, rank: int, alpha: float, dropout: float, device: str = "cpu"):
        base.to(device)
        self.device = torch.device(device)
        base.config.use_cache = True
        config = LoraConfig(
            r=rank,
            lora_alpha=alpha,
            lora_dropout=dropout,
            target_modules=TARGETS,
            bias="none",
            task_type="CAUSAL_LM",
        )
        self.model = get_peft_model(base, config)
        self.inner = self.model.base_model.model.model  # the decoder stack, LoRA inside
        self.head = self.model.base_model.model.lm_head.weight  # tied, frozen

    def log_p(self, hidden: torch.Tensor, yes: list[int], no: list[int]) -> torch.Tensor:
        """(log P(yes), log P(no)) from final hidden states, over the verdict tokens only."""
        ids = torch.tensor(yes + no, device=self.device)
        logits = hidden @ self.head[ids].T  # (B, len(yes) + len(no))
        both = torch.logsumexp(logits, dim=-1)
        log_yes = torch.logsumexp(logits[:, : len(yes)], dim=-1) - both
        log_no = torch.logsumexp(logits[:, len(yes) :], dim=-1) - both
        return torch.stack([log_yes, log_no], dim=-1)

    def batch_log_p(self, batch: list[dict], prefix_len: int) -> torch.Tensor:
        """log P(option) for a batch of one task: the shared prefix once, without gradients,
        then every example's own tokens from its KV cache."""
        prefix = torch.tensor([batch[0]["ids"][:prefix_len]], device=self.device)
        with torch.no_grad():
            cache = self.inner(input_ids=prefix, use_cache=True).past_key_values
        cache.batch_repeat_interleave(len(batch))
        own = [e["ids"][prefix_len:] for e in batch]
        width = max(len(o) for o in own)
        ids = torch.zeros((len(batch), width), dtype=torch.long)
        for i, o in enumerate(own):  # right padding: causal attention never reads it
            ids[i, : len(o)] = torch.tensor(o)
        ids = ids.to(self.device)
        positions = torch.arange(prefix_len, prefix_len + width, device=self.device)
        hidden = self.inner(
            input_ids=ids,
            past_key_values=cache,
            use_cache=True,
            cache_position=positions,
            position_ids=positions.unsqueeze(0).expand(len(batch), -1),
        ).last_hidden_state
        last = torch.tensor([len(o) - 1 for o in own], device=self.device)
        picked = hidden[torch.arange(len(batch), device=self.device), last]
        return self.log_p(picked, batch[0]["yes"], batch[0]["no"])

    def full_log_p(self, example: dict) -> torch.Tensor:
        """The same for one example with a plain forward over its whole prompt."""
        ids = torch.tensor([example["ids"]], device=self.device)
        hidden = self.inner(input_ids=ids).last_hidden_state
        return self.log_p(hidden[:, -1], example["yes"], example["no"])


def load_base(model_dir: Path, gguf: str, device: str):
    """The embedded GGUF, dequantised to float32 by transformers."""
    # On CUDA (transformers 5.17, torch 2.11) the default SDPA attention disagreed with a
    # full forward on the shared-prefix path by 1.7 in log P; eager attention agrees to
    # 6e-6 there. On CPU the default passes `check` and is kept.
    attention = {} if device == "cpu" else {"attn_implementation": "eager"}
    return AutoModelForCausalLM.from_pretrained(
        model_dir, gguf_file=gguf, dtype=torch.float32, **attention
    )


def check(model: VerdictModel, examples: list[dict], prefix_len: int) -> float:
    """Largest difference of log P between the shared-prefix path and a full forward."""
    with torch.no_grad():
        fast = model.batch_log_p(examples, prefix_len)
        full = torch.cat([model.full_log_p(e) for e in examples])
    return float((fast - full).abs().max())


def label_index(example: dict) -> int:
    return 0 if example["label"] == "yes" else 1


def target_yes(example: dict) -> float:
    """The P(yes) an example is fitted to: its `target` where it carries one (a soft target,
    training/distil.py), else its label (1 for yes, 0 for no)."""
    return float(example.get("target", 1.0 if example["label"] == "yes" else 0.0))


def soft_nll(log_p: torch.Tensor, yes: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the (yes, no) log-probabilities with targets P(yes) = `yes`; the
    same number as `nll_loss` where every target is 0 or 1."""
    return -(yes * log_p[:, 0] + (1 - yes) * log_p[:, 1]).mean()


def evaluate(model: VerdictModel, examples: list[dict], prefixes: dict[str, int], batch: int):
    """Per task: balanced accuracy at P(yes) >= 0.5 and mean loss, without gradients."""
    model.model.eval()
    out = {}
    for task, prefix_len in prefixes.items():
        rows = [e for e in examples if e["task"] == task]
        probs = []
        with torch.no_grad():
            for i in range(0, len(rows), batch):
                probs += model.batch_log_p(rows[i : i + batch], prefix_len)[:, 0].exp().tolist()
        if not rows:
            continue
        yes = [p for p, e in zip(probs, rows, strict=True) if e["label"] == "yes"]
        no = [p for p, e in zip(probs, rows, strict=True) if e["label"] == "no"]
        tpr = sum(p >= 0.5 for p in yes) / max(1, len(yes))
        tnr = sum(p < 0.5 for p in no) / max(1, len(no))
        loss = -sum(
            math.log(max(1e-9, p if e["label"] == "yes" else 1 - p))
            for p, e in zip(probs, rows, strict=True)
        ) / len(rows)
        out[task] = {"rows": len(rows), "balanced_accuracy": (tpr + tnr) / 2, "loss": loss}
    model.model.train()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--gguf", default="gemma-3-270m-q4_k_m.gguf")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--alpha", type=float, default=16.0)
    parser.add_argument("--dropout", type=float, default=0.05)
    parser.add_argument("--lr", type=float, default=4e-4)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--limit", type=int, default=None, help="use the first N examples")
    parser.add_argument(
        "--task",
        choices=("hallucination", "toxicity"),
        default=None,
        help="train on this task's examples only (an adapter of its own for one task); "
        "the held-out check reads the same first --eval-limit rows, that task's among them",
    )
    parser.add_argument("--eval-limit", type=int, default=200)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument(
        "--device", default="cpu", help="torch device: cpu (the default), or cuda on a GPU machine"
    )
    parser.add_argument(
        "--checkpoint-every", type=int, default=20, help="save OUT/checkpoint.pt every N steps"
    )
    parser.add_argument("--pause-at", type=int, default=None, help="checkpoint and stop here")
    parser.add_argument("--resume", action="store_true", help="go on from OUT/checkpoint.pt")
    args = parser.parse_args(argv)
    if args.rank > 16:
        parser.error("--rank must be 16 or less")
    if args.checkpoint_every < 1:
        parser.error("--checkpoint-every must be 1 or more")
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)

    train = load_examples(args.data / "train.tokens.jsonl", args.limit, args.task)
    held = load_examples(args.data / "heldout.tokens.jsonl", args.eval_limit, args.task)
    if not train:
        which = f"{args.task} examples" if args.task else "examples"
        print(f"train: no {which} in {args.data / 'train.tokens.jsonl'}", file=sys.stderr)
        return 2
    tasks = sorted({e["task"] for e in train})
    prefixes = {t: shared_prefix([e for e in train + held if e["task"] == t]) for t in tasks}
    recipe = {
        "train_sha256": sha256(args.data / "train.tokens.jsonl"),
        **{k: getattr(args, k) for k in ("gguf", "rank", "alpha", "dropout", "lr", "batch")},
        **{k: getattr(args, k) for k in ("epochs", "limit", "eval_limit", "seed", "task")},
    }
    saved = args.out / "checkpoint.pt"
    if saved.exists() and not args.resume:
        print(f"train: {saved} holds a paused run; pass --resume, or remove it", file=sys.stderr)
        return 2
    if args.resume and not saved.exists():
        print(f"train: --resume, but there is no {saved}", file=sys.stderr)
        return 2
    state = torch.load(saved, map_location="cpu", weights_only=False) if args.resume else None
    if state is not None and state["recipe"] != recipe:
        differ = sorted(k for k in recipe if state["recipe"].get(k) != recipe[k])
        print(f"train: {saved} was made with other {', '.join(differ)}", file=sys.stderr)
        return 2
    batches = []
    for task in tasks:
        rows = [e for e in train if e["task"] == task]
        rng.shuffle(rows)
        batches += [rows[i : i + args.batch] for i in range(0, len(rows), args.batch)]
    steps = max(1, round(len(batches) * args.epochs))
    order = [batches[i % len(batches)] for i in range(steps)]
    rng.shuffle(order)
    done = state["run"]["step"] if state else 0
    if args.pause_at is not None and not done < args.pause_at < steps:
        print(f"train: --pause-at must be after step {done} and before {steps}", file=sys.stderr)
        return 2

    started = time.perf_counter()
    model = VerdictModel(
        load_base(args.model_dir, args.gguf, args.device),
        args.rank, args.alpha, args.dropout, device=args.device,
    )  # fmt: skip
    print(f"loaded in {time.perf_counter() - started:.0f} s; shared prefix tokens {prefixes}")
    model.model.print_trainable_parameters()

    for task in tasks:
        sample = [e for e in train if e["task"] == task][:3]
        diff = check(model, sample, prefixes[task])
        print(f"check {task}: shared-prefix vs full forward, max |d log P| = {diff:.2e}")
        if diff > 2e-3:
            print("train: the shared-prefix path disagrees with a full forward", file=sys.stderr)
            return 1

    before = state["before"] if state else evaluate(model, held, prefixes, args.batch)
    print("held-out before:", json.dumps(before))

    params = [p for p in model.model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser,
        lambda s: min(1.0, (s + 1) / warmup) * max(0.05, 1 - s / steps),
    )
    run = {"step": 0, "log": [], "tokens": 0, "own_tokens": 0, "seconds": 0.0, "sittings": []}
    run["window"] = {"loss": 0.0, "right": 0, "n": 0}
    if state:
        set_peft_model_state_dict(model.model, state["adapter"])
        optimiser.load_state_dict(state["optimiser"])
        schedule.load_state_dict(state["schedule"])
        torch.set_rng_state(state["rng"])
        if state.get("cuda_rng") is not None and model.device.type == "cuda":
            torch.cuda.set_rng_state(state["cuda_rng"], model.device)
        run = state["run"]
        print(f"resumed from {saved} at step {run['step']} of {steps}")

    stop = []  # Ctrl-C or SIGTERM: finish the step under way, save a checkpoint, stop
    handlers = {
        number: signal.signal(number, lambda signum, frame: stop.append(signum))
        for number in (signal.SIGINT, signal.SIGTERM)
    }

    def sitting(step: int) -> tuple[float, dict]:
        """This sitting's seconds so far, and its entry in the record."""
        seconds = time.perf_counter() - sitting_start
        return seconds, {
            "steps": [first, step],
            "seconds": round(seconds),
            "device": str(model.device),
        }

    def save_checkpoint(step: int) -> None:
        """The run so far, this sitting counted in, without changing the live record."""
        seconds, entry = sitting(step)
        record = {**run, "seconds": run["seconds"] + seconds, "sittings": run["sittings"] + [entry]}
        cuda_rng = torch.cuda.get_rng_state(model.device) if model.device.type == "cuda" else None
        args.out.mkdir(parents=True, exist_ok=True)
        partial = saved.with_suffix(".pt.partial")
        torch.save(
            {
                "recipe": recipe,
                "before": before,
                "run": record,
                "adapter": get_peft_model_state_dict(model.model, save_embedding_layers=False),
                "optimiser": optimiser.state_dict(),
                "schedule": schedule.state_dict(),
                "rng": torch.get_rng_state(),
                "cuda_rng": cuda_rng,
            },
            partial,
        )
        partial.replace(saved)

    model.model.train()
    first = run["step"]
    sitting_start = time.perf_counter()
    window = run["window"]
    for step in range(first + 1, steps + 1):
        batch = order[step - 1]
        prefix_len = prefixes[batch[0]["task"]]
        log_p = model.batch_log_p(batch, prefix_len)
        target = torch.tensor([label_index(e) for e in batch], device=model.device)
        yes = torch.tensor([target_yes(e) for e in batch], device=model.device)
        loss = soft_nll(log_p, yes)
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimiser.step()
        schedule.step()
        own = sum(len(e["ids"]) - prefix_len for e in batch)
        run["step"] = step
        run["own_tokens"] += own
        run["tokens"] += own + prefix_len
        window["loss"] += loss.item() * len(batch)
        window["right"] += int((log_p.argmax(-1) == target).sum())
        window["n"] += len(batch)
        elapsed = run["seconds"] + time.perf_counter() - sitting_start
        if step % 10 == 0 or step == steps:
            entry = {
                "step": step,
                "of": steps,
                "loss": round(window["loss"] / window["n"], 4),
                "accuracy": round(window["right"] / window["n"], 3),
                "examples_per_s": round(step * args.batch / elapsed, 3),
                "prompt_tokens_per_s": round(run["tokens"] / elapsed, 1),
                "own_tokens_per_s": round(run["own_tokens"] / elapsed, 1),
                "elapsed_s": round(elapsed),
            }
            run["log"].append(entry)
            print(json.dumps(entry), flush=True)
            window.update(loss=0.0, right=0, n=0)
        pause = bool(stop) or step == args.pause_at
        if step < steps and (pause or step % args.checkpoint_every == 0):
            save_checkpoint(step)
            if pause:
                why = f"signal {stop[0]}" if stop else "--pause-at"
                print(f"train: paused at step {step} of {steps} ({why}); saved {saved}.")
                print("train: run the same command with --resume to go on.")
                for number, handler in handlers.items():
                    signal.signal(number, handler)
                return 75
    for number, handler in handlers.items():
        signal.signal(number, handler)
    seconds, entry = sitting(steps)
    run["sittings"].append(entry)
    elapsed = run["seconds"] + seconds

    after = evaluate(model, held, prefixes, args.batch)
    print("held-out after:", json.dumps(after))
    args.out.mkdir(parents=True, exist_ok=True)
    model.model.save_pretrained(args.out)
    tokens, own_tokens = run["tokens"], run["own_tokens"]
    summary = {
        "examples": len(train),
        "steps": steps,
        "batch": args.batch,
        "epochs": args.epochs,
        "rank": args.rank,
        "alpha": args.alpha,
        "lr": args.lr,
        "seed": args.seed,
        "task": args.task,
        "train_seconds": round(elapsed),
        "examples_per_s": round(steps * args.batch / elapsed, 3),
        "prompt_tokens_per_s": round(tokens / elapsed, 1),
        "own_tokens_per_s": round(own_tokens / elapsed, 1),
        "shared_prefix_tokens": prefixes,
        "heldout_before": before,
        "heldout_after": after,
        "log": run["log"],
        "sittings": run["sittings"],
        "threads": torch.get_num_threads(),
        "device": str(model.device),
    }
    (args.out / "training_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    saved.unlink(missing_ok=True)
    print(f"saved {args.out} after {elapsed:.0f} s of training")
    return 0


if __name__ == "__main__":
    sys.exit(main())
