"""Mastra's OWN scorers (npm `@mastra/evals`, `@mastra/core`, `@ai-sdk/openai-compatible`)
with `localjudge serve` on the embedded model as their judge: every item returns a result.
`make interop-deps` installs the npm packages into .localjudge/interop (CI reaches npm)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.test_serve import start_server, stop

REPO = Path(__file__).resolve().parents[1]
INTEROP = REPO / ".localjudge" / "interop"

ITEMS = [
    {
        "id": f"item-{n}",
        "input": "When was the Eiffel Tower completed?",
        "output": f"The Eiffel Tower was completed in {1889 + n % 3}. It is about 330 metres tall.",
        "context": ["The Eiffel Tower was completed in 1889.", "It is about 330 metres tall."],
    }
    for n in range(4)  # 1889, 1890, 1891 and 1889 again: supported and hallucinated years
]


def require(condition: bool, message: str) -> None:
    if not condition:
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.mark.real
@pytest.mark.timeout(900)
def test_mastra_scorers_run_against_localjudge_serve(tmp_path):
    node = shutil.which("node")
    require(node is not None, "node is not installed (Node >= 20 runs Mastra's scorers)")
    require((INTEROP / "node_modules" / "@mastra" / "evals").is_dir(), "run `make interop-deps`")
    script = INTEROP / "mastra_scorers.mjs"  # beside its node_modules, where imports resolve
    shutil.copy2(REPO / "tests" / "interop" / "mastra_scorers.mjs", script)
    items = tmp_path / "items.json"
    items.write_text(json.dumps(ITEMS))
    process, base = start_server("--slots", "16", "--ctx", "16384")
    try:
        done = subprocess.run(
            [node, str(script), base + "/v1", str(items), "8"],
            cwd=INTEROP,
            capture_output=True,
            text=True,
            timeout=800,
        )
    finally:
        stop(process)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert len(lines) == 2 * len(ITEMS) and all(line["ok"] for line in lines)
    assert {line["scorer"] for line in lines} == {"hallucination", "toxicity"}
    assert all(0 <= line["score"] <= 1 for line in lines)
