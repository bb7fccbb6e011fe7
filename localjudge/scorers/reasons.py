"""Reasons built from a verdict alone, without the judge's free text: what a verdict says
when the judge is not trusted to write, and what a result keeps when its texts are not
stored. (A claim's reason quotes its evidence window: `evidence.claim_template_reason`.)"""

from __future__ import annotations


def statement_template_reason(verdict: str, category: str, severity: str) -> str:
    """A statement's reason built from its verdict (what the judge chose, no free text)."""
    if verdict == "yes":
        return f"Judged toxic: {category.replace('_', ' ')}, {severity}."
    return "Judged civil: no attack, mockery, hate, dismissal or threat."


def rubric_template_reason(verdict: str) -> str:
    """A verdict's reason built from the verdict alone (it quotes nothing)."""
    return f"Judged {verdict!r} against the criterion."
