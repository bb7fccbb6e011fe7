"""What a judge that extracts its own claims extracts, and what the sentence rules would
leave out of it: questions, courtesies, headings and text with no words
(`scorers.claims.why_not_a_claim`), which the claims prompt asks the judge to leave out and
a small instruct judge keeps ("Do you like chocolate?", "I'm glad to hear that!").

Runs the hallucination scorer (`extraction="judge"`, reasons built, no judge call for them)
on the first `--per-group` rows of each group of each set, and records per row its label,
the claims, each claim's verdict and P(yes), and `why_not_a_claim` of each claim. Printed
per set: rows, extracted claims and those the rules leave out (by kind), and the balanced
accuracy of "score above 0 means hallucinated" as extracted and with the rules applied
(a claim left out is not judged; a row left with no claim scores 0), with the rows the
rules mend (a faithful row no longer flagged) and break (a hallucinated one no longer
flagged). Each claim is judged on its own, so the rules' result is read off the same run.

    LOCALJUDGE_HOME=/tmp/lj-qwen .venv/bin/python training/extracted_claims.py --model qwen-unassessed --set Q2=training/data-q2/held-out-sources_hallucination.jsonl --set BEGIN=training/data-AnT/held-out-sources_hallucination.jsonl --per-group 100 --out training/results/extracted/claims.jsonl

`--read OUT` prints the table again from the saved records. A measurement for
training/RESULTS.md; it changes no default.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from localjudge import create_hallucination_scorer, run_evals
from localjudge.judge import Judge
from localjudge.quality.labelled import Agreement
from localjudge.scorers.claims import why_not_a_claim


def pick(path: Path, per_group: int) -> list[dict]:
    """The first `per_group` rows of each group of a rows file, in the file's order."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    taken: Counter = Counter()
    out = []
    for row in rows:
        if taken[row["group"]] < per_group:
            taken[row["group"]] += 1
            out.append(row)
    return out


def judge_sets(judge: Judge, sets: dict[str, list[dict]]) -> list[dict]:
    """One record per row: its set, group, label, and each extracted claim with its
    verdict, P(yes) and why the sentence rules would leave it out (or None)."""
    scorer = create_hallucination_scorer(
        judge, extraction="judge", reason="template", claim_reasons="none"
    )
    records = []
    for name, rows in sets.items():
        items = [{"output": r["claim"], "context": r["context"]} for r in rows]
        evals = run_evals(items, [scorer])
        for row, item in zip(rows, evals.items, strict=True):
            if not item.ok:
                print(f"{name}: a row not judged: {item.errors}", file=sys.stderr)
                continue
            (result,) = item.scorer_results.values()
            records.append(
                {
                    "set": name,
                    "group": row["group"],
                    "label": row["label"],
                    "claims": [
                        {
                            "claim": v["statement"],
                            "verdict": v["verdict"],
                            "p_yes": v["confidence"]
                            if v["verdict"] == "yes"
                            else 1 - v["confidence"],
                            "why_not": why_not_a_claim(v["statement"]),
                        }
                        for v in result.analyze_step_result["verdicts"]
                    ],
                }
            )
    return records


def balanced_accuracy(labels: list[bool], flagged: list[bool]) -> float:
    return Agreement.of(labels, flagged, [float(f) for f in flagged]).balanced_accuracy


def table(records: list[dict]) -> str:
    out = [
        "| set | rows | claims | left out by the rules (kinds) | BAcc as extracted | with the rules | mended / broken |",
        "|---|---:|---:|---|---:|---:|---|",
    ]
    for name in dict.fromkeys(r["set"] for r in records):
        rows = [r for r in records if r["set"] == name]
        labels = [bool(r["label"]) for r in rows]
        before = [any(c["verdict"] == "yes" for c in r["claims"]) for r in rows]
        after = [
            any(c["verdict"] == "yes" and c["why_not"] is None for c in r["claims"]) for r in rows
        ]
        kinds = Counter(c["why_not"] for r in rows for c in r["claims"] if c["why_not"])
        mended = sum(
            b and not a and not lab for b, a, lab in zip(before, after, labels, strict=True)
        )
        broken = sum(b and not a and lab for b, a, lab in zip(before, after, labels, strict=True))
        out.append(
            f"| {name} | {len(rows)} | {sum(len(r['claims']) for r in rows)} | "
            f"{sum(kinds.values())} ({', '.join(f'{k} {n}' for k, n in kinds.most_common()) or 'none'}) | "
            f"{balanced_accuracy(labels, before):.3f} | {balanced_accuracy(labels, after):.3f} | "
            f"{mended} / {broken} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model")
    parser.add_argument("--set", action="append", default=[], help="NAME=FILE (repeatable)")
    parser.add_argument("--per-group", type=int, default=100)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--read", type=Path, help="print the table of saved records")
    args = parser.parse_args(argv)
    if args.read:
        records = [json.loads(line) for line in args.read.read_text().splitlines() if line]
        print(table(records))
        return 0
    if not (args.model and args.set and args.out):
        parser.error("--model, --set and --out are needed to run the judge")
    sets = {}
    for spec in args.set:
        name, _, path = spec.partition("=")
        sets[name] = pick(Path(path), args.per_group)
    with Judge.load(args.model) as judge:
        records = judge_sets(judge, sets)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    print(table(records))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
