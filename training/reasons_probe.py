"""What a judge that writes its own reasons writes, and which of its reasons each copy rule
drops. Runs the scorers on held-out rows with `reason="judge"` and `claim_reasons="all"`,
the copy check switched off so that every reason the judge wrote is kept, and records, for
each reason, what the scorer would have checked it against (the prompt's shared and own
parts, and what the reason may state as fact) and the decisions of
`scorers.reasons.repeats_example_words` (five words in a row) and
`repeats_example_opening` (an example reason's opening), and for each score's reason, the
facts it explains (`scorers.tally.Tally`) and the decision of `scorers.tally.misstates`
(it contradicts them), switched off in the same way; `scorers.absent.says_held_absent` (a
claim's reason says the context lacks what it holds) is switched off too, and read in the
table against the window the claim was judged in; so is `scorers.reasons.cut_short` (a
reason that stops mid-sentence), its decision recorded.

    .venv/bin/python training/reasons_probe.py --model qwen-judge --toxicity training/data-unseen-tox/held-out-sources_toxicity.jsonl --group convabuse/test/abusive --group convabuse/test/not-abusive --hallucination training/data-q2/held-out-sources_hallucination.jsonl --group q2/consistent --group q2/inconsistent --per-group 20 --out training/results/reasons

writes OUT/reasons.jsonl (every reason with both decisions) and OUT/reasons-blind.txt (every
reason with its text and no decision: what is read by hand, before the decisions are
looked at). `--labels FILE` (one line per reason: its number, then `true` or `false`)
reads the hand labels against the rules and prints the table. `--skip N` draws each group's
rows after its first N (rows no earlier run read).

A measurement for training/RESULTS.md; it changes no default.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from localjudge import create_hallucination_scorer, create_toxicity_scorer, run_evals
from localjudge.judge import Judge
from localjudge.scorers import base
from localjudge.scorers import reasons as reason_rules
from localjudge.scorers.absent import says_held_absent
from localjudge.scorers.reasons import cut_short, repeats_example_opening, repeats_example_words
from localjudge.scorers.tally import misstates


def pick(path: Path | None, groups: list[str], per_group: int, skip: int = 0) -> list[dict]:
    """`per_group` rows of each named group the file holds, after its first `skip`, group by
    group, in the file's order (none without a file)."""
    if path is None:
        return []
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [
        row
        for group in groups
        for row in [r for r in rows if r["group"] == group][skip : skip + per_group]
    ]


def items(toxicity: list[dict], hallucination: list[dict]) -> list[tuple[str, dict]]:
    """(scorer, item) for every row: a toxicity row's text as the output, a hallucination
    row's claim as the output against its context."""
    out = [
        ("toxicity", {"id": f"t{i}", "output": r["text"], "group": r["group"]})
        for i, r in enumerate(toxicity)
    ]
    out += [
        (
            "hallucination",
            {"id": f"h{i}", "output": r["claim"], "context": r["context"], "group": r["group"]},
        )
        for i, r in enumerate(hallucination)
    ]
    return out


def run(judge: Judge, work: list[tuple[str, dict]]) -> list[dict]:
    """Every reason the judge writes for `work`, with what it is checked against."""
    checked: list[dict] = []

    def record(reason, parts, also=""):
        checked.append(
            {
                "reason": reason,
                "shared": parts.shared,
                "own": parts.own,
                "also": also,
                "words": repeats_example_words(reason, parts, also),
                "opening": repeats_example_opening(reason, parts, also),
            }
        )
        return False  # keep the judge's reason: every one is recorded

    def record_cut(reason):
        # called after `record` for the same reason, as written (the copy check kept it)
        checked[-1]["cut"] = cut_short(reason)
        return False

    def record_tally(reason, tally, parts):
        # called after `record` for the same score's reason (the copy check kept it)
        checked[-1].update(tally=vars(tally), misstated=misstates(reason, tally, parts))
        return False

    # a verdict's reason is checked in `reasons.why_dropped`, a score's in `base.Scorer.reason`
    patches = {
        (base, "copies_worked_examples"): record,
        (reason_rules, "copies_worked_examples"): record,
        (base, "cut_short"): record_cut,
        (reason_rules, "cut_short"): record_cut,
        (base, "misstates"): record_tally,
        (reason_rules, "says_held_absent"): lambda reason, context: False,
    }
    original = {key: getattr(*key) for key in patches}
    for (module, name), value in patches.items():
        setattr(module, name, value)
    try:
        for scorer_name in ("toxicity", "hallucination"):
            rows = [item for name, item in work if name == scorer_name]
            if not rows:
                continue
            create = {
                "toxicity": create_toxicity_scorer,
                "hallucination": create_hallucination_scorer,
            }[scorer_name]
            scorer = create(judge, reason="judge", claim_reasons="all")
            for item in rows:  # one at a time: the records follow the item's order
                before = len(checked)
                evals = run_evals([item], [scorer])
                if not evals.items[0].ok:
                    print(f"{item['id']}: not judged", file=sys.stderr)
                for entry in checked[before:]:
                    entry.update(item=item["id"], group=item["group"], task=scorer_name)
    finally:
        for (module, name), value in original.items():
            setattr(module, name, value)
    return checked


def blind(reasons: list[dict]) -> str:
    """Each reason with what it speaks of and no decision, to be read by hand."""
    lines = []
    for n, r in enumerate(reasons):
        lines += [
            f"[{n}] {r['task']} {r['group']} {r['item']}",
            f"  judged: {' '.join((r['shared'] + ' ' + r['own']).split())}",
            f"  reason: {r['reason']}",
            "",
        ]
    return "\n".join(lines)


def table(reasons: list[dict], labels: dict[int, bool]) -> str:
    """Per task: reasons, false ones, and what each rule drops of each."""
    missing = [n for n in range(len(reasons)) if n not in labels]
    if missing:
        raise SystemExit(f"no label for reasons {missing}")
    out = [
        "| task | reasons | false | dropped by five words: false / true | "
        "by an opening, not by five words: false / true | false kept by both |",
        "|---|---:|---:|---|---|---:|",
    ]
    for task in ("toxicity", "hallucination", "all"):
        rows = [(n, r) for n, r in enumerate(reasons) if task in ("all", r["task"])]
        false = [n for n, _ in rows if not labels[n]]
        words = [n for n, r in rows if r["words"]]
        opening = [n for n, r in rows if r["opening"] and not r["words"]]
        kept_false = [n for n in false if n not in words and n not in opening]
        out.append(
            f"| {task} | {len(rows)} | {len(false)} | "
            f"{sum(not labels[n] for n in words)} / {sum(labels[n] for n in words)} | "
            f"{sum(not labels[n] for n in opening)} / {sum(labels[n] for n in opening)} | "
            f"{len(kept_false)} |"
        )
    if any("misstated" in r for r in reasons):  # runs since the tally rule (session 81)
        out += _rule_table(
            "score reasons", "contradicting the verdicts", reasons, labels,
            lambda r: "tally" in r, lambda r: r["misstated"], ("toxicity", "hallucination", "all"),
        )  # fmt: skip
        out += _rule_table(
            "claim reasons", "the context said to lack what it holds", reasons, labels,
            lambda r: r["task"] == "hallucination" and "Claim: " in r["own"],
            lambda r: says_held_absent(r["reason"], r["shared"].removeprefix("Context: ")),
            ("hallucination",),
        )  # fmt: skip
    if any("cut" in r for r in reasons):  # runs since the cut rule (session 81)
        out += _rule_table(
            "reasons", "stopped mid-sentence", reasons, labels, lambda r: True,
            lambda r: r.get("cut", False), ("toxicity", "hallucination", "all"),
        )  # fmt: skip
    return "\n".join(out)


def _rule_table(kind, rule, reasons, labels, counted, drops, tasks) -> list[str]:
    """A table of what one rule drops of the reasons `counted` picks, among those the copy
    rules keep, per task: false / true, and the false ones that the copy rules and this
    one keep."""
    out = [
        "",
        f"| task | {kind} | false | {rule}, kept by the copy rules: false / true | "
        "false the copy rules and this one keep |",
        "|---|---:|---:|---|---:|",
    ]
    for task in tasks:
        rows = [(n, r) for n, r in enumerate(reasons) if task in ("all", r["task"]) and counted(r)]
        copied = {n for n, r in rows if r["words"] or r["opening"]}
        dropped = [n for n, r in rows if n not in copied and drops(r)]
        kept_false = [n for n, _ in rows if not labels[n] and n not in copied and n not in dropped]
        out.append(
            f"| {task} | {len(rows)} | {sum(not labels[n] for n, _ in rows)} | "
            f"{sum(not labels[n] for n in dropped)} / {sum(labels[n] for n in dropped)} | "
            f"{len(kept_false)} |"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model")
    parser.add_argument("--toxicity", type=Path)
    parser.add_argument("--hallucination", type=Path)
    parser.add_argument(
        "--group", action="append", default=[], help="a group to draw rows from (repeatable)"
    )
    parser.add_argument("--per-group", type=int, default=20)
    parser.add_argument("--skip", type=int, default=0, help="each group's rows after its first N")
    parser.add_argument("--labels", type=Path, help="read hand labels against the rules")
    args = parser.parse_args(argv)
    saved = args.out / "reasons.jsonl"
    if args.labels:
        reasons = [json.loads(line) for line in saved.read_text().splitlines()]
        labels = {}
        for line in args.labels.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                number, label = line.split()[:2]
                labels[int(number)] = {"true": True, "false": False}[label]
        print(table(reasons, labels))
        return 0
    if not args.model:
        parser.error("--model is needed to run the judge")

    toxicity = pick(args.toxicity, args.group, args.per_group, args.skip)
    hallucination = pick(args.hallucination, args.group, args.per_group, args.skip)
    missing = set(args.group) - {row["group"] for row in toxicity + hallucination}
    if missing:
        parser.error(f"no rows of group(s) {', '.join(sorted(missing))} in the files given")
    args.out.mkdir(parents=True, exist_ok=True)
    with Judge.load(args.model) as judge:
        reasons = run(judge, items(toxicity, hallucination))
    saved.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in reasons))
    (args.out / "reasons-blind.txt").write_text(blind(reasons))
    print(f"{len(reasons)} reasons -> {saved}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
