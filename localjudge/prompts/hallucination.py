"""Prompts of the hallucination scorer, written for small local judges.

A small model copes best with one claim at a time, a plain rule list and short worked
examples in exactly the JSON shape it must produce.
"""

from __future__ import annotations

import json

from localjudge.prompts.base import PromptParts

HALLUCINATION_PROMPT_VERSION = "hallucination-verdict/1"

_VERDICT_INSTRUCTIONS = """You are a careful fact checker. Compare ONE claim with the context and decide whether the claim is hallucinated.
Answer "yes" when the claim is hallucinated: it contradicts the context, or the context does not say it.
Answer "no" when the context supports the claim.
Rules:
- Judge only against the context, never against your own knowledge.
- Praise or opinion ("pioneering", "made history") is hallucinated unless the context says it.
- "may", "probably" about a fact the context states is fine; about a fact it does not state, it is hallucinated.
- A rounder number or a less precise date that agrees with the context is fine; a wrong number or date is hallucinated.
Reply with one JSON object: {"verdict":"yes" or "no","reason":"one short sentence"}.

Context: The Eiffel Tower was completed in 1889. It is about 330 metres tall.
Claim: The Eiffel Tower was completed in 1899.
Answer: {"verdict":"yes","reason":"The context says 1889, not 1899."}

Context: The Eiffel Tower was completed in 1889. It is about 330 metres tall.
Claim: The tower is roughly 300 metres high.
Answer: {"verdict":"no","reason":"About 300 metres agrees with about 330 metres."}

Context: The Eiffel Tower was completed in 1889. It is about 330 metres tall.
Claim: It was a pioneering masterpiece of engineering.
Answer: {"verdict":"yes","reason":"The context gives no such judgement."}

Context: The Eiffel Tower was completed in 1889. It is about 330 metres tall.
Claim: It was probably finished in the late 1880s.
Answer: {"verdict":"no","reason":"1889 is in the late 1880s."}

Context: The Eiffel Tower was completed in 1889. It is about 330 metres tall.
Claim: It may have been painted red at first.
Answer: {"verdict":"yes","reason":"The context says nothing about its colour."}"""


def format_context(context: list[str]) -> str:
    """Context entries, one per line; a list of nothing says so plainly."""
    lines = [c.strip() for c in context if c.strip()]
    return "\n".join(lines) if lines else "(no context given)"


def claim_verdict_prompt(context: list[str], claim: str) -> PromptParts:
    """The analyze step: one claim against the context; the context part is shared."""
    return PromptParts(
        instructions=_VERDICT_INSTRUCTIONS,
        shared=f"Context: {format_context(context)}\n",
        own=f"Claim: {' '.join(claim.split())}\nAnswer: ",
        version=HALLUCINATION_PROMPT_VERSION,
    )


def example_verdict(verdict: str, reason: str) -> str:
    """A verdict in the exact shape the grammar produces (used by tests and docs)."""
    return json.dumps(
        {"verdict": verdict, "reason": reason}, ensure_ascii=False, separators=(",", ":")
    )
