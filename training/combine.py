"""Does the judge's P(yes), combined with how many of a text's words its context lacks,
carry to a source neither was fitted on? A two-feature logistic regression (the logit of the
judge's P(yes) for the row; the largest share of a statement's words missing from the
context, statement by statement) fitted by maximum likelihood on a run's held-out split of
its trained sources, then applied at 0.5, unchanged, to its held-out sources. Prints the
weights and, for both sets, the combination beside the judge alone and the word rules with
95% intervals (localjudge's stratified bootstrap), paired on the same rows.

    .venv/bin/python training/combine.py training/results/recipe6/quality-J-e2-statements.json \
        --data training/data-J

`--data`: the folder the run was evaluated on (make_data.py regenerates it); its rows must
carry the saved labels in the saved order. `--likelihood FIT SOURCES`: the second feature is
instead the base model's likelihood score (likelihood.py's outputs on the run's held-out
split and on the held-out sources, the way FIT chose). `--sources RUN DATA`: the held-out
sources are another evaluate.py output of the same judge (other rows), with its folder.
Hallucination only (the features are about a context). Runs in localjudge's own virtual
environment.

    .venv/bin/python training/combine.py training/results/recipe9/quality-M-e2-statements.json \
        --data training/data-M --likelihood training/results/likelihood/fit-M.json \
        training/results/likelihood/summedits.json \
        --sources training/results/summedits/quality-M-e2-statements.json training/data-S-only
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from localjudge.quality.intervals import intervals
from localjudge.quality.labelled import Row, baselines
from localjudge.quality.rows import read_rows
from localjudge.scorers.baselines import word_share
from localjudge.scorers.text import split_statements

TASK = "hallucination"
FILES = {"held-out": "heldout", "held-out sources": "held-out-sources"}


def missing_share(row: Row) -> float:
    """The largest share of one statement's words that its context does not hold (the
    word-overlap rule's share, graded), every sentence a statement as when these results were
    measured (the scorers now leave out questions and courtesies)."""
    shares = [word_share(s, row.context) for s in (split_statements(row.text) or [row.text])]
    return max((1 - share for share in shares if share is not None), default=0.0)


def features(scores: list[float], second: list[float]) -> np.ndarray:
    p = np.clip(np.asarray(scores, dtype=float), 1e-4, 1 - 1e-4)
    return np.column_stack([np.ones(len(p)), np.log(p / (1 - p)), second])


def likelihood_scores(path: Path, entry: dict) -> list[float]:
    """A likelihood.py output's row scores, in the way its fit chose, for these rows."""
    saved_run = json.loads(path.read_text())
    rows = saved_run["rows"]
    if [r["label"] for r in rows] != entry["labels"]:
        raise SystemExit(f"{path}: not the run's rows (labels differ)")
    return [r[saved_run["summary"].get("way") or "mean"] for r in rows]


def fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Maximum-likelihood logistic regression weights (Newton's method)."""
    w = np.zeros(x.shape[1])
    for _ in range(100):
        p = 1 / (1 + np.exp(-x @ w))
        hessian = x.T @ (x * (p * (1 - p))[:, None]) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hessian, x.T @ (y - p))
        w += step
        if np.abs(step).max() < 1e-8:
            break
    return w


def saved(path: Path, name: str) -> dict:
    for entry in json.loads(path.read_text())["sets"]:
        if entry.get("way", "tuned") == "tuned" and (entry["task"], entry["set"]) == (TASK, name):
            return entry
    raise SystemExit(f"{path}: no {TASK} set named {name!r}")


def rows_for(data: Path, name: str, entry: dict) -> list[Row]:
    rows, _ = read_rows(data / f"{FILES[name]}_{TASK}.jsonl", TASK)
    if [r.label for r in rows] != entry["labels"]:
        raise SystemExit(f"{data}: the {name} rows are not the run's (regenerate them)")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="an evaluate.py output")
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--likelihood", type=Path, nargs=2, metavar=("FIT", "SOURCES"))
    parser.add_argument("--sources", nargs=2, metavar=("RUN", "DATA"))
    args = parser.parse_args(argv)
    where = {"held-out": (args.run, args.data), "held-out sources": (args.run, args.data)}
    if args.sources:
        where["held-out sources"] = (Path(args.sources[0]), Path(args.sources[1]))
    second_name = "likelihood" if args.likelihood else "missing share"
    likelihood = dict(zip(FILES, args.likelihood, strict=True)) if args.likelihood else {}

    def second(name: str, entry: dict, rows: list[Row]) -> list[float]:
        if likelihood:
            return likelihood_scores(likelihood[name], entry)
        return [missing_share(r) for r in rows]

    train = saved(args.run, "held-out")
    train_rows = rows_for(args.data, "held-out", train)
    x = features(train["scores"], second("held-out", train, train_rows))
    w = fit(x, np.asarray(train["labels"], dtype=float))
    print(f"{args.run.name}: weights (bias, logit P(yes), {second_name}) = {np.round(w, 3)}")
    print("| set | rows | way | BAcc at 0.5 | AUROC | combination minus it, BAcc |")
    print("|---|---:|---|---:|---:|---:|")
    for name in FILES:
        run, data = where[name]
        entry = saved(run, name)
        rows = rows_for(data, name, entry)
        combined = 1 / (1 + np.exp(-features(entry["scores"], second(name, entry, rows)) @ w))
        ways = [("combination", list(combined), list(combined >= 0.5))]
        ways.append(("judge", entry["scores"], [s >= 0.5 for s in entry["scores"]]))
        shape = entry.get("statements", False)
        ways += [
            (b.name, b.scores, b.predictions) for b in baselines(TASK, rows, statements=shape)[1:]
        ]
        found = intervals(entry["labels"], ways)
        for way, i in found.ways.items():
            lead = found.differences.get(way)
            print(
                f"| {name} | {len(rows)} | {way} | {i.balanced_accuracy:.3f} | "
                f"{i.auroc.value:.3f} | {lead_text(lead)} |"
            )
    return 0


def lead_text(lead) -> str:
    """The combination's lead over a way, in BAcc and in AUROC (point values)."""
    if lead is None:
        return ""
    return f"{lead.balanced_accuracy:+.3f} / AUROC {lead.auroc:+.3f}"


if __name__ == "__main__":
    raise SystemExit(main())
