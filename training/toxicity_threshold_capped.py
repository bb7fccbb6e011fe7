"""A toxicity threshold fitted under a false-positive cap on the two sources the shipped judge
never saw, checked on a third no one here had judged (RESULTS.md, "A toxicity threshold under
a false-positive cap").

    .venv/bin/python training/toxicity_threshold_capped.py --sources training/sources \
        --saved training/results/convabuse/toxicity-threshold.json \
        --trained-heldout training/data-CA/heldout_toxicity.jsonl \
        --rows training/data-threshold --out training/results/ethos/toxicity-threshold-capped.json

Fit: session 59's 440 rows (Stormfront, ConvAbuse's train split; the same draws), judged
again and compared with the P(yes) saved then; the threshold catching the most toxic texts
while flagging no more of their other texts than 0.5 does (`choose_threshold` with
`max_fpr` the pooled false-positive rate at 0.5). Check: every ETHOS comment, and the two
guards of session 59. Prints the rule's reading; writes every P(yes). Runs in localjudge's
own virtual environment.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from make_data import ethos_rows
from toxicity_threshold import GUARDS, cell, judged, unseen_rows, versus_half

from localjudge.quality.calibration import choose_threshold

FPR_MARGIN = 0.05  # (b): at most this share of ETHOS's non-hate comments flagged beyond 0.5


def flagged(labels: list[bool], scores: list[float], cut: float) -> int:
    """How many of the rows labelled not toxic are called toxic at `cut`."""
    return sum(1 for label, s in zip(labels, scores, strict=True) if not label and s >= cut)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", type=Path, required=True)
    parser.add_argument("--saved", type=Path, required=True, help="session 59's JSON")
    parser.add_argument("--trained-heldout", type=Path, required=True)
    parser.add_argument("--rows", type=Path, required=True, help="a folder for the rows drawn")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    fitting = unseen_rows(args.sources)
    check = {"ethos": ethos_rows(args.sources)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    scores = judged({**fitting, **check}, args.rows, args.trained_heldout)
    saved = json.loads(args.saved.read_text(encoding="utf-8"))["scores"]
    drift = {}
    for name in fitting:
        if saved[name]["labels"] != scores[name][0]:
            raise SystemExit(f"{name}: the rows drawn are not session 59's")
        drift[name] = max(
            abs(a - b) for a, b in zip(saved[name]["p_yes"], scores[name][1], strict=True)
        )
    labels = [x for name in fitting for x in scores[name][0]]
    values = [x for name in fitting for x in scores[name][1]]
    cap = flagged(labels, values, 0.5) / sum(not x for x in labels)
    fitted = choose_threshold(labels, values, max_fpr=cap)
    report: dict = {
        "largest_p_yes_change_since_saved": {k: round(v, 6) for k, v in drift.items()},
        "cap": round(cap, 4),
        "fitted": round(fitted, 4),
        "on": {},
    }
    print(f"P(yes) against session 59's, largest change: {drift}")
    print(f"cap (pooled false-positive rate at 0.5): {cap:.4f}; threshold: {fitted:.4f}")
    print("| set | BAcc at the threshold against at 0.5: difference | others flagged |")
    print("|---|---|---|")
    for name in [*fitting, *check, *GUARDS]:
        entry = versus_half(*scores[name], fitted)
        negatives = sum(not x for x in scores[name][0])
        entry["others"] = negatives
        entry["flagged_at_threshold"] = flagged(*scores[name], fitted)
        entry["flagged_at_half"] = flagged(*scores[name], 0.5)
        report["on"][name] = entry
        print(
            f"| {name} | {cell(entry)} | {entry['flagged_at_threshold']} against "
            f"{entry['flagged_at_half']} of {negatives} |"
        )
    on_check = report["on"]["ethos"]
    extra = (on_check["flagged_at_threshold"] - on_check["flagged_at_half"]) / on_check["others"]
    checks = {
        "not 0.5": round(fitted, 4) != 0.5,
        "a: not surely worse on ETHOS": on_check["difference"]["high"] >= 0,
        f"b: ETHOS's others flagged at most {FPR_MARGIN:.0%} more": extra <= FPR_MARGIN,
        "c: not surely worse on the guards": all(
            report["on"][name]["difference"]["high"] >= 0 for name in GUARDS
        ),
    }
    report["checks"] = checks
    report["surely_better_on_ethos"] = on_check["difference"]["low"] > 0
    report["rule_passes"] = all(checks.values())
    for name, held in checks.items():
        print(f"{'holds' if held else 'FAILS'}: {name}")
    print(f"surely better on ETHOS: {report['surely_better_on_ethos']}")
    print(f"the rule set before: {'passes' if report['rule_passes'] else 'fails'} ({fitted:.4f})")
    report["scores"] = {
        name: {"labels": found, "p_yes": values} for name, (found, values) in scores.items()
    }
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
