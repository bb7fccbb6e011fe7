"""Evidence windows (exact, on the fake engine and a fake tokenizer): how a context is cut,
which windows a claim is judged against, and the verdicts, evidence and reasons that come
back. The real engine's turn is in tests/test_hallucination_real.py."""

from __future__ import annotations

import json

import pytest

from localjudge.errors import PromptTooLongError
from localjudge.scorers import create_hallucination_scorer
from localjudge.scorers.evidence import (
    BM25,
    GAP,
    MAX_WINDOWS,
    candidate_windows,
    check_windows,
    context_text,
    gathered_window,
    plan_windows,
    sentence_pieces,
    split_windows,
)
from localjudge.testing import FakeJudge


def words(text: str) -> int:
    return len(text.split())


FACTS = [f"Station {n} recorded {n + 3} frost days in year {2000 + n}." for n in range(40)]


def test_windows_are_whole_sentences_within_the_size_sharing_their_boundary_sentence():
    text = " ".join(FACTS)
    windows = split_windows(text, words, 20)  # 8 words a sentence: 2 per window
    assert len(windows) > 1
    for window in windows:
        assert text[window.start : window.end] == window.text
        assert words(window.text) <= 20
        assert window.text.startswith("Station") and window.text.endswith(".")
    for before, after in zip(windows, windows[1:], strict=False):
        assert after.start < before.end  # the boundary sentence is in both
        assert text[after.start : before.end].count(".") == 1
    assert windows[0].start == 0 and windows[-1].end == len(text)
    assert [w.index for w in windows] == list(range(len(windows)))


def test_a_text_that_fits_is_one_window_and_a_long_sentence_is_cut():
    (whole,) = split_windows("Short. Text.", words, 20)
    assert (whole.start, whole.end, whole.text) == (0, 12, "Short. Text.")
    long = " ".join(f"w{i}" for i in range(50)) + "."
    windows = split_windows(long, words, 12)
    assert all(words(w.text) <= 12 for w in windows)
    assert " ".join(w.text for w in windows).split() == long.split()  # every word, once
    assert split_windows("", words, 12) == []


def test_context_text_joins_the_stripped_entries_by_newlines():
    assert context_text([" a ", "", "b"]) == "a\nb"


def test_bm25_ranks_the_window_that_shares_the_claims_rare_words_first():
    texts = [
        "The museum opens at nine.",
        "The ferry leaves at noon.",
        "The museum has a roof café.",
    ]
    scores = BM25(texts).scores("When does the ferry leave? At noon.")
    assert scores.index(max(scores)) == 1
    assert BM25(["東京は日本の首都です。", "富士山は高い。"]).scores("富士山")[1] > 0


def test_candidate_windows_take_the_k_best_best_first_and_all_is_capped():
    windows = split_windows(" ".join(FACTS), words, 20)
    chosen, left_out = candidate_windows(windows, ["Station 31 recorded 34 frost days."], 2)
    (mine,) = chosen
    assert len(mine) == 2 and left_out == [0]
    assert "Station 31 " in windows[mine[0]].text  # the best first: judged first
    many = split_windows(" ".join(FACTS * 3), words, 10)  # one sentence a window
    assert len(many) > MAX_WINDOWS
    (every,), (missed,) = candidate_windows(many, ["frost"], "all")
    assert len(every) == MAX_WINDOWS and missed == len(many) - MAX_WINDOWS


def gather(text: str, claim: str, size: int):
    pieces = sentence_pieces(text, words, size)
    scores = BM25([text[start:end] for start, end, _ in pieces]).scores(claim)
    return gathered_window(text, pieces, scores, size, words(GAP), index=7)


def test_a_gathered_window_joins_a_claims_best_sentences_in_the_texts_order():
    text = " ".join(FACTS)
    found = gather(text, "There was frost in 2031 and in 2005.", 20)
    assert found is not None and found.index == 7
    # 2031 is in FACTS[31] alone, 2005 in FACTS[5]: far apart, joined by the gap, the
    # earlier first; nothing else fits beside them in 20 words
    assert found.text == FACTS[5] + GAP + FACTS[31]
    assert [text[start:end] for start, end in found.spans] == [FACTS[5], FACTS[31]]
    assert (found.start, found.end) == (found.spans[0][0], found.spans[-1][1])
    evidence = found.evidence(0.25)
    assert evidence["spans"] == [list(span) for span in found.spans]
    assert evidence["window"] == 7 and evidence["pYes"] == 0.25


def test_neighbouring_sentences_gather_into_one_span_and_the_size_holds():
    text = " ".join(FACTS)
    found = gather(text, "Frost in 2012 and in 2013.", 20)
    assert found is not None and found.text == f"{FACTS[12]} {FACTS[13]}"
    assert found.spans == ((text.index(FACTS[12]), text.index(FACTS[13]) + len(FACTS[13])),)
    for size in (8, 17, 30):
        found = gather(text, "Frost in 2012, in 2013 and in 2030.", size)
        assert found is not None and words(found.text) <= size


def test_nothing_is_gathered_for_a_claim_that_shares_no_word():
    assert gather(" ".join(FACTS), "Penguins swim.", 20) is None


def test_plan_windows_gathers_only_what_the_claims_windows_do_not_hold_and_shares_it():
    judge = FakeJudge(n_ctx=2400)
    tokenized: list[str] = []
    tokenize = judge.tokenize
    judge.tokenize = lambda text: tokenized.append(text) or tokenize(text)
    context = [" ".join(FACTS[:20]), " ".join(FACTS[20:])]
    far = "There was frost in 2005 and in 2031."  # two sentences no window holds together
    near = "It was 2012."  # its one sentence is in its best window
    windows, chosen, left_out = plan_windows(
        judge, context, [far, near, far], mode=2, window_tokens=100, gather=True
    )
    assert len(tokenized) == len(set(tokenized))  # gathering cuts again, tokenizes nothing twice
    first, second, third = chosen
    contiguous = [w for w in windows if not w.spans]
    assert len(first) == 3 and len(second) == 2 and left_out == [0, 0, 0]
    gathered = windows[first[-1]]
    assert gathered.spans and gathered.index == len(contiguous) == first[-1]
    assert "2005" in gathered.text and "2031" in gathered.text
    assert third == first and len(windows) == len(contiguous) + 1  # one window, shared
    plain, (mine,), _ = plan_windows(judge, context, [far], mode=2, window_tokens=100)
    assert len(mine) == 2 and not any(w.spans for w in plain)
    judge.close()


@pytest.mark.parametrize("bad", [0, -1, "some", 1.5, True])
def test_windows_option_is_checked(bad):
    with pytest.raises(ValueError, match="windows must be"):
        check_windows(bad)


def long_context_scorer(judge, **options):
    # the fake tokenizer reads a character a token: a window of 100 holds two sentences
    return create_hallucination_scorer(
        judge,
        context=[" ".join(FACTS[:20]), " ".join(FACTS[20:])],
        window_tokens=100,
        extraction="sentences",
        **options,
    )


def test_a_long_context_is_judged_in_windows_and_the_best_window_decides():
    judge = FakeJudge(n_ctx=2400)  # the instructions, the whole context and a claim do not fit
    output = "Station 31 recorded 34 frost days in year 2031. Station 7 recorded 99 frost days."
    with pytest.raises(PromptTooLongError):
        long_context_scorer(judge, windows="off").run({"output": output})
    result = long_context_scorer(judge).run({"output": output})
    supported, invented = result.analyze_step_result["verdicts"]
    assert supported["verdict"] == "no" and invented["verdict"] == "yes"
    assert result.score == 0.5
    text = context_text([" ".join(FACTS[:20]), " ".join(FACTS[20:])])
    evidence = supported["evidence"]
    assert text[evidence["start"] : evidence["end"]] == evidence["text"]
    assert "Station 31 recorded 34 frost days in year 2031." in evidence["text"]
    assert evidence["pYes"] < 0.5 <= invented["evidence"]["pYes"]
    # against its best windows, not the whole context, best first: the supported claim
    # stopped at the window that supports it, the invented one was judged against all 4
    assert result.usage["analyze"].requests == 1 + 4
    assert "truncated" not in supported
    judge.close()


def test_every_window_is_judged_up_to_the_cap_and_the_verdict_says_what_was_left_out():
    judge = FakeJudge(n_ctx=2400, slots=8)
    scorer = create_hallucination_scorer(
        judge,
        context=[" ".join(FACTS * 2)],
        window_tokens=50,
        windows="all",
        extraction="sentences",
    )
    result = scorer.run({"output": "Station 3 recorded 6 frost days in year 2003."})
    (verdict,) = result.analyze_step_result["verdicts"]
    assert verdict["verdict"] == "no"
    assert verdict["truncated"] == {"windows": {"judged": MAX_WINDOWS, "leftOut": 80 - MAX_WINDOWS}}
    assert result.usage["analyze"].requests == 1  # its best window supports it: no more

    invented = scorer.run({"output": "Station 3 recorded 99 frost days on the moon."})
    assert invented.analyze_step_result["verdicts"][0]["verdict"] == "yes"
    assert invented.usage["analyze"].requests == MAX_WINDOWS  # no window supports it
    judge.close()


def test_a_judge_fit_for_verdicts_only_gives_reasons_built_from_the_evidence():
    judge = FakeJudge(n_ctx=2400, extracts_claims=False)  # registry fitness "verdicts"
    output = "Station 31 recorded 34 frost days in year 2031. Station 7 recorded 99 frost days."
    result = long_context_scorer(judge).run({"output": output})
    supported, invented = result.analyze_step_result["verdicts"]
    assert supported["reasonBy"] == invented["reasonBy"] == "template"
    assert supported["reason"] == f'Supported by the context: "{supported["evidence"]["text"]}"'
    assert invented["reason"].startswith("No part of the context states this; closest: ")
    assert invented["evidence"]["text"] in invented["reason"]
    assert result.generate_reason_prompt is None  # the score's reason is built, too
    assert "Station 7 recorded 99 frost days." in result.reason
    assert f'(closest: "{invented["evidence"]["text"][:40]}' in result.reason
    meaningful = result.to_dict()["judgedBy"]["meaningful"]
    assert meaningful == {"verdicts": True, "reasons": True}
    # free text asked for anyway: written by the judge, and marked as not meaningful
    opted = long_context_scorer(judge, reason="judge", claim_reasons="all").run({"output": output})
    used, opted_used = result.usage["analyze"], opted.usage["analyze"]
    assert used.generated_tokens < opted_used.generated_tokens  # closed after the verdicts
    assert opted.analyze_step_result["verdicts"][0]["reasonBy"] == "judge"
    assert opted.reason == "Explained by the fake judge."
    assert opted.to_dict()["judgedBy"]["meaningful"] == {"verdicts": True, "reasons": False}
    judge.close()


def test_without_context_a_claim_has_no_evidence_and_says_so():
    judge = FakeJudge(extracts_claims=False)
    result = create_hallucination_scorer(judge, context=[]).run({"output": "It rained."})
    (verdict,) = result.analyze_step_result["verdicts"]
    assert verdict["verdict"] == "yes" and verdict["evidence"] is None
    assert verdict["reason"] == "No context was given, so nothing supports this claim."
    judge.close()


def test_without_stored_texts_the_evidence_keeps_its_offsets_and_the_reason_names_the_window():
    judge = FakeJudge(n_ctx=2400, extracts_claims=False)
    output = "Station 31 recorded 34 frost days in year 2031."
    result = long_context_scorer(judge).run({"output": output})
    (stored,) = result.to_dict()["analyzeStepResult"]["verdicts"]
    (verdict,) = result.to_dict(store_text=False)["analyzeStepResult"]["verdicts"]
    assert verdict["evidence"] == {k: v for k, v in stored["evidence"].items() if k != "text"}
    assert verdict["reason"] == f"Supported by the context: window {stored['evidence']['window']}"
    assert "Station" not in json.dumps(verdict)
    judge.close()
