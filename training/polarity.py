"""Which way should a chat judge be asked about a claim? The hallucination prompt asks
"is the claim hallucinated?" and calls the answer `verdict` (yes = hallucinated, Mastra's
meaning). A small instruct model may read "yes" as agreement with the context instead.
This judges every row of a hallucination file (each claim against its whole context, as
`quality` does without windows) three ways, each in our own words and with the same
five worked examples:

    verdict       the scorer's prompt as it is: {"verdict": "yes" | "no"}, yes = hallucinated
    hallucinated  the same rules, the key naming what yes means: {"hallucinated": "yes" | "no"}
    supported     asked the other way round: {"supported": "yes" | "no"};
                  P(hallucinated) = P(no)

and prints, per way, AUROC and balanced accuracy at 0.5 of P(hallucinated) against the
labels (verdicts only: no reason is decoded). Since session 76 the hallucination prompt
asks a chat judge the `supported` way, in these very words (`_SUPPORT_INSTRUCTIONS` in
localjudge/prompts/hallucination.py).

    .venv/bin/python training/polarity.py --model qwen-coder-0.5b --data training/data-AnT/heldout_hallucination.jsonl --out training/results/polarity/heldout-0.5b.json

A measurement for training/RESULTS.md; it changes no default.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from localjudge.judge import Judge
from localjudge.prompts import PromptParts
from localjudge.prompts.hallucination import (
    _SUPPORT_INSTRUCTIONS,
    _VERDICT_INSTRUCTIONS,
    _worked_examples,
    claim_verdict_prompt,
)
from localjudge.quality.labelled import auroc
from localjudge.quality.rows import read_rows

# the scorer's rules, the answer named by what "yes" means
_HALLUCINATED = (
    _VERDICT_INSTRUCTIONS.split("\n\n", 1)[0]
    .replace(
        'Answer "yes" when the claim is hallucinated: it contradicts',
        '"hallucinated": "yes" when the claim contradicts',
    )
    .replace('Answer "no" when', '"hallucinated": "no" when')
    .replace('{"verdict":', '{"hallucinated":')
    + "\n\n"
)


def _instructions(key: str) -> str:
    """The `hallucinated` way's instructions, or the `supported` way's (the package's chat
    question since session 76), with the scorer prompt's worked examples."""
    if key == "supported":
        return _SUPPORT_INSTRUCTIONS
    return _HALLUCINATED + _worked_examples("hallucinated", "yes")


def _schema(key: str) -> dict:
    return {
        "type": "object",
        "properties": {
            key: {"type": "string", "enum": ["yes", "no"]},
            "reason": {"type": "string"},
        },
        "required": [key, "reason"],
        "additionalProperties": False,
    }


WAYS = {  # way: (its key, the answer that means hallucinated)
    "verdict": ("verdict", "yes"),
    "hallucinated": ("hallucinated", "yes"),
    "supported": ("supported", "no"),
}


def prompt(way: str, context: list[str], claim: str) -> PromptParts:
    parts = claim_verdict_prompt(context, claim)
    if way == "verdict":  # the question as it was before session 76, for a chat judge too
        return replace(parts, chat=None)
    return PromptParts(_instructions(WAYS[way][0]), parts.shared, parts.own, f"polarity/{way}")


def judge_way(judge: Judge, way: str, rows) -> list[float]:
    key, flagged = WAYS[way]
    schema = "hallucination_verdict" if way == "verdict" else _schema(key)
    requests = [
        judge.prompt_request(
            prompt(way, list(row.context), row.text),
            schema,
            64,
            reasons_for=frozenset(),
            decision_field=key,
        )  # fmt: skip
        for row in rows
    ]
    scores = []
    for outcome in judge.generate_many(requests):
        if isinstance(outcome, Exception):
            raise outcome
        choice = outcome.choice(key)
        scores.append(float(choice.probabilities.get(flagged, 0.0)))
    return scores


def balanced_accuracy(labels: list[bool], flags: list[bool]) -> float:
    pos = [f for lab, f in zip(labels, flags, strict=True) if lab]
    neg = [not f for lab, f in zip(labels, flags, strict=True) if not lab]
    return (sum(pos) / len(pos) + sum(neg) / len(neg)) / 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a registry entry with a chat template")
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--ways", default=",".join(WAYS))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    rows, errors = read_rows(args.data, "hallucination")
    if errors:
        print(f"{len(errors)} rows could not be read; first: {errors[0]}", file=sys.stderr)
        return 1
    labels = [row.label for row in rows]
    out = {"model": args.model, "data": str(args.data), "rows": len(rows), "ways": {}}
    with Judge.load(args.model) as judge:
        for way in args.ways.split(","):
            started = time.perf_counter()
            scores = judge_way(judge, way, rows)
            entry = {
                "auroc": auroc(labels, scores),
                "balanced_accuracy": balanced_accuracy(labels, [s >= 0.5 for s in scores]),
                "flagged": sum(s >= 0.5 for s in scores),
                "seconds": round(time.perf_counter() - started, 1),
                "p_hallucinated": [round(s, 4) for s in scores],
            }
            out["ways"][way] = entry
            print(
                f"{args.model} {way}: AUROC {entry['auroc']:.3f}, BAcc {entry['balanced_accuracy']:.3f}, "
                f"flagged {entry['flagged']} of {len(rows)} ({sum(labels)} labelled hallucinated), "
                f"{entry['seconds']} s",
                flush=True,
            )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
