"""Prompt builders: pure functions from data to text, versioned."""

from localjudge.prompts.base import ChatQuestion, PromptParts
from localjudge.prompts.hallucination import (
    HALLUCINATION_PROMPT_VERSION,
    claim_verdict_prompt,
    claims_prompt,
    hallucination_reason_prompt,
)
from localjudge.prompts.toxicity import (
    TOXICITY_PROMPT_VERSION,
    opinion_verdict_prompt,
    toxicity_reason_prompt,
)

__all__ = [
    "HALLUCINATION_PROMPT_VERSION",
    "ChatQuestion",
    "PromptParts",
    "TOXICITY_PROMPT_VERSION",
    "claim_verdict_prompt",
    "claims_prompt",
    "hallucination_reason_prompt",
    "opinion_verdict_prompt",
    "toxicity_reason_prompt",
]
