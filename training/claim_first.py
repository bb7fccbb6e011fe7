"""Does the judge read its evidence better when it knows the claim first? The hallucination
prompt gives the context (an evidence window), then the claim, then the answer cue, so the
window's tokens are read before the claim is known. This runs `evaluate.py` or
`make_data.py` unchanged except for one line: the claim is written once more before the
context,

    Claim: <claim>          <- added here
    Context: <window>
    Claim: <claim>
    Answer:

so that the window is read with the claim in view, while the prompt still ends as the
scorer's does. Toxicity prompts have no context and are not touched.

    .venv/bin/python training/claim_first.py evaluate --model gemma-3-270m-judge --no-base \
        --no-dev --statements --data training/data-q2 --out training/results/claim-first/q2.json
    .venv/bin/python training/claim_first.py make_data --sources training/sources \
        --out training/data-AnF --hold-out begin ...

Every option after the script's name is that script's (no name: evaluate). A measurement for
training/RESULTS.md; it changes no default.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import localjudge.scorers.hallucination as hallucination
from localjudge.prompts import PromptParts, claim_verdict_prompt

sys.path.insert(0, str(Path(__file__).resolve().parent))
import evaluate  # noqa: E402  (training/evaluate.py, beside this file)
import make_data  # noqa: E402

SCRIPTS = {"evaluate": evaluate.main, "make_data": make_data.main}


def claim_first_prompt(context: list[str], claim: str) -> PromptParts:
    """The scorer's prompt with the claim also written before the context."""
    parts = claim_verdict_prompt(context, claim)
    return replace(parts, shared=f"Claim: {' '.join(claim.split())}\n{parts.shared}")


def main(argv: list[str]) -> int:
    """Run the script `argv` names first (evaluate when it names none) with the rest."""
    named = bool(argv) and argv[0] in SCRIPTS
    hallucination.claim_verdict_prompt = claim_first_prompt
    return SCRIPTS[argv[0] if named else "evaluate"](argv[1:] if named else argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
