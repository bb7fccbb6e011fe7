"""Another way of cutting an output into claims, against every sentence judged as a claim:
one judge on the same rows in both shapes, statement by statement, paired. `--shape
sentence-claims` (the default): questions and courtesies left out (RESULTS.md, "Questions
and courtesies are not claims"); `--shape split-predicates`: a sentence's coordinated
predicates judged apart (RESULTS.md, "Two facts in one sentence"; measurement only).

A row whose sentences are all claims is judged once and keeps its P(yes) in both shapes, so
only the rows the change touches can move. Printed: per set, the rows it touches, the
judge's balanced accuracy at 0.5 and AUROC in each shape, the difference (claims minus
every sentence) and the lead over word overlap in the claims shape, with 95% intervals on
the same resamples (localjudge's stratified bootstrap, 1000 resamples, seed 0).

    .venv/bin/python training/claims_shape.py --set BEGIN=training/data-M/held-out-sources_hallucination.jsonl \
        [--set NAME=FILE ...] [--dev] [--shape split-predicates] [--model gemma-3-270m-judge] \
        [--adapter A.gguf] --out OUT.json

Runs in localjudge's own virtual environment.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from dataclasses import replace
from pathlib import Path

from localjudge.judge import Judge
from localjudge.quality.intervals import intervals
from localjudge.quality.labelled import baselines, devset_rows, judge_rows, statements_of
from localjudge.quality.rows import read_rows
from localjudge.scorers.hallucination import sentence_task

EVERY_SENTENCE = sentence_task("sentences")  # every sentence a claim
CLAIMS = sentence_task("sentence-claims")  # what states nothing left out

AUXILIARIES = frozenset((
    "is", "are", "was", "were", "has", "have", "had", "will", "would", "can", "could", "does",
    "did", "may", "might", "should", "must",
))  # fmt: skip
IRREGULAR_PAST = frozenset((
    "went", "became", "began", "won", "made", "took", "gave", "saw", "came", "left", "led",
    "ran", "sold", "bought", "built", "wrote", "grew", "held", "kept", "found", "met", "lost",
    "paid", "put", "set", "told", "thought", "brought", "spent", "stood", "taught", "drew",
    "flew", "fell", "rose", "sang", "spoke", "chose", "broke", "drove", "got", "said", "knew",
))  # fmt: skip


def _word(token: str) -> str:
    return re.sub(r"^\W+|\W+$", "", token).lower()


def _verb(token: str) -> bool:
    word = _word(token)
    return word in AUXILIARIES or word in IRREGULAR_PAST or (len(word) >= 5 and word.endswith("ed"))


def split_predicates(sentence: str) -> list[str]:
    """A sentence whose subject has two coordinated predicates ("X was announced in January
    and went on sale in June"), as two claims with the subject given to both; any other
    sentence as it is (RESULTS.md, "Two facts in one sentence": the rule, set before
    measuring)."""
    tokens = sentence.split()
    first = next((n for n in range(1, min(len(tokens), 8)) if _verb(tokens[n])), None)
    if first is None:
        return [sentence]
    joint = next(
        (
            n
            for n in range(first + 2, len(tokens) - 2)
            if tokens[n] == "and" and _verb(tokens[n + 1])
        ),
        None,
    )
    if joint is None:
        return [sentence]
    subject = tokens[:first]
    end = tokens[-1][-1] if tokens[-1][-1] in ".!" else "."
    head = " ".join(tokens[:joint]).rstrip(",;") + end
    passive = (
        _word(tokens[first]) in AUXILIARIES
        and _word(tokens[first + 1]).endswith("ed")
        and _word(tokens[joint + 1]).endswith("ed")
    )
    tail = " ".join(subject + ([tokens[first]] if passive else []) + tokens[joint + 1 :])
    return [head, tail]


PREDICATES = replace(
    EVERY_SENTENCE,
    statements=lambda text: [
        part for sentence in EVERY_SENTENCE.statements(text) for part in split_predicates(sentence)
    ],
    leaves_out="",
)
SHAPES = {"sentence-claims": CLAIMS, "split-predicates": PREDICATES}


def p_yes(judge, rows, task) -> list[float]:
    verdicts = judge_rows(judge, rows, task, reasons=False, statements=True)
    failed = [v.error for v in verdicts if v.p_yes is None]
    if failed:
        raise SystemExit(f"claims_shape: {len(failed)} rows failed; first: {failed[0]}")
    return [v.p_yes for v in verdicts]


def overlap(rows, task) -> list[bool]:
    (way,) = [w for w in baselines(task, rows, statements=True) if w.name != "majority class"]
    return way.predictions


def compare(judge, name: str, rows, shape=CLAIMS) -> dict:
    touched = [
        n
        for n, r in enumerate(rows)
        if statements_of(r.text, shape) != statements_of(r.text, EVERY_SENTENCE)
    ]
    every = p_yes(judge, rows, EVERY_SENTENCE)
    claims = list(every)
    for n, p in zip(touched, p_yes(judge, [rows[n] for n in touched], shape), strict=True):
        claims[n] = p
    labels = [r.label for r in rows]
    words = overlap(rows, shape)
    spread = intervals(
        labels,
        [
            ("claims", claims, [p >= 0.5 for p in claims]),
            ("every sentence", every, [p >= 0.5 for p in every]),
            ("word overlap", [float(w) for w in words], words),
        ],
    )
    return {
        "set": name,
        "rows": len(rows),
        "touched": len(touched),
        "touched_hallucinated": sum(labels[n] for n in touched),
        "intervals": spread.to_dict(),
        "scores": {"claims": claims, "every sentence": every},
        "labels": labels,
        "row_groups": [r.group for r in rows],
    }


def line(entry: dict) -> str:
    ways, diff = entry["intervals"]["ways"], entry["intervals"]["judge_minus"]

    def cell(figure: dict) -> str:
        return f"{figure['value']:+.3f} [{figure['low']:+.3f}, {figure['high']:+.3f}]"

    return (
        f"| {entry['set']} | {entry['rows']} | {entry['touched']} "
        f"({entry['touched_hallucinated']} hallucinated) | "
        f"{ways['claims']['balanced_accuracy']['value']:.3f} / "
        f"{ways['every sentence']['balanced_accuracy']['value']:.3f} | "
        f"{ways['claims']['auroc']['value']:.3f} / {ways['every sentence']['auroc']['value']:.3f} | "
        f"{cell(diff['every sentence']['balanced_accuracy'])} / "
        f"{cell(diff['every sentence']['auroc'])} | "
        f"{cell(diff['word overlap']['balanced_accuracy'])} "
        f"({ways['word overlap']['balanced_accuracy']['value']:.3f}) |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", action="append", default=[], help="NAME=FILE (JSONL rows)")
    parser.add_argument("--dev", action="store_true", help="the built-in dev set too")
    parser.add_argument("--model", default="gemma-3-270m-judge", help="a registry entry")
    parser.add_argument("--adapter", type=Path, default=None)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="sentence-claims")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    sets = []
    for spec in args.set:
        name, _, file = spec.partition("=")
        if not name or not file or not Path(file).is_file():
            parser.error(f"--set {spec}: give NAME=FILE, a file of labelled rows")
        rows, bad = read_rows(Path(file), "hallucination")
        if bad:
            parser.error(f"--set {spec}: {len(bad)} unreadable rows, first {bad[0]}")
        sets.append((name, rows))
    if args.dev:
        sets.append(("dev set", devset_rows("hallucination")))
    out = {
        "model": args.model,
        "adapter": str(args.adapter) if args.adapter else None,
        "shape": args.shape,
        "sets": [],
    }
    print(
        "| set | rows | rows touched | BAcc: claims / every sentence | AUROC: claims / every "
        "sentence | claims minus every sentence: BAcc / AUROC | claims minus word overlap: BAcc |"
    )
    print("|---|---:|---:|---|---|---|---|")
    with Judge.load(args.model, adapter=args.adapter) as judge:
        judge.window_tokens = judge.window_tokens or 96
        for name, rows in sets:
            started = time.perf_counter()
            entry = compare(judge, name, rows, SHAPES[args.shape])
            entry["seconds"] = round(time.perf_counter() - started, 1)
            out["sets"].append(entry)
            print(line(entry), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
