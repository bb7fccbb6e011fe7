"""Reasons built from a verdict alone, without the judge's free text: what a verdict says
when the judge is not trusted to write, when what it wrote repeats the prompt's worked
examples, and what a result keeps when its texts are not stored. (A claim's reason quotes
its evidence window: `evidence.claim_template_reason`.)"""

from __future__ import annotations

import functools
import re

from localjudge.prompts.base import PromptParts

# words in a row that a reason may share with the prompt's worked examples by chance
_COPIED_RUN = 5
# what a result says where it dropped the judge's reason for repeating the examples
COPIED = "it repeated the prompt's worked examples"


def copies_worked_examples(reason: str, parts: PromptParts, also: str = "") -> bool:
    """Whether a judge's reason repeats its prompt's worked examples: a run of five words
    that the examples hold and neither the judged text (the claim or statement, its
    context, the user's message: the prompt's shared and own parts) nor `also` (what the
    reason may state as fact, such as "The score is 0.5") does. Small judges copy an
    example's reason whatever they judge ("Firm disagreement about an idea, not a person."
    for a plain fact); such a reason says nothing true of the text."""
    copied = _runs(reason) & _example_runs(parts.worked_examples)
    # the judged text (a whole context, maybe) is read only when a run matched the examples
    return bool(copied) and bool(copied - _runs(f"{parts.shared} {parts.own} {also}"))


@functools.lru_cache(maxsize=64)
def _example_runs(examples: str) -> frozenset[tuple[str, ...]]:
    return frozenset(_runs(examples))


def _runs(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i : i + _COPIED_RUN]) for i in range(len(words) - _COPIED_RUN + 1)}


def statement_template_reason(verdict: str, category: str, severity: str) -> str:
    """A statement's reason built from its verdict (what the judge chose, no free text)."""
    if verdict == "yes":
        return f"Judged toxic: {category.replace('_', ' ')}, {severity}."
    return "Judged civil: no attack, mockery, hate, dismissal or threat."


def rubric_template_reason(verdict: str) -> str:
    """A verdict's reason built from the verdict alone (it quotes nothing)."""
    return f"Judged {verdict!r} against the criterion."
