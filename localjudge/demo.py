"""What `make run` shows: the embedded judge loads offline and returns a constrained verdict."""

from __future__ import annotations

import time
from collections.abc import Callable

from localjudge.judge import Judge
from localjudge.prompts import claim_verdict_prompt

SAMPLE_CONTEXT = [
    "The first iPhone was announced on January 9, 2007.",
    "It was released on June 29, 2007.",
    "Steve Jobs introduced it at Macworld.",
]
SAMPLE_CLAIMS = [
    "The iPhone was announced in January 2007.",
    "The iPhone was released in 2008.",
]


def run_demo(model: str | None = None, *, echo: Callable[[str], None] = print) -> list[dict]:
    """Judge two sample claims against a sample context; print and return the verdicts."""
    started = time.perf_counter()
    with Judge.load(model, slots=2) as judge:
        where = f" ({judge.model.path})" if judge.model is not None else ""
        echo(f"judge: {judge.name}{where}")
        loaded = time.perf_counter()
        requests = [
            judge.prompt_request(
                claim_verdict_prompt(SAMPLE_CONTEXT, claim), "hallucination_verdict", 64
            )
            for claim in SAMPLE_CLAIMS
        ]
        outcomes = judge.generate_many(requests)
        echo("context: " + " ".join(SAMPLE_CONTEXT))
        verdicts = []
        for claim, outcome in zip(SAMPLE_CLAIMS, outcomes, strict=True):
            if isinstance(outcome, Exception):
                echo(f"claim: {claim}\n  error: {outcome}")
                continue
            choice = outcome.choice("verdict")
            p_yes = choice.probabilities.get("yes", 0.0) if choice else float("nan")
            echo(f"claim: {claim}")
            echo(f"  verdict JSON: {outcome.text}")
            echo(
                f"  P(hallucinated)={p_yes:.2f}  tokens: {outcome.counts.prefix_reused} prefix reused, "
                f"{outcome.counts.prompt_evaluated} evaluated, {outcome.counts.generated} generated"
            )
            verdicts.append({"claim": claim, **outcome.value, "p_yes": p_yes})
        echo(f"load {loaded - started:.1f}s, judge {time.perf_counter() - loaded:.1f}s")
        if not judge.meaningful:
            echo(
                f"note: {judge.name} is a base model: the JSON is always valid, the verdicts are not meaningful."
            )
    return verdicts
