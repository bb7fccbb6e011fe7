"""Prompts of the hallucination scorer, written for small local judges.

A small model copes best with one claim at a time, a plain rule list and short worked
examples in exactly the JSON shape it must produce.
"""

from __future__ import annotations

import json

from localjudge.prompts.base import ChatQuestion, PromptParts

# 3: a judge with a chat template is asked whether the context supports the claim
# (`_SUPPORT_INSTRUCTIONS`); the completion prompt is version 2's
HALLUCINATION_PROMPT_VERSION = "hallucination/3"

# the worked examples both questions share: (claim, hallucinated, reason) against one context
_EXAMPLE_CONTEXT = "The Eiffel Tower was completed in 1889. It is about 330 metres tall."
_EXAMPLES = (
    ("The Eiffel Tower was completed in 1899.", True, "The context says 1889, not 1899."),
    (
        "The tower is roughly 300 metres high.",
        False,
        "About 300 metres agrees with about 330 metres.",
    ),
    (
        "It was a pioneering masterpiece of engineering.",
        True,
        "The context gives no such judgement.",
    ),
    ("It was probably finished in the late 1880s.", False, "1889 is in the late 1880s."),
    ("It may have been painted red at first.", True, "The context says nothing about its colour."),
)


def _worked_examples(key: str, hallucinated_answer: str) -> str:
    """The worked examples answered in `key`, a hallucinated claim with `hallucinated_answer`."""
    other = {"yes": "no", "no": "yes"}[hallucinated_answer]
    return "\n\n".join(
        f"Context: {_EXAMPLE_CONTEXT}\nClaim: {claim}\nAnswer: "
        + json.dumps(
            {key: hallucinated_answer if hallucinated else other, "reason": reason},
            separators=(",", ":"),
        )
        for claim, hallucinated, reason in _EXAMPLES
    )


_VERDICT_INSTRUCTIONS = """You are a careful fact checker. Compare ONE claim with the context and decide whether the claim is hallucinated.
Answer "yes" when the claim is hallucinated: it contradicts the context, or the context does not say it.
Answer "no" when the context supports the claim.
Rules:
- Judge only against the context, never against your own knowledge.
- Praise or opinion ("pioneering", "made history") is hallucinated unless the context says it.
- "may", "probably" about a fact the context states is fine; about a fact it does not state, it is hallucinated.
- A rounder number or a less precise date that agrees with the context is fine; a wrong number or date is hallucinated.
Reply with one JSON object: {"verdict":"yes" or "no","reason":"one short sentence"}.

""" + _worked_examples("verdict", "yes")

# The same rules and worked examples asked the other way round, for judges with a chat
# template: an instruct model answers "yes" when the context supports the claim whatever
# the rules say a "yes" means (training/RESULTS.md, session 76).
_SUPPORT_INSTRUCTIONS = """You are a careful fact checker. Compare ONE claim with the context and decide whether the context supports the claim.
"supported": "yes" when the context states the claim or something that agrees with it.
"supported": "no" when the claim contradicts the context, or the context does not say it.
Rules:
- Judge only against the context, never against your own knowledge.
- Praise or opinion ("pioneering", "made history") is not supported unless the context says it.
- "may", "probably" about a fact the context states is fine; about a fact it does not state, it is not supported.
- A rounder number or a less precise date that agrees with the context is fine; a wrong number or date is not supported.
Reply with one JSON object: {"supported":"yes" or "no","reason":"one short sentence"}.

""" + _worked_examples("supported", "no")

_SUPPORT_QUESTION = ChatQuestion(
    instructions=_SUPPORT_INSTRUCTIONS,
    schema="hallucination_support",
    decision_field="supported",
    means={"yes": "no", "no": "yes"},  # supported: not hallucinated
)


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
        chat=_SUPPORT_QUESTION,
    )


_CLAIMS_INSTRUCTIONS = """Split a text into its claims: short sentences that each state one fact or one guess.
Keep names, numbers and dates exactly as written. Keep guesses ("may", "probably") as they are.
Leave out greetings, questions and filler. Write the claims in the language of the text.
Reply with one JSON object: {"claims":["claim one","claim two"]}. A text with no claims gives {"claims":[]}.

Text: The Eiffel Tower, finished in 1889, is about 330 metres tall and was probably the tallest building in the world at the time.
Claims: {"claims":["The Eiffel Tower was finished in 1889.","The Eiffel Tower is about 330 metres tall.","The Eiffel Tower was probably the tallest building in the world at the time."]}

Text: 東京は日本の首都で、人口は約1400万人です。
Claims: {"claims":["東京は日本の首都です。","東京の人口は約1400万人です。"]}

Text: Hello! How can I help you today?
Claims: {"claims":[]}"""

_REASON_INSTRUCTIONS = """Explain a hallucination score in one or two plain sentences.
The score is the share of claims that the context does not support (0 = none, 1 = all).
Name the unsupported claims and say what the context says instead; if there are none, say that the context supports every claim.
Reply with one JSON object: {"reason":"your explanation"}.

Context: The Eiffel Tower was completed in 1889. It is about 330 metres tall.
Score: 0.5 of 1
Unsupported claims: "The tower is 500 metres tall." (The context says about 330 metres.)
Supported claims: "The tower was finished in 1889."
Explanation: {"reason":"The score is 0.5 because one of two claims is unsupported: the context gives about 330 metres, not 500."}"""

_MAX_LISTED = 12  # claims listed per kind in the reason prompt; the rest are counted


def claims_prompt(output: str) -> PromptParts:
    """The preprocess step: the claims of one output (nothing shared across outputs)."""
    return PromptParts(
        instructions=_CLAIMS_INSTRUCTIONS,
        shared="",
        own=f"Text: {output.strip()}\nClaims: ",
        version=HALLUCINATION_PROMPT_VERSION,
    )


def _listed(verdicts: list[dict], with_reasons: bool) -> str:
    if not verdicts:
        return "(none)"
    parts = []
    for verdict in verdicts[:_MAX_LISTED]:
        text = json.dumps(verdict["statement"], ensure_ascii=False)
        reason = " ".join(str(verdict.get("reason", "")).split())
        parts.append(f"{text} ({reason})" if with_reasons and reason else text)
    more = len(verdicts) - _MAX_LISTED
    return " ".join(parts) + (f" and {more} more" if more > 0 else "")


def hallucination_reason_prompt(
    score: float, scale: float, verdicts: list[dict], context: list[str]
) -> PromptParts:
    """The reason step: explain the score from the context, the claims, and each verdict
    with the judge's own reason for it."""
    unsupported = [v for v in verdicts if v["verdict"] == "yes"]
    supported = [v for v in verdicts if v["verdict"] != "yes"]
    return PromptParts(
        instructions=_REASON_INSTRUCTIONS,
        shared=f"Context: {format_context(context)}\n",
        own=(
            f"Score: {score:g} of {scale:g}\n"
            f"Unsupported claims: {_listed(unsupported, True)}\n"
            f"Supported claims: {_listed(supported, False)}\n"
            "Explanation: "
        ),
        version=HALLUCINATION_PROMPT_VERSION,
    )
