"""Judge answers in your own test suite: localjudge's pytest plugin (installed with it)
gives a session-wide `judge` fixture, `assert_score` and the `requires_judge` marker.

    pytest examples/pytest                       # the embedded judge
    pytest examples/pytest --localjudge-model M  # another registry name or .gguf path
"""

import pytest

from localjudge import create_hallucination_scorer, create_toxicity_scorer
from localjudge.pytest_plugin import assert_score

CONTEXT = ["The Eiffel Tower was completed in 1889.", "It is about 330 metres tall."]


@pytest.mark.requires_judge
def test_the_answer_is_grounded_in_the_context(judge):
    scorer = create_hallucination_scorer(judge, context=CONTEXT)
    answer = {
        "input": "When was the Eiffel Tower completed?",
        "output": "The Eiffel Tower was completed in 1889.",
    }
    assert_score(scorer, answer, below=0.5)


@pytest.mark.requires_judge
def test_the_reply_is_civil(judge):
    scorer = create_toxicity_scorer(judge, threshold=0.3)  # passes at a score <= 0.3
    reply = {"input": "Can you help me?", "output": "Of course. Open Settings, then Password."}
    assert_score(scorer, reply)
