"""The scorer registry: short name -> scorer class (and factory). The command line and
every front end find scorers here, so a new scorer is one module plus one line below (or
one `register_scorer` call from the user's code)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from localjudge.scorers.base import Scorer
from localjudge.scorers.hallucination import HallucinationScorer, create_hallucination_scorer
from localjudge.scorers.rubric import RubricScorer, create_rubric_scorer, rubric_file_options
from localjudge.scorers.task import VerdictTask
from localjudge.scorers.toxicity import ToxicityScorer, create_toxicity_scorer

ScorerFactory = Callable[..., Scorer]  # factory(model, **options) -> Scorer

SCORERS: dict[str, tuple[type[Scorer], ScorerFactory]] = {
    "hallucination": (HallucinationScorer, create_hallucination_scorer),
    "toxicity": (ToxicityScorer, create_toxicity_scorer),
    "rubric": (RubricScorer, create_rubric_scorer),  # needs rubric=; or "rubric:FILE"
}
RUBRIC_FILE = "rubric:"  # "rubric:FILE": the rubric scorer with the options in FILE


def register_scorer(name: str, cls: type[Scorer], factory: ScorerFactory | None = None) -> None:
    """Make a scorer class available by `name` (to `make_scorer`, `eval --scorer`, ...)."""
    if not isinstance(cls, type) or not issubclass(cls, Scorer):
        raise ValueError(f"{cls!r} is not a Scorer subclass")
    if not name or not name.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"invalid scorer name {name!r}: use letters, digits, - and _")
    SCORERS[name] = (cls, factory or cls)


def scorer_names() -> list[str]:
    return list(SCORERS)


def is_rubric_file(name: str) -> bool:
    """Whether `name` is "rubric:FILE" (the rubric scorer with its options in FILE)."""
    return name.startswith(RUBRIC_FILE) and len(name) > len(RUBRIC_FILE)


def _entry(name: str) -> tuple[type[Scorer], ScorerFactory]:
    if is_rubric_file(name):
        return SCORERS["rubric"]
    try:
        return SCORERS[name]
    except KeyError:
        raise ValueError(f"unknown scorer {name!r}; known: {', '.join(SCORERS)}") from None


def scorer_options(name: str) -> set[str]:
    """The keyword options a registered scorer takes (its class and its base classes)."""
    cls, _ = _entry(name)
    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        for parameter in inspect.signature(init).parameters.values():
            if parameter.kind is parameter.KEYWORD_ONLY:
                names.add(parameter.name)
    return names


def make_scorer(name: str, model: Any = None, **options: Any) -> Scorer:
    """A scorer by its short name, or "rubric:FILE" for a rubric scorer whose options are
    in FILE (see `rubric_file_options`). Options that are None, or that this scorer does not
    take, are left out, so one option set configures several scorers (`score_mode` reaches
    the toxicity scorer only)."""
    _, factory = _entry(name)
    accepted = scorer_options(name)
    chosen = {k: v for k, v in options.items() if v is not None and k in accepted}
    if is_rubric_file(name):
        chosen = {"id": name, **chosen, **rubric_file_options(name[len(RUBRIC_FILE) :])}
    return factory(model, **chosen)


def task_names() -> list[str]:
    """The registered scorers that declare a verdict task (besides "rubric:FILE")."""
    return [n for n, (cls, _) in SCORERS.items() if isinstance(cls.verdict_task, VerdictTask)]


def verdict_task(name: str) -> VerdictTask:
    """The verdict task of a registered scorer, or of the rubric in "rubric:FILE"."""
    cls, _ = _entry(name)
    task = make_scorer(name).verdict_task if is_rubric_file(name) else cls.verdict_task
    if not isinstance(task, VerdictTask):
        known = ", ".join([*task_names(), "rubric:FILE"])
        raise ValueError(f"scorer {name!r} declares no verdict task; tasks: {known}")
    return task
