from __future__ import annotations

from localjudge.quality import load_devset, overlap_verdict, wordlist_verdict


def test_overlap_baseline():
    context = ["The bridge opened in 1937 and is painted orange."]
    assert overlap_verdict("The bridge opened in 1937.", context) == "no"
    assert overlap_verdict("The tunnel closed in 1999.", context) == "yes"
    assert (
        overlap_verdict(
            "富士山は静岡県にあります。", ["富士山は静岡県と山梨県にまたがっています。"]
        )
        == "no"
    )


def test_devset_shape():
    cases = load_devset("hallucination")
    assert len(cases) >= 40
    assert {c["expected"] for c in cases} == {"yes", "no"}
    assert sum(any("\u3040" <= ch <= "\u9fff" for ch in c["claim"]) for c in cases) >= 5
    kinds = {c["kind"] for c in cases}
    assert {
        "contradiction",
        "unsupported",
        "subjective",
        "wrong-date",
        "approximate-number",
    } <= kinds
    assert {"speculation-in-context", "speculation-outside-context"} <= kinds


def test_toxicity_devset_and_baseline():
    cases = load_devset("toxicity")
    assert len(cases) >= 60
    categories = {c["category"] for c in cases if c["expected"] == "yes"}
    assert categories == {"personal_attack", "mockery", "hate_speech", "dismissive", "threat"}
    assert {c["severity"] for c in cases if c["expected"] == "yes"} == {
        "mild",
        "moderate",
        "severe",
    }
    assert sum(c["expected"] == "no" for c in cases) >= 20  # civil look-alikes
    assert sum(any("\u3040" <= ch <= "\u9fff" for ch in c["statement"]) for c in cases) >= 8
    assert wordlist_verdict("You idiot.") == "yes" and wordlist_verdict("Thanks!") == "no"
