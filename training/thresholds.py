"""The P(yes) threshold that ships with the judge, fitted on sources held out from training.

    .venv/bin/python training/thresholds.py training/out/A/quality.json training/out/B/quality.json

Each fold's `quality.json` (evaluate.py) holds the P(yes) of every row of the sources that
fold never trained on. Per task, the rows of all folds are pooled and the threshold that
maximises balanced accuracy on them is chosen (the one that ships). To say what such a
choice is worth on a source it did not see, each fold's sources are also judged at the
threshold fitted on the other folds' sources alone (leave-one-fold-out). Prints a table
per task and source, and the JSON to put in the registry entry's `recommended.thresholds`.

    .venv/bin/python training/thresholds.py FIT.json [...] --cap --check RUN.json [...]

With `--cap`, the threshold is fitted under a cap on false positives: the one that catches
the most flagged rows while flagging no larger share of the others than 0.5 does on the
same rows (`choose_threshold(..., max_fpr=...)`). With `--check`, every set of a fitted task
in each RUN (an evaluate.py output: other sources, the dev sets) is read at the fitted
threshold against 0.5: balanced accuracy at each, the difference (at the threshold minus at
0.5) with its 95% interval on the same resampled rows (1,000 stratified resamples, seed 0),
and the others flagged at each.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from localjudge.quality.calibration import choose_threshold
from localjudge.quality.intervals import intervals
from localjudge.quality.labelled import Agreement
from localjudge.scorers.registry import task_names, verdict_task


def rows_of(path: Path) -> dict[str, list[tuple[float, bool, str]]]:
    """task -> (P(yes), label, source) of every held-out-source row of one fold."""
    out: dict[str, list] = {}
    for entry in json.loads(path.read_text())["sets"]:
        if entry["way"] != "tuned" or entry["set"] != "held-out sources":
            continue
        source = [g.split("/")[0] for g in entry["row_groups"]]
        out.setdefault(entry["task"], []).extend(
            zip(entry["scores"], entry["labels"], source, strict=True)
        )
    return out


def agreement(rows: list[tuple[float, bool, str]], cut: float) -> Agreement:
    labels = [label for _, label, _ in rows]
    scores = [score for score, _, _ in rows]
    return Agreement.of(labels, [s >= cut for s in scores], scores)


def difference(rows: list[tuple[float, bool, str]], cut: float) -> str | None:
    """Balanced accuracy at `cut` minus at 0.5 on `rows`, with its 95% interval on the same
    resampled rows (None without both labels)."""
    scores, labels = [r[0] for r in rows], [r[1] for r in rows]
    spread = intervals(
        labels,
        [("cut", scores, [s >= cut for s in scores]), ("0.5", scores, [s >= 0.5 for s in scores])],
    )
    if spread is None:
        return None
    d = spread.differences["0.5"].balanced_accuracy
    return f"{d.value:+.3f} [{d.low:+.3f}, {d.high:+.3f}]"


def check(path: Path, task: str, cut: float) -> None:
    """Each set of `task` in an evaluate.py output, read at `cut` against 0.5 (a table row)."""
    for entry in json.loads(path.read_text())["sets"]:
        if entry.get("way", "tuned") != "tuned" or entry["task"] != task:
            continue
        rows = list(zip(entry["scores"], entry["labels"], [""] * len(entry["labels"]), strict=True))
        spread = difference(rows, cut)
        if spread is None:
            continue
        fitted, plain = agreement(rows, cut), agreement(rows, 0.5)
        print(
            f"| {path.stem} | {entry['set']} | {len(rows)} | {fitted.balanced_accuracy:.3f} / "
            f"{plain.balanced_accuracy:.3f} | {spread} | {fitted.confusion['fp']} / "
            f"{plain.confusion['fp']} of {sum(not r[1] for r in rows)} |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folds", type=Path, nargs="+", help="evaluate.py outputs fitted on")
    parser.add_argument(
        "--cap", action="store_true", help="fit flagging no more of the others than 0.5 does"
    )
    parser.add_argument(
        "--check", type=Path, action="append", default=[], help="a run read at the fitted threshold"
    )
    args = parser.parse_args(argv)
    folds = [rows_of(path) for path in args.folds]
    shipped = {}
    for task in task_names():
        per_fold = [fold.get(task, []) for fold in folds]
        pooled = [row for rows in per_fold for row in rows]
        if not pooled:
            continue
        cap = agreement(pooled, 0.5).false_positive_rate if args.cap else None
        cut = choose_threshold([r[1] for r in pooled], [r[0] for r in pooled], max_fpr=cap)
        shipped[verdict_task(task).prompt_version] = round(cut, 4)
        capped = "" if cap is None else f" (false positives capped at 0.5's, {cap:.3f})"
        print(f"\n{task}: threshold fitted on every held-out source{capped}: {cut:.4f}")
        print(
            "| source | rows | BAcc at 0.5 | BAcc at a threshold fitted on the other folds (value) "
            "| difference [95% interval] | others flagged: at it / at 0.5 | AUROC |"
        )
        print("|---|---:|---:|---:|---|---|---:|")
        for n, rows in enumerate(per_fold):
            others = [row for m, rs in enumerate(per_fold) if m != n for row in rs]
            other_cap = agreement(others, 0.5).false_positive_rate if args.cap and others else None
            other_cut = (
                choose_threshold([r[1] for r in others], [r[0] for r in others], max_fpr=other_cap)
                if others
                else 0.5
            )
            for source in sorted({r[2] for r in rows}):
                mine = [r for r in rows if r[2] == source]
                plain, fitted = agreement(mine, 0.5), agreement(mine, other_cut)
                auroc = "-" if plain.auroc is None else f"{plain.auroc:.3f}"
                print(
                    f"| {source} | {len(mine)} | {plain.balanced_accuracy:.3f} | "
                    f"{fitted.balanced_accuracy:.3f} ({other_cut:.3f}) | "
                    f"{difference(mine, other_cut) or '-'} | {fitted.confusion['fp']} / "
                    f"{plain.confusion['fp']} of {sum(not r[1] for r in mine)} | {auroc} |"
                )
        if args.check:
            print(
                f"\n| run | set | rows | BAcc at {cut:.4f} / at 0.5 | difference [95% interval] "
                "| others flagged: at it / at 0.5 |"
            )
            print("|---|---|---:|---|---|---|")
            for path in args.check:
                check(path, task, cut)
    print("\nrecommended.thresholds:", json.dumps(shipped))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
