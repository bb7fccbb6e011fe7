"""The judge-tuning data builder (training/make_data.py): what it reads, how it splits, and
that its examples end exactly where the scorers' verdict grammar reaches the choice."""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import io
import json
import lzma
import random
import re
import sys
import tarfile
from pathlib import Path

import gguf
import numpy as np
import pytest

from localjudge.quality.labelled import Row

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def make_data():
    spec = importlib.util.spec_from_file_location("make_data", ROOT / "training" / "make_data.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_data"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_source_file_has_a_recorded_sha256(make_data):
    hashes = make_data.recorded_hashes()
    for repo, path in make_data.FILES.values():
        assert f"{repo}/{path}" in hashes, f"{repo}/{path} missing from training/DATA.md"
    assert len(hashes) == len(make_data.FILES)


def test_a_source_file_that_differs_from_its_hash_is_refused(make_data, tmp_path):
    repo, inner = make_data.FILES["davidson"]
    (tmp_path / repo / inner).parent.mkdir(parents=True)
    (tmp_path / repo / inner).write_text(
        "count,hate_speech,offensive_language,neither,class,tweet\n"
    )
    with pytest.raises(make_data.SourceError, match="sha256 differs"):
        make_data.source_path(tmp_path, "davidson", make_data.recorded_hashes())
    with pytest.raises(make_data.SourceError, match="missing source file"):
        make_data.source_path(tmp_path, "esnli_s1", make_data.recorded_hashes())


def test_balance_share_evens_the_labels_within_each_word_share_band(make_data):
    E = make_data.Example
    context = ("The bridge over the river opened in 1931 after four years of work.",)
    claims = [
        "The bridge opened in 1931.",
        "The river bridge opened in 1931.",
        "Four years of work.",
        "The bridge opened after four years of work.",
        "The bridge over the river opened.",
    ]
    copied = [E("hallucination", "snli/entailment", "no", claim, context) for claim in claims]
    wrong = "The bridge opened in 1931 over the river."  # every word in the context
    copied_wrong = [E("hallucination", "snli/contradiction", "yes", wrong, context)]
    cats = [f"A cat sleeps on a warm mat {i}." for i in range(3)]
    unrelated = [E("hallucination", "snli/neutral", "yes", cat, context) for cat in cats]
    unrelated_ok = [E("hallucination", "synthetic/copy", "no", "Dogs bark at night.", context)]
    toxic = [E("toxicity", "toxigen/hate", "yes", f"Statement {i}.") for i in range(4)]
    examples = copied + unrelated + toxic + copied_wrong + unrelated_ok
    assert {make_data.share_band(e) for e in copied + copied_wrong} == {3}
    assert {make_data.share_band(e) for e in unrelated + unrelated_ok} == {0}
    assert make_data.share_band(toxic[0]) is None
    kept = make_data.balanced_by_share(examples)
    held = [e for e in kept if e.task == "hallucination"]
    by_band = {(make_data.share_band(e), e.label) for e in held}
    assert sorted(by_band) == [(0, "no"), (0, "yes"), (3, "no"), (3, "yes")]
    assert len(held) == 4  # one of each label in each band: the more frequent label drawn down
    assert copied_wrong[0] in kept and unrelated_ok[0] in kept  # the rarer label all kept
    assert [e for e in kept if e.task == "toxicity"] == toxic  # toxicity untouched
    assert kept == [e for e in examples if e in kept]  # the order kept
    assert make_data.balanced_by_share(examples) == kept  # the same draw every time


def test_the_split_follows_the_text_only(make_data):
    a = make_data.Example("toxicity", "x", "yes", "Some statement here.")
    b = make_data.Example("toxicity", "y", "no", "  some statement HERE. ")
    c = make_data.Example("toxicity", "x", "yes", "Another statement entirely.")
    assert make_data.heldout(a, 0.2) == make_data.heldout(b, 0.2)  # same text, same side
    sides = {
        make_data.heldout(make_data.Example("t", "s", "no", f"text {i}"), 0.2) for i in range(200)
    }
    assert sides == {True, False}
    assert make_data.heldout(c, 0.0) is False and make_data.heldout(c, 1.0) is True


def test_the_template_weight_scales_only_our_templates(make_data):
    counts = make_data.PILOT["toxicity"]
    same = make_data.train_counts(counts, 2.5)
    light = make_data.train_counts(counts, 2.5, template_weight=0.43)
    assert same == {k: round(v * 2.5) for k, v in counts.items()}
    for prefix in counts:
        if prefix in make_data.TRAIN_ONLY:
            assert light[prefix] < same[prefix]
        else:
            assert light[prefix] == same[prefix]
    templates = sum(light[k] for k in make_data.TRAIN_ONLY if k in light)
    assert round(templates / sum(light.values()), 2) == 0.21  # the shipped run's share
    added = make_data.ADDED["brush-offs"]["toxicity"]  # an added template source: weighted too
    assert make_data.train_counts(added, 1.5, 0.43) == {
        k: round(v * 1.5 * 0.43) for k, v in added.items()
    }


def test_tweets_lose_mentions_links_and_retweet_marks(make_data):
    raw = "RT @someone: &amp; this is &#8220;fine&#8221; http://t.co/abc @other"
    assert make_data.clean_tweet(raw) == "& this is “fine”"


def test_swaps_change_what_the_sentence_says(make_data):
    rng = random.Random(1)
    seen = set()
    for sentence in (
        "The bridge opened in 1937 after 4 years of work.",
        "The museum is open on Sundays.",
        "The painting was bought by Mellon in Paris.",
    ):
        for _ in range(20):
            change = make_data.swapped(sentence, rng, ["Carnegie", "Frick"])
            if change is not None:
                kind, text = change
                assert text != sentence
                seen.add(kind)
    assert {"synthetic/date", "synthetic/number", "synthetic/negation"} <= seen


def test_japanese_claims_are_labelled_by_what_the_context_says(make_data):
    for example in make_data.japanese_synthetic(200, random.Random(3)):
        context = "".join(example.context)
        if example.source == "synthetic-ja/copy":
            assert example.label == "no"
        else:
            assert example.label == "yes" and example.text not in context


@pytest.mark.real
def test_examples_end_at_the_verdict_choice_of_the_real_grammar(make_data, real_judge):
    """The training prompt is the scorer's prompt, tokenized by llama.cpp, followed by the
    tokens the grammar forces, so the next token is the verdict as the scheduler reads it."""
    tokens = make_data.Tokens(real_judge)
    for task in ("hallucination", "toxicity"):
        forced, yes, no = tokens.choice[task]
        text = real_judge.engine.detokenize(forced) if forced else ""
        assert text.replace(" ", "") == '{"verdict":"'
        assert set(yes).isdisjoint(no)
        pieces = {real_judge.engine.detokenize([t]) for t in yes}
        assert "yes" in pieces and all("yes".startswith(p.split('"')[0]) for p in pieces)
    example = make_data.Example(
        "hallucination", "t", "yes", "The tower is red.", ("The tower is 330 m tall.",)
    )
    encoded = tokens.encode(example)
    request = real_judge.prompt_request(
        make_data.verdict_prompt(example), "hallucination_verdict", max_tokens=64
    )
    assert encoded["ids"][: len(encoded["ids"]) - len(forced)] == real_judge.tokenize(
        request.prompt
    )
    assert encoded["label"] == "yes" and encoded["yes"] and encoded["no"]


def test_contrast_cases_are_labelled_by_who_is_attacked_and_whether_hate_is_endorsed(make_data):
    examples = make_data.contrast(400, random.Random(5))
    kinds = {e.source.split("/")[1]: e.label for e in examples}
    assert kinds == {
        "counter": "no", "negated": "no", "identity-positive": "no", "profanity": "no",
        "endorse": "yes", "hate": "yes", "profanity-at": "yes",
    }  # fmt: skip
    quoted = [e.text for e in examples if e.source == "contrast/counter" and '"' in e.text]
    assert quoted and all(  # the quoted hate is written here, never a source's row
        any(g.lower() in q.lower() for g in make_data._GROUPS) for q in quoted
    )


def test_joined_claims_are_supported_only_when_both_halves_are_copied(make_data):
    passages = [
        "The bridge opened in 1937.", "Two dogs run across the park.",
        "The museum in Paris is open on Sundays.", "A man sells 40 apples at the market.",
    ] * 5  # fmt: skip
    examples = make_data.joined(passages, random.Random(2))
    assert {e.source for e in examples} == {"synthetic/joined", "synthetic/joined-swap"}
    for example in examples:
        halves = example.text.replace("; ", "|").replace(", and ", "|").replace(", while ", "|")
        first, second = halves.split("|")
        context = example.context[0].lower()
        assert first.lower() in context
        assert (second.lower().rstrip(".") in context) == (example.label == "no")


def test_wice_claims_are_judged_against_the_window_that_holds_their_support(make_data, tmp_path):
    sentences = [f"Sentence {i} says fact {i} about the town." for i in range(40)]
    records = [
        {"label": "supported", "claim": "Fact 31 holds.", "supporting_sentences": [[31]],
         "evidence": sentences},
        {"label": "partially_supported", "claim": "Fact 5 and more.",
         "supporting_sentences": [[5]], "evidence": sentences},
        {"label": "not_supported", "claim": "Sentence 12 fact 12 town.",
         "supporting_sentences": [], "evidence": sentences},
        {"label": "supported", "claim": "Facts 1 and 39.", "supporting_sentences": [[1, 39]],
         "evidence": sentences},  # support in no one window: left out
    ]  # fmt: skip
    path = tmp_path / "dev.jsonl"
    path.write_text("\n".join(__import__("json").dumps(r) for r in records) + "\n")
    words = lambda text: len(text.split())  # noqa: E731
    examples = make_data.wice(path, words, random.Random(1))
    assert [(e.source, e.label) for e in examples] == [
        ("wice/supported", "no"), ("wice/partially_supported", "yes"),
        ("wice/not_supported", "yes"),
    ]  # fmt: skip
    supported, partial, unsupported = examples
    assert "Sentence 31 says" in supported.context[0] and "Sentence 5 says" in partial.context[0]
    assert "Sentence 12 says" in unsupported.context[0]  # the window BM25 ranks first
    for example in examples:
        assert words(example.context[0]) <= make_data.WINDOW_TOKENS
        assert example.document == " ".join(sentences)  # held-out rows get the whole page


def test_page_sentences_are_unsupported_by_far_windows_and_supported_by_their_own(
    make_data, tmp_path
):
    sentences = [f"Item{i:02d} belonged to owner{i:02d} living near river{i:02d} forever."
                 for i in range(40)]  # fmt: skip
    sentences[20:30] = sentences[:10]  # said twice: never "yes" against a window that repeats it
    page = ["(meta data) TITLE: x", "### Menu", *sentences]
    path = tmp_path / "dev.jsonl"
    path.write_text(json.dumps({"evidence": page}) + "\n")
    words = lambda text: len(text.split())  # noqa: E731
    examples = [
        e for seed in range(10) for e in make_data.wice_pages(path, words, random.Random(seed))
    ]
    assert {(e.source, e.label) for e in examples} == {
        ("wice/page-elsewhere", "yes"), ("wice/page-inside", "no"),
    }  # fmt: skip
    text = " ".join(page)
    for example in examples:
        assert example.text in sentences  # prose only: no page furniture as a claim
        window = example.context[0]
        assert words(window) <= make_data.WINDOW_TOKENS
        assert (example.text in window) == (example.label == "no")
        if example.label == "yes" and sentences.count(example.text) == 1:
            # two windows away: not even a neighbour, which shares a sentence with its own
            start, end = text.index(example.text), text.index(window)
            assert end > start + len(example.text) + len(window) // 2 or (
                end + len(window) + len(window) // 2 < start
            )


def test_intrinsic_swaps_change_a_claim_only_with_words_its_window_holds(make_data, tmp_path):
    swap = make_data.intrinsic_swap
    rest = "Paris hosted 2004 games. Brown lost."
    sentence = "In 1998 Smith defeated Jones at Wimbledon."
    found = {swap(sentence, rest, random.Random(seed)) for seed in range(40)}
    kinds = {kind for kind, _ in found}
    assert kinds == {"entity", "number", "exchange"}
    for kind, claim in found:
        assert claim != sentence
        new = set(claim.rstrip(".").split()) - set(sentence.rstrip(".").split())
        assert new <= set(rest.replace(".", "").split()) or kind == "exchange"
    assert ("exchange", "In 1998 Jones defeated Smith at Wimbledon.") in found
    assert ("number", "In 2004 Smith defeated Jones at Wimbledon.") in found
    # names in a list or in one name are not exchanged: their order says nothing
    assert not make_data.related("Smith and Jones founded it.", "Smith", "Jones")
    assert not make_data.related("Ann, Bo and Cy met.", "Ann", "Cy")
    assert not make_data.related("The Bank of England rose.", "Bank", "England")
    assert make_data.related("Ann beat Bo.", "Ann", "Bo")
    assert swap("A cat sat on the mat today.", "Nothing to take.", random.Random(0)) is None

    name = lambda i, head: head + "abcdefghij"[i // 10] + "klmnopqrst"[i % 10]  # noqa: E731
    sentences = [f"In {1900 + i} Mayor {name(i, 'Ann')} thanked Judge {name(i, 'Bo')} warmly."
                 for i in range(40)]  # fmt: skip
    path = tmp_path / "dev.jsonl"
    path.write_text(json.dumps({"evidence": sentences}) + "\n")
    words = lambda text: len(text.split())  # noqa: E731
    examples = [
        e for seed in range(5) for e in make_data.wice_intrinsic(path, words, random.Random(seed))
    ]
    assert {e.source for e in examples} >= {"wice/intrinsic-copy", "wice/intrinsic-swap/entity"}
    for example in examples:
        (window,) = example.context
        assert words(window) <= make_data.WINDOW_TOKENS
        assert (example.text in window) == (example.label == "no")
        assert example.source.startswith("wice/")  # left out with WiCE when it is held out
        said = set(window.replace(".", "").split())
        assert set(example.text.replace(".", "").split()) <= said  # the window's words only


def test_restatements_are_kept_only_when_they_keep_to_their_window_without_copying_it(make_data):
    window = (
        "The museum opened in 1905 in Leeds. It holds 4,000 paintings and a library of rare "
        "maps, and its founder, Edith Crane, gave most of the collection."
    )
    faithful = make_data.faithful_restatement
    assert faithful("The founder Edith Crane gave the museum most of its 4,000 paintings.", window)
    assert faithful("Since 1905 Leeds has had a museum with a rare map library.", window)
    # a copy of six words or more, a number or a name the window lacks, another subject
    assert not faithful("It holds 4,000 paintings and a library of maps.", window)
    assert not faithful("The museum in Leeds opened in 1907 with many paintings.", window)
    assert not faithful("Edith Crane and Paul Shaw founded the museum.", window)
    assert not faithful("Visitors enjoy quiet gardens, cafes and guided walking tours.", window)

    records = [
        {"page": i, "window": window.replace("Leeds", town), "sentences": [
            f"Since 1905 {town} has had a museum with a rare map library.",
            "It holds 4,000 paintings and a library of maps.",
        ]}
        for i, town in enumerate(["Leeds", "York", "Bath", "Hull", "Ripon", "Selby"] * 5)
    ]  # fmt: skip
    examples = make_data.restated(records, random.Random(0))
    assert len(examples) == len(records)  # the copy never passes; the restatement always does
    kinds = {e.source for e in examples}
    assert "wice/restatement/kept" in kinds
    assert any(k.startswith("wice/restatement/swapped/") for k in kinds)
    for example in examples:
        (context,) = example.context
        kept = example.source == "wice/restatement/kept"
        assert example.label == ("no" if kept else "yes")
        written = {s for r in records for s in r["sentences"]}
        assert (example.text in written) == kept  # a swapped one is changed from what was written
        assert example.source.startswith("wice/")  # left out with WiCE when it is held out


def test_only_known_sources_can_be_held_out(make_data):
    assert make_data.held_out_sources("davidson,wice") == ["davidson", "wice"]
    with pytest.raises(Exception, match="unknown source 'hatecheck'"):
        make_data.held_out_sources("davidson,hatecheck")


def test_fever_pairs_are_detokenized_and_labelled_by_their_evidence(make_data, tmp_path):
    records = [
        {"claim": "Colombiana is a French film .", "label": "SUPPORTS",
         "evidence": "Colombiana is a 2011 French action film -LRB- drama -RRB- by `` Besson '' ."},
        {"claim": "Colombiana is a French film .", "label": "REFUTES",
         "evidence": "Colombiana is a 2011 Italian action film ."},
        {"claim": "Colombiana is a French film .", "label": "SUPPORTS",
         "evidence": "Colombiana is a 2011 French action film -LRB- drama -RRB- by `` Besson '' ."},
        {"claim": "Something .", "label": "NOT ENOUGH INFO", "evidence": "Anything ."},
    ]  # fmt: skip
    path = tmp_path / "fever.jsonl"
    path.write_text("\n".join(__import__("json").dumps(r) for r in records) + "\n")
    examples = make_data.fever(path, path)  # a pair seen twice is kept once
    assert [(e.source, e.label, e.text) for e in examples] == [
        ("fever/supports", "no", "Colombiana is a French film."),
        ("fever/refutes", "yes", "Colombiana is a French film."),
    ]
    assert examples[0].context == (
        'Colombiana is a 2011 French action film (drama) by " Besson ".',
    )


def test_multinli_pairs_are_labelled_by_entailment_alone(make_data, tmp_path):
    path = tmp_path / "dev.txt"
    path.write_text(
        "entailment\t(The Shia are dominant in Iran.)\tIn Iran, dominance is held by the Shia.\n"
        "not_entailment\tThe sun had not come up yet.\tThe sun was setting.\n"
        "entailment\t(The Shia are dominant in Iran.)\tIn Iran, dominance is held by the Shia.\n"
        "neutral\tA premise.\tA label DocNLI never writes.\n"
        "entailment\tA premise with no hypothesis.\n"
        "not_entailment\t \tAn empty premise.\n",
        encoding="utf-8",
    )
    examples = make_data.mnli(path)  # a pair met twice is kept once; other shapes left out
    assert [(e.source, e.label, e.text, e.context) for e in examples] == [
        ("mnli/entailment", "no", "In Iran, dominance is held by the Shia.",
         ("(The Shia are dominant in Iran.)",)),
        ("mnli/not-entailment", "yes", "The sun was setting.", ("The sun had not come up yet.",)),
    ]  # fmt: skip


def test_windowed_examples_keep_their_evidence_and_label_within_the_window_size(make_data):
    fillers = [f"Filler sentence number {i} about nothing." for i in range(30)]
    examples = [
        make_data.Example("hallucination", "snli/entailment", "no", f"Claim {i}.",
                          (f"The evidence sentence {i}.",))
        for i in range(40)
    ]  # fmt: skip
    words = lambda text: len(text.split())  # noqa: E731
    out = make_data.in_windows(examples, fillers, words, random.Random(3), share=0.5)
    assert [(e.text, e.label, e.source) for e in out] == [
        (e.text, e.label, e.source) for e in examples
    ]
    padded = [e for e in out if len(e.context[0]) > 30]
    assert 0 < len(padded) < len(out)  # about half
    for before, after in zip(examples, out, strict=True):
        assert len(after.context) == 1 and before.context[0] in after.context[0]
        assert words(after.context[0]) <= make_data.WINDOW_TOKENS


def test_a_folder_source_is_hashed_by_its_files_names_and_contents(make_data, tmp_path):
    folder = tmp_path / "all_files"
    folder.mkdir()
    (folder / "b.txt").write_text("second")
    (folder / "a.txt").write_text("first")
    lines = "".join(
        f"{name} {hashlib.sha256(text.encode()).hexdigest()}\n"
        for name, text in (("a.txt", "first"), ("b.txt", "second"))
    )
    digest = make_data.sha256_of(folder)
    assert digest == hashlib.sha256(lines.encode()).hexdigest()  # as DATA.md says
    (folder / "b.txt").write_text("changed")
    assert make_data.sha256_of(folder) != digest
    repo, inner = make_data.FILES["stormfront_sentences"]
    (tmp_path / repo / inner).mkdir(parents=True)
    (tmp_path / repo / inner / "1_1.txt").write_text("not the dataset")
    with pytest.raises(make_data.SourceError, match="sha256 differs"):
        make_data.source_path(tmp_path, "stormfront_sentences", make_data.recorded_hashes())
    with pytest.raises(make_data.SourceError, match="missing source file"):
        make_data.source_path(tmp_path / "none", "stormfront_sentences", {})


def test_stormfront_keeps_sentences_judged_without_their_thread(make_data, tmp_path):
    (tmp_path / "all_files").mkdir()
    rows = [
        ("1_1", "0", "hate", "These people are a plague on our nation ."),
        ("1_2", "0", "noHate", "I visited Dublin last summer with my family ."),
        ("1_3", "2", "hate", "They do n't belong here , and neither do their kids ."),
        ("1_4", "0", "idk/skip", "What do you mean by that exactly ?"),
        ("1_5", "0", "relation", "And that is exactly why it happened again ."),
        ("1_6", "0", "noHate", "Ok ."),
    ]
    lines = ["file_id,user_id,subforum_id,num_contexts,label"]
    for file_id, contexts, label, text in rows:
        lines.append(f"{file_id},1,1,{contexts},{label}")
        (tmp_path / "all_files" / f"{file_id}.txt").write_text(text + "\n")
    (tmp_path / "labels.csv").write_text("\n".join(lines) + "\n")
    examples = make_data.stormfront(tmp_path / "labels.csv", tmp_path / "all_files")
    assert [(e.source, e.label, e.text) for e in examples] == [
        ("stormfront/hate", "yes", "These people are a plague on our nation."),
        ("stormfront/no-hate", "no", "I visited Dublin last summer with my family."),
    ]  # thread-dependent, unsure, "relation" and too-short sentences are left out


def test_texts_typed_to_an_agent_are_labelled_by_the_majority_of_their_annotators(
    make_data, tmp_path
):
    degrees = ("1", "0", "-1", "-2", "-3")
    header = ["example_id", "conv_id", "prev_agent", "prev_user", "agent", "user", "bot"]
    for a in (1, 2, 3):
        header += [f"Annotator{a}_is_abuse.{d}" for d in degrees]
        header += [f"Annotator{a}_target.system"]

    def row(user, *marks):  # one degree per annotator, "" for one who did not label it
        cells = ["1", "c", "", "", "How can I help?", user, "CarbonBot"]
        for mark in marks:
            cells += ["1" if mark == d else "0" for d in degrees] + ["1" if mark < "1" else "0"]
        return ",".join(f'"{c}"' for c in cells)

    emoji = "<span class='emoji-bytes' data-emoji-bytes='[240, 159, 164, 173]'></span>"
    rows = [
        row("you are a useless program", "-1", "-2", "1"),  # two of three: abusive
        row("what time is it", "1", "1", ""),  # two of two: not abusive
        row("shut up", "-1", "1", ""),  # split: left out
        row("whatever", "0", "0", "1"),  # ambiguous: left out
        row("fuck you", "-3", "1", ""),  # met again below: pooled, 3 of 4 abusive
        row("Fuck you", "-2", "-1", ""),
        row(f"thanks{emoji}", "1", "1", "1"),
    ]
    path = tmp_path / "split.csv"
    path.write_text("\n".join([",".join(header), *rows]) + "\n", encoding="utf-8")
    examples = make_data.convabuse({"test": path})
    assert [(e.source, e.label, e.text) for e in examples] == [
        ("convabuse/test/abusive", "yes", "you are a useless program"),
        ("convabuse/test/not-abusive", "no", "what time is it"),
        ("convabuse/test/abusive", "yes", "fuck you"),
        ("convabuse/test/not-abusive", "no", "thanks\U0001f92d"),
    ]
    assert not any(e.input for e in examples)  # judged alone, as the other public sources


def test_comments_are_hate_from_half_their_annotators_and_a_conflicting_text_is_left_out(
    make_data, tmp_path
):
    path = tmp_path / "Ethos_Dataset_Binary.csv"
    path.write_text(
        "comment;isHate\n"
        "They should all be deported;1.0\n"
        '"nice  video\n ";0.0\n'  # whitespace, a quoted line break among it, collapsed
        "half of them said so;0.5\n"
        "Nice video;0.1\n"  # met again, the same label: kept once
        "say it twice;0.6\n"
        "Say it twice;0.2\n"  # met again, the other label: left out
        ";1.0\n",
        encoding="utf-8",
    )
    examples = make_data.ethos(path)
    assert [(e.source, e.label, e.text) for e in examples] == [
        ("ethos/hate", "yes", "They should all be deported"),
        ("ethos/not-hate", "no", "nice video"),
        ("ethos/hate", "yes", "half of them said so"),
    ]
    assert not any(e.input for e in examples)


def test_news_comments_are_sorted_into_brush_offs_attacks_and_healthy_by_their_labels(
    make_data, tmp_path
):
    header = (
        "_unit_id,_trusted_judgments,comment,antagonize,antagonize:confidence,condescending,"
        "condescending:confidence,dismissive,dismissive:confidence,generalisation,"
        "generalisation:confidence,generalisation_unfair,generalisation_unfair:confidence,"
        "healthy,healthy:confidence,hostile,hostile:confidence,sarcastic,sarcastic:confidence"
    )

    def row(text, healthy=1, **marked):
        labels = ["antagonize", "condescending", "dismissive", "generalisation",
                  "generalisation_unfair", "healthy", "hostile", "sarcastic"]  # fmt: skip
        cells = []
        for name in labels:
            value = healthy if name == "healthy" else marked.get(name, 0)
            cells += [str(float(value) if name == "generalisation_unfair" else value), "0.8"]
        return ",".join(["1", "3", json.dumps(text), *cells])

    path = tmp_path / "test.csv"
    path.write_text(
        "\n".join([
            header,
            row("Nobody here  asked you.", healthy=0, dismissive=1),
            row("Bless your heart, read a book.", healthy=0, condescending=1, sarcastic=1),
            row("You are a liar and a crook.", healthy=0, hostile=1, dismissive=1),
            row("Typical troll post.", healthy=0, antagonize=1),
            row("Good point about the budget."),
            row("Oh sure, that will work.", healthy=0, sarcastic=1),  # sarcasm alone: out
            row("All of them are the same.", healthy=1, generalisation=1),  # out
            row("Unhealthy, with no reason given.", healthy=0),  # out
            row("good point about the BUDGET.", healthy=0, dismissive=1),  # two kinds: out
            row("Typical troll post.", healthy=0, hostile=1),  # met again, same kind: once
        ]) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    examples = make_data.ucc(path)
    assert [(e.source, e.label, e.text) for e in examples] == [
        ("ucc/subtle", "yes", "Nobody here asked you."),
        ("ucc/subtle", "yes", "Bless your heart, read a book."),
        ("ucc/hostile", "yes", "You are a liar and a crook."),
        ("ucc/hostile", "yes", "Typical troll post."),
    ]
    assert make_data.FILES["ucc_test"][1] == "corpus/test.csv"  # the validation split unread
    for measured_only in ("ucc", "ethos"):  # their licences keep them out of any adapter
        assert make_data.held_out_sources(measured_only) == [measured_only]
        with pytest.raises(argparse.ArgumentTypeError, match="unknown source"):
            make_data.added_sources(measured_only)


def test_hate_speech_and_its_counter_narratives_are_taken_apart_and_measured_only(
    make_data, tmp_path
):
    path = tmp_path / "Multitarget-CONAN.csv"
    path.write_text(
        "INDEX,HATE_SPEECH,COUNTER_NARRATIVE,TARGET,VERSION\n"
        '0,"They  are all thieves.","Most of them work hard, like you.",MIGRANTS,V1\n'
        '1,They are all thieves.,"Where are the figures for that?",MIGRANTS,V2\n'
        "2,Women should not vote.,They are all thieves.,WOMEN,V1\n"  # both kinds: out
        '3,Keep them out of school.,"Children learn best together.",DISABLED,V1\n',
        encoding="utf-8",
    )
    examples = make_data.conan(path)
    assert [(e.source, e.label, e.text) for e in examples] == [
        ("conan/counter", "no", "Most of them work hard, like you."),
        ("conan/counter", "no", "Where are the figures for that?"),
        ("conan/hate", "yes", "Women should not vote."),
        ("conan/hate", "yes", "Keep them out of school."),
        ("conan/counter", "no", "Children learn best together."),
    ]
    # research use only, no redistribution: it can be held out and measured, never added
    assert make_data.held_out_sources("conan") == ["conan"]
    with pytest.raises(argparse.ArgumentTypeError, match="unknown source"):
        make_data.added_sources("conan")


def test_adversarial_statements_keep_their_gold_label_and_leave_out_insults_called_not_hate(
    make_data, tmp_path
):
    header = (
        "entry_id,text,type,target,round.base,round.set,set,split,label_gold,matched_text,"
        "matched_id"
    )
    path = tmp_path / "train.csv"
    path.write_text(
        "\n".join([
            header,
            '1,"I would love to \U0001f52a some  \U0001f473",derogation,[],5,5a,original,train,1,x,2',
            '2,I would love to \U0001f44f some \U0001f473,none,[],5,5b,perturbation,train,0,x,1',
            "3,if you hate them you are a Moron,none,[],5,5a,original,train,0,x,4",  # insult: out
            "4,fucking insomnia,none,[],5,5b,perturbation,train,0,x,3",  # no target: kept
            "5,say it twice,derogation,[],6,6a,original,train,1,x,6",
            "6,Say it twice,none,[],6,6b,perturbation,train,0,x,5",  # both labels: out
        ]) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    examples = make_data.hatemoji({"train": path})
    assert [(e.source, e.label, e.text) for e in examples] == [
        ("hatemoji/train/hate", "yes", "I would love to \U0001f52a some \U0001f473"),
        ("hatemoji/train/not-hate", "no", "I would love to \U0001f44f some \U0001f473"),
        ("hatemoji/train/not-hate", "no", "fucking insomnia"),
    ]
    assert not any(e.input for e in examples)
    # trained from its train split, measured from its test split; the test suite never read
    assert make_data.added_sources("hatemoji") == ["hatemoji"]
    assert make_data.held_out_sources("hatemoji") == ["hatemoji"]
    assert {prefix.split("/")[1] for prefix in make_data.HELD_OUT_SOURCE["hatemoji"]} == {"test"}
    assert {prefix.split("/")[1] for prefix in make_data.ADDED["hatemoji"]["toxicity"]} == {"train"}
    assert not any("HatemojiCheck" in inner for _, inner in make_data.FILES.values())


def test_hatemoji_pairs_are_drawn_whole_and_on_one_side_of_the_split(make_data, tmp_path):
    header = (
        "entry_id,text,type,target,round.base,round.set,set,split,label_gold,matched_text,"
        "matched_id"
    )
    rows = [header]
    for i in range(40):  # 40 pairs: an original and the perturbation written of it
        hate, flipped = ("1", "0") if i % 2 else ("0", "1")  # originals of either label
        rows.append(f"{2 * i},they are vermin no {i},x,[],5,5a,original,train,{hate},x,{2 * i + 1}")
        rows.append(
            f"{2 * i + 1},they are lovely no {i},x,[],5,5b,perturbation,train,{flipped},x,{2 * i}"
        )
    rows.append("80,same again,derogation,[],6,6a,original,train,1,x,81")
    rows.append("81,you moron same again,none,[],6,6b,perturbation,train,0,x,80")  # insult: out
    rows.append("82,both kept hateful,derogation,[],6,6a,original,train,1,x,83")
    # both hateful: no contrast, out
    rows.append("83,both kept hateful too,derogation,[],6,6b,perturbation,train,1,x,82")
    path = tmp_path / "train.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")  # fmt: skip
    examples = make_data.hatemoji_pairs(path)
    assert len(examples) == 80 and {e.pair for e in examples} == {str(2 * i) for i in range(40)}
    for pair in {e.pair for e in examples}:
        members = [e for e in examples if e.pair == pair]
        assert sorted(e.label for e in members) == ["no", "yes"]
        assert {make_data.heldout(e, 0.2) for e in members} in ({True}, {False})
        hateful = "they are vermin" if int(pair) % 4 == 2 else "they are lovely"
        assert [e.text for e in members if e.label == "yes"][0].startswith(hateful)
    counts = {"hatemoji/train/pair-hate": 10, "hatemoji/train/pair-not-hate": 10}
    drawn = make_data.take_pairs(examples, counts, random.Random(1))
    assert len(drawn) == 20 and len({e.pair for e in drawn}) == 10
    one_side = [e for e in examples if e.label == "yes" or int(e.pair) % 4]  # some pairs halved
    assert all(
        sum(d.pair == e.pair for d in one_side) == 2
        for e in make_data.take_pairs(one_side, counts, random.Random(1), upto=True)
    )
    with pytest.raises(make_data.SourceError):
        make_data.take_pairs(examples, {k: 50 for k in counts}, random.Random(1))
    with pytest.raises(argparse.ArgumentTypeError):
        make_data.added_sources("hatemoji,hatemoji-pairs")


def test_counter_replies_name_the_group_they_defend_and_quote_no_hate(make_data):
    examples = make_data.counter_replies(200, random.Random(5))
    assert len(examples) == 200 and len({e.text for e in examples}) == 200
    labels = {e.source: e.label for e in examples}
    assert labels == {"counter-reply/argue": "no", "counter-reply/agree": "yes"}
    assert sum(e.label == "yes" for e in examples) == 100
    for e in examples:
        assert any(g.lower() in e.text.lower() for g in make_data._GROUPS), e.text
        assert '"' not in e.text  # an argument, not a quotation of the hate
    smears = set(make_data._SMEARS)
    assert not [e.text for e in examples if e.label == "no" and any(s in e.text for s in smears)]
    assert make_data.is_template("counter-reply/argue")  # training only, weighted as ours


def test_japanese_prodrop_claims_leave_out_their_subject_and_say_what_the_context_does(make_data):
    examples = make_data.japanese_prodrop(200, random.Random(5))
    assert len(examples) == 200 and len({(e.text, e.context) for e in examples}) == 200
    labels = {e.source: e.label for e in examples}
    assert labels == {"ja-prodrop/supported": "no", "ja-prodrop/unsupported": "yes"}
    assert sum(e.label == "yes" for e in examples) == 100
    words = make_data._JA_CITIES + make_data._JA_FIELDS
    for e in examples:
        context = "".join(e.context)
        assert not any(name in e.text for name in make_data._JA_NAMES), e.text  # no subject
        assert e.context[0].startswith(tuple(make_data._JA_NAMES))  # the context names it
        numbers = set(re.findall(r"\d+", e.text)) <= set(re.findall(r"\d+", context))
        named = all(w in context for w in words if w in e.text)
        stated = numbers and named and "ノーベル賞" not in e.text
        assert stated == (e.label == "no"), (e.text, e.context)
    assert make_data.is_template("ja-prodrop/supported")  # training only, weighted as ours


def test_dialogue_replies_are_labelled_by_the_file_they_are_in_and_never_trained_without_begin(
    make_data, tmp_path
):
    header = ",episode_idx,round,topic,message,response,knowledge,gold"
    files = {
        "dodeca_consistent": [
            ("it aired  in the us , canada", "The show aired in the US, Canada and Mexico."),
            ("ok", "A reply too short to judge."),  # out: under 10 characters
            ("it is a sport of two teams .", "Hockey is played by two teams."),
        ],
        "dodeca_inconsistent": [("it aired in 1999 .", "The show aired from 1983 to 1994.")],
        "memnet_consistent": [("it is a sport of two teams .", "Hockey is played by two teams.")],
        "memnet_inconsistent": [
            ("it is a sport of two teams .", "Polo is played on horseback."),  # other sentence
            ("it is a sport of two teams .", "Hockey is played by two teams."),  # both: out
        ],
    }
    paths = {}
    for name, rows in files.items():
        paths[name] = tmp_path / f"{name}.csv"
        lines = [header] + [
            f'{n},{n},1,Topic,"Hi?",{json.dumps(reply)},{json.dumps(knowledge)},gold'
            for n, (reply, knowledge) in enumerate(rows)
        ]
        paths[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
    examples = make_data.q2(paths)
    assert [(e.source, e.label, e.text, e.context) for e in examples] == [
        ("q2/consistent", "no", "it aired in the us , canada",
         ("The show aired in the US, Canada and Mexico.",)),
        ("q2/inconsistent", "yes", "it aired in 1999 .", ("The show aired from 1983 to 1994.",)),
        ("q2/inconsistent", "yes", "it is a sport of two teams .",
         ("Polo is played on horseback.",)),
    ]  # fmt: skip
    assert make_data.held_out_sources("begin,q2") == ["begin", "q2"]
    with pytest.raises(SystemExit):  # Wizard of Wikipedia's conversations, as BEGIN's are
        make_data.main(["--sources", str(tmp_path), "--hold-out", "begin", "--add", "q2"])
    for refused in (["--hold-out", "summedits"], ["--add", "summedits-all,summedits-sales"]):
        with pytest.raises(SystemExit):  # every SummEdits domain is trained on
            make_data.main(["--sources", str(tmp_path), "--add", "summedits-all", *refused])


def test_brush_offs_carry_the_same_facts_as_the_civil_replies_beside_them(make_data):
    examples = make_data.brush_offs(200, random.Random(3))
    assert len(examples) == 200 and len({e.text for e in examples}) == 200
    labels = {e.source: e.label for e in examples}
    assert labels == {"brush-off/dismissive": "yes", "brush-off/civil": "no"}
    facts = make_data._BRUSH_OFF_SLOTS["f"]
    for source in labels:  # the same facts on both sides: the label is in how it is said
        said = {f for f in facts for e in examples if e.source == source and f in e.text.lower()}
        assert said == set(facts)
    insults = {*make_data._TOX_EN_SLOTS["n"], "idiot", "stupid", "shit", "fuck"}
    assert not [e.text for e in examples if insults & set(re.findall(r"[a-z]+", e.text.lower()))]


def test_dialogue_replies_are_labelled_by_their_pooled_accuracy_ratings(make_data, tmp_path):
    docs = {"hotel": {"7": {"docs": {
        "0": {"title": "Is parking free at the Bijou?", "body": "Parking costs $45 a day."},
        "1": {"title": "Can I bring my dog?", "body": "Dogs are welcome at the Bijou."},
    }}}}  # fmt: skip

    def ref(doc):
        return {"target": True, "knowledge": [{"domain": "hotel", "entity_id": 7, "doc_id": doc}]}

    gold = [ref(0), ref(1), {"target": False}, ref(0), ref(1), ref(0)]
    entries = {
        "a": [
            ("Parking at the Bijou costs $45 a day. Anything else?", [5, 5, 4]),
            ("Yes, dogs are welcome at the hotel. Would you like to book a room?", [5, 4, 5]),
            ("Parking is free for every guest.", [1, 1, 1]),  # not a knowledge turn
            ("Parking is free at the Bijou hotel, no charge.", [1, 2, 2]),
            ("Parking is free at the Bijou hotel, no charge.", [5, 5, 5]),  # rated both ways
            ("Parking costs about $45 per day at the hotel.", [3, 3, 4]),  # in between
        ],
        "b": [
            ("Parking at the Bijou costs $45 a day.", [4, 4, 3]),  # pooled with a's: 4.17
            ("No, the hotel does not allow dogs of any kind.", [1, 2, 1]),
            (None, None),
            ("Yes. Would you like more help with that?", [1, 1, 1]),  # nothing left to judge
            ("Dogs stay free of charge at the Bijou.", [2, 2, 1]),
            ("Parking costs about $45 per day at the hotel.", [3, 3, 4]),
        ],
    }
    pairs = []
    for name, replies in entries.items():
        outputs = [{"target": text is not None, "response": text} for text, _ in replies]
        rated = [{"accuracy": r, "appropriateness": [5, 5, 5]} if r else None for _, r in replies]
        (tmp_path / f"{name}.json").write_text(json.dumps(outputs))
        (tmp_path / f"{name}.rated.json").write_text(json.dumps(rated))
        pairs.append((tmp_path / f"{name}.json", tmp_path / f"{name}.rated.json"))
    (tmp_path / "labels.json").write_text(json.dumps(gold))
    (tmp_path / "knowledge.json").write_text(json.dumps(docs))
    examples = make_data.dstc9(tmp_path / "labels.json", tmp_path / "knowledge.json", pairs)
    dogs = ("Can I bring my dog? Dogs are welcome at the Bijou.",)
    assert [(e.source, e.label, e.text, e.context) for e in examples] == [
        ("dstc9/accurate", "no", "Yes, dogs are welcome at the hotel.", dogs),
        ("dstc9/inaccurate", "yes", "No, the hotel does not allow dogs of any kind.", dogs),
        ("dstc9/inaccurate", "yes", "Dogs stay free of charge at the Bijou.", dogs),
    ]  # closing questions cut off; pooled-in-between, both-ways and empty replies left out
    kept = make_data.dstc9(
        tmp_path / "labels.json", tmp_path / "knowledge.json", pairs, keep_closing=True
    )  # dstc9_closings.py: the question stays, so the replies are no longer pooled
    assert [(e.source, e.text) for e in kept] == [
        ("dstc9/accurate", "Parking at the Bijou costs $45 a day. Anything else?"),
        ("dstc9/accurate", "Yes, dogs are welcome at the hotel. Would you like to book a room?"),
        ("dstc9/inaccurate", "No, the hotel does not allow dogs of any kind."),
        ("dstc9/inaccurate", "Yes. Would you like more help with that?"),
        ("dstc9/inaccurate", "Dogs stay free of charge at the Bijou."),
    ]
    pairs[1][0].write_text(json.dumps(json.loads(pairs[1][0].read_text())[:-1]))
    with pytest.raises(make_data.SourceError, match="5 replies, 6 ratings, 6 test turns"):
        make_data.dstc9(tmp_path / "labels.json", tmp_path / "knowledge.json", pairs)


def test_summaries_are_judged_against_their_whole_document_by_people_s_label(make_data, tmp_path):
    memo = "Ann will buy butter. Mike checks the fridge for milk."
    chat = "Tom: the train leaves at 9. Eva: I will be on it."
    records = {
        "samsum": [
            {"id": "a_og", "doc": memo, "summary": "Ann buys butter.", "label": 1},
            {"id": "a_1", "doc": memo, "summary": "Ann buys cheese.", "label": 0},
            {"id": "a_2", "doc": memo, "summary": " Mike buys milk. ", "label": "0"},
            {"id": "a_3", "doc": memo, "summary": "Mike checks for milk.", "label": 1},
            {"id": "a_4", "doc": memo, "summary": "Mike checks for milk.", "label": 0},
        ],
        "news": [
            {"id": "b_og", "doc": chat, "summary": "The train leaves at 9.", "label": "1"},
            {"id": "b_1", "doc": chat, "summary": "Ann buys butter.", "label": 1},
            {"id": "b_2", "doc": chat, "summary": "Eva takes the 10:00 train.", "label": 0},
        ],
    }
    paths = {}
    for domain, rows in records.items():
        paths[domain] = tmp_path / f"{domain}.json"
        paths[domain].write_text(json.dumps(rows))
    examples = make_data.summedits(paths)
    assert [(e.source, e.label, e.text, e.context, e.document) for e in examples] == [
        ("summedits/inconsistent/samsum", "yes", "Ann buys cheese.", (memo,), memo),
        ("summedits/inconsistent/samsum", "yes", "Mike buys milk.", (memo,), memo),
        ("summedits/consistent/news", "no", "The train leaves at 9.", (chat,), chat),
        ("summedits/inconsistent/news", "yes", "Eva takes the 10:00 train.", (chat,), chat),
    ]  # labelled both ways, or written for two documents: left out
    assert make_data.quality_row(examples[0], whole=True)["context"] == [memo]
    records["news"].append({"id": "b_3", "doc": chat, "summary": "Eva is late.", "label": 2})
    paths["news"].write_text(json.dumps(records["news"]))
    with pytest.raises(make_data.SourceError, match="b_3 has label 2"):
        make_data.summedits(paths)


def test_news_summaries_come_in_pairs_a_reference_and_one_of_its_edits(make_data, tmp_path):
    article = "Ann Lee, 52, won the race in Leeds on Sunday. She thanked her coach."
    other = "The museum opened in 1901. It holds 300 paintings."
    ref = "Ann Lee won the race in Leeds . She thanked her coach ."
    task1 = [
        {
            "id": 0,
            "article_id": 7,
            "article": article,
            "reference_summary": ref,
            "edited_summary": "Ann Lee won the race in York . She thanked her coach .",
            "error_type": "Extrinsic Entity Error",
            "corrected_error_type": "Extrinsic Entity Error",
        },
        {
            "id": 1,
            "article_id": 7,
            "article": article,
            "reference_summary": ref,
            "edited_summary": "Ann Lee lost the race in Leeds . She thanked her coach .",
            "error_type": "Extrinsic Entity Error",
            "corrected_error_type": "Intrinsic Predicate Error",
        },
    ]
    task2 = [
        {"id": 0, "article_id": 7, "article": article, "reference_summary": ref,
         "edited_summary": "Ann Lee won the race in Leeds . He thanked her coach .",
         "error_type": "Coreference"},
        {"id": 1, "article_id": 9, "article": other,
         "reference_summary": "The museum opened in 1901 .",
         "edited_summary": "The museum opened in 1910 .", "error_type": "Extrinsic Circumstance"},
    ]  # fmt: skip
    paths = {"task1": tmp_path / "task1.json", "task2": tmp_path / "task2.json"}
    paths["task1"].write_text(json.dumps(task1))
    paths["task2"].write_text(json.dumps(task2))
    examples = make_data.bump(paths)
    assert [(e.source, e.label, e.context, e.document) for e in examples[::2]] == [
        ("bump/reference", "no", (article,), article),
        ("bump/reference", "no", (other,), other),
    ]  # one reference per article, though two tasks hold it
    assert examples[0].text == "Ann Lee won the race in Leeds. She thanked her coach."
    edits = {
        ("bump/edited/extrinsic-entity", "Ann Lee won the race in York. She thanked her coach."),
        (
            "bump/edited/intrinsic-predicate",
            "Ann Lee lost the race in Leeds. She thanked her coach.",
        ),
        ("bump/edited/coreference", "Ann Lee won the race in Leeds. He thanked her coach."),
    }  # the corrected kind where task 1 gives one
    assert (examples[1].source, examples[1].text) in edits and examples[1].label == "yes"
    assert examples[1].document == article
    assert (examples[3].source, examples[3].text, examples[3].label) == (
        "bump/edited/extrinsic-circumstance",
        "The museum opened in 1910.",
        "yes",
    )
    assert examples == make_data.bump(paths)  # the edit drawn is the same every time
    task2[1]["error_type"] = ""
    paths["task2"].write_text(json.dumps(task2))
    with pytest.raises(make_data.SourceError, match="record 1 has no error type"):
        make_data.bump(paths)


def test_summary_sentences_are_trained_against_the_window_bm25_picks(make_data, tmp_path):
    first = "Dear Ann, I am Sam from Acme. Acme sells solar panels for farms across Ohio."
    second = "Our panels cut power bills in half. The basic plan costs 90 dollars a month."
    third = "The premium plan adds free repairs for life. Reply by Friday to get a discount."
    doc = f"{first} {second} {third}"
    seed = "Sam from Acme sells solar panels to farms in Ohio. The basic plan costs 90 dollars a month."

    def edit(summary, label):
        return {"doc": doc, "summary": summary, "original_summary": seed, "label": label}

    records = [
        edit(seed, 1),
        edit(seed.replace("90", "60"), 0),  # the edited sentence, "yes"
        edit(seed.replace("solar panels", "wind turbines").replace("90", "70"), 0),  # two edits
        edit("Acme offers a discount and free repairs for farms that reply.", "1"),  # 55% words
        edit("The basic plan costs 60 dollars a month.", 1),  # labelled both ways
        edit(seed.replace("basic", "premium"), "0"),
    ]
    path = tmp_path / "sales_email.json"
    path.write_text(json.dumps(records))
    tokens = lambda text: 4 * len(text.split())  # noqa: E731  (windows of 24 words)
    examples = make_data.summedits_sentences({"sales_email": path}, tokens)
    windows = [
        "Dear Ann, I am Sam from Acme. Acme sells solar panels for farms across Ohio. "
        "Our panels cut power bills in half.",
        "Our panels cut power bills in half. The basic plan costs 90 dollars a month. "
        "The premium plan adds free repairs for life.",
    ]
    consistent, edited = "summedits/sentence-consistent/", "summedits/sentence-edited/"
    assert [(e.source, e.label, e.text, e.context) for e in examples] == [
        (consistent + "sales_email", "no", "Sam from Acme sells solar panels to farms in Ohio.",
         (windows[0],)),
        (consistent + "sales_email", "no", "The basic plan costs 90 dollars a month.", (windows[1],)),
        (edited + "sales_email", "yes", "The premium plan costs 90 dollars a month.", (windows[1],)),
    ]  # fmt: skip
    # `--add summedits-all` keeps a supported sentence down to half its words in its window
    looser = make_data.summedits_sentences({"sales_email": path}, tokens, least=0.5)
    reworded = [e for e in looser if e not in examples]
    assert [(e.label, e.text) for e in reworded] == [
        ("no", "Acme offers a discount and free repairs for farms that reply.")
    ]
    assert make_data.SUMMEDITS_ALL_LEAST == 0.5
    # a label other than people's 0 or 1 is refused, as by the held-out reader
    path.write_text(json.dumps([*records, edit(seed, "2")]))
    with pytest.raises(make_data.SourceError, match="has label '2'"):
        make_data.summedits_sentences({"sales_email": path}, tokens)


def test_a_later_source_held_out_beside_the_first_ones_leaves_their_rows_as_they_were(
    make_data,
):
    tasks = {
        "toxicity": ("toxigen", "convabuse", "ethos", "ucc"),
        "hallucination": ("begin", "dstc9", "q2"),
    }
    pools = {
        task: [
            make_data.Example(task, f"{prefix}x" if prefix.endswith("/") else prefix, "no", f"{prefix} {i}")
            for name in names
            for prefix in make_data.HELD_OUT_SOURCE[name]
            for i in range(400)
        ]
        for task, names in tasks.items()
    }  # fmt: skip
    first = make_data.draw_held_out(pools, ["toxigen", "begin"])
    beside = make_data.draw_held_out(pools, ["toxigen", "convabuse", "ethos", "ucc", "begin"])
    assert beside["hallucination"] == first["hallucination"]
    with_q2 = make_data.draw_held_out(pools, ["toxigen", "begin", "q2"])["hallucination"]
    assert with_q2[: len(first["hallucination"])] == first["hallucination"]
    assert {e.source for e in with_q2[len(first["hallucination"]) :]} == {
        "q2/consistent",
        "q2/inconsistent",
    }
    assert beside["toxicity"][: len(first["toxicity"])] == first["toxicity"]
    sizes = {name: sum(make_data.HELD_OUT_SOURCE[name].values()) for name in tasks["toxicity"]}
    assert len(beside["toxicity"]) == sum(sizes.values())
    # the folds already measured draw as before: task by task, in the order given
    rng = random.Random(make_data.SEED + 3)
    toxigen = make_data.take(pools["toxicity"], make_data.HELD_OUT_SOURCE["toxigen"], rng)
    dstc9 = make_data.take(pools["hallucination"], make_data.HELD_OUT_SOURCE["dstc9"], rng)
    assert make_data.draw_held_out(pools, ["toxigen", "dstc9"]) == {
        "toxicity": toxigen,
        "hallucination": dstc9,
    }


def test_an_added_source_leaves_every_other_draw_as_it_was(make_data):
    prefixes = {task: list(counts) for task, counts in make_data.PILOT.items()}
    for sources in make_data.ADDED.values():
        for task, counts in sources.items():
            prefixes[task] += list(counts)
    paired = {p for name in make_data.PAIRED for c in make_data.ADDED[name].values() for p in c}
    pools = {
        task: [
            make_data.Example(
                task,
                f"{p}x" if p.endswith("/") else p,
                "no",
                f"{p} text {i}",
                pair=str(i) if p in paired else "",  # a pair's members share its number
            )
            for p in names
            for i in range(1000)
        ]
        for task, names in prefixes.items()
    }

    def select(split, add=(), hold_out=()):
        args = argparse.Namespace(
            heldout_share=0.2,
            scale=1.0,
            template_weight=1.0,
            add=list(add),
            hold_out=list(hold_out),
            upto=False,
        )
        seed = make_data.SEED + (1 if split == "train" else 2)
        return make_data.select(pools, split, random.Random(seed), args)

    for split in ("train", "heldout"):
        before = select(split)
        for name, sources in make_data.ADDED.items():
            after = select(split, add=[name])
            for task in make_data.PILOT:
                wanted = sources.get(task, {})
                new = [e for e in after[task] if e.source.startswith(tuple(wanted) or ("-",))]
                assert [e for e in after[task] if e not in new] == before[task]
                assert len(new) == sum(  # our templates are never in the held-out split
                    round(n if split == "train" else 0 if make_data.is_template(p) else n / 2)
                    for p, n in wanted.items()
                )
                assert all(make_data.heldout(e, 0.2) == (split == "heldout") for e in new)
        held = select(split, add=["stormfront"], hold_out=["stormfront"])
        assert not any(e.source.startswith("stormfront/") for t in held for e in held[t])
        held = select(split, add=["convabuse"], hold_out=["convabuse"])
        assert not any(e.source.startswith("convabuse/") for t in held for e in held[t])
        held = select(split, add=["wice-pages"], hold_out=["wice"])  # rows made of its text
        assert not any(e.source.startswith("wice/") for t in held for e in held[t])


def test_upto_makes_training_counts_ceilings_and_leaves_every_full_draw_alone(make_data):
    short = "snli/neutral"  # a source with fewer training examples than --scale asks for
    pools = {
        task: [
            make_data.Example(task, f"{p}x" if p.endswith("/") else p, "no", f"{p} text {i}")
            for p in counts
            for i in range(150 if p == short else 3000)
        ]
        for task, counts in make_data.PILOT.items()
    }

    def select(split, upto):
        args = argparse.Namespace(
            heldout_share=0.2, scale=4.0, template_weight=1.0, add=[], hold_out=[], upto=upto
        )
        seed = make_data.SEED + (1 if split == "train" else 2)
        return make_data.select(pools, split, random.Random(seed), args)

    with pytest.raises(make_data.SourceError, match=f"{short}: .* examples, 160 wanted"):
        select("train", upto=False)
    deep = select("train", upto=True)["hallucination"]
    in_train = [e for e in pools["hallucination"] if not make_data.heldout(e, 0.2)]
    assert sorted(e.text for e in deep if e.source == short) == sorted(
        e.text for e in in_train if e.source == short
    )  # all it has
    every_other = sum(n * 4 for p, n in make_data.PILOT["hallucination"].items() if p != short)
    assert len(deep) == every_other + sum(e.source == short for e in in_train)
    # the held-out split's counts do not grow with --scale, and --upto leaves them as they were
    assert select("heldout", upto=True) == select("heldout", upto=False)


def test_additions_copy_a_context_sentence_and_add_what_it_does_not_say(make_data):
    passages = [
        "The bridge opened in 1932. It carries six lanes of traffic.",
        "A woman in a red coat is walking her dog along the river.",
        "Two children are building a sandcastle on the beach.",
        "The museum holds paintings from the sixteenth century.",
    ] * 30
    examples = make_data.additions(passages, random.Random(5))
    assert examples == make_data.additions(passages, random.Random(5))
    kinds = {e.source for e in examples}
    assert kinds == {"synthetic/addition", "synthetic/addition-ok"}
    for e in examples:
        (context,) = e.context
        sentences = [s.rstrip(".") for s in re.split(r"(?<=[.!?])\s+", context)]
        if e.source == "synthetic/addition":
            assert e.label == "yes" and e.text not in context
            assert any(e.text.startswith(s) and len(e.text) > len(s) + 5 for s in sentences)
        else:
            opener, _, body = e.text.partition(", ")
            assert e.label == "no" and opener + ", " in make_data._OPENERS
            assert any(body.lower().rstrip(".") == s.lower() for s in sentences)

    # in the scorers' shape: the same draws, an added sentence on its own
    split = make_data.additions(passages, random.Random(5), split=True)
    assert len(split) == len(examples)
    alone = 0
    for whole, part in zip(examples, split, strict=True):
        assert (part.source, part.label, part.context) == (whole.source, whole.label, whole.context)
        if part.text != whole.text:  # a second sentence: now the claim by itself
            alone += 1
            assert whole.text.endswith(". " + part.text) and part.text not in part.context[0]
            assert len(re.split(r"(?<=[.!?])\s+", part.text)) == 1
    assert 0 < alone < len([e for e in examples if e.label == "yes"])  # clauses stay whole


def test_additions_come_in_one_shape(make_data):
    with pytest.raises(argparse.ArgumentTypeError, match="one or the other"):
        make_data.added_sources("additions,additions-split")
    assert make_data.added_sources("stormfront,additions-split") == [
        "stormfront",
        "additions-split",
    ]


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "training" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def toxicity_rows(tmp_path: Path, groups: list[str]) -> tuple[list[bool], Path]:
    """A data folder whose held-out toxicity rows alternate toxic and civil texts, in these
    groups (one a row); their labels and the folder."""
    texts = ["You are an idiot.", "Have a nice day.", "Idiot, go away.", "Thanks a lot."]
    labels = [i % 2 == 0 for i in range(len(groups))]
    data = tmp_path / "data"
    data.mkdir()
    (data / "held-out-sources_toxicity.jsonl").write_text(
        "".join(
            json.dumps({"text": texts[i % len(texts)], "label": y, "group": g}) + "\n"
            for i, (y, g) in enumerate(zip(labels, groups, strict=True))
        )
    )
    return labels, data


def test_spread_pairs_a_saved_run_with_its_regenerated_rows_only_when_they_match(tmp_path):
    spread = load_script("spread")
    labels, data = toxicity_rows(tmp_path, ["g"] * 20)
    entry = {
        "way": "tuned", "task": "toxicity", "set": "held-out sources",
        "scores": [0.9 if y else 0.2 for y in labels], "labels": labels,
        "row_groups": ["g"] * len(labels),
    }  # fmt: skip
    run = tmp_path / "quality-run.json"
    run.write_text(json.dumps({"sets": [entry]}))
    ((task, name, paired),) = spread.rows_of(run, data)
    assert (task, name) == ("toxicity", "held-out sources")
    assert set(paired.differences) == {"word-list baseline"}  # the majority class is left out
    assert paired.ways["judge"].balanced_accuracy.value == 1.0
    # against another run on the same rows: paired, exactly its score gap in every resample
    other = tmp_path / "quality-other.json"
    other.write_text(json.dumps({"sets": [{**entry, "scores": [0.2] * len(labels)}]}))
    ((_, _, both),) = spread.rows_of(run, data, against=other)
    gap = both.differences["quality-other"].balanced_accuracy
    assert (gap.value, gap.low, gap.high) == (0.5, 0.5, 0.5)
    # the same run against rows in another order: shown without the lead
    entry["labels"] = labels[::-1]
    run.write_text(json.dumps({"sets": [entry]}))
    ((_, _, alone),) = spread.rows_of(run, data)
    assert alone.differences == {} and set(alone.ways) == {"judge"}


def test_spread_reads_one_group_of_every_run_and_of_the_regenerated_rows(tmp_path):
    spread = load_script("spread")
    groups = ["a/x" if i < 8 else "b/y" for i in range(20)]
    labels, data = toxicity_rows(tmp_path, groups)
    # right on group a, every row of group b called toxic
    scores = [
        (0.9 if y else 0.2) if g.startswith("a/") else 0.9
        for y, g in zip(labels, groups, strict=True)
    ]
    entry = {
        "way": "tuned", "task": "toxicity", "set": "held-out sources",
        "scores": scores, "labels": labels, "row_groups": groups,
    }  # fmt: skip
    run = tmp_path / "quality-run.json"
    run.write_text(json.dumps({"sets": [entry]}))
    other = tmp_path / "quality-other.json"
    other.write_text(json.dumps({"sets": [{**entry, "scores": [0.2] * len(labels)}]}))
    ((_, _, whole),) = spread.rows_of(run, data, against=other)
    assert whole.ways["judge"].balanced_accuracy.value == 0.7  # (10/10 + 4/10) / 2
    ((_, _, a),) = spread.rows_of(run, data, against=other, group="a/")
    assert a.ways["judge"].balanced_accuracy.value == 1.0
    assert "word-list baseline" in a.differences  # the regenerated rows cut the same way
    assert a.differences["quality-other"].balanced_accuracy.value == 0.5
    ((_, _, b),) = spread.rows_of(run, data, group="b/")
    assert b.ways["judge"].balanced_accuracy.value == 0.5
    assert spread.rows_of(run, data, group="c/") == []  # a set with none of it: left out
    ((_, _, means),) = spread.mean_rows([run], [other], group="a/")
    assert means["difference"][0].value == 0.5


def test_spread_means_of_seeds_pair_every_run_on_the_same_resamples(tmp_path):
    spread = load_script("spread")
    labels = [i % 3 == 0 for i in range(30)]
    groups = ["g"] * len(labels)

    def run(name: str, scores: list[float], rows=labels) -> Path:
        entry = {
            "way": "tuned", "task": "hallucination", "set": "held-out sources",
            "scores": scores, "labels": rows, "row_groups": groups,
        }  # fmt: skip
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"sets": [entry]}))
        return path

    right = run("right", [0.9 if y else 0.1 for y in labels])  # BAcc 1, AUROC 1
    wrong = run("wrong", [0.1 if y else 0.9 for y in labels])  # BAcc 0, AUROC 0
    flat = run("flat", [0.6] * len(labels))  # BAcc 0.5, AUROC 0.5
    ((task, name, means),) = spread.mean_rows([right, wrong], [flat, flat])
    assert (task, name) == ("hallucination", "held-out sources")
    # every resample holds both classes, so each figure is the same in all of them
    for figure in (*means["side"], *means["against"], *means["difference"]):
        assert figure.low == figure.value == figure.high
    assert [f.value for f in means["side"]] == [0.5, 0.5]
    assert [f.value for f in means["difference"]] == [0.0, 0.0]
    ((_, _, means),) = spread.mean_rows([right, flat], [wrong, flat])
    assert [f.value for f in means["difference"]] == [0.5, 0.5]
    # scores that differ row by row: the difference of the means, paired resample by resample
    noisy = run("noisy", [(i * 7 % 10) / 10 for i in range(len(labels))])
    ((_, _, means),) = spread.mean_rows([noisy, right], [noisy, flat])
    bacc, area = means["difference"]
    assert (bacc.value, area.value) == pytest.approx((0.25, 0.25), abs=1e-12)
    # noisy cancels out on the same rows, in every resample
    assert (bacc.low, bacc.high, area.low, area.high) == pytest.approx((0.25,) * 4, abs=1e-12)
    # a run on other rows leaves the set out
    moved = run("moved", [0.5] * len(labels), rows=labels[::-1])
    assert spread.mean_rows([right, moved], [flat, flat]) == []


def test_replies_are_split_by_a_sentence_that_opens_in_the_first_person(tmp_path, capsys):
    first_person = load_script("first_person")
    assert first_person.first_person("i love gardening as well . it is relaxing .")
    assert first_person.first_person("It aired in 1983. My dad watched it.")
    assert first_person.first_person("yes , i ' m sure .") is False  # not where a sentence opens
    assert not first_person.first_person("It is what we call a hobby. Ice hockey is a sport.")
    # the rule make_data's `--begin-first-person drop` applies, to BEGIN's replies only
    make_data = load_script("make_data")
    reply = "i love it . it is old ."
    assert make_data.begin_first_person(
        make_data.Example("hallucination", "begin/wow", "yes", reply)
    )
    assert not make_data.begin_first_person(make_data.Example("hallucination", "q2/consistent", "no", reply))  # fmt: skip
    assert not make_data.begin_first_person(make_data.Example("hallucination", "begin/cmu", "no", "It is old."))  # fmt: skip
    rows = tmp_path / "rows.jsonl"
    texts = ["i love it .", "It is a sport.", "my team won .", "It is a game."]
    labels = [False, False, True, True]
    rows.write_text("".join(
        json.dumps({"context": ["Hockey is a sport."], "claim": t, "label": y, "group": "g"}) + "\n"
        for t, y in zip(texts, labels, strict=True)
    ))  # fmt: skip
    run = tmp_path / "quality-run.json"
    entry = {"way": "tuned", "statements": True, "labels": labels, "scores": [0.9, 0.1, 0.2, 0.8]}
    run.write_text(json.dumps({"sets": [entry]}))
    assert first_person.main([str(rows), str(run)]) == 0
    table = capsys.readouterr().out
    assert "| quality-run | a first-person sentence (2) | 0.000 | 1 of 1 | 0 of 1 |" in table
    assert "| quality-run | no first-person sentence (2) | 1.000 | 0 of 1 | 1 of 1 |" in table


def test_spread_gives_the_baselines_the_shape_the_run_was_judged_in(tmp_path):
    spread = load_script("spread")
    context = ["The museum opens at 9. Tickets cost 12 euros."]
    # whole, the first claim shares 8 of its 11 words with the context (not flagged); its
    # second statement shares none (flagged)
    claims = ["The museum opens at 9 and tickets cost 12 euros. Entry is free.", "It opens at 9."]
    labels = [i % 2 == 0 for i in range(10)]
    data = tmp_path / "data"
    data.mkdir()
    (data / "held-out-sources_hallucination.jsonl").write_text(
        "".join(
            json.dumps({"context": context, "claim": claims[i % 2], "label": y, "group": "g"})
            + "\n"
            for i, y in enumerate(labels)
        )
    )
    leads = {}
    for statements in (False, True):
        entry = {
            "way": "tuned", "task": "hallucination", "set": "held-out sources",
            "statements": statements, "scores": [0.9 if y else 0.1 for y in labels],
            "labels": labels, "row_groups": ["g"] * len(labels),
        }  # fmt: skip
        run = tmp_path / f"quality-{statements}.json"
        run.write_text(json.dumps({"sets": [entry]}))
        ((_, _, paired),) = spread.rows_of(run, data)
        leads[statements] = paired.differences["word-overlap baseline"].balanced_accuracy.value
    assert leads == {False: 0.5, True: 0.0}


def test_combine_fits_on_the_trained_split_and_applies_the_weights_unchanged(tmp_path, capsys):
    combine = load_script("combine")
    context = ["The museum opens at 9. Tickets cost 12 euros."]
    assert (
        combine.missing_share(Row(1, True, "It opens at 9. Entry is free.", tuple(context))) == 1.0
    )
    assert combine.missing_share(Row(2, False, "The museum opens at 9.", tuple(context))) == 0.0
    # weights recovered from labels drawn by known ones (bias -1, logit 2, missing share 3)
    rng = np.random.default_rng(0)
    x = np.column_stack([np.ones(4000), rng.normal(size=4000), rng.random(4000)])
    y = rng.random(4000) < 1 / (1 + np.exp(-(x @ [-1.0, 2.0, 3.0])))
    assert np.allclose(combine.fit(x, y.astype(float)), [-1.0, 2.0, 3.0], atol=0.3)
    # a run whose trained split says "missing words mean hallucinated" and whose judge says
    # nothing: the combination learns the words, and applies them to the held-out source
    claims = ["The museum opens at 9.", "Entry is free on Sundays."]
    data = tmp_path / "data"
    data.mkdir()
    labels = [i % 2 == 1 for i in range(20)]
    for name in ("heldout", "held-out-sources"):
        (data / f"{name}_hallucination.jsonl").write_text(
            "".join(
                json.dumps({"context": context, "claim": claims[i % 2], "label": y, "group": "g"})
                + "\n"
                for i, y in enumerate(labels)
            )
        )
    sets = [
        {"way": "tuned", "task": "hallucination", "set": name, "statements": True,
         "scores": [0.3] * 20, "labels": labels}
        for name in ("held-out", "held-out sources")
    ]  # fmt: skip
    run = tmp_path / "quality-run.json"
    run.write_text(json.dumps({"sets": sets}))
    assert combine.main([str(run), "--data", str(data)]) == 0
    table = capsys.readouterr().out
    assert "| held-out sources | 20 | combination | 1.000 [1.000, 1.000] |" in table
    assert "| held-out sources | 20 | judge | 0.500 [0.500, 0.500] |" in table
    # rows that are not the run's are refused
    sets[1]["labels"] = labels[::-1]
    run.write_text(json.dumps({"sets": sets}))
    with pytest.raises(SystemExit, match="not the run's"):
        combine.main([str(run), "--data", str(data)])


def test_likelihood_gains_are_each_statement_s_own_tokens_whatever_the_packing():
    from localjudge.engine.fake import FakeEngine

    likelihood = load_script("likelihood")
    # after "\n\n" the fake model predicts the text before it again: a window makes a
    # statement copied from its start certain, token by token, and says nothing of others
    engine = FakeEngine(lambda prompt: " " + prompt[: -len("\n\n")], marker="\n\n")
    scorer = likelihood.Scorer(engine, n_batch=200, sequences=3)
    window = "The museum opens at 9. Tickets cost 12 euros."
    jobs = [
        (scorer.tokens(window * (i % 3 + 1) + "\n\n"), scorer.tokens(" The museum opens at 9."))
        for i in range(7)
    ] + [([], scorer.tokens(" Entry is free."))]
    packed = scorer.logprobs(jobs)
    assert len(engine.plans) > 1  # several decodes, some holding several sequences
    assert max(len({t.seq_id for t in plan.tokens}) for plan in engine.plans) > 1
    alone = [
        likelihood.Scorer(FakeEngine(engine.script, marker="\n\n")).logprobs([j])[0] for j in jobs
    ]
    for got, want, (_, statement) in zip(packed, alone, jobs, strict=True):
        assert got.shape == (len(statement),) and np.array_equal(got, want)
    v = engine.n_vocab
    # the predicted token's log-probability, another's while one is predicted, and any
    # token's when none is
    sure, wrong, blind = 10 - np.log(np.exp(10) + v - 1), -np.log(np.exp(10) + v - 1), -np.log(v)
    assert np.allclose(packed[0], sure)  # first window only: the statement is its start
    assert np.allclose(packed[1], sure)  # a window repeated: still its start
    assert np.allclose(packed[-1], blind)  # no window: nothing predicted
    # gains: the copied statement gains (sure - blind) a token; the other gains that on its
    # first token (the space), loses on its second (the window predicts "T", not "E"), and
    # is predicted no better than alone after that
    per = likelihood.gains(scorer, [window], ["The museum opens at 9.", "Entry is free."])
    assert [[g["window"] for g in s] for s in per] == [[0], [0]]
    assert per[0][0]["mean"] == pytest.approx(sure - blind)
    assert per[0][0]["lowest"] == pytest.approx(sure - blind)
    n = len(scorer.tokens(" Entry is free."))
    assert per[1][0]["mean"] == pytest.approx((sure + wrong - 2 * blind) / n)
    assert per[1][0]["lowest"] == pytest.approx(wrong - blind)
    # a row is as supported as its least supported statement, minus its gain
    assert likelihood.row_score(per, "mean") == -per[1][0]["mean"]
    assert likelihood.row_score(per[:1], "lowest") == pytest.approx(blind - sure)
    with pytest.raises(SystemExit, match="longer than 200 tokens"):
        scorer.logprobs([(scorer.tokens(window * 5), scorer.tokens(" It opens."))])


def test_combine_takes_the_likelihood_as_second_feature_and_other_rows_as_sources(tmp_path, capsys):
    combine = load_script("combine")
    context = ["The museum opens at 9. Tickets cost 12 euros."]
    claims = ["The museum opens at 9.", "It opens at 9."]  # word overlap: no help on either
    labels = [i % 2 == 1 for i in range(20)]
    for folder in ("data", "other"):
        (tmp_path / folder).mkdir()
        name = "heldout" if folder == "data" else "held-out-sources"
        (tmp_path / folder / f"{name}_hallucination.jsonl").write_text(
            "".join(
                json.dumps({"context": context, "claim": claims[i % 2], "label": y, "group": "g"})
                + "\n"
                for i, y in enumerate(labels)
            )
        )

    def saved(path: Path, name: str, scores: list[float]) -> Path:
        entry = {"way": "tuned", "task": "hallucination", "set": name, "statements": True,
                 "scores": scores, "labels": labels}  # fmt: skip
        path.write_text(json.dumps({"sets": [entry]}))
        return path

    run = saved(tmp_path / "quality-run.json", "held-out", [0.3] * 20)
    sources = saved(tmp_path / "quality-sources.json", "held-out sources", [0.3] * 20)

    def likelihood(path: Path, ys: list[bool]) -> Path:  # it says what the labels say
        rows = [{"label": y, "mean": 2.0 if y else -2.0, "lowest": 0.0} for y in ys]
        path.write_text(json.dumps({"summary": {"way": "mean"}, "rows": rows}))
        return path

    fit, other = likelihood(tmp_path / "fit.json", labels), likelihood(tmp_path / "o.json", labels)
    argv = [str(run), "--data", str(tmp_path / "data"), "--likelihood", str(fit), str(other),
            "--sources", str(sources), str(tmp_path / "other")]  # fmt: skip
    assert combine.main(argv) == 0
    table = capsys.readouterr().out
    assert "weights (bias, logit P(yes), likelihood)" in table
    assert "| held-out sources | 20 | combination | 1.000 [1.000, 1.000] |" in table
    assert "| held-out sources | 20 | judge | 0.500 [0.500, 0.500] |" in table
    # a likelihood output of other rows is refused
    likelihood(other, labels[::-1])
    with pytest.raises(SystemExit, match="not the run's rows"):
        combine.main(argv)


def test_a_device_pack_zeroes_only_embedding_rows_no_example_holds(tmp_path):
    pack = load_script("device_pack")
    source = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(source, "gemma3")
    embedding = np.arange(8 * 4, dtype=np.float32).reshape(8, 4) + 1
    other = np.full((2, 4), 7, dtype=np.float32)
    writer.add_tensor(pack.EMBEDDING, embedding)
    writer.add_tensor("blk.0.attn_q.weight", other)
    for write in (writer.write_header_to_file, writer.write_kv_data_to_file):
        write()
    writer.write_tensors_to_file()
    writer.close()
    fold = tmp_path / "data-X"
    fold.mkdir()
    example = {"ids": [1, 5], "yes": [6], "no": [5]}
    (fold / "train.tokens.jsonl").write_text(json.dumps(example) + "\n")
    (fold / "heldout.tokens.jsonl").write_text(json.dumps({**example, "ids": [0]}) + "\n")

    used = pack.used_tokens([fold])
    assert used == {0, 1, 5, 6}
    target = tmp_path / "zeroed.gguf"
    assert pack.zero_unused_rows(source, target, used) == (4, 8)
    tensors = {t.name: np.array(t.data) for t in gguf.GGUFReader(target).tensors}
    for row in range(8):
        expected = embedding[row] if row in used else np.zeros(4, dtype=np.float32)
        assert (tensors[pack.EMBEDDING][row] == expected).all()
    assert (tensors["blk.0.attn_q.weight"] == other).all()
    with pytest.raises(ValueError, match="past the embedding"):
        pack.zero_unused_rows(source, tmp_path / "bad.gguf", {8})

    parts = pack.write_parts({"model/zeroed.gguf": target}, tmp_path, 100)
    assert [p.name for p in parts][:2] == ["part.00", "part.01"]
    assert all(p.stat().st_size <= 100 for p in parts)
    joined = b"".join(p.read_bytes() for p in parts)
    with tarfile.open(fileobj=io.BytesIO(lzma.decompress(joined))) as tar:
        assert tar.extractfile("model/zeroed.gguf").read() == target.read_bytes()


@pytest.mark.parametrize(
    ("sentence", "parts"),
    [
        (
            "The first iPhone was announced on January 9, 2007 and went on sale on June 29, 2007.",
            [
                "The first iPhone was announced on January 9, 2007.",
                "The first iPhone went on sale on June 29, 2007.",
            ],
        ),
        (  # a passive: the auxiliary goes with the subject
            "The film was directed by Smith and edited by Jones.",
            ["The film was directed by Smith.", "The film was edited by Jones."],
        ),
        (
            "Apple released the iPhone in 2007, and sold a million units.",
            ["Apple released the iPhone in 2007.", "Apple sold a million units."],
        ),
        # left whole: nouns joined, a second clause with its own subject, a present tense or
        # a short "-ed" word the closed rule does not take for a verb
        ("Shizuoka and Yamanashi share the mountain.", None),
        ("I was there and it rained all day.", None),
        ("The hotel has a pool and offers free parking.", None),
        ("He was born in 1950 and died in 2000.", None),
    ],
)
def test_coordinated_predicates_are_split_only_as_the_rule_set_before_says(sentence, parts):
    spec = importlib.util.spec_from_file_location(
        "claims_shape", ROOT / "training" / "claims_shape.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.split_predicates(sentence) == (parts or [sentence])


def test_minimal_pairs_are_read_per_document_with_ties_counted_half(tmp_path, capsys):
    pairs = load_script("pairs")
    article, other = "Ann won the race in Leeds.", "The museum opened in 1901."
    rows = [
        {"context": [article], "claim": "Ann won in Leeds.", "label": False, "group": "x/ref"},
        {"context": [other], "claim": "It opened in 1910.", "label": True,
         "group": "x/edited/intrinsic-circumstance"},
        {"context": [other], "claim": "It opened in 1901.", "label": False, "group": "x/ref"},
        {"context": [article], "claim": "Ann won in York.", "label": True,
         "group": "x/edited/intrinsic-entity"},
    ]  # fmt: skip
    data = tmp_path / "data"
    data.mkdir()
    (data / "held-out-sources_hallucination.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows)
    )
    labels = [r["label"] for r in rows]
    run = tmp_path / "run.json"
    saved = {"task": "hallucination", "set": "held-out sources", "statements": True,
             "labels": labels, "scores": [0.2, 0.6, 0.6, 0.9]}  # fmt: skip
    run.write_text(json.dumps({"sets": [saved]}))
    found = pairs.pairs_of([tuple(r["context"]) for r in rows], labels)
    assert found == [(0, 3), (2, 1)]
    assert pairs.ordered(saved["scores"], found).tolist() == [1.0, 0.5]  # a tie counts half
    assert pairs.main([str(run), "--data", str(data)]) == 0
    out = capsys.readouterr().out
    assert "2 pairs" in out and "| judge, P(yes) | 0.750 [" in out
    assert "| judge, verdicts at 0.5 | 0.750 [" in out  # 0.6 and 0.6 are both yes: a tie
    assert pairs.main([str(run), "--data", str(data), "--by-kind"]) == 0
    by_kind = capsys.readouterr().out.split("The judge by kind of edit:")[1]
    assert "| intrinsic (all) | 2 | 2 (100%) | 1 (50%) | 0.750 [" in by_kind  # both kinds
    assert "| intrinsic-entity | 1 | 1 (100%) | 0 (0%) | 1.000 [1.000, 1.000] |" in by_kind
    assert "| intrinsic-circumstance | 1 | 1 (100%) | 1 (100%) | 0.500 [0.500, 0.500] |" in by_kind
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"sets": [saved | {"scores": [0.5, 0.1, 0.5, 0.1]}]}))
    assert pairs.main([str(run), "--data", str(data), "--by-kind", "--against", str(other)]) == 0
    by_kind = capsys.readouterr().out.split("The judge by kind of edit:")[1]
    # the other run put both edits below their references: this one is 1 and 0.5 above it
    assert "| 0.750 [0.500, 1.000] | +0.750 [+0.500, +1.000] |" in by_kind
    assert "| intrinsic-entity | 1 | 1 (100%) | 0 (0%) | 1.000 [1.000, 1.000] | +1.000" in by_kind
    with pytest.raises(pairs.PairError, match="2 faithful and 0 unfaithful"):
        pairs.pairs_of([("a",), ("a",)], [False, False])
    saved["labels"] = labels[::-1]
    run.write_text(json.dumps({"sets": [saved]}))
    assert pairs.main([str(run), "--data", str(data)]) == 2  # not the rows it judged


def test_sentence_support_judges_each_statement_beside_its_closest_window_s_share(tmp_home):
    from localjudge.quality.labelled import Row
    from localjudge.testing import FakeJudge

    support = load_script("sentence_support")
    rows = [Row(number=3, text="It opens at 9. Entry is free.", label=False,
                context=("It opens at 9.",))]  # fmt: skip
    with FakeJudge(extracts_claims=False) as judge:  # supported: found word for word
        records = support.judged(judge, rows)
    assert [(r["row"], r["statement"], r["p_yes"] >= 0.5, r["share"]) for r in records] == [
        (3, 1, False, 1.0),  # "It opens at 9."
        (3, 2, True, 0.0),  # "Entry is free."
    ]
    lines = support.table(records)
    assert lines[2] == "| 0% to 50% of its words | 1 | 1 (100%) |"
    assert lines[-1] == "| 90% to 100% of its words | 1 | 0 (0%) |"


def git_repo(path: Path, files: dict[str, bytes]) -> str:
    """A one-commit repository at `path` holding `files`; its commit."""
    import subprocess

    for name, data in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(data)
    run = lambda *args: subprocess.run(  # noqa: E731
        ["git", "-C", str(path), *args], check=True, capture_output=True, text=True
    ).stdout.strip()
    run("init", "--quiet")
    run("add", "-A")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "data")
    return run("rev-parse", "HEAD")


def test_get_sources_takes_each_file_at_its_commit_and_checks_its_sha256(
    tmp_path, make_data, monkeypatch, capsys
):
    get_sources = load_script("get_sources")
    github = tmp_path / "github"
    (github / "someone").mkdir(parents=True)
    files = {"data/rows.csv": b"a,b\n1,2\n", "all/one.txt": b"one\n", "all/two.txt": b"two\n"}
    commit = git_repo(github / "someone" / "rows.git", files)
    folder = tmp_path / "folder"  # the folder's sha256 as make_data.py computes it
    folder.mkdir()
    for name in ("one.txt", "two.txt"):
        (folder / name).write_bytes(files[f"all/{name}"])
    data_md = tmp_path / "DATA.md"
    data_md.write_text(
        "| Source | Repository @ commit |\n|---|---|\n"
        f"| Rows | `someone/rows` @ `{commit}` |\n\n"
        "| File | sha256 | Bytes |\n|---|---|---|\n"
        f"| `someone+rows/data/rows.csv` | `{hashlib.sha256(files['data/rows.csv']).hexdigest()}` "
        "| 8 |\n"
        f"| `someone+rows/all/` | `{make_data.sha256_of(folder)}` | 2 files |\n"
    )
    out, clones = tmp_path / "sources", tmp_path / "clones"
    args = ["--out", str(out), "--clones", str(clones), "--data-md", str(data_md)]
    # with no clone and --offline, nothing is reached for
    assert get_sources.main([*args, "--offline"]) == 2
    assert "no clone of someone/rows" in capsys.readouterr().err
    monkeypatch.setattr(get_sources, "GITHUB", github.as_uri())
    assert get_sources.main(args) == 0
    assert "2 files of 1 repositories (2 written)" in capsys.readouterr().out
    assert (out / "someone+rows" / "data" / "rows.csv").read_bytes() == files["data/rows.csv"]
    assert sorted(p.name for p in (out / "someone+rows" / "all").iterdir()) == [
        "one.txt",
        "two.txt",
    ]
    # a second run, offline now, finds every file in place and writes none
    assert get_sources.main([*args, "--offline"]) == 0
    assert "(0 written)" in capsys.readouterr().out
    # a file whose bytes at the commit are not DATA.md's is an error and is not written
    (out / "someone+rows" / "data" / "rows.csv").unlink()
    rows_sha256 = hashlib.sha256(files["data/rows.csv"]).hexdigest()
    data_md.write_text(data_md.read_text().replace(rows_sha256, "0" * 64))
    assert get_sources.main([*args, "--offline"]) == 2
    err = capsys.readouterr().err
    assert "someone+rows/data/rows.csv" in err and "sha256 differs" in err
    assert not (out / "someone+rows" / "data" / "rows.csv").exists()
    assert list((out / "someone+rows" / "data").iterdir()) == []  # no scratch left behind


def test_get_sources_says_what_git_failed_on(tmp_path, monkeypatch, capsys):
    get_sources = load_script("get_sources")
    commit = "1" * 40
    data_md = tmp_path / "DATA.md"
    data_md.write_text(
        f"| Rows | `someone/gone` @ `{commit}` |\n\n"
        f"| `someone+gone/rows.csv` | `{'0' * 64}` | 8 |\n"
    )
    monkeypatch.setattr(get_sources, "GITHUB", (tmp_path / "github").as_uri())
    args = ["--out", str(tmp_path / "sources"), "--clones", str(tmp_path / "clones")]
    assert get_sources.main([*args, "--data-md", str(data_md)]) == 2
    err = capsys.readouterr().err
    # git's own fatal line, not the hint it prints after it
    assert "git clone" in err and "fatal:" in err and "repository exists" not in err
    assert not (tmp_path / "clones" / "someone+gone").exists()
    assert get_sources.git_error(b"hint: a\nerror: b\nhint: c\n") == "error: b"
    assert get_sources.git_error(b"just this\n\n") == "just this"
    assert get_sources.git_error(b"") == "failed"


def test_get_sources_reads_every_repository_data_md_names_at_one_commit(make_data):
    get_sources = load_script("get_sources")
    data_md = (ROOT / "training" / "DATA.md").read_text(encoding="utf-8")
    files = get_sources.recorded(data_md)
    assert len({f.repo for f in files}) == 17 and len(files) == len(make_data.recorded_hashes())
    with pytest.raises(get_sources.SourceError, match="at two commits"):
        get_sources.recorded("`a/b` @ `" + "1" * 40 + "`\n`a/b` @ `" + "2" * 40 + "`\n")
    with pytest.raises(get_sources.SourceError, match="no commit for a\\+b"):
        get_sources.recorded("| `a+b/x.csv` | `" + "3" * 64 + "` | 1 |\n")


def test_measured_sets_makes_a_folder_and_checks_it_against_the_run_that_judged_it(
    tmp_path, make_data, monkeypatch, capsys
):
    measured_sets = load_script("measured_sets")
    rows = [{"text": f"text {i}", "label": i % 2 == 0, "group": "src/a"} for i in range(6)]
    draw = tmp_path / "draw"
    draw.mkdir()
    (draw / "held-out-sources_toxicity.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows)
    )
    judged = {"task": "toxicity", "set": "held-out sources", "way": "tuned",
              "labels": [r["label"] for r in rows[-4:]], "row_groups": ["src/a"] * 4}  # fmt: skip
    results = tmp_path / "results"
    (results / "r").mkdir(parents=True)
    (results / "r" / "quality.json").write_text(json.dumps({"sets": [judged]}))
    keep = measured_sets.copy("held-out-sources_toxicity.jsonl", last=4)
    monkeypatch.setattr(measured_sets, "SETS", (measured_sets.MeasuredSet(
        "data-x", None, lambda _, folder, sources: keep(draw, folder, sources),
        (measured_sets.held("r/quality.json", "toxicity"),), "a section"),))  # fmt: skip
    training = tmp_path / "training"
    training.mkdir()
    args = ["--sources", str(tmp_path), "--training", str(training), "--results", str(results)]
    assert measured_sets.main(args) == 0
    assert "data-x: made" in capsys.readouterr().out
    made = training / "data-x" / "held-out-sources_toxicity.jsonl"
    assert [json.loads(line)["text"] for line in made.read_text().splitlines()] == [
        "text 2", "text 3", "text 4", "text 5",
    ]  # fmt: skip
    assert measured_sets.main(args) == 0
    assert "data-x: there" in capsys.readouterr().out
    # rows other than the run judged: made again, refused, and what was there left alone
    judged["labels"] = judged["labels"][::-1]
    (results / "r" / "quality.json").write_text(json.dumps({"sets": [judged]}))
    before = made.read_text()
    made.write_text(before + before)
    assert measured_sets.main(args) == 2
    err = capsys.readouterr().err
    assert "data-x/held-out-sources_toxicity.jsonl: not the rows r/quality.json judged" in err
    assert made.read_text() == before + before
    assert measured_sets.main([*args, "--only", "y"]) == 2
    assert "unknown folder data-y" in capsys.readouterr().err


def test_measured_sets_keeps_the_shared_sources_rows_only(tmp_path):
    measured_sets = load_script("measured_sets")
    draw, folder = tmp_path / "draw", tmp_path / "folder"
    draw.mkdir(), folder.mkdir()
    for task, groups in (("toxicity", ["davidson/x", "stormfront/y", "toxigen/z"]),
                         ("hallucination", ["snli/x", "fever/y"])):  # fmt: skip
        (draw / f"heldout_{task}.jsonl").write_text(
            "".join(json.dumps({"text": g, "label": True, "group": g}) + "\n" for g in groups)
        )
    measured_sets.shared(draw, folder, tmp_path)
    kept = lambda task: [  # noqa: E731
        json.loads(line)["group"]
        for line in (folder / f"heldout_{task}.jsonl").read_text().splitlines()
    ]
    assert kept("toxicity") == ["davidson/x", "toxigen/z"] and kept("hallucination") == ["snli/x"]


def test_each_measured_set_names_saved_runs_and_a_results_section_that_exist(make_data):
    measured_sets = load_script("measured_sets")
    results = ROOT / "training" / "results"
    headings = [
        line.removeprefix("### ")
        for line in (ROOT / "training" / "RESULTS.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("### ")
    ]
    for measured in measured_sets.SETS:
        assert any(h.startswith(measured.section) for h in headings), measured.folder
        for judged in measured.judged:
            saved = measured_sets.saved_sets(results / judged.run)
            assert (judged.task, judged.name) in saved, (measured.folder, judged)


def test_soft_targets_blend_each_label_with_the_teachers_p_and_find_their_rows_by_tokens(
    make_data, real_judge, tmp_path
):
    distil = load_script("distil")
    assert distil.blended("yes", 0.2, 0.5) == pytest.approx(0.6)
    assert distil.blended("no", 0.8, 0.25) == pytest.approx(0.2)
    assert distil.blended("yes", None, 0.5) == 1.0  # no answer from the teacher: the label

    taught = [
        {"context": ["The tower is 330 m tall."], "claim": "The tower is red.", "label": True,
         "group": "t/a", "teacher": 0.9},
        {"context": ["The tower is 330 m tall."], "claim": "The tower is tall.", "label": False,
         "group": "t/b", "teacher": 0.3},
    ]  # fmt: skip
    tokens = make_data.Tokens(real_judge)
    examples = [
        make_data.Example("hallucination", r["group"], "yes" if r["label"] else "no",
                          r["claim"], tuple(r["context"]))
        for r in taught
    ]  # fmt: skip
    toxic = make_data.Example("toxicity", "x/y", "yes", "You are an idiot.")
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    shuffled = [tokens.encode(e) for e in (examples[1], toxic, examples[0])]
    (data / "train.tokens.jsonl").write_text("".join(json.dumps(e) + "\n" for e in shuffled))
    (data / "heldout_hallucination.jsonl").write_text("{}\n")
    targets = distil.targets_of(taught, tokens, 0.5)
    assert distil.write_blended(data, out, targets) == 2
    written = [json.loads(line) for line in (out / "train.tokens.jsonl").read_text().splitlines()]
    assert [e.get("target") for e in written] == [pytest.approx(0.15), None, pytest.approx(0.95)]
    assert [e["ids"] for e in written] == [e["ids"] for e in shuffled]
    assert (out / "heldout_hallucination.jsonl").read_text() == "{}\n"
    # a tokens file with an example no taught row matches is refused
    with pytest.raises(SystemExit, match="no taught row"):
        distil.write_blended(data, tmp_path / "again", distil.targets_of(taught[:1], tokens, 0.5))


def test_centred_teacher_p_moves_the_teachers_own_threshold_to_one_half_keeping_order():
    distil = load_script("distil")
    taught = [
        {"label": True, "teacher": 0.9},
        {"label": True, "teacher": 0.8},
        {"label": False, "teacher": 0.7},
        {"label": False, "teacher": 0.2},
        {"label": True, "teacher": None},
    ]
    # the teacher's best cut on these labels is 0.75 (halfway between 0.7 and 0.8)
    moved = [row["teacher"] for row in distil.centred(taught)]
    odds = 0.75 / 0.25
    expected = [p / (1 - p) / odds for p in (0.9, 0.8, 0.7, 0.2)]
    assert moved[:4] == pytest.approx([o / (1 + o) for o in expected])
    assert moved[0] == pytest.approx(0.75) and moved[4] is None
    assert moved[:4] == sorted(moved[:4], reverse=True)  # the teacher's order kept
    assert [row["label"] for row in distil.centred(taught)] == [r["label"] for r in taught]
    # a teacher whose best cut is at an end (it calls no row yes) cannot be centred
    with pytest.raises(SystemExit, match="cannot be centred"):
        distil.centred([{"label": False, "teacher": 0.5}, {"label": False, "teacher": 0.6}])


def test_the_claim_first_prompt_adds_the_claim_before_the_context_and_ends_as_the_scorers():
    from localjudge.prompts import claim_verdict_prompt

    claim_first = load_script("claim_first")
    context, claim = ["The shop opens at nine."], "The shop  opens\nat ten."
    shipped = claim_verdict_prompt(context, claim)
    first = claim_first.claim_first_prompt(context, claim)
    assert first.shared == "Claim: The shop opens at ten.\n" + shipped.shared
    assert (first.instructions, first.own, first.version) == (
        shipped.instructions,
        shipped.own,
        shipped.version,
    )
