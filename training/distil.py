"""Soft targets from a larger judge: the teacher's P(hallucinated) on a data folder's training
rows, blended with their labels, for `train.py` to fit instead of the labels alone.

    LOCALJUDGE_HOME=/tmp/lj-qwen .venv/bin/python training/distil.py teach \
        --model qwen-coder-1.5b-verdicts --data training/data-AnT --out training/teacher.jsonl
    .venv/bin/python training/distil.py blend --data training/data-AnT \
        --teacher training/teacher.jsonl --weight 0.5 --out training/data-AnD
    .venv/bin/python training/distil.py blend --data training/data-AnT \
        --teacher training/teacher.jsonl --weight 0.5 --centre --out training/data-AnC

`teach` judges every row of `train_hallucination.jsonl` through localjudge itself (the
teacher's own prompt format; each row's context whole, since make_data.py cut it to one
training window) and writes one line per row: the row and the teacher's P(yes). `blend` writes a copy of the data folder in which each
hallucination example of `train.tokens.jsonl` carries `target`, (1 - weight) x its label
+ weight x the teacher's P(yes); toxicity examples, and every other file, are copied as
they are. An example is matched to its row by its token ids, re-encoded from the row as
make_data.py encodes it, so the shuffled order of `train.tokens.jsonl` does not matter.
With `--centre`, the teacher's P(yes) is first read at its own threshold: the one that
best fits the taught rows' labels (balanced accuracy, `localjudge calibrate`'s choice)
is moved to 0.5 on the logit scale, so that the blend takes the teacher's order of the
rows and not its lean toward yes.

Runs in localjudge's own virtual environment.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))


def teach(args: argparse.Namespace) -> int:
    from localjudge.judge import Judge
    from localjudge.quality.labelled import judge_rows
    from localjudge.quality.rows import read_rows

    rows, bad = read_rows(args.data / "train_hallucination.jsonl", "hallucination")
    if bad:
        raise SystemExit(f"distil: {len(bad)} unreadable rows: {bad[0]}")
    raw = [
        json.loads(line)
        for line in (args.data / "train_hallucination.jsonl").read_text().splitlines()
        if line
    ]
    with Judge.load(args.model) as judge:
        done = 0

        def progress(n: int) -> None:
            nonlocal done
            done += n
            print(f"teach: {done} of {len(rows)}", flush=True)

        # each row's context is already one training window: judged whole, as the student sees it
        verdicts = judge_rows(
            judge, rows, "hallucination", reasons=False, progress=progress, windows="off"
        )
    with args.out.open("w", encoding="utf-8") as f:
        for row, verdict in zip(raw, verdicts, strict=True):
            f.write(json.dumps({**row, "teacher": verdict.p_yes}, ensure_ascii=False) + "\n")
    unanswered = sum(v.p_yes is None for v in verdicts)
    print(f"teach: {len(verdicts)} rows, {unanswered} unanswered -> {args.out}")
    return 0


def blended(label: str, teacher: float | None, weight: float) -> float:
    """The soft target for P(yes): the label (yes = 1) moved `weight` of the way toward the
    teacher's P(yes); the label alone where the teacher gave no answer."""
    hard = 1.0 if label == "yes" else 0.0
    return hard if teacher is None else (1 - weight) * hard + weight * teacher


def centred(taught: list[dict]) -> list[dict]:
    """The taught rows with each teacher P(yes) moved on the logit scale so that the
    teacher's own threshold (the one that best fits these rows' labels in balanced
    accuracy) falls at 0.5: P' = sigmoid(logit(P) - logit(threshold)). Rows without an
    answer are kept as they are."""
    from prior import logit, sigmoid

    from localjudge.quality.calibration import choose_threshold

    answered = [row for row in taught if row["teacher"] is not None]
    cut = choose_threshold([bool(r["label"]) for r in answered], [r["teacher"] for r in answered])
    if not 0 < cut < 1:
        raise SystemExit(f"distil: the teacher's threshold {cut} cannot be centred")
    shift = logit(cut)
    return [
        row
        if row["teacher"] is None
        else {**row, "teacher": sigmoid(logit(row["teacher"]) - shift)}
        for row in taught
    ]


def targets_of(taught: list[dict], tokens, weight: float) -> dict[tuple[int, ...], float]:
    """Each taught row's soft target, keyed by the token ids make_data.py's `Tokens` gives
    its example (so that a shuffled tokens file finds its rows)."""
    from make_data import Example

    targets = {}
    for row in taught:
        label = "yes" if row["label"] else "no"
        example = Example("hallucination", row["group"], label, row["claim"], tuple(row["context"]))
        targets[tuple(tokens.encode(example)["ids"])] = blended(label, row["teacher"], weight)
    return targets


def write_blended(data: Path, out: Path, targets: dict[tuple[int, ...], float]) -> int:
    """Copy data folder `data` to `out`, each hallucination example of `train.tokens.jsonl`
    given its `target`; the number of examples given one. An example no taught row matches
    is an error (a teacher run on another folder's rows)."""
    out.mkdir(parents=True, exist_ok=True)
    matched = 0
    with (out / "train.tokens.jsonl").open("w", encoding="utf-8") as f:
        for line in (data / "train.tokens.jsonl").read_text().splitlines():
            example = json.loads(line)
            if example["task"] == "hallucination":
                target = targets.get(tuple(example["ids"]))
                if target is None:
                    raise SystemExit(f"distil: a {example['source']} example has no taught row")
                example["target"] = target
                matched += 1
            f.write(json.dumps(example) + "\n")
    for path in data.iterdir():
        if path.is_file() and path.name != "train.tokens.jsonl":
            shutil.copy2(path, out / path.name)
    return matched


def blend(args: argparse.Namespace) -> int:
    from make_data import Tokens

    from localjudge.judge import Judge

    if not 0 <= args.weight <= 1:
        raise SystemExit("distil: --weight is between 0 and 1")
    taught = [json.loads(line) for line in args.teacher.read_text().splitlines() if line]
    if args.centre:
        taught = centred(taught)
    with Judge.load("gemma-3-270m", slots=1) as judge:
        targets = targets_of(taught, Tokens(judge), args.weight)
    matched = write_blended(args.data, args.out, targets)
    print(f"blend: {matched} hallucination examples given targets -> {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    steps = parser.add_subparsers(dest="step", required=True)
    t = steps.add_parser("teach", help="the teacher's P(yes) on the training rows")
    t.add_argument("--model", required=True, help="the teacher's registry entry")
    t.add_argument("--data", type=Path, required=True)
    t.add_argument("--out", type=Path, required=True)
    b = steps.add_parser("blend", help="a data folder whose examples carry soft targets")
    b.add_argument("--data", type=Path, required=True)
    b.add_argument("--teacher", type=Path, required=True)
    b.add_argument("--weight", type=float, default=0.5)
    b.add_argument(
        "--centre",
        action="store_true",
        help="read the teacher's P(yes) at its own threshold on these rows (moved to 0.5)",
    )
    b.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    return teach(args) if args.step == "teach" else blend(args)


if __name__ == "__main__":
    sys.exit(main())
