"""Does the base model's own likelihood tell a supported statement from an unsupported one,
on sources nothing was trained on? No training at all: for each statement of a row (as the
hallucination scorer splits an output) and each of its evidence windows (96 tokens, the 4
best by BM25, as the scorer chooses them), how much likelier the window makes the
statement's tokens:

    gain(statement, window) = mean over the statement's tokens of
        log P(token | window, statement so far) - log P(token | statement so far)

A statement is as supported as its best window makes it; a row as its least supported
statement. The score compared with the labels is minus that (higher: more likely
hallucinated). Two ways of averaging over tokens are written out: the mean (`mean`) and
the lowest token (`lowest`, one invented name or number is one token the window does not
predict).

Prints AUROC of both ways and of word overlap (the largest share of a statement's words the
context lacks). With `--fit`, the way with the higher AUROC on these rows and the threshold
that maximises its balanced accuracy here; with `--apply FIT`, a fitted run's way and
threshold, unchanged, so a threshold fitted on one set is measured on others. Writes every
row's values to `--out`, with the set's scores as evaluate.py saves them (a logistic of the
distance past the threshold, so 0.5 is the threshold) for `spread.py`.

    .venv/bin/python training/likelihood.py training/data-M/heldout_hallucination.jsonl --fit --out FIT.json
    .venv/bin/python training/likelihood.py training/data-M/held-out-sources_hallucination.jsonl --apply FIT.json --out F.json

Runs in localjudge's own virtual environment, on the embedded base model.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from localjudge.engine.llama import EngineConfig, LlamaEngine
from localjudge.engine.plan import BatchToken, StepPlan
from localjudge.model_registry import resolve
from localjudge.quality.calibration import choose_threshold
from localjudge.quality.labelled import Agreement, auroc
from localjudge.quality.rows import read_rows
from localjudge.scorers.evidence import (
    DEFAULT_TOP_K,
    candidate_windows,
    context_text,
    split_windows,
)
from localjudge.scorers.text import split_statements

sys.path.insert(0, str(Path(__file__).parent))
from combine import missing_share  # noqa: E402  (word overlap's graded share, as combine.py reads it)
from evaluate import WINDOW_TOKENS  # noqa: E402  (the windows every evaluation here uses)

TOP_K = DEFAULT_TOP_K  # the scorers' k
SEPARATOR = "\n\n"
WAYS = ("mean", "lowest")


class Scorer:
    """Token log-probabilities of statements after a prefix, many sequences per decode."""

    def __init__(self, engine, *, n_batch: int = 512, sequences: int = 20) -> None:
        self.engine = engine  # a LlamaEngine (or localjudge's FakeEngine in tests)
        self.n_batch = n_batch  # the engine's own n_batch at most
        self.sequences = sequences  # below the engine's n_seq_max
        self.bos = engine.tokenize("", add_special=True)
        if not self.bos:
            raise SystemExit(f"{engine.name}: no BOS token to predict a first token after")

    def tokens(self, text: str) -> list[int]:
        return self.engine.tokenize(text, add_special=False)

    def logprobs(self, jobs: list[tuple[list[int], list[int]]]) -> list[np.ndarray]:
        """For each (prefix, statement) job (token lists; BOS is put before the prefix),
        the log-probability of each statement token given everything before it. Jobs are
        packed, each its own sequence, into as few decodes as fit."""
        out: list[np.ndarray] = []
        pending = [self.bos + prefix + statement for prefix, statement in jobs]
        if any(len(seq) > self.n_batch for seq in pending):
            raise SystemExit(f"a statement with its window is longer than {self.n_batch} tokens")
        done = 0
        while done < len(jobs):
            tokens, packed = [], []
            while done + len(packed) < len(jobs) and len(packed) < self.sequences:
                seq = pending[done + len(packed)]
                if len(tokens) + len(seq) > self.n_batch:
                    break
                first = len(seq) - len(jobs[done + len(packed)][1]) - 1  # predicts statement[0]
                tokens += [
                    BatchToken(token, pos, len(packed), first <= pos < len(seq) - 1)
                    for pos, token in enumerate(seq)
                ]
                packed.append(jobs[done + len(packed)][1])
            self.engine.clear()
            logits = self.engine.execute(StepPlan(tokens=tokens)).logits
            row = 0
            for statement in packed:
                rows = logits[row : row + len(statement)].astype(np.float64)
                row += len(statement)
                top = rows.max(axis=1, keepdims=True)
                norm = top[:, 0] + np.log(np.exp(rows - top).sum(axis=1))
                out.append(rows[np.arange(len(statement)), statement] - norm)
            done += len(packed)
        return out


def gains(scorer: Scorer, context: list[str], statements: list[str]) -> list[list[dict]]:
    """For each statement, its candidate windows' mean and lowest per-token gain."""
    text = context_text(context)
    windows = split_windows(text, lambda t: len(scorer.tokens(t)), WINDOW_TOKENS)
    chosen, _ = candidate_windows(windows, statements, TOP_K)
    prefixes = {w: scorer.tokens(windows[w].text + SEPARATOR) for ws in chosen for w in ws}
    jobs, where = [], []
    for s, statement in enumerate(statements):
        tokens = scorer.tokens(" " + statement.strip())
        jobs.append(([], tokens))  # the statement alone
        where.append((s, None))
        for w in chosen[s]:
            jobs.append((prefixes[w], tokens))
            where.append((s, w))
    values = scorer.logprobs(jobs)
    alone = {s: values[j] for j, (s, w) in enumerate(where) if w is None}
    out: list[list[dict]] = [[] for _ in statements]
    for j, (s, w) in enumerate(where):
        if w is None:
            continue
        diff = values[j] - alone[s]
        out[s].append({"window": w, "mean": float(diff.mean()), "lowest": float(diff.min())})
    return out


def row_score(per_statement: list[list[dict]], way: str) -> float:
    """Minus the least supported statement's best window's gain."""
    return -min(max(g[way] for g in windows) for windows in per_statement if windows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="hallucination rows (JSONL)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--set", default="held-out sources", help="the set's name in --out")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--fit", action="store_true", help="choose the way and threshold here")
    group.add_argument("--apply", type=Path, help="a --fit run's --out: its way and threshold")
    parser.add_argument(
        "--model", default="gemma-3-270m", help="a registry name or a .gguf path (no adapter)"
    )
    args = parser.parse_args(argv)
    rows, errors = read_rows(args.data, "hallucination")
    if errors:
        raise SystemExit(f"{args.data}: {len(errors)} rows could not be read")
    engine = LlamaEngine(
        resolve(args.model).path, EngineConfig(n_ctx=8192, n_seq_max=24, n_batch=512)
    )
    scorer = Scorer(engine)
    start = time.perf_counter()
    records = []
    for n, row in enumerate(rows):
        statements = split_statements(row.text) or [row.text]
        per = gains(scorer, list(row.context), statements)
        records.append(
            {
                "label": row.label,
                "group": row.group,
                "statements": statements,
                "gains": per,
                "mean": row_score(per, "mean"),
                "lowest": row_score(per, "lowest"),
                "overlap": missing_share(row),
            }
        )
        if (n + 1) % 50 == 0:
            print(f"{n + 1} rows, {time.perf_counter() - start:.0f} s", flush=True)
    labels = [r["label"] for r in records]
    summary: dict = {"rows": len(records), "seconds": round(time.perf_counter() - start, 1)}
    for way in WAYS + ("overlap",):
        summary[f"auroc_{way}"] = auroc(labels, [r[way] for r in records])
    if args.fit:
        way = max(WAYS, key=lambda w: summary[f"auroc_{w}"])
        threshold = choose_threshold(labels, [r[way] for r in records])
    elif args.apply:
        fitted = json.loads(args.apply.read_text())["summary"]
        way, threshold = fitted["way"], fitted["threshold"]
    else:
        way, threshold = None, None
    sets = []
    if way is not None:
        # as evaluate.py saves a set (spread.py reads it): a score >= 0.5 is "hallucinated"
        scores = [1 / (1 + math.exp(-(r[way] - threshold))) for r in records]
        agreement = Agreement.of(labels, [s >= 0.5 for s in scores], scores)
        summary.update(way=way, threshold=threshold, bacc=agreement.balanced_accuracy)
        sets.append(
            {
                "task": "hallucination",
                "set": args.set,
                "statements": True,
                "labels": labels,
                "row_groups": [r["group"] for r in records],
                "scores": scores,
            }
        )
    out = {"summary": summary, "sets": sets, "rows": records}
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
