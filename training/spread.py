"""How far a held-out figure could move on other rows of the same kind, beside how far it
moves with the training seed: 95% intervals (localjudge's stratified bootstrap, 1000
resamples, seed 0) of the judge's balanced accuracy at 0.5 and AUROC, from the per-row
scores that evaluate.py saves, as a Markdown table.

    .venv/bin/python training/spread.py training/results/recipe3/quality-G-e2.json \
        training/results/recipe3/quality-G-e2-seed7.json

Runs in localjudge's own virtual environment.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from localjudge.quality.intervals import intervals


def rows_of(path: Path) -> list[tuple[str, str, object]]:
    """(task, set, intervals of the judge) for every set an evaluate.py output holds."""
    out = []
    for entry in json.loads(path.read_text())["sets"]:
        if entry.get("way", "tuned") != "tuned":
            continue
        scores, labels = entry["scores"], entry["labels"]
        spread = intervals(labels, [("judge", scores, [s >= 0.5 for s in scores])])
        out.append((entry["task"], entry["set"], spread))
    return out


def cell(i) -> str:
    return f"{i.value:.3f} [{i.low:.3f}, {i.high:.3f}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, nargs="+", help="evaluate.py --out files")
    args = parser.parse_args(argv)
    print("| run | task | set | BAcc at 0.5 [95% interval] | AUROC [95% interval] |")
    print("|---|---|---|---:|---:|")
    for path in args.results:
        for task, name, spread in rows_of(path):
            if spread is None:
                continue
            judge = spread.ways["judge"]
            print(
                f"| {path.stem} | {task} | {name} | {cell(judge.balanced_accuracy)} | "
                f"{cell(judge.auroc)} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
