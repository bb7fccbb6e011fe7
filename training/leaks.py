"""Which judged texts a training set holds: every text, claim, input and context sentence of
40 characters or more from the sets a recipe is measured on (each `--judged` folder's
held-out files, ETHOS's whole CSV under `--sources`, and the built-in dev sets) that is a
training text, or (a text, claim or input) inside one, counted by the judged row's source
and field (each distinct text once), with the first example. Case and runs of whitespace
are ignored. A check made before training (training/RESULTS.md says what each recipe's
check printed).

    .venv/bin/python training/make_data.py --sources training/sources --out /tmp/allheld --hold-out begin,q2,ethos,ucc,conan,convabuse,summedits,bump --upto
    .venv/bin/python training/leaks.py --train training/data-AnTx --judged /tmp/allheld training/data-AnT --sources training/sources

Runs in localjudge's own virtual environment.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from localjudge.quality.labelled import devset_rows

sys.path.insert(0, str(Path(__file__).parent))
from make_data import SourceError, ethos_rows  # noqa: E402

MIN_CHARS = 40
JUDGED_FILES = ("held-out-sources_*.jsonl", "heldout_*.jsonl")

Text = tuple[str, str, str]  # (field, text, group)


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().lower())


def texts_of(path: Path) -> Iterator[Text]:
    """Every text of a rows file, by field: text, claim, input, and each context passage."""
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        group = row.get("group") or ""
        for field in ("text", "claim", "input"):
            if row.get(field):
                yield field, row[field], group
        for passage in row.get("context") or []:
            yield "context", passage, group


def judged_texts(folders: Iterable[Path], sources: Path | None) -> Iterator[Text]:
    for folder in folders:
        for pattern in JUDGED_FILES:
            for path in sorted(folder.glob(pattern)):
                yield from texts_of(path)
    if sources is not None:  # every comment, as make_data.py reads them; sha256 checked
        for row in ethos_rows(sources):
            yield "text", row["text"], "ethos/all"
    for task in ("toxicity", "hallucination"):
        for row in devset_rows(task):
            yield "text", row.text, f"dev/{task}"
            for passage in row.context:
                yield "context", passage, f"dev/{task}"


def leaks(train: Iterable[Text], judged: Iterable[Text]) -> dict[tuple[str, str], list[str]]:
    """(judged source, field) -> the judged texts found in training: a context passage only
    when it is a training text itself; a text, claim or input also inside one."""
    trained = {norm(text) for _, text, _ in train}
    blob = "\n".join(trained)
    found: dict[tuple[str, str], list[str]] = {}
    seen: set[tuple[str, str, str]] = set()
    for field, text, group in judged:
        key, source = norm(text), group.split("/", 1)[0]
        if len(key) < MIN_CHARS or (source, field, key) in seen:
            continue
        seen.add((source, field, key))
        if key in trained or (field != "context" and key in blob):
            found.setdefault((source, field), []).append(text)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=Path, required=True, help="a data folder (train_*.jsonl)")
    parser.add_argument("--judged", type=Path, nargs="+", required=True)
    parser.add_argument("--sources", type=Path, default=None, help="for ETHOS's whole CSV")
    args = parser.parse_args(argv)
    train = [t for path in sorted(args.train.glob("train_*.jsonl")) for t in texts_of(path)]
    if not train:
        raise SystemExit(f"leaks: no train_*.jsonl in {args.train}")
    try:
        found = leaks(train, judged_texts(args.judged, args.sources))
    except SourceError as exc:
        print(f"leaks: {exc}", file=sys.stderr)
        return 2
    for (source, field), texts in sorted(found.items()):
        print(f"{source}\t{field}\t{len(texts)}\t{texts[0][:80]!r}")
    if not found:
        print("no judged text of 40 characters or more is in training")
    return 0


if __name__ == "__main__":
    sys.exit(main())
