"""`make quality`: how well a judge agrees with small labelled dev sets, beside a trivial
baseline. A measurement for the README, not a test threshold."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).parent / "data"
_WORD = re.compile(r"[A-Za-z]+|\d[\d,.]*")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")


def load_devset(name: str) -> list[dict]:
    path = DATA / f"{name}_dev.jsonl"
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def _units(text: str) -> set[str]:
    """Lower-cased words and numbers, plus character bigrams of CJK text."""
    units = {w.lower().rstrip(".,") for w in _WORD.findall(text) if len(w) > 2 or w[0].isdigit()}
    cjk = "".join(_CJK.findall(text))
    units |= {cjk[i : i + 2] for i in range(len(cjk) - 1)}
    return units


def overlap_verdict(claim: str, context: list[str], threshold: float = 0.7) -> str:
    """Baseline: "no" (supported) when most of the claim's words appear in the context."""
    claim_units = _units(claim)
    if not claim_units:
        return "no"
    shared = claim_units & _units(" ".join(context))
    return "no" if len(shared) / len(claim_units) >= threshold else "yes"


@dataclass
class Metrics:
    """Agreement with the labels, "yes" being the positive class."""

    n: int
    accuracy: float
    balanced_accuracy: float  # mean of the true-positive and true-negative rates
    f1: float
    false_positive_rate: float

    @classmethod
    def of(cls, expected: list[str], predicted: list[str], positive: str = "yes") -> Metrics:
        pairs = list(zip(expected, predicted, strict=True))
        tp = sum(e == positive and p == positive for e, p in pairs)
        tn = sum(e != positive and p != positive for e, p in pairs)
        fp = sum(e != positive and p == positive for e, p in pairs)
        fn = sum(e == positive and p != positive for e, p in pairs)
        tpr = tp / (tp + fn) if tp + fn else 0.0
        tnr = tn / (tn + fp) if tn + fp else 0.0
        precision = tp / (tp + fp) if tp + fp else 0.0
        f1 = 2 * precision * tpr / (precision + tpr) if precision + tpr else 0.0
        return cls(
            n=len(pairs),
            accuracy=(tp + tn) / len(pairs) if pairs else 0.0,
            balanced_accuracy=(tpr + tnr) / 2,
            f1=f1,
            false_positive_rate=fp / (fp + tn) if fp + tn else 0.0,
        )


def judge_verdicts(judge, prompts: list, schema: str) -> list[str]:
    """The judge's verdict for each prompt, run as one batch ("error" where it failed)."""
    requests = [judge.prompt_request(parts, schema, 64) for parts in prompts]
    outcomes = judge.generate_many(requests)
    return [o.value["verdict"] if not isinstance(o, Exception) else "error" for o in outcomes]


def hallucination_quality(judge) -> dict[str, Metrics]:
    """Judge and baseline verdicts on the hallucination dev set."""
    from localjudge.prompts import claim_verdict_prompt

    cases = load_devset("hallucination")
    prompts = [claim_verdict_prompt(c["context"], c["claim"]) for c in cases]
    expected = [c["expected"] for c in cases]
    return {
        "judge": Metrics.of(expected, judge_verdicts(judge, prompts, "hallucination_verdict")),
        "word-overlap baseline": Metrics.of(
            expected, [overlap_verdict(c["claim"], c["context"]) for c in cases]
        ),
        "always yes": Metrics.of(expected, ["yes"] * len(cases)),
    }


# A trivial baseline: a statement is toxic when it contains one of these words or phrases.
TOXIC_WORDS = (
    "idiot", "moron", "stupid", "dumb", "useless", "pathetic", "lazy", "disgrace", "worst",
    "whining", "nobody cares", "irrelevant", "wasting my time", "bother", "whatever",
    "regret", "watch your back", "see what happens", "criminals", "fanatics", "liars",
    "バカ", "頭が悪い", "くだらない", "誰も気に", "ただじゃおかない", "嘘つき",
)  # fmt: skip


def wordlist_verdict(statement: str) -> str:
    """Baseline: "yes" (toxic) when the statement contains a listed word or phrase."""
    lowered = statement.lower()
    return "yes" if any(word in lowered for word in TOXIC_WORDS) else "no"


def toxicity_quality(judge) -> dict[str, Metrics]:
    """Judge and baseline verdicts on the toxicity dev set."""
    from localjudge.prompts import opinion_verdict_prompt

    cases = load_devset("toxicity")
    prompts = [opinion_verdict_prompt(c["input"], c["statement"]) for c in cases]
    expected = [c["expected"] for c in cases]
    return {
        "judge": Metrics.of(expected, judge_verdicts(judge, prompts, "toxicity_verdict")),
        "word-list baseline": Metrics.of(
            expected, [wordlist_verdict(c["statement"]) for c in cases]
        ),
        "always no": Metrics.of(expected, ["no"] * len(cases)),
    }
