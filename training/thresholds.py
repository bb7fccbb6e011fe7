"""The P(yes) threshold that ships with the judge, fitted on sources held out from training.

    .venv/bin/python training/thresholds.py training/out/A/quality.json training/out/B/quality.json

Each fold's `quality.json` (evaluate.py) holds the P(yes) of every row of the sources that
fold never trained on. Per task, the rows of all folds are pooled and the threshold that
maximises balanced accuracy on them is chosen (the one that ships). To say what such a
choice is worth on a source it did not see, each fold's sources are also judged at the
threshold fitted on the other folds' sources alone (leave-one-fold-out). Prints a table
per task and source, and the JSON to put in the registry entry's `recommended.thresholds`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from localjudge.quality.calibration import choose_threshold
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


def main(paths: list[str]) -> int:
    folds = [rows_of(Path(p)) for p in paths]
    shipped = {}
    for task in task_names():
        per_fold = [fold.get(task, []) for fold in folds]
        pooled = [row for rows in per_fold for row in rows]
        if not pooled:
            continue
        cut = choose_threshold([r[1] for r in pooled], [r[0] for r in pooled])
        shipped[verdict_task(task).prompt_version] = round(cut, 4)
        print(f"\n{task}: threshold fitted on every held-out source: {cut:.4f}")
        print(
            "| source | rows | BAcc at 0.5 | BAcc at a threshold fitted on the other folds (value) | AUROC |"
        )
        print("|---|---:|---:|---:|---:|")
        for n, rows in enumerate(per_fold):
            others = [row for m, rs in enumerate(per_fold) if m != n for row in rs]
            other_cut = (
                choose_threshold([r[1] for r in others], [r[0] for r in others]) if others else 0.5
            )
            for source in sorted({r[2] for r in rows}):
                mine = [r for r in rows if r[2] == source]
                plain, fitted = agreement(mine, 0.5), agreement(mine, other_cut)
                auroc = "-" if plain.auroc is None else f"{plain.auroc:.3f}"
                print(
                    f"| {source} | {len(mine)} | {plain.balanced_accuracy:.3f} | "
                    f"{fitted.balanced_accuracy:.3f} ({other_cut:.3f}) | {auroc} |"
                )
    print("\nrecommended.thresholds:", json.dumps(shipped))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
