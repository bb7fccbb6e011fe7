"""The hallucination scorer (Mastra's `createHallucinationScorer`).

preprocess: the output's claims -> analyze: one verdict per claim against the context (a
long context as evidence windows: each claim against its best-matching windows, best first,
until one supports it; the claims of a round in one batch with the windows as shared
prefixes; the deciding window is its evidence) ->
score: hallucinated / verdicts * scale -> reason: built from the verdicts and evidence, or
written by a judge fit to write it.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from localjudge.judge import Judge
from localjudge.prompts import (
    HALLUCINATION_PROMPT_VERSION,
    claim_verdict_prompt,
    claims_prompt,
    hallucination_reason_prompt,
)
from localjudge.scorers.base import Scorer
from localjudge.scorers.baselines import overlap_verdict
from localjudge.scorers.claims import left_out_text, sentence_claims
from localjudge.scorers.evidence import (
    DEFAULT_TOP_K,
    check_windows,
    claim_contexts,
    claim_template_reason,
    context_text,
    p_yes,
    plan_windows,
    quote,
)
from localjudge.scorers.result import ScorerResult, StepUsage
from localjudge.scorers.scorer_run import ScorerRun, check_context, check_option
from localjudge.scorers.steps import call_hook, cap, check_cap, decide, verdict_confidence
from localjudge.scorers.tally import CLAIM_WORDS, Tally
from localjudge.scorers.task import Baseline, LabelledRow, VerdictTask
from localjudge.scorers.text import (
    every,
    how_many,
    judge_text,
    round_half_up,
    split_statements,
)

EXTRACTION_MODES = ("auto", "judge", "sentences", "sentence-claims")
GetContext = Callable[..., Any]  # get_context(run=, results=, score=, step=) -> list[str]


def hallucination_score(verdicts: list[dict], scale: float | None = 1) -> float:
    """`hallucinated / verdicts * scale`, rounded half up to 2 decimals; 0 without verdicts."""
    if not verdicts:
        return 0.0
    hallucinated = sum(1 for v in verdicts if v["verdict"] == "yes")
    return round_half_up(hallucinated / len(verdicts) * (scale or 1))


def hallucination_template_reason(
    score: float,
    scale: float,
    verdicts: list[dict],
    *,
    quoted: bool = True,
    skipped: Sequence[dict] = (),
) -> str:
    """The reason built from the verdicts and their evidence, without a judge call;
    `quoted=False` names claims and windows by number instead of quoting them (what a
    result keeps when its texts are not stored); the `skipped` sentences (sentence-claims
    extraction) stated nothing to check, and are counted by kind."""
    left_out = f" ({left_out_text(list(skipped))})" if skipped else ""
    if not verdicts:
        return f"The score is {score:g} because the output makes no claims to check{left_out}."
    unsupported = [(n, v) for n, v in enumerate(verdicts, 1) if v["verdict"] == "yes"]
    if not unsupported:
        claims = every(len(verdicts), "claim")
        return f"The score is {score:g} because the context supports {claims}{left_out}."
    listed = []
    for number, verdict in unsupported[:_MAX_LISTED]:
        evidence = verdict.get("evidence")
        if not quoted:
            closest = f" (closest: window {evidence['window']})" if evidence else ""
            listed.append(f"claim {number}{closest}")
            continue
        closest = f' (closest: "{quote(evidence["text"], 120)}")' if evidence else ""
        listed.append(f'"{verdict["statement"]}"{closest}')
    more = len(unsupported) - _MAX_LISTED
    counted = how_many(len(unsupported), len(verdicts), "claim")
    return (
        f"The score is {score:g} out of {scale:g} because {counted} not supported by the context: "
        f"{'; '.join(listed)}" + (f" and {more} more" if more > 0 else "") + f"{left_out}."
    )


_MAX_LISTED = 12  # unsupported claims named in the score's reason; the rest are counted


@dataclass(frozen=True)
class Extracted:
    """An output's claims as the scorer judges them: `mode` is the extraction used,
    `skipped` the sentences it left out as stating nothing (sentence-claims), `prompt` the
    judge's extraction prompt where it was asked, `fallback` why its claims were not used."""

    claims: list[str]
    mode: str
    skipped: list[dict] = field(default_factory=list)
    prompt: str | None = None
    fallback: str | None = None


def fell_apart(claims: list[str]) -> bool:
    """Whether a judge's claims are its output cut into single words ("well", "it's",
    "about", "scarlett", ...): three claims or more, most of them one word (a claim in a
    script written without spaces, such as Japanese, is never one word). A small instruct
    judge does this now and then (RESULTS.md, "A judge's extracted claims held to its own
    prompt"); each word judged as a claim would make the score up."""
    return len(claims) >= 3 and 2 * sum(map(_one_word, claims)) > len(claims)


# Chinese, Japanese and Korean text, which writes a whole claim without a space
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def _one_word(claim: str) -> bool:
    return len(claim.split()) == 1 and not _CJK.search(claim)


def _claim_prompt(row: LabelledRow):
    return claim_verdict_prompt(list(row.context), row.text)


def _claim_reason(value: dict, evidence: dict | None) -> str:
    return claim_template_reason(value["verdict"], evidence)


# one claim against its context (or evidence windows): "yes" is hallucinated
HALLUCINATION_TASK = VerdictTask(
    name="hallucination",
    schema="hallucination_verdict",
    prompt_version=HALLUCINATION_PROMPT_VERSION,
    prompt=_claim_prompt,
    reason=_claim_reason,
    text_field="claim",
    context="required",
    windowed=True,
    baselines=(
        Baseline(
            "word-overlap baseline", lambda text, context: overlap_verdict(text, context) == "yes"
        ),
    ),
    devset="hallucination",
)


def sentence_task(extraction: str) -> VerdictTask:
    """The hallucination task with a whole output cut as `extraction` cuts it without a
    judge: "sentences" (every sentence) or "sentence-claims" (less what states nothing),
    for `quality --statements` and `calibrate --statements`."""
    if extraction == "sentences":
        return HALLUCINATION_TASK
    if extraction == "sentence-claims":
        return replace(
            HALLUCINATION_TASK,
            statements=lambda text: sentence_claims(text).claims,
            leaves_out="questions and courtesies",
        )
    raise ValueError(f'extraction must be "sentences" or "sentence-claims", not {extraction!r}')


class HallucinationScorer(Scorer):
    id = "hallucination-scorer"
    name = "Hallucination Scorer"
    description = "Share of the output's claims that the context contradicts or does not support."
    verdict_task = HALLUCINATION_TASK

    def __init__(
        self,
        model: Judge | str | Path | None,
        *,
        context: list[str] | None = None,
        get_context: GetContext | None = None,
        extraction: str = "auto",
        max_claims: int | None = None,
        max_claim_chars: int = 600,
        claims_max_tokens: int = 512,
        windows: str | int = DEFAULT_TOP_K,
        window_tokens: int | None = None,
        **options: Any,
    ) -> None:
        super().__init__(model, **options)
        check_option("extraction mode", extraction, EXTRACTION_MODES)
        check_cap("max_claims", max_claims)
        self.windows = check_windows(windows)
        check_cap("window_tokens", window_tokens)
        self.window_tokens = window_tokens
        if get_context is not None and not callable(get_context):
            raise ValueError("get_context must be callable")
        self.context = check_context(context, "context") if context is not None else None
        self.get_context = get_context
        self.extraction = extraction
        self.max_claims = max_claims
        self.max_claim_chars = max_claim_chars
        self.claims_max_tokens = claims_max_tokens

    def extraction_mode(self) -> str:
        """ "auto" means the judge extracts the claims when its free text can be trusted,
        else sentences (a base model, or a judge tuned for verdicts only)."""
        if self.extraction != "auto":
            return self.extraction
        return "judge" if self.judge.extracts_claims else "sentences"

    async def _context(
        self, run: ScorerRun, results: dict, score: float | None, step: str
    ) -> list[str]:
        """get_context beats the run's own context, which beats the static one."""
        if self.get_context is not None:
            value = await call_hook(
                self.get_context, "get_context", run=run, results=results, score=score, step=step
            )
            return check_context(value if value is not None else [], "get_context's result")
        if run.context is not None:
            return run.context
        return list(self.context or [])

    async def _claims(self, output: str, usage: dict[str, StepUsage]) -> Extracted:
        """The output's claims in the extraction mode asked for; where the judge's extraction
        ran past `claims_max_tokens` (its list cut short would leave claims unjudged) or fell
        apart into single words (`fell_apart`), its sentences instead, every one judged."""
        mode = self.extraction_mode()
        if not output.strip():
            return Extracted([], mode)
        if mode == "sentences":
            return Extracted(split_statements(output, self.max_claim_chars), mode)
        if mode == "sentence-claims":
            found = sentence_claims(output, self.max_claim_chars)
            return Extracted(found.claims, mode, skipped=found.skipped)
        request = self.judge_request(claims_prompt(output), "claims", self.claims_max_tokens)
        (result,) = await self.ask("preprocess", [request], usage)
        if result.finish_reason == "budget":
            why = f"the judge's claims ran past claims_max_tokens={self.claims_max_tokens}"
        else:
            claims = [" ".join(c.split()) for c in result.value["claims"] if c.strip()]
            if not fell_apart(claims):
                return Extracted(claims, mode, prompt=request.prompt)
            why = "the judge's claims were single words"
        sentences = split_statements(output, self.max_claim_chars)
        return Extracted(sentences, "sentences", prompt=request.prompt, fallback=why)

    async def _verdicts(
        self, claims: list[str], context: list[str], whole: str, usage: dict[str, StepUsage]
    ) -> tuple[list[dict], str]:
        """One verdict per claim, and the literal prompt of the first request. A claim is
        judged against its candidate windows best first, all claims' windows of a round in
        one batch (the windows are its shared prefixes), and stops at the first window that
        supports it: that window decides and is its evidence. A claim no window supports is
        hallucinated, with the window that came closest (lowest P(hallucinated)). The
        verdicts are those of judging every window and taking the best; the windows after
        a supporting one are not evaluated. `whole` is the context as one text
        (`context_text`), which a written reason saying "the context does not mention ..."
        is read against."""
        windows, chosen, left_out = await asyncio.to_thread(  # tokenizes the whole context
            plan_windows,
            self.judge,
            context,
            claims,
            mode=self.windows,
            window_tokens=self.window_tokens,
            max_tokens=self.verdict_max_tokens,
        )
        threshold = self.judge.verdict_threshold(HALLUCINATION_PROMPT_VERSION)
        texts = [claim_contexts(context, windows, ws) for ws in chosen]
        # each claim's (result, the prompt it answered), window by window
        judged: list[list] = [[] for _ in claims]
        pending, level, first_prompt = list(range(len(claims))), 0, None
        while pending:
            prompts = [claim_verdict_prompt(texts[c][level], claims[c]) for c in pending]
            results, prompt = await self.judge_each(
                "analyze", prompts, "hallucination_verdict", self.verdict_max_tokens, usage
            )
            first_prompt = first_prompt or prompt
            for c, result, parts in zip(pending, results, prompts, strict=True):
                judged[c].append((result, parts))
            pending = [
                c
                for c, result in zip(pending, results, strict=True)
                if decide(result, threshold) == "yes" and level + 1 < len(texts[c])
            ]
            level += 1
        verdicts = []
        for claim, ws, missed, mine in zip(claims, chosen, left_out, judged, strict=True):
            best = min(range(len(mine)), key=lambda i: p_yes(mine[i][0]))
            result, asked = mine[best]
            verdict = decide(result, threshold)
            evidence = windows[ws[best]].evidence(p_yes(result)) if ws else None
            record = {
                "statement": claim,
                "verdict": verdict,
                **self.verdict_reason(
                    result, verdict, claim_template_reason(verdict, evidence), asked, whole
                ),
                "confidence": verdict_confidence(result, verdict),
                "evidence": evidence,
            }
            if missed:
                record["truncated"] = {"windows": {"judged": len(ws), "leftOut": missed}}
            verdicts.append(record)
        return verdicts, first_prompt

    async def run_async(self, run: ScorerRun | dict) -> ScorerResult:
        run = ScorerRun.from_value(run)
        output = judge_text(run.output_text)
        usage: dict[str, StepUsage] = {}
        extracted = await self._claims(output, usage)
        skipped = extracted.skipped
        claims, truncated = cap(extracted.claims, self.max_claims, "claims")
        preprocessed: dict[str, Any] = {"claims": claims}
        if skipped:
            preprocessed["skipped"] = skipped
        results: dict[str, Any] = {"preprocessStepResult": preprocessed}
        context = await self._context(run, results, None, "analyze")
        whole = context_text(context)
        verdicts: list[dict] = []
        analyze_prompt = None
        if claims:
            verdicts, analyze_prompt = await self._verdicts(claims, context, whole, usage)
        results["analyzeStepResult"] = {"verdicts": verdicts}
        score = hallucination_score(verdicts, self.scale)
        reason_context = await self._context(run, results, score, "generateReason")
        if context_text(reason_context) == whole and any(
            v["evidence"] and v["evidence"]["text"] != whole for v in verdicts
        ):  # judged in windows: the reason is written from the windows that decided
            reason_context = list(dict.fromkeys(v["evidence"]["text"] for v in verdicts))
        details: dict[str, Any] = {"extraction": extracted.mode, "scale": self.scale}
        if extracted.fallback:  # the judge's extraction ran past its budget or fell apart
            details["extractionFallback"] = extracted.fallback
        reason, reason_prompt, dropped = await self.reason(
            hallucination_template_reason(score, self.scale, verdicts, skipped=skipped),
            hallucination_reason_prompt(score, self.scale, verdicts, reason_context)
            if verdicts
            else None,
            usage,
            Tally.of(score, verdicts, CLAIM_WORDS),
        )
        if dropped:
            details["judgeReasonDropped"] = dropped
        if self.claim_reasons != "all":
            details["claimReasons"] = self.claim_reasons
        if truncated:
            details["truncated"] = truncated
        return self.result(
            run,
            score=score,
            reason=reason,
            preprocess_step_result=preprocessed,
            preprocess_prompt=extracted.prompt,
            analyze_step_result={"verdicts": verdicts},
            analyze_prompt=analyze_prompt,
            generate_reason_prompt=reason_prompt,
            usage=usage,
            prompt_version=HALLUCINATION_PROMPT_VERSION,
            private_reason=hallucination_template_reason(
                score, self.scale, verdicts, quoted=False, skipped=skipped
            ),
            details=details,
        )


def create_hallucination_scorer(
    model: Judge | str | Path | None = None,
    *,
    scale: float | None = 1,
    context: list[str] | None = None,
    get_context: GetContext | None = None,
    extraction: str = "auto",
    reason: str | None = None,
    **options: Any,
) -> HallucinationScorer:
    """A hallucination scorer on a local judge.

    `model`: a registry name, a `.gguf` path, a loaded `Judge` (shared), or None for the
    default. `context`: static context strings. `get_context(run=, results=, score=, step=)`
    (plain or async; called with the keywords it names, or all with `**kwargs`) resolves
    context at run time and replaces it entirely, even with `[]`.
    `extraction`: "judge" (claims by the judge), "sentences" (deterministic splitter, every
    sentence a claim), "sentence-claims" (the same, less the sentences that state nothing:
    a question, a courtesy such as "Have a nice day!" or a Markdown heading, listed in
    `preprocessStepResult.skipped`) or "auto" (sentences unless the judge's free text can
    be trusted: not a base model or a judge tuned for verdicts only). `reason`: "judge" (written by the judge) or "template"
    (built from the verdicts and their evidence, no judge call); the default is "judge" for
    a judge whose free text can be trusted and "template" otherwise (`claim_reasons` alike:
    "all" or "none"). `windows`: a context longer than `window_tokens` (default: the judge's
    registry entry, else as long as its context allows) is cut into windows of whole
    sentences, and each claim is judged against its `windows` best windows by BM25 (an
    integer, default 4), or against every window ("all", at most 32, the verdict's
    `truncated` says how many were left out), or against the whole context ("off"). Each
    verdict records its `evidence`: the deciding window's offsets in the context (entries
    joined by newlines), its text and P(yes). Every claim is judged unless `max_claims`
    caps them; the result's `truncated` then says how many were left out.
    """
    return HallucinationScorer(
        model,
        scale=scale,
        context=context,
        get_context=get_context,
        extraction=extraction,
        reason=reason,
        **options,
    )
