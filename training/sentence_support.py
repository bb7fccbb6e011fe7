"""Each statement of a held-out file's rows judged on its own, as the scorers judge an output
(its 4 best evidence windows by BM25, the lowest P(yes) deciding), beside how much of it the
closest of those windows holds (the share of its words, numbers and CJK bigrams in the
window, as the word-overlap baseline counts them): whether what a judge flags are sentences
that copy their document or sentences that sum it up. A table of statements and the share
flagged at 0.5 by that overlap, and with `--out` one JSON line per statement: its row's
number, its place among the row's statements (1-based, as `statements_of` cuts them), P(yes)
and the share; no text, so that a source whose texts may not be passed on stays uncommitted.

    .venv/bin/python training/sentence_support.py \
        --data training/data-bump-only/held-out-sources_hallucination.jsonl --label no \
        --out training/results/bump/sentences-merged-references.jsonl

Runs in localjudge's own virtual environment.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from localjudge.judge import Judge
from localjudge.quality.labelled import judge_rows, prompts_of, statements_of
from localjudge.quality.rows import read_rows
from localjudge.scorers.baselines import word_share

sys.path.insert(0, str(Path(__file__).parent))
from evaluate import WINDOW_TOKENS  # noqa: E402  (the windows every evaluation here uses)

TASK = "hallucination"
BINS = ((0.0, 0.5), (0.5, 0.7), (0.7, 0.9), (0.9, 1.01))  # share of the statement's words


def closest_share(judge, statement) -> float | None:
    """The largest share of a statement's words (a row whose text is the statement) held by
    one of the windows `judge_rows` judges it against (the whole context when it is one
    window); None for a statement without words."""
    judged_in = [window for _, window in prompts_of(judge, statement, TASK)]
    texts = [statement.context if w is None else [w.text] for w in judged_in]
    found = [s for s in (word_share(statement.text, text) for text in texts) if s is not None]
    return max(found) if found else None


def judged(judge, rows) -> list[dict]:
    """One record per statement of every row: its row's number, its place among the row's
    statements (1-based), P(yes) and the closest window's share of its words."""
    owners, statements = [], []
    for row in rows:
        for place, text in enumerate(statements_of(row.text, TASK), 1):
            owners.append((row, place))
            statements.append(replace(row, text=text))
    verdicts = judge_rows(judge, statements, TASK, reasons=False)
    return [
        {
            "row": row.number,
            "statement": place,
            "p_yes": verdict.p_yes,
            "share": closest_share(judge, statement),
        }
        for (row, place), statement, verdict in zip(owners, statements, verdicts, strict=True)
    ]


def table(records: list[dict]) -> list[str]:
    """Statements and the share flagged at 0.5, by the closest window's share of their words."""
    lines = ["| closest window holds | statements | flagged at 0.5 |", "|---|---:|---:|"]
    for low, high in BINS:
        inside = [
            r for r in records if r["share"] is not None and r["p_yes"] is not None
            and low <= r["share"] < high
        ]  # fmt: skip
        flagged = sum(r["p_yes"] >= 0.5 for r in inside)
        share = f"{flagged} ({flagged / len(inside):.0%})" if inside else "0"
        lines.append(f"| {low:.0%} to {min(high, 1):.0%} of its words | {len(inside)} | {share} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="hallucination rows (JSONL)")
    parser.add_argument("--model", default="gemma-3-270m-judge")
    parser.add_argument("--label", choices=("yes", "no"), help="only the rows with this label")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    rows, bad = read_rows(args.data, TASK)
    if bad:
        print(f"sentence_support: {len(bad)} unreadable rows in {args.data}", file=sys.stderr)
        return 2
    if args.label is not None:
        rows = [r for r in rows if r.label == (args.label == "yes")]
    with Judge.load(args.model) as judge:
        judge.window_tokens = WINDOW_TOKENS
        records = judged(judge, rows)
    print(f"{len(records)} statements of {len(rows)} rows")
    print("\n".join(table(records)))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("w", encoding="utf-8") as f:
            for record in records:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
