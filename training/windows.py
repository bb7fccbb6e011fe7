"""Accuracy against cost over evidence-window size and k, on claims whose context is a whole
long document, judged by the default (shipped) judge through localjudge's own windows,
prompts and scheduler. For each window size, every claim is judged once against its 8 best
windows (BM25, best first); k = 1, 2, 4, 8 then read the first k of them, as the scorer
would: the lowest P(yes) over them is the claim's score, and the cascade (stop at the first
window that supports the claim) says how many windows the scorer judges. `--ks 4,all` judges
every window instead (the scorer's `windows="all"`, at most MAX_WINDOWS per claim), to set
top-k against judging all windows.

    .venv/bin/python training/windows.py --data training/data-A/held-out-sources_hallucination.jsonl
    .venv/bin/python training/windows.py --data ... --sizes 96 --ks 4,all

The rows must come from a source the judge never trained on (the shipped adapter did not
see WiCE). A measurement for training/RESULTS.md; nothing here changes a default.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from localjudge.judge import Judge
from localjudge.quality.labelled import VERDICT_TOKENS, Agreement, prompts_of
from localjudge.quality.rows import read_rows
from localjudge.scorers.evidence import p_yes

KS = (1, 2, 4, 8)


def judge_windows(judge, rows, window_tokens: int | None, ks=KS) -> list[dict]:
    """Each row's P(yes) per window, best first (`window_tokens` None: the whole context,
    one prompt, which fails for a context longer than the judge's); every window when `ks`
    holds "all"."""
    mode = ("all" if "all" in ks else max(ks)) if window_tokens else "off"
    plans, requests = [], []
    for row in rows:
        prompts = prompts_of(judge, row, "hallucination", windows=mode, window_tokens=window_tokens)
        plans.append(len(prompts))
        requests += [
            judge.prompt_request(parts, "hallucination_verdict", VERDICT_TOKENS,
                                 reasons_for=frozenset())
            for parts, _ in prompts
        ]  # fmt: skip
    outcomes = judge.generate_many(requests)
    out, at = [], 0
    for n in plans:
        mine = outcomes[at : at + n]
        at += n
        failed = next((o for o in mine if isinstance(o, Exception)), None)
        out.append({"error": str(failed)} if failed else {"p": [p_yes(o) for o in mine]})
    return out


def summarise(rows, judged, k: int | str) -> dict:
    labels, scores, judged_windows = [], [], 0
    for row, result in zip(rows, judged, strict=True):
        if "p" not in result:
            continue
        first = result["p"] if k == "all" else result["p"][:k]
        labels.append(row.label)
        scores.append(min(first))
        stop = next((i for i, p in enumerate(first) if p < 0.5), len(first) - 1)
        judged_windows += stop + 1  # the cascade: up to the first window that supports
    agreement = Agreement.of(labels, [s >= 0.5 for s in scores], scores)
    return {
        "k": k,
        "rows": len(labels),
        "balanced_accuracy": round(agreement.balanced_accuracy, 4),
        "auroc": None if agreement.auroc is None else round(agreement.auroc, 4),
        "windows_judged_per_claim": round(judged_windows / max(len(labels), 1), 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--model", default=None, help="registry name (default: the default)")
    parser.add_argument("--adapter", type=Path, default=None, help="a GGUF LoRA on --model")
    parser.add_argument(
        "--sizes", default="whole,48,96,192,384", help="window sizes in tokens, or whole"
    )
    parser.add_argument("--ks", default="1,2,4,8", help="windows read per claim: numbers, all")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    ks = [k if k == "all" else int(k) for k in args.ks.split(",")]
    rows, bad = read_rows(args.data, "hallucination")
    if bad:
        raise SystemExit(f"windows: {len(bad)} unreadable rows in {args.data}: {bad[0]}")
    report: dict = {"data": str(args.data), "rows": len(rows), "sizes": []}
    model = args.model or ("gemma-3-270m" if args.adapter else None)
    with Judge.load(model, n_ctx=8192, adapter=args.adapter) as judge:
        report["model"] = judge.name
        for size in (None if s == "whole" else int(s) for s in args.sizes.split(",")):
            started = time.perf_counter()
            stats_before = judge.runtime.stats
            judged = judge_windows(judge, rows, size, ks)
            stats = judge.runtime.stats.since(stats_before)
            entry = {
                "window_tokens": size or "whole context",
                "seconds": round(time.perf_counter() - started, 1),
                "windows_judged": ks[-1] if size else 1,
                "prompt_tokens": stats.num_prompt_tokens,
                "errors": sum("error" in r for r in judged),
                "by_k": [summarise(rows, judged, k) for k in (ks if size else (1,))],
            }
            report["sizes"].append(entry)
            print(json.dumps(entry), file=sys.stderr, flush=True)
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
