import json
from localjudge.judge import Judge
from localjudge.prompts import claim_verdict_prompt
items = [json.loads(l) for l in open("/work/main/examples/sample.jsonl")]
with Judge.load(slots=1, max_prefixes=1, n_ctx=4096) as j:
    out = []
    for it in items:
        ctx = it.get("context") or []
        for sent in [s for s in it["output"].split(". ") if s][:2]:
            req = j.prompt_request(claim_verdict_prompt(ctx, sent), "hallucination_verdict", 64)
            (r,) = j.generate_many([req])
            ch = r.choices[0]
            out.append((it["id"], r.text[:40], round(ch.probabilities["yes"], 6), r.counts.forced))
for o in out: print(o)
