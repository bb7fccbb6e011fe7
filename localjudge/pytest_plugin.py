"""localjudge's pytest plugin (registered under `pytest11`, so installing localjudge enables
it): a session-wide `judge` fixture, `assert_score` with a failure message a reader can act
on, and the `requires_judge` marker, which skips a test when no judge model is installed.

    from localjudge import create_hallucination_scorer
    from localjudge.pytest_plugin import assert_score

    @pytest.mark.requires_judge
    def test_answer_is_grounded(judge):
        scorer = create_hallucination_scorer(judge, context=["Paris is in France."])
        assert_score(scorer, {"input": "Where is Paris?", "output": "Paris is in France."},
                     below=0.5)

The model: `--localjudge-model NAME` (or the `localjudge_model` ini option), else
`$LOCALJUDGE_MODEL`, the `models default` choice, else the embedded judge.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # imported when used: every pytest session loads this plugin
    from localjudge.scorers.base import Scorer
    from localjudge.scorers.result import ScorerResult
    from localjudge.scorers.scorer_run import ScorerRun

MARKER = "requires_judge"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("localjudge")
    group.addoption(
        "--localjudge-model",
        default=None,
        help="judge model for the `judge` fixture: a registry name or a .gguf path",
    )
    parser.addini("localjudge_model", "judge model for the `judge` fixture", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}: skip the test when no localjudge judge model is installed"
    )


def configured_model(config: pytest.Config) -> str | None:
    return config.getoption("--localjudge-model") or config.getini("localjudge_model") or None


def missing_model(model: str | None) -> str | None:
    """Why the judge model cannot be loaded without building or downloading anything, or
    None when it can."""
    from localjudge.errors import LocalJudgeError
    from localjudge.loading import wants_fake

    if wants_fake(model):
        return None
    from localjudge.model_registry import resolve

    try:
        resolve(model, assemble=False)
    except LocalJudgeError as error:
        return f"no localjudge judge model installed ({error}); run `localjudge models assemble`"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker(MARKER) is not None:
        reason = missing_model(configured_model(item.config))
        if reason is not None:
            pytest.skip(reason)


@pytest.fixture(scope="session")
def judge(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The configured judge, loaded once for the session and closed at its end."""
    from localjudge.loading import load_judge

    with load_judge(configured_model(request.config)) as loaded:
        yield loaded


def assert_score(
    scorer: Scorer,
    item: ScorerRun | dict,
    *,
    below: float | None = None,
    above: float | None = None,
) -> ScorerResult:
    """Score `item` and assert the score is below `below` and/or above `above` (strictly),
    or, with neither, that it passes the scorer's own `threshold`. On failure the message
    gives the score, the bound, the reason and every flagged verdict with its evidence.
    Returns the result."""
    from localjudge.scorers.threshold import passes

    result = scorer.run(item)
    score = result.score
    if below is None and above is None:
        if scorer.threshold is None:
            raise ValueError("assert_score needs below=, above= or a scorer with a threshold")
        if passes(score, scorer.threshold):
            return result
        wanted = f"passes threshold {scorer.threshold}"
    else:
        ok = (below is None or score < below) and (above is None or score > above)
        if ok:
            return result
        wanted = " and ".join(
            f"{word} {bound:g}" for word, bound in (("below", below), ("above", above))
            if bound is not None
        )  # fmt: skip
    raise AssertionError(failure_message(result, f"score {score:g} is not {wanted}"))


def failure_message(result: ScorerResult, headline: str) -> str:
    lines = [f"{result.scorer_id}: {headline} (judge {result.judge})"]
    if result.reason:
        lines.append(f"  reason: {result.reason}")
    flagged = [
        v
        for v in (result.analyze_step_result or {}).get("verdicts", [])
        if v.get("verdict") == "yes"
    ]
    if flagged:
        lines.append("  flagged verdicts:")
    for verdict in flagged:
        line = f"    - {verdict.get('statement', '')!r}"
        if verdict.get("category"):
            line += f" ({verdict['category']}, {verdict.get('severity')})"
        evidence = verdict.get("evidence")
        if isinstance(evidence, dict):
            line += (
                f"; P(yes) {evidence.get('pYes')}; closest context [{evidence.get('start')}:"
                f"{evidence.get('end')}]: {evidence.get('text', '')!r}"
            )
        lines.append(line)
    return "\n".join(lines)
