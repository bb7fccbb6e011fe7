"""`Scorer`: the base of every scorer, with its named steps."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from localjudge.judge import Judge
from localjudge.prompts import PromptParts
from localjudge.scheduler import GenerationRequest, GenerationResult
from localjudge.scorers.reasons import COPIED, CUT, copies_worked_examples, cut_short, why_dropped
from localjudge.scorers.result import ScorerResult, StepUsage
from localjudge.scorers.scorer_run import ScorerRun, check_option
from localjudge.scorers.shared import shared_judge
from localjudge.scorers.steps import Step, generate_all, run_coroutine
from localjudge.scorers.tally import MISSTATED, Tally, misstates
from localjudge.scorers.task import VerdictTask
from localjudge.scorers.threshold import Threshold, check_threshold, passes

REASON_MODES = ("judge", "template")
# which verdicts get the judge's own reason: every one, only flagged ones (hallucinated
# claims, toxic statements: "yes"), or none; the others are closed right after the verdict
CLAIM_REASON_MODES = ("all", "flagged", "none")
_REASONS_FOR = {"all": None, "flagged": frozenset({"yes"}), "none": frozenset()}


def check_scale(scale: Any) -> float:
    """The score's scale: a positive finite number; 0 or None mean 1, as in Mastra."""
    if scale is None or (not isinstance(scale, bool) and scale == 0):
        return 1
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise ValueError(f"scale must be a positive number, not {scale!r}")
    if not math.isfinite(scale) or scale < 0:
        raise ValueError(f"scale must be a positive finite number, not {scale!r}")
    return scale


class Scorer:
    """A scorer: `run(run)` (or `await run_async(run)`) returns a `ScorerResult`."""

    id: str = "scorer"
    name: str = "Scorer"
    description: str = ""
    # what the scorer asks the judge about one text; declared, it reaches `quality --data`,
    # `calibrate` and training with no other edit
    verdict_task: VerdictTask | None = None

    def __init__(
        self,
        model: Judge | str | Path | None,
        *,
        scale: float | None = 1,
        reason: str | None = None,
        verdict_max_tokens: int = 96,
        reason_max_tokens: int = 128,
        claim_reasons: str | None = None,
        id: str | None = None,
        threshold: Threshold | None = None,
    ) -> None:
        if reason is not None:
            check_option("reason mode", reason, REASON_MODES)
        if claim_reasons is not None:
            check_option("claim_reasons", claim_reasons, CLAIM_REASON_MODES)
        if id is not None:
            if not isinstance(id, str) or not id.strip():
                raise ValueError(f"a scorer id must be a non-empty string, not {id!r}")
            self.id = id
        self._model = model
        self._judge: Judge | None = model if isinstance(model, Judge) else None
        self.scale = check_scale(scale)
        self._reason_mode = reason
        self.verdict_max_tokens = verdict_max_tokens
        self.reason_max_tokens = reason_max_tokens
        self._claim_reasons = claim_reasons
        # the highest score that passes (or {"min", "max"}): each result says `passed`
        self.threshold = check_threshold(threshold, self.id)

    @property
    def judge(self) -> Judge:
        """The judge, loaded on first use (shared with other scorers of the same model)."""
        if self._judge is None:
            self._judge = shared_judge(self._model)
        return self._judge

    @property
    def reason_mode(self) -> str:
        """How the score's reason is written: as asked, else by the judge when its free text
        can be trusted and from the verdicts ("template") when it cannot."""
        if self._reason_mode is not None:
            return self._reason_mode
        return "judge" if self.judge.writes_reasons else "template"

    @property
    def claim_reasons(self) -> str:
        """Which verdicts the judge explains in its own words: as asked, else all of them
        when its free text can be trusted and none when it cannot (their reasons are then
        built from the verdict and its evidence)."""
        if self._claim_reasons is not None:
            return self._claim_reasons
        return "all" if self.judge.writes_reasons else "none"

    @property
    def reasons_meaningful(self) -> bool:
        """Whether the reasons this scorer gives can be trusted: built from the verdicts, or
        written by a judge whose free text can be trusted."""
        if self.judge.writes_reasons:
            return True
        return self.reason_mode == "template" and self.claim_reasons == "none"

    async def run_async(self, run: ScorerRun | dict) -> ScorerResult:
        raise NotImplementedError

    def run(self, run: ScorerRun | dict) -> ScorerResult:
        """Score one run (blocking). Works inside a running event loop too (Jupyter): the
        coroutine then runs in a helper thread; there `await run_async(run)` is better."""
        return run_coroutine(self.run_async(run))

    def judge_request(
        self,
        parts: PromptParts,
        schema: str,
        max_tokens: int,
        reasons_for: frozenset[str] | None = None,
    ) -> GenerationRequest:
        """A request for one judge step: the prompt rendered for this judge and split into
        its shared prefix and own part."""
        return self.judge.prompt_request(parts, schema, max_tokens, reasons_for=reasons_for)

    def count_tokens(self, text: str) -> int:
        return len(self.judge.tokenize(text))

    async def ask(
        self, step: str, requests: Sequence[GenerationRequest], usage: dict[str, StepUsage]
    ) -> list[GenerationResult]:
        """Run one step's requests together, timing the step and counting its tokens."""
        with Step(usage, step) as step_usage:
            results = await generate_all(self.judge, requests)
            for result in results:
                step_usage.add(result)
        return results

    async def judge_each(
        self,
        step: str,
        prompts: Sequence[PromptParts],
        schema: str | dict,
        max_tokens: int,
        usage: dict[str, StepUsage],
    ) -> tuple[list[GenerationResult], str]:
        """One request per prompt, run together as `step`: the results in prompt order, and
        the literal text of the first prompt (what the result reports as the step's prompt)."""
        reasons_for = _REASONS_FOR[self.claim_reasons] if step == "analyze" else None
        requests = [self.judge_request(parts, schema, max_tokens, reasons_for) for parts in prompts]
        return await self.ask(step, requests, usage), requests[0].prompt

    def verdict_reason(
        self,
        result: GenerationResult,
        verdict: str,
        built: str,
        parts: PromptParts,
        context: str | None = None,
    ) -> dict:
        """A verdict's reason: the judge's own text, or when `claim_reasons` skipped it (or
        a calibrated threshold overruled the verdict it explained), `built` from the verdict
        and its evidence; and which of the two it is. A reason `why_dropped` drops (it
        repeats the worked examples of `parts`, the verdict's prompt; stops mid-sentence; or
        says that `context`, the whole context, lacks what it holds) is replaced by `built`,
        and says why."""
        if result.reason_skipped or verdict != result.value["verdict"]:
            return {"reason": built, "reasonBy": "template"}
        dropped = why_dropped(result.value["reason"], parts, context)
        if dropped:
            return {"reason": built, "reasonBy": "template", "judgeReasonDropped": dropped}
        return {"reason": result.value["reason"], "reasonBy": "judge"}

    async def reason(
        self,
        fallback: str,
        parts: PromptParts | None,
        usage: dict[str, StepUsage],
        tally: Tally,
    ) -> tuple[str, str | None, str | None]:
        """The generateReason step: (plain-text reason, prompt, why the judge's reason was
        dropped). In "template" mode, without a prompt (nothing was judged), or when the
        judge writes nothing: the reason built from the verdicts (`fallback`), with no judge
        call. A reason that repeats the prompt's worked examples, stops mid-sentence, or states
        a score or a count of the verdicts other than `tally`'s, is replaced by `fallback`,
        and the third value says which (`details.judgeReasonDropped` in the result)."""
        if self.reason_mode == "template" or parts is None:
            return fallback, None, None
        request = self.judge_request(parts, "reason", self.reason_max_tokens)
        (result,) = await self.ask("generateReason", [request], usage)
        written = " ".join(result.value["reason"].split())
        if not written:
            return fallback, request.prompt, None
        if copies_worked_examples(written, parts, f"The score is {tally.score:g} because"):
            return fallback, request.prompt, COPIED
        if cut_short(result.value["reason"]):
            return fallback, request.prompt, CUT
        if misstates(written, tally, parts):
            return fallback, request.prompt, MISSTATED
        return written, request.prompt, None

    def result(self, run: ScorerRun, **fields: Any) -> ScorerResult:
        judge = self.judge
        threshold = judge.verdict_threshold(fields.get("prompt_version", ""))
        if threshold is not None:  # the verdicts were P(yes) >= a calibrated threshold
            fields["details"] = {
                **fields.get("details", {}),
                "threshold": {"value": threshold[0], "source": threshold[1]},
            }
        if self.threshold is not None:
            fields["passed"] = passes(fields["score"], self.threshold)
        return ScorerResult(
            run_id=run.run_id,
            scorer_id=self.id,
            input=run.input,
            output=run.output,
            ground_truth=run.ground_truth,
            request_context=run.request_context,
            judge=judge.name,
            judge_meaningful=judge.meaningful,
            reasons_meaningful=judge.meaningful and self.reasons_meaningful,
            **fields,
        )
