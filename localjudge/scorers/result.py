"""What a scorer returns: the result with every step's output, prompt and usage, and its
Mastra-shaped serialisation."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from localjudge.scheduler import GenerationResult
from localjudge.scorers.evidence import claim_template_reason
from localjudge.scorers.reasons import rubric_template_reason, statement_template_reason

BASE_MODEL_NOTE = "judged by a base model: the verdicts are not meaningful (use an instruct GGUF for real judging)"


@dataclass
class StepUsage:
    """What one step cost."""

    requests: int = 0  # judge requests made
    prompt_tokens: int = 0  # prompt tokens evaluated for them
    prefix_reused: int = 0  # prompt tokens read from shared prefixes instead
    generated_tokens: int = 0  # output tokens
    seconds: float = 0.0  # wall time of the step

    def add(self, result: GenerationResult) -> None:
        self.requests += 1
        self.prompt_tokens += result.counts.prompt_evaluated
        self.prefix_reused += result.counts.prefix_reused
        self.generated_tokens += result.counts.generated

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "promptTokens": self.prompt_tokens,
            "prefixReused": self.prefix_reused,
            "generatedTokens": self.generated_tokens,
            "seconds": round(self.seconds, 4),
        }


@dataclass
class ScorerResult:
    """A scored run, with every step's result and prompt."""

    run_id: str
    scorer_id: str
    score: float
    reason: str
    preprocess_step_result: dict | None
    preprocess_prompt: str | None
    analyze_step_result: dict
    analyze_prompt: str | None
    generate_reason_prompt: str | None
    input: Any = None
    output: Any = None
    ground_truth: Any = None
    request_context: Any = None
    usage: dict[str, StepUsage] = field(default_factory=dict)
    judge: str = ""  # the judge model's name
    judge_meaningful: bool = True  # False: a base model judged; the verdicts mean nothing
    # False: free text from a judge not fit to write it (opted in); the verdicts may still be
    reasons_meaningful: bool = True
    prompt_version: str = ""
    details: dict[str, Any] = field(default_factory=dict)  # scorer-specific settings used
    passed: bool | None = None  # against the scorer's `threshold`; None: it has none
    # the reason without any text of the run (claims and windows by number): what
    # `to_dict(store_text=False)` keeps, since the reason itself may quote them
    private_reason: str | None = None

    def to_dict(self, *, store_text: bool = True) -> dict[str, Any]:
        """Mastra's camelCase shape, so tools built for Mastra's results read it.

        `store_text=False` leaves out every text of the run (input, output, ground truth,
        request context, the prompts that quote them, claims and statements); ids, scores,
        verdict labels and reasons stay.
        """
        data: dict[str, Any] = {
            "runId": self.run_id,
            "scorerId": self.scorer_id,
            "score": self.score,
            "reason": self.reason,
            "preprocessStepResult": self.preprocess_step_result,
            "preprocessPrompt": self.preprocess_prompt,
            "analyzeStepResult": self.analyze_step_result,
            "analyzePrompt": self.analyze_prompt,
            "generateReasonPrompt": self.generate_reason_prompt,
            "input": self.input,
            "output": self.output,
            "groundTruth": self.ground_truth,
            "requestContext": self.request_context,
            "usage": {step: usage.to_dict() for step, usage in self.usage.items()},
            # not "judge": @mastra/core's results use that key for the judge's config
            "judgedBy": {
                "model": self.judge,
                "meaningful": {
                    "verdicts": self.judge_meaningful,
                    "reasons": self.reasons_meaningful,
                },
                **({} if self.judge_meaningful else {"note": BASE_MODEL_NOTE}),
            },
            "promptVersion": self.prompt_version,
            **self.details,
        }
        if self.passed is not None:
            data["passed"] = self.passed
        if self.preprocess_prompt is None:  # Mastra omits the key where no prompt ran
            del data["preprocessPrompt"]
        if self.preprocess_step_result is None:
            del data["preprocessStepResult"]
        if not store_text:
            _strip_texts(data)
            data["reason"] = self.private_reason or f"The score is {self.score:g}."
        return data

    def to_json(self, *, store_text: bool = True, **kwargs) -> str:
        return json.dumps(
            self.to_dict(store_text=store_text), ensure_ascii=False, default=str, **kwargs
        )


_TEXT_FIELDS = (
    "input",
    "output",
    "groundTruth",
    "requestContext",
    "preprocessPrompt",
    "analyzePrompt",
    "generateReasonPrompt",
)


def _strip_texts(data: dict[str, Any]) -> None:
    """Drop the run's texts from a result dict, in place (see `ScorerResult.to_dict`)."""
    for key in _TEXT_FIELDS:
        data.pop(key, None)
    preprocess = data.get("preprocessStepResult")
    if isinstance(preprocess, dict) and "claims" in preprocess:
        data["preprocessStepResult"] = {"numClaims": len(preprocess["claims"])}
        if preprocess.get("skipped"):  # what was left out, by why, without its text
            data["preprocessStepResult"]["skipped"] = [
                {"why": s["why"]} for s in preprocess["skipped"]
            ]
    analyze = data.get("analyzeStepResult") or {}
    data["analyzeStepResult"] = {
        "verdicts": [_without_texts(verdict) for verdict in analyze.get("verdicts", [])]
    }
    data["textsStored"] = False


def _without_texts(verdict: dict) -> dict:
    """A verdict without the texts it carries: its statement, its evidence's text, and a
    reason built from that evidence, which then names the window instead of quoting it."""
    out = {k: v for k, v in verdict.items() if k != "statement"}
    evidence = verdict.get("evidence")
    if isinstance(evidence, dict):
        out["evidence"] = {k: v for k, v in evidence.items() if k != "text"}
    if "reason" not in verdict:
        return out
    if "category" in verdict:  # a toxicity verdict: its built reason quotes nothing
        out["reason"] = statement_template_reason(
            verdict["verdict"], verdict["category"], verdict.get("severity", "none")
        )
    elif "probabilities" in verdict:  # a rubric verdict: built from the verdict alone
        out["reason"] = rubric_template_reason(verdict["verdict"])
    else:  # the judge's own words may quote the claim or the context: built again
        out["reason"] = claim_template_reason(
            verdict["verdict"], evidence if isinstance(evidence, dict) else None, quoted=False
        )
    if verdict.get("reasonBy") == "judge":
        out["reasonBy"] = "template"
    return out
