"""Whether a toxicity threshold fitted on sources the shipped judge never saw carries from
one to the other (RESULTS.md, "A toxicity threshold for the shipped judge").

    .venv/bin/python training/toxicity_threshold.py --sources training/sources \
        --trained-heldout training/data-CA/heldout_toxicity.jsonl \
        --rows training/data-threshold --out training/results/convabuse/toxicity-threshold.json

Rows: Stormfront's sentences (120 hate, 120 other) and ConvAbuse's train split (100 abusive,
100 other), each drawn with make_data's seed. The default judge gives every row's P(yes).
Each source's best threshold (`calibrate`'s rule) is applied to the other and compared with
0.5 on the same rows (paired balanced-accuracy difference, 95% interval); the threshold
fitted on both pooled is compared with 0.5 on the held-out rows of the sources the judge
trained on and on the built-in toxicity dev set. Prints the rule's reading; writes every
P(yes). Runs in localjudge's own virtual environment.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from make_data import (
    CONVABUSE_SPLITS,
    SEED,
    convabuse,
    quality_row,
    recorded_hashes,
    source_path,
    stormfront,
)

from localjudge.judge import Judge
from localjudge.quality.calibration import choose_threshold
from localjudge.quality.intervals import intervals
from localjudge.quality.labelled import devset_rows, judge_rows
from localjudge.quality.rows import read_rows

DRAWS = {
    "stormfront": {"stormfront/hate": 120, "stormfront/no-hate": 120},
    "convabuse-train": {"convabuse/train/abusive": 100, "convabuse/train/not-abusive": 100},
}


def drawn(examples, counts: dict[str, int], name: str) -> list[dict]:
    rng = random.Random(f"{SEED}:threshold:{name}")
    rows = []
    for source, n in counts.items():
        found = sorted((e for e in examples if e.source == source), key=lambda e: e.text)
        rng.shuffle(found)
        rows += [quality_row(e) for e in found[:n]]
    return rows


def versus_half(labels: list[bool], scores: list[float], cut: float) -> dict:
    """Balanced accuracy at `cut` and at 0.5 on these rows, and the paired difference."""
    found = intervals(
        labels,
        [
            ("cut", scores, [s >= cut for s in scores]),
            ("half", scores, [s >= 0.5 for s in scores]),
        ],
    )
    return {
        "threshold": round(cut, 4),
        "at_threshold": found.ways["cut"].balanced_accuracy.to_dict(),
        "at_half": found.ways["half"].balanced_accuracy.to_dict(),
        "difference": found.differences["half"].balanced_accuracy.to_dict(),
    }


def cell(entry: dict) -> str:
    d = entry["difference"]
    return (
        f"{entry['at_threshold']['value']:.3f} against {entry['at_half']['value']:.3f} "
        f"({entry['threshold']:.3f}): {d['value']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"
    )


GUARDS = ("held-out rows of the trained sources", "built-in dev set")


def unseen_rows(sources: Path) -> dict[str, list[dict]]:
    """Session 59's rows of the two toxicity sources the shipped judge never saw, as
    `localjudge quality` rows: Stormfront's sentences and ConvAbuse's train split."""
    hashes = recorded_hashes()
    path = lambda name: source_path(sources, name, hashes)  # noqa: E731
    return {
        "stormfront": drawn(
            stormfront(path("stormfront_labels"), path("stormfront_sentences")),
            DRAWS["stormfront"],
            "stormfront",
        ),
        "convabuse-train": drawn(
            convabuse({s: path(f"convabuse_{s}") for s in CONVABUSE_SPLITS}),
            DRAWS["convabuse-train"],
            "convabuse-train",
        ),
    }


def jsonl(rows: list[dict]) -> str:
    """Rows as `judged` writes them to `--rows`, one JSON object a line."""
    return "".join(json.dumps(r) + "\n" for r in rows)


def judged(
    records: dict[str, list[dict]], rows_dir: Path, trained_heldout: Path
) -> dict[str, tuple[list[bool], list[float]]]:
    """Each set's labels and the default judge's P(yes) (`--no-reasons` shape): the sets
    given, written to `rows_dir` and read back as `localjudge quality` reads them, then
    the GUARDS (the held-out rows of the sources the judge trained on, the built-in
    toxicity dev set)."""
    rows_dir.mkdir(parents=True, exist_ok=True)
    sets = {}
    for name, found in records.items():
        written = rows_dir / f"{name}.jsonl"
        written.write_text(jsonl(found), encoding="utf-8")
        sets[name] = read_rows(written, "toxicity")[0]
    sets[GUARDS[0]] = read_rows(trained_heldout, "toxicity")[0]
    sets[GUARDS[1]] = devset_rows("toxicity")
    scores = {}
    with Judge.load() as judge:
        for name, rows in sets.items():
            verdicts = judge_rows(judge, rows, "toxicity", reasons=False)
            scores[name] = ([r.label for r in rows], [v.p_yes for v in verdicts])
    return scores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", type=Path, required=True)
    parser.add_argument("--trained-heldout", type=Path, required=True)
    parser.add_argument("--rows", type=Path, required=True, help="a folder for the rows drawn")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    unseen = unseen_rows(args.sources)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    scores = judged(unseen, args.rows, args.trained_heldout)
    fitted = {name: choose_threshold(*scores[name]) for name in unseen}
    report: dict = {"fitted": {k: round(v, 4) for k, v in fitted.items()}, "cross": {}}
    print("| fitted on | applied to | BAcc at that threshold against at 0.5: difference |")
    print("|---|---|---|")
    for name in unseen:
        other = next(o for o in unseen if o != name)
        entry = versus_half(*scores[other], fitted[name])
        report["cross"][f"{name} -> {other}"] = entry
        print(f"| {name} | {other} | {cell(entry)} |")
    pooled_labels = [x for name in unseen for x in scores[name][0]]
    pooled_scores = [x for name in unseen for x in scores[name][1]]
    pooled = choose_threshold(pooled_labels, pooled_scores)
    report["pooled"] = round(pooled, 4)
    report["guards"] = {}
    for name in GUARDS:
        entry = versus_half(*scores[name], pooled)
        report["guards"][name] = entry
        print(f"| both pooled | {name} | {cell(entry)} |")
    cross = [e["difference"] for e in report["cross"].values()]
    checks = {
        "a: neither cross-applied threshold surely worse": all(d["high"] >= 0 for d in cross),
        "b: one surely better": any(d["low"] > 0 for d in cross),
        "c: pooled not surely worse on the guards": all(
            e["difference"]["high"] >= 0 for e in report["guards"].values()
        ),
    }
    report["checks"] = checks
    report["rule_passes"] = all(checks.values())  # what shipped is RESULTS.md's to say
    for check, held in checks.items():
        print(f"{'holds' if held else 'FAILS'}: {check}")
    print(f"the rule set before: {'passes' if report['rule_passes'] else 'fails'} ({pooled:.4f})")
    report["scores"] = {
        name: {"labels": labels, "p_yes": values} for name, (labels, values) in scores.items()
    }
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
