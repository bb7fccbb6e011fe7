"""`make bench-serve`: items/s of Mastra's own scorers with `localjudge serve` as their judge,
beside localjudge's in-process scorers on the same items, measured in one run.

Both ways run the hallucination scorer (claims extracted by the judge, a judge-written
reason) and the toxicity scorer (judge-written reason) on every item. Prints one JSON
object; the README's table comes from it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from localjudge import Judge, create_hallucination_scorer, create_toxicity_scorer, run_evals
from localjudge.bench.workloads import MULTI_ITEMS

REPO = Path(__file__).resolve().parents[2]
INTEROP = REPO / ".localjudge" / "interop"


def make_items(count: int) -> list[dict]:
    """Items with a context and an output of three of its claims (some unsupported)."""
    items = []
    for n in range(count):
        context, claims = MULTI_ITEMS[n % len(MULTI_ITEMS)]
        picked = [claims[(n + k) % len(claims)] for k in range(3)]
        items.append(
            {
                "id": f"item-{n}",
                "input": "Tell me about it.",
                "output": " ".join(picked),
                "context": context,
            }
        )
    return items


def in_process(items: list[dict], model: str | None, slots: int) -> tuple[float, dict]:
    with Judge.load(model, slots=slots) as judge:
        scorers = [
            create_hallucination_scorer(judge, extraction="judge", reason="judge"),
            create_toxicity_scorer(judge, reason="judge"),
        ]
        started = time.perf_counter()
        result = run_evals(items, scorers)
        seconds = time.perf_counter() - started
    errors = {r.item.id: r.errors for r in result.items if r.errors}
    return seconds, errors  # an error is an answer too (e.g. claims over their token budget)


def through_mastra(items: list[dict], model: str | None, slots: int, concurrency: int) -> float:
    node = shutil.which("node")
    if node is None or not (INTEROP / "node_modules").is_dir():
        raise SystemExit("needs node and `make interop-deps`")
    shutil.copy2(REPO / "tests" / "interop" / "mastra_scorers.mjs", INTEROP / "mastra_scorers.mjs")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [
        sys.executable,
        "-m",
        "localjudge",
        "serve",
        "--port",
        str(port),
        "--slots",
        str(slots),
    ]
    if model:
        command += ["--model", model]
    server = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                if httpx.get(base + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            json.dump(items, handle)
        started = time.perf_counter()
        done = subprocess.run(
            [node, "mastra_scorers.mjs", base + "/v1", handle.name, str(concurrency)],
            cwd=INTEROP,
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - started
        os.unlink(handle.name)
        if done.returncode != 0:
            raise SystemExit(f"Mastra's scorers failed:\n{done.stdout[-2000:]}")
        return seconds
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--slots", type=int, default=16)
    parser.add_argument("--model", default=None)
    args = parser.parse_args()
    items = make_items(args.items)
    mastra_s = through_mastra(items, args.model, args.slots, args.concurrency)
    local_s, local_errors = in_process(items, args.model, args.slots)
    print(
        json.dumps(
            {
                "items": len(items),
                "scorers": ["hallucination", "toxicity"],
                "mastra_on_serve": {
                    "seconds": round(mastra_s, 2),
                    "items_per_s": round(len(items) / mastra_s, 3),
                },
                "in_process": {
                    "seconds": round(local_s, 2),
                    "items_per_s": round(len(items) / local_s, 3),
                    "item_errors": local_errors,
                },
                "ratio_in_process_over_mastra": round(mastra_s / local_s, 2),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
