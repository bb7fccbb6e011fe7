"""Prompts of the rubric scorer: a criterion the user writes, judged one text at a time
under a verdict grammar the user's verdicts make."""

from __future__ import annotations

import hashlib
import json

from localjudge.prompts.base import PromptParts

RUBRIC_PROMPT_VERSION = "rubric/1"

_INSTRUCTIONS = """You are a careful, fair evaluator. Judge ONE text against the criterion below, and nothing else.
Criterion: {rubric}
Possible verdicts: {options}.
Read the text, decide which verdict the criterion gives it, and say why in one short sentence that refers to the text.
Reply with one JSON object: {{"verdict":"<one of the verdicts>","reason":"..."}}."""

_REASON_INSTRUCTIONS = """Explain a score in one or two plain sentences.
The texts were judged against a criterion; the score counts the verdicts as stated.
Reply with one JSON object: {"reason":"your explanation"}."""


def rubric_version(rubric: str, verdicts: tuple[str, ...]) -> str:
    """The prompt version of one rubric: a new criterion or verdict set is a new prompt
    (its calibrated threshold does not carry over)."""
    digest = hashlib.sha256(json.dumps([rubric, list(verdicts)]).encode()).hexdigest()[:12]
    return f"{RUBRIC_PROMPT_VERSION}/{digest}"


def rubric_verdict_prompt(
    rubric: str, verdicts: tuple[str, ...], user_input: str, text: str
) -> PromptParts:
    """One text against the criterion; the criterion and the user's message are shared."""
    options = ", ".join(f'"{v}"' for v in verdicts)
    shown_input = " ".join(user_input.split())
    return PromptParts(
        instructions=_INSTRUCTIONS.format(rubric=" ".join(rubric.split()), options=options),
        shared=f"User's message (context, not judged): {shown_input}\n\n" if shown_input else "",
        own=f"Text: {' '.join(text.split())}\nAnswer: ",
        version=rubric_version(rubric, verdicts),
    )


def rubric_reason_prompt(
    rubric: str, score: float, scale: float, verdicts: list[dict]
) -> PromptParts:
    """The reason step: explain the score from the verdicts."""
    listed = "\n".join(
        f'- "{" ".join(v["statement"].split())[:300]}": {v["verdict"]}' for v in verdicts[:12]
    )
    return PromptParts(
        instructions=_REASON_INSTRUCTIONS,
        shared="",
        own=(
            f"Criterion: {' '.join(rubric.split())}\nScore: {score:g} of {scale:g}\n"
            f"Verdicts:\n{listed}\nExplanation: "
        ),
        version=RUBRIC_PROMPT_VERSION,
    )
