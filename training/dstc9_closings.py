"""DSTC9's rated system replies that close with a question, the question kept: the case the
hallucination scorer's `extraction="sentence-claims"` was written for (RESULTS.md, "The case
the claim rule was written for"). Built as `make_data.py` builds DSTC9's rows (the same
ratings, pooling and thresholds), then up to 100 accurate and 100 inaccurate replies drawn
with make_data's seed, written as `localjudge quality` rows.

    .venv/bin/python training/dstc9_closings.py --sources training/sources \
        --out training/data-dstc9-closings/held-out-sources_hallucination.jsonl

Runs in localjudge's own virtual environment.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from make_data import SEED, dstc9_from, quality_row, recorded_hashes, source_path

PER_LABEL = 100


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    hashes = recorded_hashes()
    path = lambda name: source_path(args.sources, name, hashes)  # noqa: E731
    examples = dstc9_from(path, keep_closing=True)
    closing = [e for e in examples if e.text.rstrip().endswith("?")]
    rng = random.Random(f"{SEED}:dstc9-closings")
    rows = []
    for kind in ("accurate", "inaccurate"):
        found = sorted((e for e in closing if e.source == f"dstc9/{kind}"), key=lambda e: e.text)
        rng.shuffle(found)
        rows += [quality_row(e) for e in found[:PER_LABEL]]
        print(
            f"dstc9/{kind}: {len(found)} replies close with a question; {len(found[:PER_LABEL])} kept"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
