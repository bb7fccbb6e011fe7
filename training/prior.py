"""Does the judge's verdict on a statement with no evidence for it say how to read its
verdict with evidence? On long documents the judge's P(yes) varies more between statements
than an edit moves it (RESULTS.md, BUMP). This measures whether reading each statement's
P(yes) against the statement's own prior takes that variance out: each statement (as the
hallucination scorer cuts an output) is judged against its 4 best 96-token windows (BM25,
all 4 judged, no cascade) and once against an unrelated window, the window BM25 ranks first
for it in the next row's document (the next row in file order with another context), where
nothing supports it. Per row, three scores, each the largest over its statements:

    plain     the lowest P(yes) over its windows, as the scorer reads it (no cascade)
    contrast  sigmoid(logit(plain) - logit(P(yes) against the unrelated window)): 0.5 when
              the best window leaves the statement as likely unsupported as a window about
              something else does, lower the more the evidence clears it
    share     (the row's score, not the largest) the share of its statements with plain at
              or above 0.5, the hallucination scorer's score; reported, deciding nothing

A row with no statement to check scores 0 every way, as `quality` scores it. Each way is
written as an evaluate.py output (`--out DIR`: `quality-<way>.json`), so that `spread.py`
and `pairs.py` read them, with every statement's P(yes) values in `prior-statements.json`.
Only AUROC and pair orderings mean anything for `contrast` and `share`: their 0.5 is not a
threshold anyone fitted.

    .venv/bin/python training/prior.py --data training/data-S-only --out training/results/prior/S-only

Runs in localjudge's own virtual environment, on the judge users get unless `--model` or
`--adapter` says otherwise. A measurement for training/RESULTS.md; it changes no default.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

from localjudge.judge import Judge
from localjudge.quality.labelled import VERDICT_TOKENS, prompts_of, statements_of
from localjudge.quality.rows import read_rows
from localjudge.scorers.evidence import DEFAULT_TOP_K, p_yes

TASK = "hallucination"
TOP_K = DEFAULT_TOP_K  # the scorers' k: 4
FILE = "held-out-sources_hallucination.jsonl"
CLAMP = 1e-6


def logit(p: float) -> float:
    p = min(max(p, CLAMP), 1 - CLAMP)
    return math.log(p / (1 - p))


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def unrelated_contexts(rows) -> list[tuple[str, ...]]:
    """Per row, the context of the next row in file order (wrapping) whose context differs;
    a file with one context has none to give."""
    out = []
    for i, row in enumerate(rows):
        for step in range(1, len(rows)):
            other = rows[(i + step) % len(rows)].context
            if other != row.context:
                out.append(other)
                break
        else:
            raise SystemExit("prior: every row has the same context; no unrelated window")
    return out


def statement_prompts(judge, row, statement: str, unrelated: tuple[str, ...]) -> list:
    """The statement against its TOP_K windows, best first, then against the unrelated window."""
    mine = replace(row, text=statement)
    prompts = prompts_of(judge, mine, TASK, windows=TOP_K)
    prompts += prompts_of(judge, replace(mine, context=unrelated), TASK, windows=1)[:1]
    return [parts for parts, _ in prompts]


def judge_row_statements(judge, rows, unrelated, chunk: int = 16) -> list[list[dict] | str]:
    """Per row, each statement's P(yes) per window (`p`) and against the unrelated window
    (`p0`); a row whose prompt failed is its error's text."""
    out: list[list[dict] | str] = []
    for start in range(0, len(rows), chunk):
        plans, requests = [], []
        part = zip(rows[start : start + chunk], unrelated[start : start + chunk], strict=True)
        for row, other in part:
            mine = []
            for statement in statements_of(row.text, TASK):
                prompts = statement_prompts(judge, row, statement, other)
                mine.append(len(prompts))
                requests += [
                    judge.prompt_request(parts, "hallucination_verdict", VERDICT_TOKENS,
                                         reasons_for=frozenset())
                    for parts in prompts
                ]  # fmt: skip
            plans.append(mine)
        outcomes = judge.generate_many(requests)
        at = 0
        for mine in plans:
            found: list[dict] | str = []
            for n in mine:
                got = outcomes[at : at + n]
                at += n
                failed = next((o for o in got if isinstance(o, Exception)), None)
                if failed is not None:
                    found = str(failed)
                elif isinstance(found, list):
                    values = [p_yes(o) for o in got]
                    found.append({"p": values[:-1], "p0": values[-1]})
            out.append(found)
        print(f"prior: {min(start + chunk, len(rows))}/{len(rows)} rows", file=sys.stderr)
    return out


def row_scores(statements: list[dict]) -> dict[str, float]:
    """The row's score each way (module docstring)."""
    if not statements:
        return {"plain": 0.0, "contrast": 0.0, "share": 0.0}
    plain = [min(s["p"]) for s in statements]
    contrast = [sigmoid(logit(p) - logit(s["p0"])) for p, s in zip(plain, statements, strict=True)]
    return {
        "plain": max(plain),
        "contrast": max(contrast),
        "share": sum(p >= 0.5 for p in plain) / len(plain),
    }


def set_entry(name: str, rows, scores: list[float], set_name: str = "held-out sources") -> dict:
    """One set of an evaluate.py output (the judge `name` on `rows`, statement by statement),
    as spread.py and pairs.py read it."""
    return {
        "way": "tuned",
        "judge": name,
        "task": TASK,
        "set": set_name,
        "statements": True,
        "rows": len(rows),
        "scores": scores,
        "labels": [r.label for r in rows],
        "row_groups": [r.group for r in rows],
    }


def run_entry(name: str, sets: list[dict]) -> dict:
    """An evaluate.py output holding `sets` (`set_entry`), as spread.py and pairs.py read it."""
    return {"model": name, "adapter": None, "statements": True, "sets": sets}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help=f"a folder holding {FILE}")
    parser.add_argument("--model", default=None, help="registry name (default: the default)")
    parser.add_argument("--adapter", type=Path, default=None, help="a GGUF LoRA on --model")
    parser.add_argument("--out", type=Path, required=True, help="a folder for the outputs")
    args = parser.parse_args(argv)
    rows, bad = read_rows(args.data / FILE, TASK)
    if bad:
        raise SystemExit(f"prior: {len(bad)} unreadable rows in {args.data}: {bad[0]}")
    unrelated = unrelated_contexts(rows)
    model = args.model or ("gemma-3-270m" if args.adapter else None)
    started = time.perf_counter()
    with Judge.load(model, adapter=args.adapter) as judge:
        name = judge.name
        judged = judge_row_statements(judge, rows, unrelated)
    seconds = round(time.perf_counter() - started, 1)
    failed = [i for i, j in enumerate(judged) if isinstance(j, str)]
    if failed:
        raise SystemExit(f"prior: {len(failed)} rows failed, the first: {judged[failed[0]]}")
    scores = [row_scores(j) for j in judged]
    args.out.mkdir(parents=True, exist_ok=True)
    for way in ("plain", "contrast", "share"):
        entry = run_entry(name, [set_entry(name, rows, [s[way] for s in scores])])
        (args.out / f"quality-{way}.json").write_text(json.dumps(entry) + "\n")
    record = {"model": name, "data": str(args.data), "seconds": seconds, "statements": judged}
    (args.out / "prior-statements.json").write_text(json.dumps(record) + "\n")
    print(f"prior: {len(rows)} rows in {seconds} s; outputs in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
