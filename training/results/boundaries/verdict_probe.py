"""The embedded judge's verdicts on the sample's claims, one request at a time (no batch
shapes to vary): text, P(yes) and forced-token count per request. Run from the repository
root with the code to compare on PYTHONPATH; RESULTS.md compares two commits' output.

    .venv/bin/python training/results/boundaries/verdict_probe.py > after.txt
"""

import json
from pathlib import Path

from localjudge.judge import Judge
from localjudge.prompts import claim_verdict_prompt

with Path("examples/sample.jsonl").open() as lines:
    items = [json.loads(line) for line in lines]
with Judge.load(slots=1, max_prefixes=1, n_ctx=4096) as judge:
    out = []
    for item in items:
        context = item.get("context") or []
        for sentence in [s for s in item["output"].split(". ") if s][:2]:
            parts = claim_verdict_prompt(context, sentence)
            (result,) = judge.generate_many(
                [judge.prompt_request(parts, "hallucination_verdict", 64)]
            )
            yes = round(result.choices[0].probabilities["yes"], 6)
            out.append((item["id"], result.text[:40], yes, result.counts.forced))
for row in out:
    print(row)
