"""The judge with and without a trained adapter, on the held-out split and the built-in dev
sets, through localjudge itself (llama.cpp, the scorers' prompts, the scheduler), beside the
trivial baselines; then the ship rule of training/README.md.

    .venv/bin/python training/evaluate.py --adapter training/out/judge-lora.gguf \
        --data training/data --out training/out/quality.json
    .venv/bin/python training/evaluate.py --model gemma-3-270m-judge --no-base \
        --data training/data-q2 --no-dev --statements --out shipped-q2.json   # the shipped judge

Runs in localjudge's own virtual environment.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from localjudge.judge import Judge
from localjudge.quality.labelled import QualityReport, Way, baselines, devset_rows, measure
from localjudge.quality.rows import read_rows
from localjudge.scorers.evidence import windows_from_text

TASKS = ("toxicity", "hallucination")
SHIP_MARGIN = {"toxicity": 0.05, "hallucination": 0.0}  # over the best trivial baseline


WINDOW_TOKENS = 96  # the evidence windows the tuned judge ships with (registry)


def windows_option(value: str) -> int | str:
    """`--windows`, checked as the scorers check their option."""
    try:
        return windows_from_text(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def sets(
    data: Path, dev: bool = True, tasks: tuple[str, ...] = TASKS
) -> list[tuple[str, str, list]]:
    """(task, set name, rows) of each of `tasks`: whole sources held out from training (when
    the data was made with --hold-out), our held-out split of the trained sources, the
    built-in dev sets."""
    out = []
    for task in tasks:
        for name, file in (("held-out sources", "held-out-sources"), ("held-out", "heldout")):
            path = data / f"{file}_{task}.jsonl"
            if not path.is_file() or not path.stat().st_size:
                continue
            rows, bad = read_rows(path, task)
            if bad:
                raise SystemExit(f"evaluate: {len(bad)} unreadable rows in {path}: {bad[0]}")
            out.append((task, name, rows))
        if dev:
            out.append((task, "dev set", devset_rows(task)))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--adapter",
        type=Path,
        default=None,
        help="the trained adapter (GGUF); without it, --model is measured as it is (a "
        "registry entry that is a judge already, such as the shipped gemma-3-270m-judge)",
    )
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--model", default="gemma-3-270m", help="the base registry entry")
    parser.add_argument(
        "--adapter-scale", type=float, default=None, help="the adapter's strength (default 1)"
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--no-base", action="store_true", help="measure the tuned judge only")
    parser.add_argument("--no-dev", action="store_true", help="leave out the built-in dev sets")
    parser.add_argument(
        "--task",
        choices=TASKS,
        default=None,
        help="judge this task's sets only (an adapter trained for one task: train.py --task)",
    )
    parser.add_argument(
        "--statements",
        action="store_true",
        help="judge each text statement by statement, as the scorers judge an output "
        "(flagged when any statement is; the baselines in the same shape)",
    )
    parser.add_argument(
        "--window-tokens",
        type=int,
        default=WINDOW_TOKENS,
        help=f"evidence windows' size in tokens (default {WINDOW_TOKENS}, the shipped judge's)",
    )
    parser.add_argument(
        "--windows",
        type=windows_option,
        default=None,
        help='windows judged per claim: k best by BM25, "all" (at most 32) or "off" (the whole '
        "context); default 4, the scorers' default",
    )
    parser.add_argument(
        "--gather",
        action="store_true",
        help="also judge each statement of a long context against the window of its own best "
        "sentences, gathered from the whole context (RESULTS.md, session 69)",
    )
    args = parser.parse_args(argv)
    if args.adapter is None and not args.no_base:
        parser.error("without --adapter, --model is the judge measured: give --no-base")
    if args.adapter is None and args.adapter_scale is not None:
        parser.error("--adapter-scale goes with --adapter")
    scale = 1.0 if args.adapter_scale is None else args.adapter_scale
    tasks = TASKS if args.task is None else (args.task,)

    results: dict = {
        "model": args.model,
        "adapter": None if args.adapter is None else str(args.adapter),
        "statements": args.statements,
        "window_tokens": args.window_tokens,
        "windows": args.windows,
        "gather": args.gather,
        "tasks": list(tasks),
        "sets": [],
    }
    ways = (("base", None), ("tuned", args.adapter))[1 if args.no_base else 0 :]
    for way, adapter in ways:
        started = time.perf_counter()
        with Judge.load(args.model, adapter=adapter, adapter_scale=scale) as judge:
            judge.window_tokens = args.window_tokens  # long contexts judged in evidence windows
            for task, name, rows in sets(args.data, not args.no_dev, tasks):
                report = measure(
                    judge, rows, task, source=name, reasons=False, statements=args.statements,
                    windows=args.windows, gather=args.gather,
                )  # fmt: skip
                parts = by_source(report) if name == "held-out sources" else {}
                for set_name, part in [(name, report), *parts.items()]:
                    entry = entry_of(way, set_name, part)
                    results["sets"].append(entry)
                    print(
                        f"{way:5} {task:13} {set_name:8} rows {entry['rows']:3}  "
                        + "  ".join(
                            f"{w} BA {a['balanced_accuracy']:.3f} AUROC {_f(a['auroc'])}"
                            for w, a in entry["agreement"].items()
                        ),
                        flush=True,
                    )
        print(f"{way}: {time.perf_counter() - started:.0f} s")

    decision = ship_decision(results["sets"])
    results["ship"] = decision
    for line in decision["lines"]:
        print(line)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


SOURCE_SET = "held-out source "  # + a source's name: one of several pooled held-out sources


def source_of(group: str | None) -> str:
    """The source a row was drawn from: its group's first part (`toxigen/hate`)."""
    return (group or "").split("/", 1)[0]


def by_source(report: QualityReport) -> dict[str, QualityReport]:
    """When a set pools rows of several sources (more than one held out for a task), the
    report of each source's rows alone, named `held-out source <name>`, the baselines
    worked out again on those rows; empty for a set of one source. The ship rule is read on
    each of them (a source the judge fails cannot hide behind another it passes)."""
    members: dict[str, list[int]] = {}
    for i, row in enumerate(report.rows):
        members.setdefault(source_of(row.group), []).append(i)
    if len(members) < 2:
        return {}
    out = {}
    judge = report.ways[0]
    for source, kept in sorted(members.items()):
        rows = [report.rows[i] for i in kept]
        scores = [judge.scores[i] for i in kept]
        predictions = [judge.predictions[i] for i in kept]
        out[SOURCE_SET + source] = replace(
            report,
            source=SOURCE_SET + source,
            rows=rows,
            ways=[
                Way(judge.name, scores, predictions),
                *baselines(report.task, rows, statements=report.statements),
            ],
            judge_errors=[e for e in report.judge_errors if source_of(e[0].group) == source],
            reasons=[report.reasons[i] for i in kept] if report.reasons else [],
        )
    return out


def entry_of(way: str, name: str, report: QualityReport) -> dict:
    """One set's figures as saved in --out."""
    return {
        "way": way,
        "judge": report.model,
        "task": report.task,
        "set": name,
        "statements": report.statements,
        "rows": len(report.rows),
        "errors": len(report.judge_errors),
        "agreement": {w: vars(a) for w, a in report.agreement().items()},
        # 95% bootstrap intervals, and the judge minus each baseline (paired)
        "intervals": spread.to_dict() if (spread := report.intervals) else None,
        "groups": {g: vars(a["judge"]) for g, a in report.by_group().items()},
        # per row, for fitting a threshold on sources held out from training
        "scores": [round(x, 6) for x in report.ways[0].scores],
        "labels": [r.label for r in report.rows],
        "row_groups": [r.group for r in report.rows],
    }


def _f(value) -> str:
    return "  -  " if value is None else f"{value:.3f}"


def _gap(entry: dict, baseline: str) -> str:
    """The judge's lead over the baseline with its 95% interval (reported, not deciding)."""
    gap = ((entry.get("intervals") or {}).get("judge_minus") or {}).get(baseline)
    if gap is None:
        return ""
    d = gap["balanced_accuracy"]
    return f"; lead {d['value']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"


def ship_decision(entries: list[dict]) -> dict:
    """The rule (issue 16): on held-out data, the tuned judge beats the best trivial
    baseline by 5 balanced-accuracy points on toxicity and does not fall below it on
    hallucination. It decides on our held-out split (public data never trained on); the
    built-in dev sets (63 and 48 hand-written rows, whose word-list baseline was written
    with them) are checked the same way and reported beside it. Where a task's held-out
    sources are several, the rule is read on each source, and their pool is reported. A
    task with no held-out set among the entries is not decided, so the adapter does not
    ship on them."""
    lines, passed, decided = [], True, set()
    names = {e["set"] for e in entries}
    deciding_set = "held-out sources" if "held-out sources" in names else "held-out"
    split = {e["task"] for e in entries if e["set"].startswith(SOURCE_SET)}
    for entry in entries:
        if entry["way"] != "tuned":
            continue
        if deciding_set == "held-out sources" and entry["task"] in split:
            deciding = entry["set"].startswith(SOURCE_SET)  # each source, not their pool
        else:
            deciding = entry["set"] == deciding_set
        agreement = entry["agreement"]
        judge = agreement["judge"]["balanced_accuracy"]
        baseline_name, baseline = max(
            ((w, a["balanced_accuracy"]) for w, a in agreement.items() if w != "judge"),
            key=lambda pair: pair[1],
        )
        need = baseline + SHIP_MARGIN[entry["task"]]
        ok = judge >= need - 1e-9 and entry["errors"] == 0
        if deciding:
            passed &= ok
            decided.add(entry["task"])
        verdict = ("pass" if ok else "FAIL") if deciding else ("met" if ok else "not met")
        lines.append(
            f"{verdict}: {entry['task']} {entry['set']}: tuned BA {judge:.3f}, "
            f"needs >= {need:.3f} ({baseline_name} {baseline:.3f} + {SHIP_MARGIN[entry['task']]:.2f})"
            + _gap(entry, baseline_name)
            + ("" if deciding else " [reported, not deciding]")
        )
    if missing := [task for task in TASKS if task not in decided]:
        passed = False
        lines.append(f"not decided: no held-out set of {', '.join(missing)}")
    lines.append("ship: " + ("yes" if passed else "no"))
    return {"ship": passed, "lines": lines}


if __name__ == "__main__":
    sys.exit(main())
