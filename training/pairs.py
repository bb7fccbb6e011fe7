"""Minimal pairs, read as BUMP reads a faithfulness metric: in how many pairs (a summary and
an unfaithful edit of it, each against the same document) the judge gives the edit the
higher P(yes), ties counted half, from the per-row scores evaluate.py saves and the data
folder it judged (make_data.py's held-out sources, where each document comes with one "no"
row and one "yes" row). 0.5 is chance; the 95% interval is a bootstrap over pairs (1000
resamples, seed 0). Beside it, the task's word rules in the run's shape, and the share of
pairs where the judge's verdicts at 0.5 tell the two apart the right way round. With
`--by-kind`, also the judge's figures by the kind of edit (the unfaithful row's group, its
last part: `bump/edited/intrinsic-entity` is `intrinsic-entity`) and by its family (the kind
up to its first hyphen: `intrinsic`); with `--against RUN`, beside each kind's share, this
run's minus RUN's on the same pairs, with a paired 95% interval (the same resampled pairs).

    .venv/bin/python training/pairs.py training/results/bump/quality-merged-bump.json \
        --data training/data-bump [--by-kind [--against OTHER-RUN.json]]

Runs in localjudge's own virtual environment.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from localjudge.quality.intervals import RESAMPLES, SEED, Interval, interval
from localjudge.quality.labelled import baselines
from localjudge.quality.rows import read_rows

SET = "held-out sources"


class PairError(Exception):
    pass


def pairs_of(contexts: list[tuple[str, ...]], labels: list[bool]) -> list[tuple[int, int]]:
    """(faithful row, unfaithful row) per context; every context must hold exactly one of each."""
    found: dict[tuple[str, ...], dict[bool, list[int]]] = {}
    for i, (context, label) in enumerate(zip(contexts, labels, strict=True)):
        found.setdefault(context, {False: [], True: []})[label].append(i)
    out = []
    for sides in found.values():
        if len(sides[False]) != 1 or len(sides[True]) != 1:
            raise PairError(
                f"a document with {len(sides[False])} faithful and {len(sides[True])} "
                "unfaithful rows: pairs need one of each"
            )
        out.append((sides[False][0], sides[True][0]))
    return out


def ordered(scores: list[float], pairs: list[tuple[int, int]]) -> np.ndarray:
    """Per pair: 1 when the unfaithful row scores higher, 0.5 on a tie, 0 otherwise."""
    values = np.asarray(scores, dtype=float)
    faithful, unfaithful = (values[[p[k] for p in pairs]] for k in (0, 1))
    return (unfaithful > faithful) + 0.5 * (unfaithful == faithful)


def share(per_pair: np.ndarray) -> Interval:
    """The mean with its 95% bootstrap interval over pairs."""
    rng = np.random.default_rng(SEED)
    means = per_pair[rng.integers(0, per_pair.size, (RESAMPLES, per_pair.size))].mean(axis=1)
    return interval(per_pair.mean(), means)


def kinds(groups: list[str | None], pairs: list[tuple[int, int]]) -> dict[str, list[int]]:
    """The pairs (their places in `pairs`) of each kind of edit and of each family of kinds
    with more than one kind, families first, each in name order."""
    kind = [(groups[u] or "").rsplit("/", 1)[-1] for _, u in pairs]
    family: dict[str, list[int]] = {}
    by_kind: dict[str, list[int]] = {}
    for place, name in enumerate(kind):
        by_kind.setdefault(name, []).append(place)
        family.setdefault(name.split("-", 1)[0], []).append(place)
    wide = {
        f"{name} (all)": places
        for name, places in sorted(family.items())
        if len({kind[p] for p in places}) > 1
    }
    return wide | dict(sorted(by_kind.items()))


def kind_table(
    scores: list[float], groups: list[str | None], pairs, against: list[float] | None = None
) -> list[str]:
    """The judge by kind of edit: pairs, edits and their faithful sides flagged at 0.5, and
    the share of pairs with the edit above its faithful side; with `against` (another run's
    scores on the same rows), this share minus that run's, paired."""
    extra = " difference from the other run [95%] |" if against is not None else ""
    lines = [
        "| kind of edit | pairs | edits flagged at 0.5 | faithful sides flagged | "
        "edit above its faithful side [95%] |" + extra,
        "|---|---:|---:|---:|---:|" + ("---:|" if extra else ""),
    ]
    above = ordered(scores, pairs)
    other = None if against is None else ordered(against, pairs)
    for name, places in kinds(groups, pairs).items():
        mine = [pairs[p] for p in places]
        edits = sum(scores[u] >= 0.5 for _, u in mine)
        faithful = sum(scores[f] >= 0.5 for f, _ in mine)
        found = share(above[places])
        cells = [f"{found.value:.3f} [{found.low:.3f}, {found.high:.3f}]"]
        if other is not None:
            lead = share(above[places] - other[places])
            cells.append(f"{lead.value:+.3f} [{lead.low:+.3f}, {lead.high:+.3f}]")
        lines.append(
            f"| {name} | {len(mine)} | {edits} ({edits / len(mine):.0%}) | "
            f"{faithful} ({faithful / len(mine):.0%}) | " + " | ".join(cells) + " |"
        )
    return lines


def saved_entry(run: Path, task: str, rows) -> dict | None:
    """The tuned judge's held-out-sources entry of an evaluate.py output, when it judged
    exactly these rows."""
    entries = [
        e
        for e in json.loads(run.read_text())["sets"]
        if e["task"] == task and e["set"] == SET and e.get("way", "tuned") == "tuned"
    ]
    if len(entries) != 1 or entries[0]["labels"] != [r.label for r in rows]:
        return None
    return entries[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="an evaluate.py output")
    parser.add_argument("--data", type=Path, required=True, help="the folder it judged")
    parser.add_argument("--task", default="hallucination")
    parser.add_argument("--by-kind", action="store_true", help="also by kind of edit")
    parser.add_argument(
        "--against", type=Path, default=None, help="with --by-kind: another run on the same rows"
    )
    args = parser.parse_args(argv)
    if args.against is not None and not args.by_kind:
        parser.error("--against goes with --by-kind")
    rows, bad = read_rows(args.data / f"held-out-sources_{args.task}.jsonl", args.task)
    if bad:
        print(f"pairs: {len(bad)} unreadable rows in {args.data}", file=sys.stderr)
        return 2
    entry = saved_entry(args.run, args.task, rows)
    other = None if args.against is None else saved_entry(args.against, args.task, rows)
    for run, found in ((args.run, entry), (args.against, other)):
        if run is not None and found is None:
            print(f"pairs: {run} holds no {SET!r} set with these rows", file=sys.stderr)
            return 2
    try:
        pairs = pairs_of([tuple(r.context) for r in rows], [r.label for r in rows])
    except PairError as exc:
        print(f"pairs: {exc}", file=sys.stderr)
        return 2
    ways = [("judge, P(yes)", entry["scores"])]
    ways.append(("judge, verdicts at 0.5", [float(s >= 0.5) for s in entry["scores"]]))
    shape = entry.get("statements", False)
    ways += [(w.name, w.scores) for w in baselines(args.task, rows, statements=shape)[1:]]
    print(f"{len(pairs)} pairs; the unfaithful side above the faithful one (ties half):")
    print("| way | share [95%] |\n|---|---:|")
    for name, scores in ways:
        found = share(ordered(scores, pairs))
        print(f"| {name} | {found.value:.3f} [{found.low:.3f}, {found.high:.3f}] |")
    if args.by_kind:
        print("\nThe judge by kind of edit:")
        against = None if other is None else other["scores"]
        print("\n".join(kind_table(entry["scores"], [r.group for r in rows], pairs, against)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
