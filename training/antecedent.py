"""Does a statement that leaves its subject to the sentence before ("It should arrive on
Thursday.", "静岡県と山梨県にまたがっています。") pass when it is read with that sentence? The
scorers judge an output sentence by sentence, so such a statement reaches the judge without
what it is about. This measures one rule for it, offline, on labelled rows:

    plain       each statement (as the hallucination scorer cuts an output) against its 4
                best 96-token windows (BM25, all 4 judged, no cascade), its P(yes) the
                lowest; the row's score the largest over its statements, as `quality
                --statements` reads it
    antecedent  the same, except that a statement flagged alone (P(yes) >= 0.5) whose
                statement before it ends supported (under 0.5, after this rule) is judged
                again as the text from the start of that statement to its own end, against
                that text's own 4 best windows; when the judge clears the two together
                clearly (P(yes) <= CLEAR_P, a verdict given with at least 0.8 confidence),
                the statement takes that P(yes), else it keeps its own

Every flagged statement after the first is judged joined, whatever its predecessor's verdict,
so that one pass serves the rule's chain. A row with no statement to check scores 0. Each way
is written as an evaluate.py output (`--out DIR`: `quality-<way>.json`, one set per `--data`
folder, named by the folder, and one `pooled` set of them all), so that `spread.py --against`
pairs them row by row; every statement's values go to `antecedent-statements.json` (places
and P(yes) only, no text).

    .venv/bin/python training/antecedent.py --data training/data-bump-only training/data-q2 --out training/results/antecedent

Runs in localjudge's own virtual environment, on the judge users get unless `--model` or
`--adapter` says otherwise. A measurement for training/RESULTS.md; it changes no default.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from localjudge.judge import Judge
from localjudge.quality.labelled import statements_of
from localjudge.quality.rows import read_rows
from localjudge.scorers.evidence import DEFAULT_TOP_K

sys.path.insert(0, str(Path(__file__).parent))
from prior import FILE, TASK, run_entry, set_entry  # noqa: E402  (evaluate.py's output shape)
from windows import judge_windows  # noqa: E402

THRESHOLD = 0.5  # the shipped judge's hallucination threshold (it ships none: 0.5)
CLEAR_P = 0.2  # a joined reading counts when the judge clears it with 0.8 confidence


def spans(text: str, statements: list[str]) -> list[tuple[int, int]] | None:
    """Where each statement lies in `text`, in order; None when one is not found as it is."""
    out, at = [], 0
    for statement in statements:
        start = text.find(statement, at)
        if start < 0:
            return None
        out.append((start, start + len(statement)))
        at = start + len(statement)
    return out


def joined_texts(text: str, statements: list[str]) -> list[str | None]:
    """Per statement, the text from the start of the one before it to its own end (None for
    the first); the two joined by a space where `text` does not hold them as they are."""
    found = spans(text, statements)
    out: list[str | None] = [None] if statements else []
    for i in range(1, len(statements)):
        if found is None:
            out.append(f"{statements[i - 1]} {statements[i]}")
        else:
            out.append(text[found[i - 1][0] : found[i][1]])
    return out


def antecedent_scores(plain: list[float], joined: list[float | None]) -> list[float]:
    """Each statement's P(yes) after the rule (module docstring), in order."""
    out: list[float] = []
    for i, p in enumerate(plain):
        q = joined[i]
        if i and p >= THRESHOLD and out[i - 1] < THRESHOLD and q is not None and q <= CLEAR_P:
            out.append(q)
        else:
            out.append(p)
    return out


def lowest_p_yes(judge, rows: list, texts: list[str]) -> list[float]:
    """Each text against its row's context in its 4 best windows (the judge's size): the
    lowest P(yes). A failed prompt stops the run: no row is scored without its verdict."""
    mine = [replace(row, text=text) for row, text in zip(rows, texts, strict=True)]
    judged = judge_windows(judge, mine, judge.window_tokens, ks=(DEFAULT_TOP_K,))
    failed = next((j["error"] for j in judged if "error" in j), None)
    if failed is not None:
        raise SystemExit(f"antecedent: a prompt failed: {failed}")
    return [min(j["p"]) for j in judged]


def judge_rows(judge, rows: list, chunk: int = 16) -> list[dict]:
    """Per row, each statement's `plain` P(yes) and, for a flagged one after the first, its
    `joined` P(yes) (None where not judged joined)."""
    out: list[dict] = []
    for start in range(0, len(rows), chunk):
        part = rows[start : start + chunk]
        said = [statements_of(row.text, TASK) for row in part]
        owners = [n for n, mine in enumerate(said) for _ in mine]
        texts = [s for mine in said for s in mine]
        plain = lowest_p_yes(judge, [part[n] for n in owners], texts)
        per_row: list[list[float]] = [[] for _ in part]
        for n, p in zip(owners, plain, strict=True):
            per_row[n].append(p)
        wanted = []  # (row in part, statement, joined text)
        for n, (row, mine) in enumerate(zip(part, said, strict=True)):
            for i, text in enumerate(joined_texts(row.text, mine)):
                if text is not None and per_row[n][i] >= THRESHOLD:
                    wanted.append((n, i, text))
        joined = lowest_p_yes(judge, [part[n] for n, _, _ in wanted], [t for *_, t in wanted])
        per_row_joined: list[list[float | None]] = [[None] * len(p) for p in per_row]
        for (n, i, _), q in zip(wanted, joined, strict=True):
            per_row_joined[n][i] = q
        out += [{"plain": p, "joined": q} for p, q in zip(per_row, per_row_joined, strict=True)]
        print(f"antecedent: {min(start + chunk, len(rows))}/{len(rows)} rows", file=sys.stderr)
    return out


def row_scores(record: dict) -> dict[str, float]:
    """The row's score each way: the largest over its statements, 0 with none."""
    plain = record["plain"]
    after = antecedent_scores(plain, record["joined"])
    return {"plain": max(plain, default=0.0), "antecedent": max(after, default=0.0)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, nargs="+", required=True,
                        help=f"folders, each holding {FILE}")  # fmt: skip
    parser.add_argument("--model", default=None, help="registry name (default: the default)")
    parser.add_argument("--adapter", type=Path, default=None, help="a GGUF LoRA on --model")
    parser.add_argument("--out", type=Path, required=True, help="a folder for the outputs")
    args = parser.parse_args(argv)
    folders = {}
    for folder in args.data:
        rows, bad = read_rows(folder / FILE, TASK)
        if bad:
            raise SystemExit(f"antecedent: {len(bad)} unreadable rows in {folder}: {bad[0]}")
        folders[folder.name] = rows
    model = args.model or ("gemma-3-270m" if args.adapter else None)
    started = time.perf_counter()
    records: dict[str, list[dict]] = {}
    with Judge.load(model, adapter=args.adapter) as judge:
        judge_name = judge.name
        for name, rows in folders.items():
            records[name] = judge_rows(judge, rows)
    seconds = round(time.perf_counter() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    for way in ("plain", "antecedent"):
        sets, pooled_rows, pooled_scores = [], [], []
        for name, rows in folders.items():
            scores = [row_scores(r)[way] for r in records[name]]
            sets.append(set_entry(judge_name, rows, scores, name))
            pooled_rows += rows
            pooled_scores += scores
        sets.append(set_entry(judge_name, pooled_rows, pooled_scores, "pooled"))
        output = run_entry(judge_name, sets)
        (args.out / f"quality-{way}.json").write_text(json.dumps(output) + "\n")
    record = {"model": judge_name, "seconds": seconds, "statements": records}
    (args.out / "antecedent-statements.json").write_text(json.dumps(record) + "\n")
    print(
        f"antecedent: {sum(map(len, folders.values()))} rows in {seconds} s; outputs in {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
