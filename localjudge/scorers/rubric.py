"""The rubric scorer: a criterion the user writes, judged by the local judge under the same
grammar-constrained verdicts and scheduler as the built-in scorers, with each verdict's
probability. Mastra's `createScorer`, DeepEval's `GEval` and promptfoo's `llm-rubric`
answer the same need."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from localjudge.judge import Judge
from localjudge.prompts.rubric import (
    rubric_reason_prompt,
    rubric_verdict_prompt,
    rubric_version,
)
from localjudge.scorers.base import Scorer
from localjudge.scorers.reasons import rubric_template_reason
from localjudge.scorers.result import ScorerResult, StepUsage
from localjudge.scorers.scorer_run import ScorerRun, check_option
from localjudge.scorers.steps import cap, check_cap, verdict_confidence
from localjudge.scorers.tally import Tally
from localjudge.scorers.task import LabelledRow, VerdictTask
from localjudge.scorers.text import judge_text, split_statements

PER_MODES = ("output", "sentence")
ScoreRule = Mapping[str, float] | Callable[[list[dict]], float]


def verdict_schema(verdicts: Sequence[str]) -> dict:
    """The verdict grammar's schema: one of `verdicts`, then a reason."""
    return {
        "type": "object",
        "properties": {
            "verdict": {"type": "string", "enum": list(verdicts)},
            "reason": {"type": "string"},
        },
        "required": ["verdict", "reason"],
        "additionalProperties": False,
    }


def check_verdicts(verdicts: Any) -> tuple[str, ...]:
    if isinstance(verdicts, str) or not isinstance(verdicts, Sequence):
        raise ValueError(f"verdicts must be a list of strings, not {verdicts!r}")
    values = tuple(verdicts)
    if len(values) < 2 or len(set(values)) != len(values):
        raise ValueError(f"verdicts must be two or more distinct strings, not {list(values)!r}")
    for value in values:
        if not isinstance(value, str) or not value.strip() or '"' in value or "\\" in value:
            raise ValueError(f"a verdict must be a plain non-empty string, not {value!r}")
    return values


class RubricScorer(Scorer):
    """Judges the output (or each sentence of it) against `rubric`. The score is the mean
    over the judged texts of `score[verdict]` (default: 1 for the first verdict, 0 for the
    others: the share flagged), times `scale`, or `score(verdicts)` when a function."""

    id = "rubric-scorer"
    name = "Rubric Scorer"
    description = "A criterion you write, judged per output or per sentence."

    def __init__(
        self,
        model: Judge | str | Path | None,
        *,
        rubric: str,
        verdicts: Sequence[str] = ("yes", "no"),
        per: str = "output",
        score: ScoreRule | None = None,
        max_texts: int | None = None,
        max_text_chars: int = 2000,
        **options: Any,
    ) -> None:
        super().__init__(model, **options)
        if not isinstance(rubric, str) or not rubric.strip():
            raise ValueError("rubric must be a non-empty string: the criterion to judge by")
        check_option("per", per, PER_MODES)
        check_cap("max_texts", max_texts)
        self.rubric = rubric.strip()
        self.verdicts = check_verdicts(verdicts)
        self.per = per
        self.max_texts = max_texts
        self.max_text_chars = max_text_chars
        if score is None:
            score = {v: 1.0 if i == 0 else 0.0 for i, v in enumerate(self.verdicts)}
        if not callable(score):
            if not isinstance(score, Mapping) or set(score) != set(self.verdicts):
                raise ValueError(f"score must map every verdict {list(self.verdicts)} to a number")
            if not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in score.values()
            ):
                raise ValueError("score must map every verdict to a number")
        self.score_rule = score
        self.schema = verdict_schema(self.verdicts)
        self.prompt_version = rubric_version(self.rubric, self.verdicts)
        # one text (with the user's message) against the criterion: a true label is the
        # first verdict
        self.verdict_task = VerdictTask(
            name=self.id,
            schema=self.schema,
            prompt_version=self.prompt_version,
            prompt=self._row_prompt,
            reason=lambda value, evidence: rubric_template_reason(value["verdict"]),
            flagged=self.verdicts[0],
        )

    def _row_prompt(self, row: LabelledRow):
        return rubric_verdict_prompt(self.rubric, self.verdicts, row.input, row.text)

    def _score(self, verdicts: list[dict]) -> float:
        if not verdicts:
            return 0.0
        if callable(self.score_rule):
            return float(self.score_rule(verdicts))
        values = [float(self.score_rule[v["verdict"]]) for v in verdicts]
        return round(sum(values) / len(values) * self.scale, 4)

    def _template_reason(self, score: float, verdicts: list[dict], *, quoted: bool) -> str:
        if not verdicts:
            return f"The score is {score:g} because the output is empty."
        unit = "sentences" if self.per == "sentence" else "outputs"
        counts = ", ".join(
            f"{sum(v['verdict'] == option for v in verdicts)} {option!r}"
            for option in self.verdicts
        )
        text = f"The score is {score:g} out of {self.scale:g}: of {len(verdicts)} {unit} judged against the criterion, {counts}"
        first = [i for i, v in enumerate(verdicts) if v["verdict"] == self.verdicts[0]][:10]
        if first and self.per == "sentence":
            named = (
                "; ".join(f'"{verdicts[i]["statement"]}"' for i in first)
                if quoted
                else ", ".join(f"sentence {i + 1}" for i in first)
            )
            text += f" ({self.verdicts[0]!r}: {named})"
        return text + "."

    async def run_async(self, run: ScorerRun | dict) -> ScorerResult:
        run = ScorerRun.from_value(run)
        output = judge_text(run.output_text)
        if self.per == "sentence":
            texts = split_statements(output, self.max_text_chars)
        else:
            texts = [output[: self.max_text_chars]] if output.strip() else []
        texts, truncated = cap(texts, self.max_texts, "texts")
        usage: dict[str, StepUsage] = {}
        verdicts: list[dict] = []
        analyze_prompt = None
        if texts:
            user_input = judge_text(run.input_text)
            prompts = [
                rubric_verdict_prompt(self.rubric, self.verdicts, user_input, t) for t in texts
            ]
            reasons_for = {
                "all": None, "flagged": frozenset({self.verdicts[0]}), "none": frozenset()
            }[self.claim_reasons]  # fmt: skip
            requests = [
                self.judge_request(p, self.schema, self.verdict_max_tokens, reasons_for)
                for p in prompts
            ]
            results = await self.ask("analyze", requests, usage)
            analyze_prompt = requests[0].prompt
            for text, result, parts in zip(texts, results, prompts, strict=True):
                verdict = result.value["verdict"]
                choice = result.choice("verdict")
                verdicts.append(
                    {
                        "statement": text,
                        "verdict": verdict,
                        **self.verdict_reason(
                            result, verdict, rubric_template_reason(verdict), parts
                        ),
                        "confidence": verdict_confidence(result, verdict),
                        "probabilities": {
                            k: round(p, 4)
                            for k, p in (choice.probabilities if choice else {}).items()
                        },
                    }
                )
        score = self._score(verdicts)
        details: dict[str, Any] = {
            "rubric": self.rubric,
            "verdicts": list(self.verdicts),
            "per": self.per,
            "scale": self.scale,
        }
        reason, reason_prompt, dropped = await self.reason(
            self._template_reason(score, verdicts, quoted=True),
            rubric_reason_prompt(self.rubric, score, self.scale, verdicts) if verdicts else None,
            usage,
            Tally(score),
        )
        if dropped:
            details["judgeReasonDropped"] = dropped
        if not callable(self.score_rule):
            details["verdictScores"] = dict(self.score_rule)
        if truncated:
            details["truncated"] = truncated
        return self.result(
            run,
            score=score,
            reason=reason,
            preprocess_step_result=None,
            preprocess_prompt=None,
            analyze_step_result={"verdicts": verdicts},
            analyze_prompt=analyze_prompt,
            generate_reason_prompt=reason_prompt,
            usage=usage,
            prompt_version=self.prompt_version,
            private_reason=self._template_reason(score, verdicts, quoted=False),
            details=details,
        )


def create_rubric_scorer(
    model: Judge | str | Path | None = None,
    *,
    rubric: str,
    verdicts: Sequence[str] = ("yes", "no"),
    per: str = "output",
    score: ScoreRule | None = None,
    reason: str | None = None,
    **options: Any,
) -> RubricScorer:
    """A scorer for a criterion you write, without writing a class.

    `rubric`: the criterion in plain words ("Does the reply refuse the request?").
    `verdicts`: the answers the judge may give (default "yes", "no"); each is decoded under
    a grammar, with its probability. `per`: judge the whole output ("output") or each
    sentence ("sentence"). `score`: a mapping from verdict to value (default: 1 for the first
    verdict, 0 otherwise; the score is the mean times `scale`) or a function of the verdict
    records. `reason`, `claim_reasons`, `threshold`, `scale`, `id` as for the built-in
    scorers. From a file: `eval --scorer rubric:FILE` (the criterion as text, or JSON with
    these keys)."""
    return RubricScorer(
        model, rubric=rubric, verdicts=verdicts, per=per, score=score, reason=reason, **options
    )


def rubric_file_options(path: str | Path) -> dict[str, Any]:
    """The factory options in a rubric file: JSON with `rubric` and optionally `verdicts`,
    `per`, `score`, `id`; or plain text, the criterion itself."""
    file = Path(path).expanduser()
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as error:
        raise ValueError(f"cannot read rubric file {file}: {error.strerror or error}") from None
    if file.suffix.lower() == ".json":
        try:
            options = json.loads(text)
        except ValueError as error:
            raise ValueError(f"{file}: not JSON: {error}") from None
        if not isinstance(options, dict) or "rubric" not in options:
            raise ValueError(f'{file}: a JSON rubric is an object with a "rubric" key')
        unknown = set(options) - {"rubric", "verdicts", "per", "score", "id"}
        if unknown:
            raise ValueError(f"{file}: unknown rubric key(s) {', '.join(sorted(unknown))}")
        return options
    return {"rubric": text}
