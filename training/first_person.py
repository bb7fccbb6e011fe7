"""Verdicts on a set of dialogue replies split by whether the reply has a first-person
sentence ("i ...", "my ...", "we ..."), for word overlap and for each saved evaluate.py run
(RESULTS.md, "A second source of knowledge-grounded replies: Q²"): where a source's labels
and the scorer's part ways, a personal statement is judged against knowledge that cannot
hold it.

    .venv/bin/python training/first_person.py training/data-q2/held-out-sources_hallucination.jsonl \
        training/results/q2/quality-M-e2.json [...]

Runs in localjudge's own virtual environment.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from localjudge.quality.labelled import baselines
from localjudge.quality.rows import read_rows

sys.path.insert(0, str(Path(__file__).parent))
from make_data import first_person  # noqa: E402  (one rule for both scripts)


def counts(flagged: list[bool], labels: list[bool]) -> str:
    """Balanced accuracy, and how many of each label were flagged."""
    pos = [f for f, label in zip(flagged, labels, strict=True) if label]
    neg = [f for f, label in zip(flagged, labels, strict=True) if not label]
    bacc = (sum(pos) / len(pos) + (len(neg) - sum(neg)) / len(neg)) / 2
    return f"{bacc:.3f} | {sum(neg)} of {len(neg)} | {sum(pos)} of {len(pos)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rows", type=Path, help="the rows, in `localjudge quality` format")
    parser.add_argument("runs", type=Path, nargs="*", help="evaluate.py outputs on those rows")
    args = parser.parse_args(argv)
    rows, bad = read_rows(args.rows, "hallucination")
    if bad:
        parser.error(f"{args.rows}: {len(bad)} unreadable rows")
    labels = [r.label for r in rows]
    (overlap,) = [w for w in baselines("hallucination", rows, statements=True) if w.name != "majority class"]  # fmt: skip
    ways = {"word overlap": [bool(p) for p in overlap.predictions]}
    for run in args.runs:
        found = [
            e
            for e in json.loads(run.read_text())["sets"]
            if e.get("way", "tuned") == "tuned" and e["labels"] == labels and e.get("statements")
        ]
        if not found:
            parser.error(f"{run}: no set of these rows judged statement by statement")
        ways[run.stem] = [p >= 0.5 for p in found[0]["scores"]]
    split = [first_person(r.text) for r in rows]
    print("| way | rows | BAcc at 0.5 | not hallucinated, flagged | hallucinated, caught |")
    print("|---|---|---:|---:|---:|")
    for name, flagged in ways.items():
        for part, keep in (
            ("all", None),
            ("no first-person sentence", False),
            ("a first-person sentence", True),
        ):
            n = [i for i, s in enumerate(split) if keep is None or s == keep]
            print(f"| {name} | {part} ({len(n)}) | " + counts([flagged[i] for i in n], [labels[i] for i in n]) + " |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
