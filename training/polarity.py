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
asks a chat judge the `supported` way (its `ChatQuestion`), so that way is the scorer's
own prompt, read back as a verdict; `verdict` is the same prompt with that question left out.

    .venv/bin/python training/polarity.py --model qwen-coder-0.5b --data training/data-AnT/heldout_hallucination.jsonl --out training/results/polarity/heldout-0.5b.json

`--task toxicity` asks about each statement of a toxicity file the same three ways, with
the rubric's nine worked examples: `verdict` (the scorer's prompt: is it toxic?), `toxic`
(the key names what yes means) and `civil` (asked the other way round; P(toxic) = P(no)).

A measurement for training/RESULTS.md; it changes no default.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from localjudge.grammar import load_schema
from localjudge.judge import Judge
from localjudge.prompts import PromptParts
from localjudge.prompts.hallucination import (
    _VERDICT_INSTRUCTIONS,
    _worked_examples,
    claim_verdict_prompt,
)
from localjudge.prompts.toxicity import _VERDICT_INSTRUCTIONS as _TOXICITY_INSTRUCTIONS
from localjudge.prompts.toxicity import opinion_verdict_prompt
from localjudge.quality.labelled import Agreement
from localjudge.quality.rows import read_rows

# the scorer's rules and worked examples, the answer named by what "yes" means
_HALLUCINATED_INSTRUCTIONS = (
    _VERDICT_INSTRUCTIONS.split("\n\n", 1)[0]
    .replace(
        'Answer "yes" when the claim is hallucinated: it contradicts',
        '"hallucinated": "yes" when the claim contradicts',
    )
    .replace('Answer "no" when', '"hallucinated": "no" when')
    .replace('{"verdict":', '{"hallucinated":')
    + "\n\n"
    + _worked_examples("hallucinated", "yes")
)


def _renamed(branch: dict, key: str, spec: dict | None = None) -> None:
    """A verdict schema (or one of its branches) answering in `key` where it answered in
    `verdict`, first as before, with `spec` instead of the verdict's own where given."""
    own = branch["properties"].pop("verdict")
    branch["properties"] = {key: own if spec is None else spec, **branch["properties"]}
    branch["required"] = [key if r == "verdict" else r for r in branch["required"]]


_HALLUCINATED_SCHEMA = load_schema("hallucination_verdict")
_HALLUCINATED_SCHEMA["$id"] = "polarity_hallucinated"
_renamed(_HALLUCINATED_SCHEMA, "hallucinated")
WAYS = {
    "hallucination": ("verdict", "hallucinated", "supported"),
    "toxicity": ("verdict", "toxic", "civil"),
}


def _toxicity_way(key: str, toxic: str, civil: str) -> tuple[str, dict]:
    """The rubric and its worked examples answered in `key`, a toxic statement with `toxic`
    and a civil one with `civil`; and the verdict schema with that key and those values."""
    text = (
        _TOXICITY_INSTRUCTIONS.replace('{"verdict":"yes"', '{"@":"TOXIC"')
        .replace('{"verdict":"no"', '{"@":"CIVIL"')
        .replace('Toxic ("yes") means one of:', f'"{key}": "{toxic}" when it is toxic, one of:')
        .replace('Not toxic ("no"): ', f'"{key}": "{civil}" for ')
    )
    if key == "civil":
        text = text.replace("reply is toxic.", "reply is civil.")
    text = text.replace('"@":"TOXIC"', f'"{key}":"{toxic}"').replace(
        '"@":"CIVIL"', f'"{key}":"{civil}"'
    )
    schema = load_schema("toxicity_verdict")
    schema["$id"] = f"polarity_{key}"
    for branch, value in zip(schema["oneOf"], (toxic, civil), strict=True):
        _renamed(branch, key, {"const": value})
    return text, schema


_TOXIC_INSTRUCTIONS, _TOXIC_SCHEMA = _toxicity_way("toxic", "yes", "no")
_CIVIL_INSTRUCTIONS, _CIVIL_SCHEMA = _toxicity_way("civil", "no", "yes")


def toxicity_request(judge: Judge, way: str, statement: str):
    """One statement's verdict-only request, its field, and the answer meaning toxic."""
    parts = opinion_verdict_prompt("", statement)
    if way == "verdict":
        return (
            judge.prompt_request(parts, "toxicity_verdict", 64, reasons_for=frozenset()),
            "verdict",
            "yes",
        )
    text, schema, toxic = {
        "toxic": (_TOXIC_INSTRUCTIONS, _TOXIC_SCHEMA, "yes"),
        "civil": (_CIVIL_INSTRUCTIONS, _CIVIL_SCHEMA, "no"),
    }[way]
    parts = PromptParts(text, parts.shared, parts.own, f"polarity/{way}")
    made = judge.prompt_request(parts, schema, 64, reasons_for=frozenset(), decision_field=way)
    return made, way, toxic


def request(judge: Judge, way: str, context: list[str], claim: str):
    """One claim's verdict-only request, and the field whose "yes" means hallucinated."""
    parts = claim_verdict_prompt(context, claim)
    if way == "hallucinated":
        parts = PromptParts(
            _HALLUCINATED_INSTRUCTIONS, parts.shared, parts.own, "polarity/hallucinated"
        )
        schema, field = _HALLUCINATED_SCHEMA, "hallucinated"
    else:  # `supported` is the scorer's own chat question, read back as a verdict
        parts = replace(parts, chat=None) if way == "verdict" else parts
        schema, field = "hallucination_verdict", "verdict"
    made = judge.prompt_request(parts, schema, 64, reasons_for=frozenset(), decision_field=field)
    return made, field


def judge_way(judge: Judge, task: str, way: str, rows) -> list[float]:
    """P(flagged) of every row asked `way`: hallucinated, or toxic."""
    if task == "toxicity":
        asked = [toxicity_request(judge, way, row.text) for row in rows]
    else:
        asked = [(*request(judge, way, list(row.context), row.text), "yes") for row in rows]
    scores = []
    outcomes = judge.generate_many([r for r, _, _ in asked])
    for outcome, (_, field, flagged) in zip(outcomes, asked, strict=True):
        if isinstance(outcome, Exception):
            raise outcome
        scores.append(float(outcome.choice(field).probabilities.get(flagged, 0.0)))
    return scores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a registry entry with a chat template")
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--task", choices=sorted(WAYS), default="hallucination")
    parser.add_argument("--ways", help="comma-separated (default: all three of the task)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    rows, errors = read_rows(args.data, args.task)
    if errors:
        print(f"{len(errors)} rows could not be read; first: {errors[0]}", file=sys.stderr)
        return 1
    labels = [row.label for row in rows]
    out = {
        "model": args.model,
        "task": args.task,
        "data": str(args.data),
        "rows": len(rows),
        "ways": {},
    }
    with Judge.load(args.model) as judge:
        if judge.chat_template is None:
            print(f"{args.model} has no chat template: it is asked one way only", file=sys.stderr)
            return 1
        for way in args.ways.split(",") if args.ways else WAYS[args.task]:
            started = time.perf_counter()
            scores = judge_way(judge, args.task, way, rows)
            agreement = Agreement.of(labels, [s >= 0.5 for s in scores], scores)
            entry = {
                "auroc": agreement.auroc,
                "balanced_accuracy": agreement.balanced_accuracy,
                "flagged": sum(s >= 0.5 for s in scores),
                "seconds": round(time.perf_counter() - started, 1),
                f"p_{'toxic' if args.task == 'toxicity' else 'hallucinated'}": [
                    round(s, 4) for s in scores
                ],
            }
            out["ways"][way] = entry
            print(
                f"{args.model} {way}: AUROC {entry['auroc']:.3f}, BAcc {entry['balanced_accuracy']:.3f}, "
                f"flagged {entry['flagged']} of {len(rows)} ({sum(labels)} labelled so), "
                f"{entry['seconds']} s",
                flush=True,
            )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
