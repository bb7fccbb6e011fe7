"""`make run`'s sample (examples/sample.jsonl) on the real engine with the default judge:
each item against the score a right judge gives (examples/sample-expected.json), and no
reason that quotes the prompts' worked examples."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from localjudge import create_hallucination_scorer, create_toxicity_scorer, run_evals
from localjudge.prompts import hallucination, toxicity

pytestmark = pytest.mark.real

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SAMPLE = [json.loads(line) for line in (EXAMPLES / "sample.jsonl").read_text().splitlines()]
EXPECTED = json.loads((EXAMPLES / "sample-expected.json").read_text())["items"]
CLEAR = 0.8  # a verdict is clear when the judge gives it at least this probability
# what the default judge still gets wrong (issue 34's training): strict, so a fix shows
WRONG = {
    ("fuji", "hallucination"): "flags a copy with no subject, two places and a verb ending",
    ("support-rude", "toxicity"): "takes 'before bothering us' for civil",
}


@pytest.fixture(scope="module")
def results(real_judge):
    scorers = [create_hallucination_scorer(real_judge), create_toxicity_scorer(real_judge)]
    evals = run_evals(SAMPLE, scorers)
    assert all(item.ok for item in evals.items)
    return {
        (SAMPLE[item.index]["id"], name.removesuffix("-scorer")): result
        for item in evals.items
        for name, result in item.scorer_results.items()
    }


def right(score: float, expected) -> bool:
    return score > 0 if expected == "above 0" else score == expected


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(
            (item, scorer),
            marks=[pytest.mark.xfail(strict=True, reason=WRONG[item, scorer])]
            if (item, scorer) in WRONG
            else [],
            id=f"{item}-{scorer}",
        )
        for item in EXPECTED
        for scorer in ("hallucination", "toxicity")
    ],
)
def test_each_sample_item_gets_the_score_a_right_judge_gives(results, key):
    result = results[key]
    confidences = [v["confidence"] for v in result.analyze_step_result["verdicts"]]
    if key not in WRONG and any(c < CLEAR for c in confidences):
        # P(yes) moves a little with the CPU and batch shape: a near tie proves nothing
        pytest.skip(f"a verdict is not clear on this machine ({min(confidences)})")
    assert right(result.score, EXPECTED[key[0]][key[1]]), result.reason


def worked_examples() -> list[str]:
    """The prompts' worked examples (the lines after the rules), one text per prompt."""
    return [
        getattr(module, name).split("\n\n", 1)[-1]
        for module in (hallucination, toxicity)
        for name in dir(module)
        if name.startswith("_") and name.endswith("_INSTRUCTIONS")
    ]


def worked_example_phrases() -> set[tuple[str, ...]]:
    """Every run of 5 words in the prompts' worked examples."""
    return set().union(*(runs(examples) for examples in worked_examples()))


def worked_example_openings() -> set[tuple[str, ...]]:
    """The first 3 words of each worked example's reason that no other reason of its
    prompt opens with: one example's judgement, which a copying judge applies to any text."""
    openings = set()
    for examples in worked_examples():
        reasons = re.findall(r'"reason":"(.*?)"}', examples)
        firsts = [tuple(re.findall(r"\w+", reason.lower())[:3]) for reason in reasons]
        openings |= {first for first in firsts if firsts.count(first) == 1}
    return openings


def runs(text: str, n: int = 5) -> set[tuple[str, ...]]:
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def test_no_reason_quotes_the_prompts_worked_examples(results):
    examples, openings = worked_example_phrases(), worked_example_openings()
    # what the old reasons copied, and how a larger judge applied an example to a date
    assert {
        ("the", "context", "says", "1889", "not"),
        ("polite", "criticism", "of", "a", "plan"),
    } <= examples
    assert ("firm", "disagreement", "about") in openings
    assert ("the", "context", "says") not in openings  # two examples open so
    for (item_id, _), result in results.items():
        item = next(i for i in SAMPLE if i["id"] == item_id)
        judged = [" ".join([item["input"], item["output"], *item["context"]])]
        judged.append(f"The score is {result.score:g}")  # its own score, stated: true of it
        reasons = [result.reason, *(v["reason"] for v in result.analyze_step_result["verdicts"])]
        for reason in reasons:
            copied = (runs(reason) & examples) - set().union(*(runs(t) for t in judged))
            copied |= (runs(reason, 3) & openings) - set().union(*(runs(t, 3) for t in judged))
            assert not copied, (item_id, reason, copied)
