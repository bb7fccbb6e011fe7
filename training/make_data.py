"""Build the judge-tuning data: public labelled sources -> the exact verdict prompts the
scorers send, tokenized by the judge's own llama.cpp tokenizer.

Runs in localjudge's own virtual environment (it needs the prompts, the tokenizer and the
verdict grammars), not in the training one:

    .venv/bin/python training/make_data.py --sources DIR --out training/data

`--sources` holds the repository snapshots named in training/DATA.md (one folder per
repository, named `owner+name`, with the files at their paths in the repository); every file
is checked against the sha256 recorded there before it is read.

Writes, per split (`train`, `heldout`):
- `{split}.tokens.jsonl`: one verdict example per line: task, source, label ("yes" = hallucinated
  or toxic), the prompt's token ids up to the verdict choice, and the ids of the tokens that
  commit to "yes" and to "no" at that choice, so training reads P(yes) exactly as the scheduler
  does;
- `{split}_{task}.jsonl`: the same rows in `localjudge quality --data` format.
The split is decided by a hash of the judged text, so a text is never on both sides.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import html
import json
import random
import re
import sys
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

HERE = Path(__file__).parent
SEED = 20261130

# (repository folder, path) -> sha256: the files DATA.md lists, and nothing else is read.
FILES = {
    "davidson": ("t-davidson+hate-speech-and-offensive-language", "data/labeled_data.csv"),
    "esnli_s1": ("OanaMariaCamburu+e-SNLI", "dataset/eSNLI/s1.dev"),
    "esnli_s2": ("OanaMariaCamburu+e-SNLI", "dataset/eSNLI/s2.dev"),
    "esnli_labels": ("OanaMariaCamburu+e-SNLI", "dataset/eSNLI/labels.dev"),
    "begin_wow": ("google+BEGIN-dataset", "wow/begin_dev_wow.tsv"),
    "begin_cmu": ("google+BEGIN-dataset", "cmu-dog/begin_dev_cmu.tsv"),
    "wice_dev": ("ryokamoi+wice", "data/entailment_retrieval/claim/dev.jsonl"),
    "fever_dev": ("TalSchuster+FeverSymmetric", "symmetric_v0.2/fever_symmetric_dev.jsonl"),
    "fever_test": ("TalSchuster+FeverSymmetric", "symmetric_v0.2/fever_symmetric_test.jsonl"),
    "stormfront_labels": ("Vicomtech+hate-speech-dataset", "annotations_metadata.csv"),
    # a folder of one-sentence files: its sha256 is the folder's (see sha256_of)
    "stormfront_sentences": ("Vicomtech+hate-speech-dataset", "all_files/"),
}
# The challenge's rated system outputs: each entry's responses and, in the same order, three
# people's 1-5 ratings of each (team13's outputs are not in the repository).
DSTC9 = "alexa+alexa-with-dstc9-track1-dataset"
DSTC9_ENTRIES = (
    "baseline/entry0", "team03/entry1", "team10/entry0", "team11/entry3", "team15/entry3",
    "team17/entry0", "team18/entry3", "team19/entry2", "team20/entry4", "team21/entry3",
    "team23/entry0",
)  # fmt: skip
FILES["dstc9_labels"] = (DSTC9, "data_eval/test/labels.json")
FILES["dstc9_knowledge"] = (DSTC9, "data_eval/knowledge.json")
for _entry in DSTC9_ENTRIES:
    FILES[f"dstc9_out_{_entry}"] = (DSTC9, f"results/{_entry}.json")
    FILES[f"dstc9_rated_{_entry}"] = (DSTC9, f"results/{_entry}.human_eval.json")
# SummEdits: summaries of documents from eight domains (the repository's billsum and shakespeare
# files are over the snapshot size limit), each one of many edits of a seed summary that
# people labelled consistent or not with its document. Measured whole (`--hold-out
# summedits`), or trained on: the two sales domains (`--add summedits-sales`) or all eight
# (`--add summedits-all`), never while SummEdits is held out.
SUMMEDITS = "salesforce+factualNLG"
SUMMEDITS_DOMAINS = (
    "ectsum", "news", "podcast", "qmsumm", "sales_call", "sales_email", "samsum", "scitldr",
)  # fmt: skip
for _domain in SUMMEDITS_DOMAINS:
    FILES[f"summedits_{_domain}"] = (SUMMEDITS, f"data/summedits/summedits_{_domain}.json")
# ConvAbuse: what people typed to two conversational agents, each text labelled by two to
# seven annotators as abusive (mildly to very strongly), ambiguous or not, mostly insults and
# harassment aimed at the agent. Measured from its test split (`--hold-out convabuse`); its
# train split is trained on only when named (`--add convabuse`).
CONVABUSE = "amandacurry+convabuse"
CONVABUSE_SPLITS = ("train", "test")
for _split in CONVABUSE_SPLITS:
    FILES[f"convabuse_{_split}"] = (CONVABUSE, f"2_splits/ConvAbuseEMNLP{_split}.csv")
# ETHOS: YouTube and Reddit comments, each with the share of its annotators who called it hate
# speech. GPL-3.0: measured only (`--hold-out ethos`, and the threshold check of
# toxicity_threshold_capped.py), never trained on.
ETHOS = "intelligence-csd-auth-gr+Ethos-Hate-Speech-Dataset"
FILES["ethos"] = (ETHOS, "ethos/ethos_data/Ethos_Dataset_Binary.csv")
# The Unhealthy Comments Corpus: comments on news articles, each labelled by crowd workers for
# six kinds of incivility (the rubric's dismissive and condescending among them) and for being
# healthy. CC BY-NC-SA 4.0: measured only (`--hold-out ucc`), never trained on. Its test split
# only; the validation split is left unread for a later check.
UCC = "conversationai+unhealthy-conversations"
FILES["ucc_test"] = (UCC, "corpus/test.csv")
# Multitarget-CONAN (Fanton et al. 2021): hate speech about seven targets, written or edited by
# NGO operators, each paired with a counter-narrative an expert wrote in reply. Its licence
# allows research use and no redistribution: measured only (`--hold-out conan`), never trained
# on, its texts never committed (the rows go to a data folder; results keep labels and P(yes)).
CONAN = "marcoguerini+CONAN"
FILES["conan"] = (CONAN, "Multitarget-CONAN/Multitarget-CONAN.csv")
# Q² (Honovich et al. 2021): two dialogue systems' replies in Wizard of Wikipedia's validation
# conversations, each annotated by people as factually consistent with the one knowledge
# sentence the system was given, or not. Apache 2.0 (the repository), the data MIT (its
# `third_party/data/LICENSE.txt`). No knowledge sentence of it is in BEGIN's files.
Q2 = "orhonovich+q-squared"
Q2_FILES = ("dodeca_consistent", "dodeca_inconsistent", "memnet_consistent", "memnet_inconsistent")
for _name in Q2_FILES:
    FILES[f"q2_{_name}"] = (Q2, f"third_party/data/{_name}.csv")
# BUMP (Ma et al. 2023): CNN/DailyMail test articles, each with its reference summary and
# edits of it that annotators made unfaithful by one small change (an entity, a predicate, a
# time or place, a pronoun), in two tasks that share 95 articles. MIT (the repository);
# the articles are CNN's and the Daily Mail's, under their own terms. Measured only
# (`--hold-out bump`), never trained on: news summaries against whole articles, the kind of
# data of issue 34's first target, from a benchmark that is not among its yardstick sets.
BUMP = "dataminr-ai+BUMP"
BUMP_TASKS = ("task1", "task2")
for _task in BUMP_TASKS:
    FILES[f"bump_{_task}"] = (BUMP, f"data/{_task}_dataset.json")
# MultiNLI (Williams et al. 2018) in DocNLI's binary form (Yin et al. 2021): premises from
# ten genres of written and spoken English (letters, government reports, travel guides,
# fiction, telephone talk, ...) with hypotheses people wrote as entailed or not. The
# repository is BSD-3 (Salesforce); MultiNLI's text is the OANC's (free for any use) and,
# for its fiction, CC BY-SA 3.0, CC BY 3.0 or public domain. `dev.txt` is half of MultiNLI's
# own development pairs. Trained on only with `--add mnli`.
FILES["mnli_dev"] = ("salesforce+DocNLI", "Data/binary-MNLI/dev.txt")
# HatemojiBuild (Kirk et al. 2022): statements people wrote on Dynabench to fool a hate
# classifier (the rounds after Vidgen et al.'s Dynamically Generated Hate Speech Dataset),
# most with emoji, each paired with a perturbation of it that flips or keeps its label: hate
# turned into counter-speech, negation, a positive statement about the identity, or aimed at
# an object. CC BY 4.0. Trained on from its train split only with `--add hatemoji`; measured
# from its test split with `--hold-out hatemoji`. Its HatemojiCheck test suite is never read.
HATEMOJI = "HannahKirk+Hatemoji"
HATEMOJI_SPLITS = ("train", "test")
for _split in HATEMOJI_SPLITS:
    FILES[f"hatemoji_{_split}"] = (HATEMOJI, f"HatemojiBuild/{_split}.csv")
TOXIGEN_GROUPS = (
    "asian", "bisexual", "black", "chinese", "immigrant", "jewish", "latino", "lgbtq",
    "mental_disability", "mexican", "middle_east", "muslim", "native_american",
    "physical_disability", "trans", "women",
)  # fmt: skip
for _group in TOXIGEN_GROUPS:
    for _kind in ("hate", "neutral") if _group != "trans" else ("hate",):  # no neutral_trans
        FILES[f"toxigen_{_kind}_{_group}"] = (
            "microsoft+TOXIGEN",
            f"prompts/{_kind}_{_group}_1k.txt",
        )


@dataclass
class Example:
    task: str  # hallucination | toxicity
    source: str
    label: str  # "yes" (hallucinated / toxic) or "no"
    text: str  # the claim or the statement
    context: tuple[str, ...] = ()  # hallucination only
    input: str = ""  # toxicity only: the user's message
    document: str = ""  # the whole text the window was cut from, for held-out rows
    pair: str = ""  # a contrast pair's id: `take_pairs` draws both members or neither

    def key(self) -> str:
        return hashlib.sha256(self.text.strip().lower().encode()).hexdigest()


class SourceError(Exception):
    pass


def sha256_of(path: Path) -> str:
    """A file's sha256; a folder's is the sha256 of its files' names and sha256s, one
    `name sha256` line each, sorted by name (so one DATA.md row covers thousands of files)."""
    if path.is_dir():
        lines = sorted(f"{f.name} {sha256_of(f)}\n" for f in path.iterdir() if f.is_file())
        return hashlib.sha256("".join(lines).encode()).hexdigest()
    return hashlib.sha256(path.read_bytes()).hexdigest()


# a row of DATA.md's table of files: | `owner+name/path` | `sha256` | ...
HASH_ROW = re.compile(r"\|\s*`([^`]+)`\s*\|\s*`([0-9a-f]{64})`\s*\|")


def recorded_hashes() -> dict[str, str]:
    """`path -> sha256` from the table in DATA.md (the one place they are written)."""
    table = {}
    for line in (HERE / "DATA.md").read_text(encoding="utf-8").splitlines():
        found = HASH_ROW.match(line)
        if found:
            table[found.group(1)] = found.group(2)
    return table


def source_path(sources: Path, name: str, hashes: dict[str, str]) -> Path:
    repo, inner = FILES[name]
    path = sources / repo / inner
    key = f"{repo}/{inner}"
    if not (path.is_dir() if inner.endswith("/") else path.is_file()):
        raise SourceError(f"missing source file {path} (see training/DATA.md)")
    if key not in hashes:
        raise SourceError(f"{key} has no sha256 in training/DATA.md")
    if sha256_of(path) != hashes[key]:
        raise SourceError(f"{path}: sha256 differs from training/DATA.md")
    return path


# -- toxicity -------------------------------------------------------------------------------

_MENTION = re.compile(r"@\w+:?")
_URL = re.compile(r"https?://\S+")
_RT = re.compile(r"^\s*(RT\s+)+")


def clean_tweet(text: str) -> str:
    text = html.unescape(html.unescape(text))
    text = _URL.sub("", _MENTION.sub("", text))
    text = _RT.sub("", text).replace("RT ", " ")
    text = re.sub(r"&#\d+;?", "", text)
    return " ".join(text.replace('"', " ").split()).strip(" :!")


def davidson(path: Path) -> list[Example]:
    """Tweets: hate speech and offensive language are toxic, "neither" is not."""
    out = []
    with path.open(encoding="utf-8", newline="") as f:
        for record in csv.DictReader(f):
            text = clean_tweet(record["tweet"])
            if not 20 <= len(text) <= 240:
                continue
            label = "no" if record["class"] == "2" else "yes"
            kind = {"0": "hate", "1": "offensive", "2": "neither"}[record["class"]]
            out.append(Example("toxicity", f"davidson/{kind}", label, text))
    return out


def toxigen(sources: Path, hashes: dict[str, str]) -> list[Example]:
    """Machine-written statements about 16 groups: hateful ones are toxic, neutral mentions
    of the same groups are not (the contrast a word list cannot learn)."""
    out, seen = [], set()
    for group in TOXIGEN_GROUPS:
        for kind in ("hate", "neutral"):
            if f"toxigen_{kind}_{group}" not in FILES:
                continue
            path = source_path(sources, f"toxigen_{kind}_{group}", hashes)
            for line in path.read_text(encoding="utf-8").splitlines():
                for item in line.split("\\n"):
                    text = " ".join(item.strip().lstrip("-").split())
                    if len(text) < 15 or text.lower() in seen:
                        continue
                    seen.add(text.lower())
                    label = "yes" if kind == "hate" else "no"
                    out.append(Example("toxicity", f"toxigen/{kind}", label, text))
    return out


def stormfront(labels: Path, sentences: Path) -> list[Example]:
    """Sentences from a white-supremacist forum, labelled hate or not one by one: much of the
    hate is implicit (no slur, no insult), and the rest of the forum's talk mentions the same
    groups without attacking them. Only sentences the annotators judged without reading the
    thread around them (`num_contexts` 0): a verdict on one sentence needs no more."""
    out = []
    with labels.open(encoding="utf-8", newline="") as f:
        for record in csv.DictReader(f):
            if record["num_contexts"] != "0" or record["label"] not in ("hate", "noHate"):
                continue
            path = sentences / f"{record['file_id']}.txt"
            text = detokenize(path.read_text(encoding="utf-8").strip())
            if not 20 <= len(text) <= 300:
                continue
            hate = record["label"] == "hate"
            kind = "hate" if hate else "no-hate"
            out.append(Example("toxicity", f"stormfront/{kind}", "yes" if hate else "no", text))
    return out


_EMOJI_SPAN = re.compile(r"<span class='emoji-bytes' data-emoji-bytes='\[([\d, ]*)\]'></span>")


def convabuse_text(text: str) -> str:
    """A ConvAbuse text as typed: its emoji are stored as HTML spans holding their UTF-8
    bytes."""

    def emoji(found: re.Match) -> str:
        codes = [int(n) for n in found.group(1).split(",") if n.strip()]
        return bytes(codes).decode("utf-8", "replace")

    return " ".join(_EMOJI_SPAN.sub(emoji, html.unescape(text)).split())


def convabuse(paths: dict[str, Path]) -> list[Example]:
    """Texts typed to a conversational agent, by the majority of the people who labelled
    them: more than half abusive (any degree) is toxic, more than half not abusive is not; a
    text with no such majority (ambiguous, split) is left out. A text met more than once (a
    "yes", a "fuck you") is one example, by all its labels pooled. Judged alone, as the
    other public sources are (the agent's turn before it is not its input: the judged text
    answers it). Sources `convabuse/{split}/abusive` and `convabuse/{split}/not-abusive`."""
    out = []
    for split, path in paths.items():
        seen: dict[str, tuple[str, Counter]] = {}  # lowered text -> first text, votes
        with path.open(encoding="utf-8", newline="") as f:
            for record in csv.DictReader(f):
                text = convabuse_text(record["user"])
                if not text:
                    continue
                _, votes = seen.setdefault(text.lower(), (text, Counter()))
                for column, value in record.items():
                    degree = column.partition("_is_abuse.")[2]
                    if degree and value.strip() in ("1", "1.0"):
                        votes["abusive" if degree.startswith("-") else degree] += 1
        for text, votes in seen.values():
            if votes["abusive"] * 2 > votes.total():
                kind, label = "abusive", "yes"
            elif votes["1"] * 2 > votes.total():
                kind, label = "not-abusive", "no"
            else:
                continue
            out.append(Example("toxicity", f"convabuse/{split}/{kind}", label, text))
    return out


# An insult word: a not-hateful HatemojiBuild text holding one may still attack a person
# ("if you hate them you are a ...", "you stupid ..."), which the rubric calls toxic.
_INSULT = re.compile(
    r"\b(idiot|stupid|cunt|bitch|twat|moron|dumb|retard|wanker|prick|scum|trash|dick|loser)",
    re.IGNORECASE,
)


def hatemoji(paths: dict[str, Path]) -> list[Example]:
    """HatemojiBuild's statements by their gold label: hateful `hatemoji/{split}/hate`
    ("yes"), not hateful `hatemoji/{split}/not-hate` ("no"). A not-hateful text with an insult
    word is left out: its label says it attacks no protected group, not that it attacks no
    one. Whitespace collapsed; a text met twice with both labels left out. Judged alone."""
    out = []
    for split, path in paths.items():
        found = []
        with path.open(encoding="utf-8", newline="") as f:
            for record in csv.DictReader(f):
                text = " ".join(record["text"].split())
                hate = record["label_gold"].strip() == "1"
                if text and (hate or not _INSULT.search(text)):
                    found.append((text, "hate" if hate else "not-hate"))
        out += [
            Example("toxicity", f"hatemoji/{split}/{kind}", "yes" if kind == "hate" else "no", text)
            for text, kind in one_kind_each(found)
        ]
    return out


def hatemoji_pairs(path: Path) -> list[Example]:
    """HatemojiBuild's train split as its annotators' contrast pairs: an original statement
    and the perturbation written of it, one hateful and the other not
    (`hatemoji/train/pair-hate` "yes", `hatemoji/train/pair-not-hate` "no"), both carrying
    the pair's id. Left out as `hatemoji` leaves them out (a not-hateful member with an
    insult word, a text met with both labels), and so is a pair whose text another pair
    has. Judged alone."""
    with path.open(encoding="utf-8", newline="") as f:
        records = {r["entry_id"]: r for r in csv.DictReader(f)}
    text = lambda r: " ".join(r["text"].split())  # noqa: E731
    kept = {e.text for e in hatemoji({"train": path})}
    pairs = []
    for record in records.values():
        other = records.get(record["matched_id"])
        if record["set"] != "original" or other is None:
            continue
        hate, civil = (record, other) if record["label_gold"].strip() == "1" else (other, record)
        if hate["label_gold"].strip() == "1" and civil["label_gold"].strip() == "0":
            pairs.append((record["entry_id"], text(hate), text(civil)))
    used = Counter(t.lower() for _, hate, civil in pairs for t in (hate, civil))
    out = []
    for pair, hate, civil in pairs:
        if {hate, civil} <= kept and used[hate.lower()] == used[civil.lower()] == 1:
            out.append(Example("toxicity", "hatemoji/train/pair-hate", "yes", hate, pair=pair))
            out.append(Example("toxicity", "hatemoji/train/pair-not-hate", "no", civil, pair=pair))
    return out


# -- hallucination --------------------------------------------------------------------------

# Where make_data cuts a source's text into sentences: after ., ! or ?, at the whitespace
# that follows. Plainer than the scorers' `sentence_spans`, which keeps "3:30 p.m. Is" whole,
# and the rows every recorded fold trained on were cut this way.
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")


def snli(s1: Path, s2: Path, labels: Path) -> list[Example]:
    """SNLI pairs: an entailed hypothesis is supported ("no"); a contradicted or merely
    possible one is hallucinated ("yes": the context does not say it)."""
    out = []
    rows = zip(
        s1.read_text(encoding="utf-8").splitlines(),
        s2.read_text(encoding="utf-8").splitlines(),
        labels.read_text(encoding="utf-8").splitlines(),
        strict=True,
    )
    for premise, hypothesis, label in rows:
        premise, hypothesis = detokenize(premise), detokenize(hypothesis)
        verdict = "no" if label.strip() == "entailment" else "yes"
        out.append(
            Example("hallucination", f"snli/{label.strip()}", verdict, hypothesis, (premise,))
        )
    return out


_PTB = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "``": '"', "''": '"', "--": "–"}


def detokenize(text: str) -> str:
    text = " ".join(_PTB.get(word, word) for word in text.split())
    text = re.sub(r"([(\[]) ", r"\1", text)
    text = re.sub(r" ([)\]])", r"\1", text)
    text = re.sub(r" ([.,!?;:'])", r"\1", text)
    text = re.sub(r" n't", "n't", text)
    return text[:1].upper() + text[1:]


def begin(path: Path, name: str) -> list[Example]:
    """Dialogue responses against their knowledge passage: fully attributable is supported,
    anything else is not."""
    out = []
    with path.open(encoding="utf-8", newline="") as f:
        for record in csv.DictReader(f, delimiter="\t"):
            label = record["begin_label"].strip().lower()
            if label not in ("fully attributable", "not fully attributable"):
                continue
            knowledge, response = record["knowledge"].strip(), record["response"].strip()
            if not knowledge or not 10 <= len(response) <= 300 or len(knowledge) > 700:
                continue
            verdict = "no" if label == "fully attributable" else "yes"
            out.append(Example("hallucination", f"begin/{name}", verdict, response, (knowledge,)))
    return out


_FIRST_PERSON = re.compile(r"(^|[.!?] )(i|i'm|i ' m|my|we)\b", re.IGNORECASE)


def first_person(text: str) -> bool:
    """Whether a sentence of `text` opens with "i", "i'm", "my" or "we": a personal statement,
    which BEGIN labels not attributable and Q² may label consistent."""
    return bool(_FIRST_PERSON.search(text))


def dstc9(
    labels: Path, knowledge: Path, entries: list[tuple[Path, Path]], *, keep_closing: bool = False
) -> list[Example]:
    """System responses from a task-oriented dialogue challenge (hotels, restaurants, trains,
    taxis, sights), each rated 1 to 5 by three people for how accurate it is against the
    reference knowledge: one FAQ question and answer about the place. Judged against that
    snippet: a mean rating of 4.5 or more is supported ("no"), 2 or less hallucinated
    ("yes"), the rest left out. Ratings of the same text against the same snippet (systems
    that wrote the same reply) are pooled. A closing question ("Anything else I can do for
    you?") asserts nothing and is cut off (`keep_closing` keeps it, for
    `dstc9_closings.py`); a text rated both ways against different snippets is left out,
    and every text is kept once."""
    gold = json.loads(labels.read_text(encoding="utf-8"))
    docs = json.loads(knowledge.read_text(encoding="utf-8"))

    def snippet(ref: dict) -> str:
        doc = docs[ref["domain"]][str(ref["entity_id"])]["docs"][str(ref["doc_id"])]
        return f"{doc['title'].strip()} {doc['body'].strip()}"

    ratings: dict[tuple[str, str], list[int]] = {}
    for outputs, rated in entries:
        replies = json.loads(outputs.read_text(encoding="utf-8"))
        scores = json.loads(rated.read_text(encoding="utf-8"))
        if not len(replies) == len(scores) == len(gold):
            raise SourceError(
                f"{rated}: {len(replies)} replies, {len(scores)} ratings, {len(gold)} test turns"
            )
        for truth, reply, score in zip(gold, replies, scores, strict=True):
            if not (score and truth.get("target") and reply.get("target")):
                continue
            sentences = _SENTENCE_BREAK.split((reply.get("response") or "").strip())
            while not keep_closing and sentences and sentences[-1].endswith("?"):
                sentences.pop()
            text = " ".join(sentences)
            if 20 <= len(text) <= 300:
                context = " ".join(snippet(ref) for ref in truth["knowledge"])
                ratings.setdefault((text, context), []).extend(score["accuracy"])
    verdicts: dict[str, list[tuple[str, str]]] = {}
    for (text, context), given in ratings.items():
        mean = sum(given) / len(given)
        if mean >= 4.5 or mean <= 2:
            verdicts.setdefault(text, []).append(("no" if mean >= 4.5 else "yes", context))
    out = []
    for text, found in verdicts.items():
        if len({label for label, _ in found}) == 1:
            label, context = found[0]
            kind = "accurate" if label == "no" else "inaccurate"
            out.append(Example("hallucination", f"dstc9/{kind}", label, text, (context,)))
    return out


def dstc9_from(path, *, keep_closing: bool = False) -> list[Example]:
    """`dstc9` on the source files, each found by `path(name)` (its sha256 checked)."""
    rated = [(path(f"dstc9_out_{e}"), path(f"dstc9_rated_{e}")) for e in DSTC9_ENTRIES]
    return dstc9(path("dstc9_labels"), path("dstc9_knowledge"), rated, keep_closing=keep_closing)


def summedits_label(path: Path, record: dict) -> str:
    """A SummEdits record's verdict: people's label 1 (consistent) "no", 0 "yes"."""
    if str(record.get("label")) not in ("0", "1"):
        raise SourceError(f"{path}: {record.get('id')} has label {record.get('label')!r}")
    return "no" if str(record["label"]) == "1" else "yes"


def summedits(paths: dict[str, Path]) -> list[Example]:
    """SummEdits: a summary judged against the whole document it summarises (a news article,
    a podcast or meeting transcript, an earnings call, a sales email or call, a chat, a
    paper's abstract), as a user's context comes; the judge picks its evidence windows.
    Labelled by people: consistent ("no") or not ("yes", an edit changed or added a fact).
    A summary labelled both ways is left out, and every summary is kept once."""
    found: dict[tuple[str, str], set[str]] = {}
    domains: dict[tuple[str, str], str] = {}
    for domain, path in paths.items():
        for record in json.loads(path.read_text(encoding="utf-8")):
            pair = (record["summary"].strip(), record["doc"].strip())
            found.setdefault(pair, set()).add(summedits_label(path, record))
            domains[pair] = domain
    texts = Counter(text for text, _ in found)
    out = []
    for (text, doc), labels in found.items():
        if len(labels) == 1 and texts[text] == 1:
            label = labels.pop()
            kind = "consistent" if label == "no" else "inconsistent"
            source = f"summedits/{kind}/{domains[text, doc]}"
            out.append(Example("hallucination", source, label, text, (doc,), document=doc))
    return out


def bump(paths: dict[str, Path]) -> list[Example]:
    """BUMP's minimal pairs: each article's reference summary ("no", `bump/reference`) and one
    of its unfaithful edits drawn at random from both tasks ("yes", `bump/edited/<kind>`, the
    error kind as corrected in task 1, else as given), each against its whole article. The
    summaries' tokenized spacing (" ." and " 's") is undone, the same way for both sides.
    BUMP takes the reference as the faithful side of each pair; that label is its own."""
    edits: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for path in paths.values():
        for record in json.loads(path.read_text(encoding="utf-8")):
            kind = record.get("corrected_error_type") or record.get("error_type")
            if not kind:
                raise SourceError(f"{path}: record {record.get('id')} has no error type")
            kind = re.sub(r" error$", "", kind.strip().lower()).replace(" ", "-")
            pair = (record["article"].strip(), detokenize(record["reference_summary"]))
            edits.setdefault(pair, []).append((kind, detokenize(record["edited_summary"])))
    rng = random.Random(f"{SEED}:bump")
    out = []
    for (article, reference), found in edits.items():
        found = sorted({(kind, text) for kind, text in found if text != reference})
        if not found:
            continue
        kind, edited = rng.choice(found)
        out.append(Example("hallucination", "bump/reference", "no", reference, (article,),
                           document=article))  # fmt: skip
        out.append(Example("hallucination", f"bump/edited/{kind}", "yes", edited, (article,),
                           document=article))  # fmt: skip
    return out


SUMMEDITS_TRAINED = ("sales_call", "sales_email")  # documents the authors' models wrote
# `--add summedits-all`: a consistent summary's sentence is kept as "no" when its window holds
# half its words, so that sentences which reword their document are among them
SUMMEDITS_ALL_LEAST = 0.5


def summedits_sentences(paths: dict[str, Path], count_tokens, least: float = 0.6) -> list[Example]:
    """Training rows in the scorers' shape from SummEdits' summaries (`--add
    summedits-sales`: of sales calls and emails; `--add summedits-all`: of all eight
    domains): each sentence of a summary against the 96-token window of its document that
    BM25 ranks first for it, as the scorer picks. The consistent summaries are paraphrases of
    a seed summary, so their sentences are supported claims that do not copy the document:
    "no" when the window holds at least `least` of the sentence's words (else it may rest on
    other windows, and is left out). An inconsistent summary whose edit changed one
    sentence of its seed gives that sentence, "yes" against its window: a small change (a
    name, a number, a negation, an added fact) to a sentence otherwise supported. A sentence
    labelled both ways is left out."""
    from localjudge.scorers.baselines import word_share
    from localjudge.scorers.evidence import BM25, candidate_windows, split_windows
    from localjudge.scorers.text import split_statements

    found: dict[str, set[tuple[str, str, str]]] = {}
    for domain, path in paths.items():
        records = json.loads(path.read_text(encoding="utf-8"))
        windows_of: dict[str, tuple[list, BM25]] = {}
        for record in records:
            doc = record["doc"].strip()
            if doc not in windows_of:
                windows = split_windows(doc, count_tokens, WINDOW_TOKENS)
                windows_of[doc] = (windows, BM25([w.text for w in windows]))
            windows, bm25 = windows_of[doc]
            sentences = split_statements(record["summary"].strip())
            if summedits_label(path, record) == "no":
                picked = [(s, "no") for s in sentences]
            else:
                seed = set(split_statements(record["original_summary"].strip()))
                edited = [s for s in sentences if s not in seed]
                picked = [(edited[0], "yes")] if len(edited) == 1 else []
            for sentence, label in picked:
                best = windows[candidate_windows(windows, [sentence], 1, bm25)[0][0][0]]
                if label == "no" and (word_share(sentence, [best.text]) or 0) < least:
                    continue
                found.setdefault(sentence, set()).add((label, best.text, domain))
    out = []
    for sentence, rows in found.items():
        if len({label for label, _, _ in rows}) == 1:
            label, window, domain = sorted(rows)[0]
            kind = "sentence-consistent" if label == "no" else "sentence-edited"
            out.append(Example("hallucination", f"summedits/{kind}/{domain}", label, sentence,
                               (window,)))  # fmt: skip
    return out


def fever(*paths: Path) -> list[Example]:
    """FEVER claims against one Wikipedia sentence, in the symmetric set's pairs: each claim
    once with evidence that supports it ("no") and once with evidence edited to refute it
    ("yes"), so the verdict cannot be read off the claim alone."""
    out, seen = [], set()
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            claim, evidence = detokenize(record["claim"]), detokenize(record["evidence"])
            if (claim, evidence) in seen or record["label"] not in ("SUPPORTS", "REFUTES"):
                continue
            seen.add((claim, evidence))
            verdict = "no" if record["label"] == "SUPPORTS" else "yes"
            out.append(Example("hallucination", f"fever/{record['label'].lower()}", verdict,
                               claim, (evidence,)))  # fmt: skip
    return out


def mnli(path: Path) -> list[Example]:
    """MultiNLI pairs, one `label<TAB>premise<TAB>hypothesis` line each: an entailed
    hypothesis is supported ("no"); one that is contradicted or only possible is not ("yes":
    the premise does not say it). A line of another shape, or a pair met twice, is left out."""
    out, seen = [], set()
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) != 3 or parts[0] not in ("entailment", "not_entailment"):
            continue
        label, premise, hypothesis = (part.strip() for part in parts)
        if not premise or not hypothesis or (premise, hypothesis) in seen:
            continue
        seen.add((premise, hypothesis))
        verdict = "no" if label == "entailment" else "yes"
        source = "mnli/entailment" if verdict == "no" else "mnli/not-entailment"
        out.append(Example("hallucination", source, verdict, hypothesis, (premise,)))
    return out


def in_windows(examples, fillers, count_tokens, rng, share=0.5):
    """Put `share` of the examples' evidence among unrelated sentences, up to a window of
    WINDOW_TOKENS: in use the judge reads a claim against a 96-token window of a longer
    text, where the sentence that decides it sits among others. The label is unchanged
    (unrelated sentences neither support nor refute the claim)."""
    out = []
    for example in examples:
        if rng.random() >= share:
            out.append(example)
            continue
        parts = [" ".join(example.context)]
        size = count_tokens(parts[0])
        for _ in range(12):
            filler = rng.choice(fillers)
            extra = count_tokens(filler) + 1
            if size + extra > WINDOW_TOKENS:
                break
            parts.insert(rng.randint(0, len(parts)), filler)
            size += extra
        out.append(replace(example, context=(" ".join(parts),)))
    return out


WINDOW_TOKENS = 96  # the registry's recommended.window_tokens: train on the windows used


def wice(path: Path, count_tokens, rng: random.Random) -> list[Example]:
    """WiCE (dev split; its test split is an evaluation set): claims from Wikipedia against
    the web page they cite (~2,000 tokens), cut into the evidence windows the scorer uses.
    A supported claim is judged against a window that holds one of its annotated supporting
    sentence sets ("no"); a partially supported claim against such a window ("yes": part of
    it is not stated); an unsupported one against the window BM25 ranks first for it, as the
    scorer would pick ("yes")."""
    from localjudge.scorers.evidence import candidate_windows, split_windows

    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        text, spans = page_text(record)
        windows = split_windows(text, count_tokens, WINDOW_TOKENS)
        label, claim = record["label"], record["claim"].strip()
        window = None
        if label == "not_supported":
            window = windows[candidate_windows(windows, [claim], 1)[0][0][0]]
        else:
            sets = [s for s in record["supporting_sentences"] if s]
            rng.shuffle(sets)
            for wanted in sets:
                inside = [
                    w for w in windows
                    if all(w.start <= spans[i][0] and spans[i][1] <= w.end for i in wanted)
                ]  # fmt: skip
                if inside:
                    window = inside[0]
                    break
        if window is None or len(claim) > 400:
            continue  # the support spans more than one window
        verdict = "no" if label == "supported" else "yes"
        out.append(Example("hallucination", f"wice/{label}", verdict, claim, (window.text,),
                           document=text))  # fmt: skip
    return out


def page_text(record: dict) -> tuple[str, list[tuple[int, int]]]:
    """A WiCE record's cited page as one text, and the (start, end) of each of its
    evidence sentences in it."""
    text, spans = "", []
    for sentence in (s.strip() for s in record["evidence"]):
        start = len(text) + (1 if text else 0)
        text = f"{text} {sentence}" if text else sentence
        spans.append((start, len(text)))
    return text, spans


_PROSE = re.compile(r"^[A-Z][^#|]{38,218}[.!?]$")
_CONTENT = re.compile(r"[a-z0-9]{4,}")


def cited_pages(path: Path, count_tokens):
    """Each page WiCE's claims cite (one per line of its dev split): its text, its evidence
    windows, and the (start, end) of its prose sentences of 7 words or more."""
    from localjudge.scorers.evidence import split_windows
    from localjudge.scorers.text import sentence_spans

    for line in path.read_text(encoding="utf-8").splitlines():
        text, _ = page_text(json.loads(line))
        prose = [
            (start, end) for start, end in sentence_spans(text)
            if _PROSE.match(text[start:end]) and len(text[start:end].split()) >= 7
        ]  # fmt: skip
        yield text, split_windows(text, count_tokens, WINDOW_TOKENS), prose


def wice_pages(path: Path, count_tokens, rng: random.Random) -> list[Example]:
    """On-topic statements a window does not make, from the pages WiCE's claims cite (dev
    split): a prose sentence of the page judged against one of the three windows of the same
    page that BM25 ranks first for it among those at least two windows away ("yes": same
    subject, another part of the page), and the same sentence judged against a window that
    holds it ("no"). The reply that adds a true-sounding fact about the subject, which the
    context does not state, is what the judge let through on held-out dialogue. A sentence
    with 60% of its content words in the far window is skipped: the page may say it twice
    there."""
    from localjudge.scorers.evidence import BM25

    out = []
    for text, windows, prose in cited_pages(path, count_tokens):
        if len(windows) < 4:
            continue
        bm25 = BM25([w.text for w in windows])
        rng.shuffle(prose)
        for start, end in prose[:4]:
            sentence = text[start:end]
            own = [w.index for w in windows if w.start < end and start < w.end]
            far = [w.index for w in windows if min(abs(w.index - i) for i in own) >= 2]
            if not far:
                continue
            scores = bm25.scores(sentence)
            near = sorted(far, key=lambda i: (-scores[i], i))[:3]
            window = windows[rng.choice(near)]
            words = set(_CONTENT.findall(sentence.lower()))
            shared = words & set(_CONTENT.findall(window.text.lower()))
            if words and len(shared) >= 0.6 * len(words):
                continue  # may be said again there
            out.append(Example("hallucination", "wice/page-elsewhere", "yes", sentence,
                               (window.text,)))  # fmt: skip
            inside = [w for w in windows if w.start <= start and end <= w.end]
            if inside:
                out.append(Example("hallucination", "wice/page-inside", "no", sentence,
                                   (rng.choice(inside).text,)))  # fmt: skip
    return out


def joined(passages: list[str], rng: random.Random) -> list[Example]:
    """Two context sentences joined into one claim: supported when both are copied (the
    judge called such joins hallucinated), not when one of them is swapped. The context
    holds the two sentences, in either order, as one text."""
    names = sorted({w for p in passages for w in re.findall(r"\b[A-Z][a-z]{3,}\b", p)} - _COMMON)
    sentences = [p for p in passages if 20 <= len(p) <= 160 and p[:1].isupper()]
    out = []
    for _ in range(len(sentences) // 2):
        first, second = rng.sample(sentences, 2)
        context = f"{first} {second}" if rng.random() < 0.5 else f"{second} {first}"
        tail = inside(second)
        glue = rng.choice((", and ", "; ", ", while "))
        head = first.rstrip(".!?")
        if rng.random() < 0.5:
            claim = head + glue + tail
            out.append(Example("hallucination", "synthetic/joined", "no", claim, (context,)))
            continue
        change = swapped(tail, rng, names)
        if change is not None:
            claim = head + glue + change[1]
            out.append(Example("hallucination", "synthetic/joined-swap", "yes", claim, (context,)))
    return out


# What a reply adds to what it copies: statements its context does not make (our own
# sentences, written for the partial-support failure: a copied fact with something more).
_ADDED_CLAIMS = (
    ", and it is still very popular today", ", which most people never notice",
    ", and it has won several awards", ", and it happened again the following year",
    ", which made it the first of its kind", ", and the same is true in most countries",
    ", and everyone there agreed it was a good idea", ", which took about ten years",
    ", and that is why it is so famous", ", and it was all paid for by the city",
)  # fmt: skip
_PERSONAL = (
    "I have one at home and use it every day.", "I saw it myself last summer.",
    "My brother does this every weekend.", "I love it, it is the best thing ever.",
    "We tried it once and it was amazing.", "I have read everything about it.",
    "It is my favourite, I think about it all the time.", "I used to work there.",
)  # fmt: skip
_OPENERS = ("Yes, ", "Oh yes, ", "Right, ", "Indeed, ", "Well, ", "Sure, ", "Ah, ")  # fmt: skip


def additions(passages: list[str], rng: random.Random, split: bool = False) -> list[Example]:
    """A context sentence copied, then something added that the context does not state (a
    clause, a second sentence from another passage, or a personal statement): hallucinated.
    Beside them, the same kind of sentence copied after a conversational opener that states
    nothing: supported. The context is the passage the sentence comes from. With `split`,
    in the scorers' shape (they judge an output sentence by sentence): an added sentence is
    the claim on its own, the same draws otherwise."""
    sentences = [
        (passage, sentence)
        for passage in passages
        for sentence in _SENTENCE_BREAK.split(passage)
        if 25 <= len(sentence) <= 200 and sentence[:1].isupper()
    ]
    out = []
    for passage, sentence in sentences[: len(sentences) // 3]:
        head = sentence.rstrip(".!?")
        kind = rng.random()
        if kind < 0.4:
            claim = rng.choice(_OPENERS) + inside(sentence)
            out.append(Example("hallucination", "synthetic/addition-ok", "no", claim, (passage,)))
            continue
        if kind < 0.65:
            claim = head + rng.choice(_ADDED_CLAIMS) + "."
        elif kind < 0.85:
            other = rng.choice(sentences)[1]
            if other in passage:
                continue
            claim = other if split else f"{head}. {other}"
        else:
            personal = rng.choice(_PERSONAL)
            claim = personal if split else f"{head}. {personal}"
        out.append(Example("hallucination", "synthetic/addition", "yes", claim, (passage,)))
    return out


_NUMBER = re.compile(r"\b\d[\d,]*\b")
_BE = re.compile(r"\b(is|are|was|were|has|have|can|will)\b")


def wice_intrinsic(path: Path, count_tokens, rng: random.Random) -> list[Example]:
    """Claims made wrong with the window's own words, from the pages WiCE's claims cite (dev
    split): a prose sentence judged against a window that holds it, either copied ("no",
    `wice/intrinsic-copy`) or changed so that the window no longer supports it, only with
    words the window itself holds ("yes", `wice/intrinsic-swap/<kind>`): a name swapped for
    another name of the window (`entity`), a number for another number of the window
    (`number`), or two names of the sentence exchanged (`exchange`). What the judge users
    get lets through on news summaries is an edit that takes its word from elsewhere in the
    article (RESULTS.md, "Which of BUMP's edits the judge catches"); `swapped` brings in
    words from other passages."""
    out = []
    for text, windows, prose in cited_pages(path, count_tokens):
        rng.shuffle(prose)
        for start, end in prose[:4]:
            inside = [w for w in windows if w.start <= start and end <= w.end]
            if not inside:
                continue
            window = rng.choice(inside).text
            sentence = text[start:end]
            rest = window.replace(sentence, " ")
            change = None if rng.random() < 0.5 else intrinsic_swap(sentence, rest, rng)
            if change is None:
                out.append(Example("hallucination", "wice/intrinsic-copy", "no", sentence,
                                   (window,)))  # fmt: skip
            else:
                kind, claim = change
                out.append(Example("hallucination", f"wice/intrinsic-swap/{kind}", "yes", claim,
                                   (window,)))  # fmt: skip
    return out


def restated(records: list[dict], rng: random.Random) -> list[Example]:
    """Sentences a registered instruct model wrote to restate a window of WiCE's cited pages
    in other words (`training/paraphrase.py`; dev split). A sentence is kept when every
    number in it and every capitalised word past its first is the window's, when at least
    two in five of its content words are the window's, and when it copies no run of six words
    from the window: it then says, in other words, what the window says. Half of the kept
    sentences are judged against their window as written ("no", `wice/restatement/kept`), half
    changed by `swapped` (a number, a date, a name of another window, or a negation; "yes",
    `wice/restatement/swapped/<kind>`), so that rewording alone decides nothing."""
    names = sorted({w for r in records for w in _NAME.findall(r["window"]) if len(w) > 3} - _COMMON)
    out = []
    for record in records:
        window = record["window"]
        for sentence in record["sentences"]:
            if not 30 <= len(sentence) <= 250 or not faithful_restatement(sentence, window):
                continue
            change = swapped(sentence, rng, names) if rng.random() < 0.5 else None
            if change is None:
                out.append(
                    Example("hallucination", "wice/restatement/kept", "no", sentence, (window,))
                )
            else:
                kind = change[0].removeprefix("synthetic/")
                out.append(Example("hallucination", f"wice/restatement/swapped/{kind}", "yes",
                                   change[1], (window,)))  # fmt: skip
    return out


def faithful_restatement(sentence: str, window: str) -> bool:
    """Whether `sentence` keeps to `window` (its numbers and names are the window's, two in
    five of its content words or more are) without copying it (no run of six words)."""
    if any(n not in window for n in _NUMBER.findall(sentence)):
        return False
    if any(w not in window for w in _NAME.findall(" ".join(sentence.split()[1:]))):
        return False
    words = set(_CONTENT.findall(sentence.lower()))
    if not words or len(words & set(_CONTENT.findall(window.lower()))) < 0.4 * len(words):
        return False
    seq = re.findall(r"\w+", window.lower())
    runs = {tuple(seq[i : i + 6]) for i in range(len(seq) - 5)}
    own = re.findall(r"\w+", sentence.lower())
    return not any(tuple(own[i : i + 6]) in runs for i in range(len(own) - 5))


_NAME = re.compile(r"\b[A-Z][a-z]{2,}\b")  # a capitalised word: maybe a name
_LINKS = {"and", "or", "nor", "the", "of", "de", "von", "van", "&"}  # of lists and names


def related(sentence: str, a: str, b: str) -> bool:
    """Whether names `a` and `b` (each once in `sentence`) are joined by a word that makes
    their order matter: a lower-case word between them other than a list's or a name's
    links ("Ann beat Bo", not "Ann and Bo", "Ann, Bo and Cy" or "Bank of Ann")."""
    i, j = sorted(
        (re.search(rf"\b{a}\b", sentence).start(), re.search(rf"\b{b}\b", sentence).start())
    )
    between = sentence[i:j].split()[1:]
    return any(w.islower() and w.strip(",;:") not in _LINKS for w in between)


def intrinsic_swap(sentence: str, rest: str, rng: random.Random) -> tuple[str, str] | None:
    """`sentence` changed with words `rest` (the rest of its window) or the sentence itself
    holds: (kind, text), or None when it has nothing to swap. Only a word the sentence holds
    once is changed, and never its first word (a capital there need not be a name)."""
    first = sentence.split()[0]
    own_names = [w for w in _NAME.findall(sentence) if w not in _COMMON and w != first]
    once = [w for w in own_names if len(re.findall(rf"\b{w}\b", sentence)) == 1]
    other_names = sorted(set(_NAME.findall(rest)) - _COMMON - set(_NAME.findall(sentence)))
    own_numbers = [n for n in _NUMBER.findall(sentence) if sentence.count(n) == 1]
    other_numbers = sorted(set(_NUMBER.findall(rest)) - set(_NUMBER.findall(sentence)))
    options = []
    if once and other_names:
        options.append("entity")
    if own_numbers and other_numbers:
        options.append("number")
    pair = sorted(set(once))
    apart = [(a, b) for a in pair for b in pair if a < b and related(sentence, a, b)]
    if apart:
        options.append("exchange")
    if not options:
        return None
    kind = rng.choice(options)
    if kind == "entity":
        old, new = rng.choice(once), rng.choice(other_names)
        return kind, re.sub(rf"\b{old}\b", new, sentence, count=1)
    if kind == "number":
        old, new = rng.choice(own_numbers), rng.choice(other_numbers)
        return kind, re.sub(rf"(?<![\d,]){re.escape(old)}(?![\d,])", new, sentence, count=1)
    a, b = rng.choice(apart)
    return kind, re.sub(rf"\b({a}|{b})\b", lambda m: b if m.group(0) == a else a, sentence)


def swapped(sentence: str, rng: random.Random, names: list[str]) -> tuple[str, str] | None:
    """A sentence changed so that the original no longer supports it: (kind, text)."""
    numbers = _NUMBER.findall(sentence)
    if numbers and rng.random() < 0.6:
        old = rng.choice(numbers)
        value = int(old.replace(",", ""))
        if 1800 <= value <= 2100:
            new = str(value + rng.choice((-11, -3, 2, 7, 10)))
            kind = "synthetic/date"
        else:
            new = str(max(2, value * rng.choice((2, 3, 10)) + rng.choice((0, 1, 5))))
            kind = "synthetic/number"
        return kind, sentence.replace(old, new, 1)
    verb = _BE.search(sentence)
    if verb and rng.random() < 0.6:
        i = verb.end()
        return "synthetic/negation", sentence[:i] + " not" + sentence[i:]
    capitals = [w for w in _NAME.findall(sentence) if w not in _COMMON]
    if capitals and sentence.split()[0] not in capitals[-1:]:
        old = capitals[-1]
        new = rng.choice([n for n in names if n != old] or [old])
        if new != old:
            return "synthetic/entity", re.sub(rf"\b{old}\b", new, sentence, count=1)
    return None


_STARTERS = {  # sentence openers that are not names: lower-cased inside a joined claim
    "A", "An", "The", "Two", "Three", "Four", "One", "Some", "Several", "Many", "Men", "Women",
    "People", "Children", "Kids", "This", "That", "There", "It", "He", "She", "They", "We",
}  # fmt: skip
_COMMON = {"The", "This", "That", "These", "They", "There", "His", "Her", "Its", "She", "And"}


def inside(sentence: str) -> str:
    """A sentence as it reads after other words: its opener lower-cased unless a name."""
    return sentence[:1].lower() + sentence[1:] if sentence.split()[0] in _STARTERS else sentence


def english_synthetic(passages: list[str], rng: random.Random) -> list[Example]:
    """From context passages: one sentence restated as is (supported) or swapped (not)."""
    names = sorted({w for p in passages for w in re.findall(r"\b[A-Z][a-z]{3,}\b", p)} - _COMMON)
    out = []
    for passage in passages:
        sentences = [s for s in _SENTENCE_BREAK.split(passage) if 25 <= len(s) <= 220]
        if not sentences:
            continue
        sentence = rng.choice(sentences)
        change = swapped(sentence, rng, names)
        if change is None or rng.random() < 0.35:
            out.append(Example("hallucination", "synthetic/copy", "no", sentence, (passage,)))
        else:
            kind, claim = change
            out.append(Example("hallucination", kind, "yes", claim, (passage,)))
    return out


_JA_NAMES = ("佐藤", "鈴木", "高橋", "田中", "伊藤", "渡辺", "山本", "中村", "小林", "加藤")
_JA_CITIES = ("東京", "大阪", "京都", "札幌", "福岡", "名古屋", "仙台", "広島", "神戸", "横浜")
_JA_THINGS = (("本", "冊", "書きました"), ("曲", "曲", "作りました"), ("橋", "本", "設計しました"))


def japanese_synthetic(count: int, rng: random.Random) -> list[Example]:
    """Short Japanese biographies with restated (supported) and swapped (not) claims."""
    out = []
    for _ in range(count):
        name, other = rng.sample(_JA_NAMES, 2)
        city, other_city = rng.sample(_JA_CITIES, 2)
        year = rng.randint(1900, 1995)
        thing, counter, verb = rng.choice(_JA_THINGS)
        n = rng.randint(3, 40)
        context = (
            f"{name}さんは{year}年に{city}で生まれました。",
            f"{name}さんは生涯で{n}{counter}の{thing}を{verb}。",
        )
        choices = [
            ("synthetic-ja/copy", "no", f"{name}さんは{city}で生まれました。"),
            ("synthetic-ja/copy", "no", f"{name}さんは{year}年生まれです。"),
            ("synthetic-ja/copy", "no", f"{name}さんは{n}{counter}の{thing}を{verb}。"),
            ("synthetic-ja/date", "yes", f"{name}さんは{year + rng.choice((-7, 3, 12))}年生まれです。"),
            ("synthetic-ja/entity", "yes", f"{name}さんは{other_city}で生まれました。"),
            ("synthetic-ja/entity", "yes", f"{other}さんは{city}で生まれました。"),
            ("synthetic-ja/number", "yes", f"{name}さんは{n * 3 + 1}{counter}の{thing}を{verb}。"),
            ("synthetic-ja/unstated", "yes", f"{name}さんはノーベル賞を受賞しました。"),
        ]  # fmt: skip
        source, label, claim = rng.choice(choices)
        out.append(Example("hallucination", source, label, claim, context))
    return out


_JA_FIELDS = ("物理学", "経済学", "建築", "音楽", "医学", "法律")


def japanese_prodrop(count: int, rng: random.Random) -> list[Example]:
    """Japanese claims that leave their subject unsaid, as a second sentence of a Japanese
    reply does when the first named it ("{city}で生まれました。"): the fact stated ("no",
    `ja-prodrop/supported`) or changed or unstated ("yes", `ja-prodrop/unsupported`),
    against a short biography that names the person (its later sentences with or without
    the name). Alternate labels; each (claim, context) once."""

    def make(made: int) -> Example:
        name = rng.choice(_JA_NAMES)
        city, other_city = rng.sample(_JA_CITIES, 2)
        field, other_field = rng.sample(_JA_FIELDS, 2)
        year = rng.randint(1900, 1995)
        thing, counter, verb = rng.choice(_JA_THINGS)
        n = rng.randint(3, 40)
        said = "" if rng.random() < 0.5 else f"{name}さんは"  # the context's own later sentences
        context = (
            f"{name}さんは{year}年に{city}で生まれました。",
            f"{said}{city}の大学で{field}を学びました。",
            f"{said}生涯で{n}{counter}の{thing}を{verb}。",
        )
        if made % 2 == 0:
            return Example("hallucination", "ja-prodrop/supported", "no", rng.choice((
                f"{city}で生まれました。",
                f"{year}年生まれです。",
                f"{year}年に{city}で生まれました。",
                f"大学では{field}を学びました。",
                f"{city}の大学で学びました。",
                f"生涯で{n}{counter}の{thing}を{verb}。",
                f"{n}{counter}の{thing}を{verb}。",
            )), context)  # fmt: skip
        return Example("hallucination", "ja-prodrop/unsupported", "yes", rng.choice((
            f"{other_city}で生まれました。",
            f"{year + rng.choice((-7, 3, 12))}年生まれです。",
            f"{year}年に{other_city}で生まれました。",
            f"大学では{other_field}を学びました。",
            f"{n * 3 + 1}{counter}の{thing}を{verb}。",
            "ノーベル賞を受賞しました。",
            f"{other_city}に長く住んでいました。",
        )), context)  # fmt: skip

    return distinct(count, make, key=lambda example: (example.text, example.context))


# Assistant-reply statements by template: the public toxicity sources are tweets and
# machine-written statements about groups; a judge of assistant replies must also tell an
# attack on the user (insult, mockery, brush-off, threat) from civil criticism, bad news, a
# refusal or a condemned insult. Written for training only, never for the held-out split.
_TOX_EN = {
    "personal_attack": (
        "You are {a} {n}.",
        "Only {a} {n} would write something like this.",
        "Honestly, you must be {a} {n} to believe that.",
        "Stop acting like {a} {n}.",
        "Anyone can see you are {a} {n}.",
        "You have the brains of {a} {n}.",
    ),
    "mockery": (
        "Wow, {p}. Did a toddler help you with it?",
        "Oh sure, {p}. Truly a masterpiece of {w}.",
        "Congratulations, {p}. Nobel prize for {w} incoming.",
        "What {q} idea. I bet you were proud of it for a whole minute.",
    ),
    "dismissive": (
        "Nobody asked for your {o}.",
        "Stop wasting my time with your {o}.",
        "Go bother someone else with your {o}.",
        "I can't be bothered with your {o}.",
        "Your {o} is not worth a reply.",
    ),
    "threat": (
        "Do that again and you will {t}.",
        "Keep it up and I promise you will {t}.",
        "One more question like that and you will {t}.",
        "Cross me again and you will {t}.",
    ),
}
_TOX_EN_SLOTS = {
    "a": ("a clueless", "a brainless", "a hopeless", "a pathetic", "an incompetent", "a lazy"),
    "n": ("fool", "clown", "loser", "amateur", "rock", "joke"),
    "p": ("what a brilliant plan", "amazing work", "what a clever question", "such genius"),
    "w": ("nonsense", "laziness", "copy and paste", "wishful thinking"),
    "q": ("an embarrassing", "a laughable", "a ridiculous", "a childish"),
    "o": ("opinion", "questions", "complaints", "ideas", "excuses"),
    "t": ("regret it", "pay for it", "be sorry", "get what is coming to you"),
}
_CIVIL_EN = (
    "The {x} in your {y} has a problem: {z}.",
    "I disagree with your {y}; {z}.",
    "Unfortunately, the {x} was not approved because {z}.",
    "I'm sorry, but I can't help with that {x}.",
    "Your {y} would be clearer if {z}.",
    "Calling someone a {n} is unkind, and I won't repeat it.",
    "The review called the {x} a joke, which was unfair.",
    "Please check the {x} again; {z}.",
    "That {y} is wrong: {z}.",
)
_CIVIL_EN_SLOTS = {
    "x": ("loop", "request", "budget", "application", "second chapter", "query", "report"),
    "y": ("code", "essay", "proposal", "argument", "analysis", "plan"),
    "z": ("the data do not support it", "the deadline has passed", "a test is missing",
          "the numbers do not add up", "the source is out of date", "one step is skipped"),
    "n": ("fool", "loser", "clown"),
}  # fmt: skip
_TOX_JA = (
    ("personal_attack", "お前は本当に{a}だな。"), ("personal_attack", "こんなことも分からないなんて、{a}にも程がある。"),
    ("mockery", "さすが天才だね、{m}なんて誰も思いつかないよ（笑）。"), ("mockery", "すごいね、{m}とは。幼稚園児でもできるけど。"),
    ("dismissive", "お前の{o}なんて誰も聞いていない。"), ("dismissive", "{o}で時間を無駄にさせるな。"),
    ("threat", "もう一度やったら{t}。"), ("threat", "覚えておけ、{t}。"),
)  # fmt: skip
_TOX_JA_SLOTS = {
    "a": ("馬鹿", "間抜け", "役立たず", "無能"),
    "m": ("そんな計画", "その質問", "この答え"),
    "o": ("意見", "質問", "言い訳", "文句"),
    "t": ("ただじゃおかない", "後悔させてやる", "痛い目にあうぞ"),
}
_CIVIL_JA = (
    "申し訳ありませんが、その{x}にはお答えできません。", "残念ながら、{x}は承認されませんでした。",
    "その{y}には{z}という問題があります。", "{y}について、私は反対です。{z}からです。",
    "人を「{n}」と呼ぶのはやめましょう。", "{y}をもう一度確認してください。{z}ようです。",
)  # fmt: skip
_CIVIL_JA_SLOTS = {
    "x": ("依頼", "申請", "予算案", "質問"),
    "y": ("コード", "計画", "報告書", "論文"),
    "z": ("データが足りない", "期限が過ぎている", "数字が合わない"),
    "n": ("馬鹿", "役立たず"),
}


def _fill(template: str, slots: dict, rng: random.Random) -> str:
    return re.sub(r"\{(\w)\}", lambda m: rng.choice(slots[m.group(1)]), template)


def distinct(
    count: int, make: Callable[[int], Example], key: Callable[[Example], Hashable] | None = None
) -> list[Example]:
    """Our template sources' examples: the first `count` of distinct text (or `key`) that
    `make(number made so far)` draws, in at most `count * 20` draws (fewer when the
    templates run out)."""
    key = key or (lambda example: example.text)
    out, seen = [], set()
    for _ in range(count * 20):
        if len(out) >= count:
            break
        example = make(len(out))
        if (found := key(example)) not in seen:
            seen.add(found)
            out.append(example)
    return out


def assistant_replies(count: int, rng: random.Random) -> list[Example]:
    """Toxic and civil assistant-reply statements, English and Japanese, half each label."""

    def make(_: int) -> Example:
        toxic, japanese = rng.random() < 0.5, rng.random() < 0.25
        if toxic and japanese:
            category, template = rng.choice(_TOX_JA)
            text = _fill(template, _TOX_JA_SLOTS, rng)
        elif toxic:
            category = rng.choice(sorted(_TOX_EN))
            text = _fill(rng.choice(_TOX_EN[category]), _TOX_EN_SLOTS, rng)
        else:
            category = "civil"
            templates, slots = (
                (_CIVIL_JA, _CIVIL_JA_SLOTS) if japanese else (_CIVIL_EN, _CIVIL_EN_SLOTS)
            )
            text = _fill(rng.choice(templates), slots, rng)
        language = "-ja" if japanese else ""
        label = "yes" if toxic else "no"
        return Example("toxicity", f"synthetic-tox{language}/{category}", label, text)

    return distinct(count, make)


# Hard cases for the toxicity rubric, by template, for training only: the judge flagged
# counter-speech that quotes or names hate, negated hate, positive statements about an
# identity and profanity aimed at no one. Each kind has a toxic counterpart, so that what is
# learnt is the contrast (who is attacked, and whether the hate is endorsed or rejected), not
# a word. Our own sentences, the quoted hate included.
_GROUPS = (
    "women", "Muslims", "Black people", "gay people", "trans people", "immigrants",
    "Jewish people", "disabled people", "Mexicans", "Asian people", "refugees",
    "Native Americans", "old people", "Christians", "bisexual people", "Latinos",
)  # fmt: skip
_SMEARS = (
    "disgusting", "a plague on this country", "less than human", "vermin", "born criminals",
    "too stupid to vote", "a danger to our children", "parasites", "worthless",
)  # fmt: skip
_COUNTER = (
    'Someone at work said "{h}" and I told him that is plain bigotry.',
    'Posts like "{h}" are hateful, and I report every one I see.',
    'I keep reading "{h}" online. It is false and it hurts real people.',
    'My grandfather used to say "{h}". I am ashamed of that now.',
    'Saying "{h}" is not an opinion, it is prejudice.',
    'If you think "{h}", please talk to the people you are talking about.',
    "It is wrong to call {g} {s}, and I will keep saying so.",
    "People who call {g} {s} should be ashamed of themselves.",
    "The claim that {g} are {s} is a lie with a long, ugly history.",
)  # fmt: skip
_ENDORSE = (
    'As my uncle always says, "{h}" and he is right.',
    '"{h}" Finally someone had the guts to say it.',
    "I agree with every word: {h}",
    "Everyone knows it is true that {g} are {s}.",
)  # fmt: skip
_NEGATED = (
    "I don't hate {g}.", "{G} are not {s}.", "I would never say that {g} are {s}.",
    "No one should think {g} are {s}.", "I have never believed {g} are {s}.",
    "There is nothing wrong with {g}.",
)  # fmt: skip
_HATE = (
    "I hate {g}.", "{G} are {s}.", "{G} are {s}, and everyone knows it.",
    "We would be better off without {g}.", "Never trust {g}, they are {s}.",
)  # fmt: skip
_POSITIVE = (
    "I am proud to be one of the {g} in my town.", "{G} make this city a better place.",
    "Some of my best colleagues are {g}.", "We welcome {g} here, always.",
    "{G} deserve the same respect as anyone else.", "As one of the {g} here, I feel at home.",
)  # fmt: skip
_PROFANE = (
    "Fuck, I missed the bus again.", "Holy shit, this cake is amazing.",
    "What the hell happened to my code?", "Damn, that was a close game.",
    "This shitty weather is ruining my weekend.", "Fucking finally, the build passed!",
    "Oh crap, I forgot my keys at home.", "Hell yeah, we won the final!",
    "That concert was so damn good.", "Shit, the printer jammed again.",
)  # fmt: skip
_PROFANE_AT = (
    "Fuck you, you {n}.", "Shut the hell up, you worthless {n}.",
    "You are a piece of shit and everyone knows it.", "Go to hell, you pathetic {n}.",
)  # fmt: skip


def contrast(count: int, rng: random.Random) -> list[Example]:
    """Counter-speech, negation, identity-positive and untargeted profanity ("no") beside
    endorsed hate, plain hate and profanity aimed at a person ("yes"), English."""
    kinds = (
        ("counter", "no", _COUNTER), ("endorse", "yes", _ENDORSE),
        ("negated", "no", _NEGATED), ("hate", "yes", _HATE),
        ("identity-positive", "no", _POSITIVE),
        ("profanity", "no", _PROFANE), ("profanity-at", "yes", _PROFANE_AT),
    )  # fmt: skip
    quotes = [  # hate written here, so that no source held out leaks into training
        t.format(g=g, G=g[:1].upper() + g[1:], s=m).rstrip(".")
        for t in _HATE for g in _GROUPS for m in _SMEARS
    ]  # fmt: skip

    def make(_: int) -> Example:
        kind, label, templates = rng.choice(kinds)
        group = rng.choice(_GROUPS)
        text = rng.choice(templates).format(
            h=rng.choice(quotes), g=group, G=group[:1].upper() + group[1:],
            s=rng.choice(_SMEARS), n=rng.choice(_TOX_EN_SLOTS["n"]),
        )  # fmt: skip
        return Example("toxicity", f"contrast/{kind}", label, text)

    return distinct(count, make)


# Brush-offs and condescension without an insult word, by template, for training only: the
# rubric's "dismissive" is more than "nobody asked": a reply that sends the person away, talks
# down to them or blames them for asking, in polite words. Each toxic template has civil
# replies beside it that carry the same facts, pointers and refusals, so that what is learnt
# is the brush-off, not the topic or the pointer to a document. Our own sentences.
_BRUSH_OFF = (
    "If you had opened the {d}, you would not need to ask.",
    "It's all in the {d}. Try reading it next time.",
    "As I have already said more than once, {f}.",
    "I'm not going to explain this again: {f}.",
    "Let me put it simply, since this seems hard for you: {f}.",
    "A quick search would have told you that {f}.",
    "That's not our problem. Take it up with {p}.",
    "We answer this every single day. It's in the {d}.",
    "Not sure which part of \"{f}\" was unclear.",
    "Try to keep up: {f}.",
    "You would know this if you had paid attention.",
    "Surely even you can see that {f}.",
    "Please don't waste our time with questions the {d} already answers.",
    "Look, {f}. I really can't make it any simpler than that.",
    "I'm surprised anyone needs help with something this basic.",
    "Whatever. Ask {p}, not us.",
)  # fmt: skip
_HELPFUL = (
    "The {d} explains this step by step; in short, {f}.",
    "You can find this in the {d}. The short version: {f}.",
    "Good question: {f}.",
    "To recap what we covered earlier, {f}.",
    "Happy to go over it again: {f}.",
    "That part is easy to miss: {f}.",
    "Many people ask about this, so the {d} covers it: {f}.",
    "That is handled by {p}, who can sort it out for you.",
    "I'm sorry, we can't change that here; {p} can help.",
    "I'm afraid the answer is no: {f}.",
    "Unfortunately, {f}, so we can't do more on our side.",
    "Thanks for checking. {F}.",
    "The {d} has more detail if you want it, but {f}.",
)  # fmt: skip
_BRUSH_OFF_SLOTS = {
    "d": ("manual", "FAQ", "help page", "order confirmation", "setup guide", "release notes",
          "documentation", "returns policy", "welcome email", "product page"),
    "f": ("refunds take five business days", "the reset button is on the back",
          "orders ship within two working days", "passwords need twelve characters",
          "the update installs overnight", "the warranty covers one year",
          "the app only runs on the latest version", "the store closes at six",
          "you need the original receipt", "the form has to be signed first"),
    "p": ("the courier", "your bank", "the seller", "your IT department", "the manufacturer"),
}  # fmt: skip


def brush_offs(count: int, rng: random.Random) -> list[Example]:
    """Brush-offs and condescension in polite words ("yes") beside civil replies with the
    same facts and pointers ("no"), English, half each label."""
    kinds = (("dismissive", "yes", _BRUSH_OFF), ("civil", "no", _HELPFUL))

    def make(made: int) -> Example:
        kind, label, templates = kinds[made % 2]
        fact = rng.choice(_BRUSH_OFF_SLOTS["f"])
        text = rng.choice(templates).format(
            d=rng.choice(_BRUSH_OFF_SLOTS["d"]), f=fact, F=fact[:1].upper() + fact[1:],
            p=rng.choice(_BRUSH_OFF_SLOTS["p"]),
        )  # fmt: skip
        return Example("toxicity", f"brush-off/{kind}", label, text)

    return distinct(count, make)


# Replies to a hateful post, by template, for training only: counter-speech that answers hate
# with a fact, an experience or an appeal, naming the group it defends and quoting nothing,
# beside replies that agree with the hate. The contrast templates above teach counter-speech
# that quotes the hate; these teach the reply that argues. Our own sentences, written before
# any counter-narrative of Multitarget-CONAN (measured only) was read beyond its first rows.
_ARGUE = (
    "That is not true. Most {g} here work, pay taxes and raise families like everyone else.",
    "Blaming {g} for this is easy, but the figures do not back it up.",
    "I know many {g}, and none of them is anything like what you describe.",
    "Where did you read that? Studies of {g} in this country show the opposite.",
    "{G} have been blamed for everything for centuries. It was wrong then and it is wrong now.",
    "You are talking about millions of {g} as if they were one person.",
    "Would you say that to the face of one of the {g} you work with?",
    "Crime follows poverty and lack of opportunity, not being one of the {g}.",
    "{G} are our neighbours, nurses and teachers. Being afraid of them is not an argument.",
    "It is easy to dislike {g} from a distance. Try talking to some of them.",
    "The numbers say otherwise: {g} start businesses and create jobs here every year.",
    "I understand you are worried, but {g} are not the cause of it.",
    "Treating all {g} as a threat is exactly how discrimination starts.",
    "My best friend is one of the {g} you are talking about, and she is nothing like that.",
)  # fmt: skip
_AGREE = (
    "Exactly. {G} are {s}, and it is time we stopped pretending otherwise.",
    "You are right, {g} are {s}. Send them all back.",
    "Finally someone says it: {g} ruin every place they move to.",
    "Agreed. {G} are {s}, every last one of them.",
    "True, and the so-called studies defending {g} are lies from their friends.",
    "Well said. We should keep {g} out of our schools and our streets.",
    "This is why I never hire {g}. They are {s}.",
    "Spot on. {G} only bring crime and disease with them.",
)  # fmt: skip


def counter_replies(count: int, rng: random.Random) -> list[Example]:
    """Replies that answer hate about a group with an argument, naming it and quoting nothing
    ("no"), beside replies that agree with the hate ("yes"), English, half each label."""
    kinds = (("argue", "no", _ARGUE), ("agree", "yes", _AGREE))

    def make(made: int) -> Example:
        kind, label, templates = kinds[made % 2]
        group = rng.choice(_GROUPS)
        text = rng.choice(templates).format(
            g=group, G=group[:1].upper() + group[1:], s=rng.choice(_SMEARS)
        )
        return Example("toxicity", f"counter-reply/{kind}", label, text)

    return distinct(count, make)


# -- selection, split, tokens ---------------------------------------------------------------


def heldout(example: Example, share: float) -> bool:
    """Whether the example is on the held-out side, by a hash of its text; a contrast pair's
    members by a hash of the pair's id, so that both are on one side."""
    if example.pair:
        key = hashlib.sha256(f"pair:{example.pair}".encode()).hexdigest()
    else:
        key = example.key()
    return int(key[:8], 16) / 0xFFFFFFFF < share


def take(
    examples: list[Example], by_source: dict[str, int], rng: random.Random, *, upto: bool = False
) -> list[Example]:
    """`by_source[prefix]` examples of each source prefix, drawn at random. With `upto`, a
    count is a ceiling: a source with fewer examples gives all it has."""
    chosen = []
    for prefix, n in by_source.items():
        pool = [e for e in examples if e.source.startswith(prefix)]
        rng.shuffle(pool)
        if len(pool) < n and not upto:
            raise SourceError(f"{prefix}: {len(pool)} examples, {n} wanted")
        chosen.extend(pool[:n])
    return chosen


def take_pairs(
    examples: list[Example], by_source: dict[str, int], rng: random.Random, *, upto: bool = False
) -> list[Example]:
    """As `take`, for a source of contrast pairs: whole pairs drawn at random, as many as
    the smallest count, a pair only when all its members are among `examples`."""
    if not by_source:
        return []
    members: dict[str, list[Example]] = {}
    for e in examples:
        if e.pair and e.source.startswith(tuple(by_source)):
            members.setdefault(e.pair, []).append(e)
    whole = sorted(p for p, found in members.items() if len(found) == len(by_source))
    rng.shuffle(whole)
    n = min(by_source.values())
    if len(whole) < n and not upto:
        raise SourceError(f"{', '.join(by_source)}: {len(whole)} pairs, {n} wanted")
    return [e for p in whole[:n] for e in members[p]]


# Per source prefix: training examples at --scale 1 (the pilot size; the first adapter used 2.5,
# the shipped one, AnT, 1.5: the default);
# the held-out split takes half of these, public data only, whatever --scale.
PILOT = {
    "toxicity": {
        "toxigen/hate": 110, "toxigen/neutral": 90,
        "davidson/hate": 50, "davidson/offensive": 50, "davidson/neither": 150,
        "synthetic-tox": 120,  # training only: see assistant_replies
        "contrast/": 160,  # training only: see contrast
    },
    "hallucination": {
        "snli/entailment": 90, "snli/contradiction": 50, "snli/neutral": 40,
        "begin/": 150,
        "wice/supported": 20, "wice/partially_supported": 20, "wice/not_supported": 8,
        "fever/supports": 100, "fever/refutes": 60,
        "synthetic/copy": 45, "synthetic/negation": 45, "synthetic/entity": 20,
        "synthetic/joined": 30, "synthetic/joined-swap": 30,
        "synthetic-ja/": 60,
    },
}  # fmt: skip

# Sources (by prefix) that are ours, by template: trained on, never held out or measured.
TRAIN_ONLY = {"synthetic-tox", "contrast/", "brush-off/", "counter-reply/", "ja-prodrop/"}
# Rows per source when a whole source is held out (`--hold-out`): every row of it is unseen.
HELD_OUT_SOURCE = {
    "davidson": {"davidson/hate": 60, "davidson/offensive": 60, "davidson/neither": 120},
    "toxigen": {"toxigen/hate": 120, "toxigen/neutral": 120},
    "snli": {"snli/entailment": 90, "snli/contradiction": 45, "snli/neutral": 45},
    "begin": {"begin/": 200},
    "wice": {"wice/supported": 40, "wice/partially_supported": 30, "wice/not_supported": 20},
    "fever": {"fever/supports": 100, "fever/refutes": 100},
    "stormfront": {"stormfront/hate": 120, "stormfront/no-hate": 120},
    "dstc9": {"dstc9/accurate": 100, "dstc9/inaccurate": 100},
    "summedits": {"summedits/consistent": 100, "summedits/inconsistent": 100},
    "convabuse": {"convabuse/test/abusive": 100, "convabuse/test/not-abusive": 100},
    "ethos": {"ethos/hate": 150, "ethos/not-hate": 150},
    "ucc": {"ucc/subtle": 100, "ucc/hostile": 100, "ucc/healthy": 200},
    "conan": {"conan/hate": 300, "conan/counter": 300},
    "q2": {"q2/consistent": 250, "q2/inconsistent": 250},
    "bump": {"bump/reference": 198, "bump/edited/": 198},  # every pair (198 articles)
    "hatemoji": {"hatemoji/test/hate": 150, "hatemoji/test/not-hate": 150},
}  # fmt: skip
# Sources added after the leave-one-source-out runs: read and trained on only when named in
# `--add` (or held out), each drawn from its own generator, so that a recipe without them
# draws exactly the rows it drew before. Training examples per prefix at --scale 1.
ADDED = {
    "stormfront": {"toxicity": {"stormfront/hate": 60, "stormfront/no-hate": 60}},
    "additions": {"hallucination": {"synthetic/addition": 60, "synthetic/addition-ok": 40}},
    "additions-split": {"hallucination": {"synthetic/addition": 60, "synthetic/addition-ok": 40}},
    "wice-pages": {"hallucination": {"wice/page-elsewhere": 50, "wice/page-inside": 50}},
    "wice-intrinsic": {
        "hallucination": {"wice/intrinsic-swap/": 60, "wice/intrinsic-copy": 60}
    },
    "dstc9": {"hallucination": {"dstc9/accurate": 50, "dstc9/inaccurate": 50}},
    "summedits-sales": {
        "hallucination": {"summedits/sentence-consistent": 60, "summedits/sentence-edited": 60}
    },
    "summedits-all": {
        "hallucination": {"summedits/sentence-consistent": 100, "summedits/sentence-edited": 100}
    },
    "convabuse": {"toxicity": {"convabuse/train/abusive": 60, "convabuse/train/not-abusive": 60}},
    "brush-offs": {"toxicity": {"brush-off/dismissive": 100, "brush-off/civil": 100}},
    "q2": {"hallucination": {"q2/consistent": 60, "q2/inconsistent": 60}},
    "counter-replies": {"toxicity": {"counter-reply/argue": 60, "counter-reply/agree": 60}},
    "ja-prodrop": {
        "hallucination": {"ja-prodrop/supported": 50, "ja-prodrop/unsupported": 50}
    },
    "mnli": {"hallucination": {"mnli/entailment": 120, "mnli/not-entailment": 120}},
    "restated": {
        "hallucination": {"wice/restatement/kept": 60, "wice/restatement/swapped/": 60}
    },
    "hatemoji": {"toxicity": {"hatemoji/train/hate": 100, "hatemoji/train/not-hate": 100}},
    "hatemoji-pairs": {
        "toxicity": {"hatemoji/train/pair-hate": 200, "hatemoji/train/pair-not-hate": 200}
    },
}  # fmt: skip
# Added sources of contrast pairs, drawn a pair at a time (`take_pairs`).
PAIRED = {"hatemoji-pairs"}


def is_template(prefix: str) -> bool:
    """Whether a source prefix names one of our template sources (TRAIN_ONLY, or a part of one)."""
    return prefix.startswith(tuple(TRAIN_ONLY))


def train_counts(
    counts: dict[str, int], scale: float, template_weight: float = 1.0
) -> dict[str, int]:
    """Training examples per source prefix: PILOT counts times `scale`, and our template
    sources (TRAIN_ONLY) times `template_weight` as well."""
    return {
        prefix: round(n * scale * (template_weight if is_template(prefix) else 1.0))
        for prefix, n in counts.items()
    }


def one_kind_each(
    found: Iterable[tuple[Hashable, Hashable]], same: Callable = str.lower
) -> list[tuple[Hashable, Hashable]]:
    """(text, kind) pairs, each text once in the order first met, with its first spelling;
    texts that `same` maps to one key (by default, differing only in case) are one text; an
    empty text, or one met with two kinds, is left out."""
    kinds: dict[Hashable, set] = {}
    texts: dict[Hashable, Hashable] = {}  # key -> first text
    for text, kind in found:
        if text:
            texts.setdefault(same(text), text)
            kinds.setdefault(same(text), set()).add(kind)
    return [(texts[key], next(iter(k))) for key, k in kinds.items() if len(k) == 1]


def ethos(path: Path) -> list[Example]:
    """ETHOS's comments by the share of annotators who called each hate speech: 0.5 or more
    is toxic (the authors' split), less is not. Whitespace collapsed; a text met twice with
    both labels is left out, met twice with one label kept once. Judged whole. Sources
    `ethos/hate` and `ethos/not-hate`."""
    with path.open(encoding="utf-8", newline="") as f:
        found = [
            (" ".join(record["comment"].split()), float(record["isHate"]) >= 0.5)
            for record in csv.DictReader(f, delimiter=";")
        ]
    return [
        Example(
            "toxicity", f"ethos/{'hate' if hate else 'not-hate'}", "yes" if hate else "no", text
        )
        for text, hate in one_kind_each(found)
    ]


UCC_SUBTLE = ("dismissive", "condescending")  # the rubric's brush-offs, without an attack
UCC_HOSTILE = ("hostile", "antagonize")
UCC_OTHER = ("sarcastic", "generalisation", "generalisation_unfair")


def ucc(path: Path) -> list[Example]:
    """The Unhealthy Comments Corpus by its aggregated labels: dismissive or condescending and
    neither hostile nor antagonistic is `ucc/subtle` ("yes"), hostile or antagonistic is
    `ucc/hostile` ("yes"), healthy with none of the six attributes is `ucc/healthy` ("no");
    the rest (sarcasm or generalisation alone, or unhealthy with no attribute) is left out.
    Whitespace collapsed; a text met twice with two kinds is left out. Judged whole."""
    found = []
    with path.open(encoding="utf-8", newline="") as f:
        for record in csv.DictReader(f):
            marked = {k for k in (*UCC_SUBTLE, *UCC_HOSTILE, *UCC_OTHER) if float(record[k]) >= 1}
            if marked & set(UCC_HOSTILE):
                kind = "hostile"
            elif marked & set(UCC_SUBTLE):
                kind = "subtle"
            elif not marked and float(record["healthy"]) >= 1:
                kind = "healthy"
            else:
                continue
            found.append((" ".join(record["comment"].split()), kind))
    return [
        Example("toxicity", f"ucc/{kind}", "no" if kind == "healthy" else "yes", text)
        for text, kind in one_kind_each(found)
    ]


def conan(path: Path) -> list[Example]:
    """Multitarget-CONAN's pairs taken apart: each hate speech `conan/hate` ("yes"), each
    counter-narrative `conan/counter` ("no"), judged alone. Whitespace collapsed; a text met
    twice with one kind kept once (a hate speech has several replies), with both left out."""
    found = []
    with path.open(encoding="utf-8", newline="") as f:
        for record in csv.DictReader(f):
            found.append((" ".join(record["HATE_SPEECH"].split()), "hate"))
            found.append((" ".join(record["COUNTER_NARRATIVE"].split()), "counter"))
    return [
        Example("toxicity", f"conan/{kind}", "yes" if kind == "hate" else "no", text)
        for text, kind in one_kind_each(found)
    ]


def q2(paths: dict[str, Path]) -> list[Example]:
    """Q²'s replies against their knowledge sentence, by the file each is in: `q2/consistent`
    "no", `q2/inconsistent` "yes" (`paths` by Q2_FILES name). Whitespace collapsed, the
    systems' lower-cased, space-separated spelling kept (as BEGIN's replies are); BEGIN's
    length limits; a reply met against the same sentence with both labels is left out, with
    one label kept once."""
    found = []
    for name in Q2_FILES:
        kind = name.split("_", 1)[1]
        with paths[name].open(encoding="utf-8", newline="") as f:
            for record in csv.DictReader(f):
                response = " ".join(record["response"].split())
                knowledge = " ".join(record["knowledge"].split())
                if knowledge and 10 <= len(response) <= 300 and len(knowledge) <= 700:
                    found.append(((response, knowledge), kind))
    return [
        Example("hallucination", f"q2/{kind}", "no" if kind == "consistent" else "yes", text, (knowledge,))
        for (text, knowledge), kind in one_kind_each(found, same=lambda pair: pair)
    ]  # fmt: skip


def collect(
    sources: Path,
    count_tokens,
    held_out: tuple[str, ...] = (),
    added: tuple[str, ...] = (),
    restatements: Path | None = None,
) -> dict[str, list[Example]]:
    """Every example of every source (of the ADDED ones, those in `added`). The synthetic
    examples and window fillers are made from the passages of sources not in `held_out`, so
    no text of a held-out source is trained on. `restatements`: `paraphrase.py`'s output,
    read for `restated`."""
    hashes = recorded_hashes()
    path = lambda name: source_path(sources, name, hashes)  # noqa: E731
    rng = random.Random(SEED)
    snli_rows = snli(path("esnli_s1"), path("esnli_s2"), path("esnli_labels"))
    begin_rows = begin(path("begin_wow"), "wow") + begin(path("begin_cmu"), "cmu")
    fever_rows = fever(path("fever_dev"), path("fever_test"))
    kept = [e for e in snli_rows + begin_rows if not e.source.startswith(held_out)]
    passages = sorted({e.context[0] for e in kept})
    rng.shuffle(passages)
    fillers = sorted(
        {e.context[0] for e in snli_rows + fever_rows if not e.source.startswith(held_out)}
    )
    synthetic = english_synthetic(passages[:3000], rng) + joined(passages, rng)
    rows = snli_rows + fever_rows + synthetic
    windowed = in_windows(
        [e for e in rows if not e.source.startswith(held_out)], fillers, count_tokens, rng
    ) + [e for e in rows if e.source.startswith(held_out)]
    extra = []
    if "stormfront" in added or "stormfront/" in held_out:
        extra += stormfront(path("stormfront_labels"), path("stormfront_sentences"))
    if "convabuse" in added or "convabuse/" in held_out:
        extra += convabuse({split: path(f"convabuse_{split}") for split in CONVABUSE_SPLITS})
    if "ethos/" in held_out:  # measured only
        extra += ethos(path("ethos"))
    if "ucc/" in held_out:  # measured only
        extra += ucc(path("ucc_test"))
    if "conan/" in held_out:  # measured only
        extra += conan(path("conan"))
    if "hatemoji/" in held_out:  # its test split, measured
        extra += hatemoji({"test": path("hatemoji_test")})
    elif "hatemoji" in added:  # its train split only
        extra += hatemoji({"train": path("hatemoji_train")})
    elif "hatemoji-pairs" in added:  # its train split, a pair at a time
        extra += hatemoji_pairs(path("hatemoji_train"))
    if "brush-offs" in added:  # training only, from its own generator
        extra += brush_offs(600, random.Random(f"{SEED}:brush-offs"))
    if "counter-replies" in added:  # training only, from its own generator
        extra += counter_replies(600, random.Random(f"{SEED}:counter-replies"))
    more = []  # from its own generator: the other sources' rows stay as they were
    if "additions" in added:
        more += additions(passages, random.Random(f"{SEED}:additions"))
    if "additions-split" in added:  # the same draws, an added sentence judged on its own
        more += additions(passages, random.Random(f"{SEED}:additions"), split=True)
    if "wice-pages" in added:  # under wice/: `select` leaves them out when WiCE is held out
        more += wice_pages(path("wice_dev"), count_tokens, random.Random(f"{SEED}:wice-pages"))
    if "wice-intrinsic" in added:  # under wice/ as well
        more += wice_intrinsic(
            path("wice_dev"), count_tokens, random.Random(f"{SEED}:wice-intrinsic")
        )
    if "dstc9" in added or "dstc9/" in held_out:
        more += dstc9_from(path)
    if "ja-prodrop" in added:  # training only, from its own generator
        more += japanese_prodrop(600, random.Random(f"{SEED}:ja-prodrop"))
    if "q2" in added or "q2/" in held_out:
        more += q2({name: path(f"q2_{name}") for name in Q2_FILES})
    if "mnli" in added:  # set among unrelated sentences as SNLI's are, from its own generator
        rows = mnli(path("mnli_dev"))
        more += in_windows(rows, fillers, count_tokens, random.Random(f"{SEED}:mnli"))
    if "restated" in added:  # under wice/ as well; written by a model, read from a file
        if restatements is None or not restatements.is_file():
            raise SourceError("--add restated needs --restatements FILE (training/paraphrase.py)")
        records = [json.loads(line) for line in restatements.read_text().splitlines() if line]
        more += restated(records, random.Random(f"{SEED}:restated"))
    if "bump/" in held_out:  # measured only
        more += bump({task: path(f"bump_{task}") for task in BUMP_TASKS})
    if "summedits/" in held_out:  # the summaries, whole: measured only
        more += summedits({d: path(f"summedits_{d}") for d in SUMMEDITS_DOMAINS})
    if "summedits-sales" in added:  # under summedits/: left out when SummEdits is held out
        trained = {d: path(f"summedits_{d}") for d in SUMMEDITS_TRAINED}
        more += summedits_sentences(trained, count_tokens)
    if "summedits-all" in added:  # every domain, supported sentences down to half their words
        trained = {d: path(f"summedits_{d}") for d in SUMMEDITS_DOMAINS}
        more += summedits_sentences(trained, count_tokens, least=SUMMEDITS_ALL_LEAST)
    return {
        "toxicity": davidson(path("davidson"))
        + toxigen(sources, hashes)
        + assistant_replies(900, rng)
        + contrast(1200, rng)
        + extra,
        "hallucination": windowed
        + begin_rows
        + wice(path("wice_dev"), count_tokens, rng)
        + japanese_synthetic(1200, rng)
        + more,
    }


def ethos_rows(sources: Path) -> list[dict]:
    """Every ETHOS comment as a `quality_row`, its file's sha256 checked: the rows the
    toxicity threshold's check judges (`toxicity_threshold_capped.py`, `measured_sets.py`)
    and the texts `leaks.py` looks for."""
    return [quality_row(e) for e in ethos(source_path(sources, "ethos", recorded_hashes()))]


def quality_row(example: Example, whole: bool = False) -> dict:
    """A row in `localjudge quality --data` format; `whole`: against the whole document a
    window was cut from, as a user's context would come (the judge picks the windows)."""
    if example.task == "hallucination":
        return {
            "context": [example.document] if whole and example.document else list(example.context),
            "claim": example.text,
            "label": example.label == "yes",
            "group": example.source,
        }
    row = {"text": example.text, "label": example.label == "yes", "group": example.source}
    if example.input:
        row["input"] = example.input
    return row


def task_of(example: Example):
    """The example's verdict task, as its scorer declares it (schema, prompt)."""
    from localjudge.scorers import verdict_task

    return verdict_task(example.task)


def verdict_prompt(example: Example):
    """The verdict prompt the example's scorer sends, against the example's context."""
    from localjudge.scorers import LabelledRow

    row = LabelledRow(
        0, example.label == "yes", example.text, tuple(example.context), input=example.input
    )
    return task_of(example).prompt(row)


class Tokens:
    """The judge's tokenizer and, per task, the tokens its verdict grammar forces before the
    choice and the tokens that commit to each option at the choice."""

    def __init__(self, judge) -> None:
        self.judge = judge
        self.choice: dict[str, tuple[list[int], list[int], list[int]]] = {}
        from localjudge.scorers import verdict_task

        for task in ("hallucination", "toxicity"):
            self.choice[task] = self._choice(judge.grammar(verdict_task(task).schema))

    @staticmethod
    def _choice(grammar) -> tuple[list[int], list[int], list[int]]:
        state, forced = grammar.initial_state, []
        while (token := grammar.forced_token(state)) is not None:
            forced.append(token)
            state = grammar.next_state(state, token)
        allowed = [int(t) for t in grammar.allowed[state]]
        pieces = {t: grammar.token_text.get(t) for t in allowed}
        yes = [t for t in allowed if grammar.option_of("verdict", pieces[t] or "") == "yes"]
        no = [t for t in allowed if grammar.option_of("verdict", pieces[t] or "") == "no"]
        if not yes or not no:  # P(yes) is read as yes / (yes + no), like the scheduler does
            raise SourceError(f"no verdict choice after the forced tokens ({len(allowed)} allowed)")
        return forced, yes, no

    def encode(self, example: Example) -> dict:
        request = self.judge.prompt_request(
            verdict_prompt(example), task_of(example).schema, max_tokens=64
        )
        forced, yes, no = self.choice[example.task]
        ids = self.judge.tokenize(request.prompt) + forced
        return {
            "task": example.task,
            "source": example.source,
            "label": example.label,
            "ids": ids,
            "yes": yes,
            "no": no,
        }


# Held-out sources added after the first folds: drawn after the others, so that holding one
# out beside them leaves the others' rows as they were (one generator serves every draw).
LATE_HELD_OUT = (
    "stormfront", "dstc9", "summedits", "convabuse", "ethos", "ucc", "q2", "conan", "bump",
    "hatemoji",
)  # fmt: skip


def draw_held_out(pools: dict[str, list[Example]], names: list[str]) -> dict[str, list[Example]]:
    """Per task, the rows of the whole sources held out (HELD_OUT_SOURCE's counts), drawn
    with one generator: the first folds' sources in the order given, task by task, then the
    later ones (LATE_HELD_OUT) the same way."""
    rng = random.Random(SEED + 3)
    picked: dict[str, list[Example]] = {task: [] for task in PILOT}
    for late in (False, True):
        for task in PILOT:
            for name in names:
                if (name in LATE_HELD_OUT) != late:
                    continue
                if any(e.source.startswith(f"{name}/") for e in pools[task]):
                    picked[task].extend(take(pools[task], HELD_OUT_SOURCE[name], rng))
    return picked


def begin_first_person(example: Example) -> bool:
    """A BEGIN reply with a first-person sentence (`--begin-first-person drop` trains without)."""
    return example.source.startswith("begin/") and first_person(example.text)


# word-share bands (the word-overlap baseline's share: a claim's words the context holds)
SHARE_BANDS = (0.5, 0.7, 0.9)


def share_band(example: Example) -> int | None:
    """The band of a hallucination example's word share (0: under 0.5 ... 3: 0.9 or more);
    None for a toxicity example or a claim with no words to count."""
    from localjudge.scorers.baselines import word_share

    if example.task != "hallucination":
        return None
    share = word_share(example.text, example.context)
    return None if share is None else sum(share >= edge for edge in SHARE_BANDS)


def balanced_by_share(examples: list[Example]) -> list[Example]:
    """The examples, less hallucination examples of the label more frequent in their
    word-share band, drawn at random down to the other label's count there, so that how much
    of a claim its context holds says nothing of its label (`--balance-share`); every other
    example, and the order, kept."""
    bands: dict[tuple[int, str], list[int]] = {}
    for i, example in enumerate(examples):
        band = share_band(example)
        if band is not None:
            bands.setdefault((band, example.label), []).append(i)
    dropped: set[int] = set()
    rng = random.Random(f"{SEED}:balance-share")
    for band in sorted({b for b, _ in bands}):
        yes, no = bands.get((band, "yes"), []), bands.get((band, "no"), [])
        more, fewer = (yes, no) if len(yes) > len(no) else (no, yes)
        dropped.update(rng.sample(more, len(more) - len(fewer)))
    return [e for i, e in enumerate(examples) if i not in dropped]


def held_out_sources(value: str) -> list[str]:
    names = [n for n in value.split(",") if n]
    for name in names:
        if name not in HELD_OUT_SOURCE:
            raise argparse.ArgumentTypeError(
                f"unknown source {name!r}: one of {', '.join(HELD_OUT_SOURCE)}"
            )
    return names


# `--add` names that draw the same rows two ways: never both
ONE_OR_THE_OTHER = (
    ("additions", "additions-split"),  # one shape of the same rows
    ("hatemoji", "hatemoji-pairs"),  # one source's rows, drawn two ways
    ("summedits-sales", "summedits-all"),  # the sales rows are among all's
)


def added_sources(value: str) -> list[str]:
    names = [n for n in value.split(",") if n]
    for name in names:
        if name not in ADDED:
            raise argparse.ArgumentTypeError(f"unknown source {name!r}: one of {', '.join(ADDED)}")
    for first, second in ONE_OR_THE_OTHER:
        if {first, second} <= set(names):
            raise argparse.ArgumentTypeError(f"{first} and {second} are one or the other")
    return names


def write_rows(path: Path, examples: list[Example], whole: bool = False) -> None:
    with path.open("w", encoding="utf-8") as f:
        for example in examples:
            f.write(json.dumps(quality_row(example, whole), ensure_ascii=False) + "\n")


def split_counts(counts: dict[str, int], split: str, args: argparse.Namespace) -> dict[str, int]:
    """Examples per source prefix for one split: training takes `train_counts`; the held-out
    split half of each public source's count, the same rows whatever --scale."""
    if split == "heldout":
        return {k: round(v / 2) for k, v in counts.items() if not is_template(k)}
    return train_counts(counts, args.scale, args.template_weight)


def select(
    pools: dict[str, list[Example]], split: str, rng: random.Random, args: argparse.Namespace
) -> dict[str, list[Example]]:
    """Per task, the examples of one split (`train` or `heldout`): PILOT's sources drawn with
    `rng`, then each `--add` source from its own generator; none of a held-out source."""
    unseen = tuple(f"{name}/" for name in args.hold_out)
    picks = {}
    for task, counts in PILOT.items():
        pool = [e for e in pools[task] if heldout(e, args.heldout_share) == (split == "heldout")]
        kept = {k: v for k, v in counts.items() if not k.startswith(unseen)}
        upto = args.upto and split == "train"
        picked = take(pool, split_counts(kept, split, args), rng, upto=upto)
        for name in args.add:
            if name not in args.hold_out:
                wanted = {
                    k: v for k, v in ADDED[name].get(task, {}).items() if not k.startswith(unseen)
                }  # a held-out source's text is never trained on, in whatever rows
                added = split_counts(wanted, split, args)
                draw = take_pairs if name in PAIRED else take
                picked += draw(pool, added, random.Random(f"{SEED}:{split}:{name}"), upto=upto)
        picks[task] = picked
    return picks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=HERE / "data")
    parser.add_argument("--heldout-share", type=float, default=0.2)
    parser.add_argument(
        "--scale",
        type=float,
        default=1.5,
        help="training examples: PILOT counts times this (default 1.5, the shipped adapter's)",
    )
    parser.add_argument(
        "--upto",
        action="store_true",
        help="training counts are ceilings: a source with fewer examples than --scale asks "
        "for gives all it has (for runs on an accelerator, which can afford every example)",
    )
    parser.add_argument(
        "--template-weight",
        type=float,
        default=1.0,
        help="our template sources (synthetic-tox, contrast) at this times their PILOT count: "
        "0.43 gives them the share of toxicity examples the shipped run had (21%%)",
    )
    parser.add_argument(
        "--hold-out",
        type=held_out_sources,
        default=[],
        help="whole sources never trained on (comma-separated: "
        + ", ".join(HELD_OUT_SOURCE)
        + "); their rows go to held-out-sources_{task}.jsonl",
    )
    parser.add_argument(
        "--add",
        type=added_sources,
        default=[],
        help="sources added since the leave-one-source-out runs, trained on as well "
        "(comma-separated: " + ", ".join(ADDED) + ")",
    )
    parser.add_argument(
        "--begin-first-person",
        choices=("keep", "drop"),
        default="keep",
        help="drop: training leaves out the BEGIN replies with a first-person sentence, every "
        'other row and their order kept (RESULTS.md, "BEGIN in the training mix")',
    )
    parser.add_argument(
        "--balance-share",
        action="store_true",
        help="training keeps, in each band of word share (under 0.5, 0.5-0.7, 0.7-0.9, 0.9 "
        "and more), as many hallucinated as supported claims, the more frequent label drawn "
        'down at random (RESULTS.md, "Word share balanced within each band")',
    )
    parser.add_argument(
        "--restatements",
        type=Path,
        help="for --add restated: the sentences training/paraphrase.py wrote",
    )
    args = parser.parse_args(argv)
    if "summedits-all" in args.add and "summedits" in args.hold_out:
        parser.error(
            "--add summedits-all trains on every SummEdits domain: not with --hold-out summedits"
        )
    if "q2" in args.add and "begin" in args.hold_out:
        parser.error(
            "--add q2 with --hold-out begin: Q²'s replies are in Wizard of Wikipedia's "
            "conversations, as BEGIN's are, so they are trained on only where BEGIN is"
        )

    from localjudge.judge import Judge

    args.out.mkdir(parents=True, exist_ok=True)
    with Judge.load("gemma-3-270m", slots=1) as judge:
        try:
            count = lambda text: len(judge.tokenize(text))  # noqa: E731
            pools = collect(
                args.sources, count, tuple(f"{n}/" for n in args.hold_out), tuple(args.add),
                args.restatements,
            )  # fmt: skip
        except SourceError as exc:
            print(f"make_data: {exc}", file=sys.stderr)
            return 2
        tokens = Tokens(judge)
        for task, picked in draw_held_out(pools, args.hold_out).items():
            write_rows(args.out / f"held-out-sources_{task}.jsonl", picked, whole=True)
            if picked:
                print(f"held-out sources, {task}: {len(picked)} rows")
        for split in ("train", "heldout"):
            rng = random.Random(SEED + (1 if split == "train" else 2))
            picks = select(pools, split, rng, args)
            chosen = [e for picked in picks.values() for e in picked]
            rng.shuffle(chosen)
            if split == "train" and args.begin_first_person == "drop":
                chosen = [e for e in chosen if not begin_first_person(e)]
                picks = {t: [e for e in p if not begin_first_person(e)] for t, p in picks.items()}
            if split == "train" and args.balance_share:
                kept = {id(e) for e in balanced_by_share(chosen)}
                chosen = [e for e in chosen if id(e) in kept]
                picks = {t: [e for e in p if id(e) in kept] for t, p in picks.items()}
            for task, picked in picks.items():
                write_rows(args.out / f"{split}_{task}.jsonl", picked)
            with (args.out / f"{split}.tokens.jsonl").open("w", encoding="utf-8") as f:
                for example in chosen:
                    f.write(json.dumps(tokens.encode(example)) + "\n")
            labels = {t: sum(e.label == "yes" for e in chosen if e.task == t) for t in PILOT}
            sizes = {t: sum(e.task == t for e in chosen) for t in PILOT}
            print(f"{split}: {len(chosen)} examples; yes/all by task: "
                  + ", ".join(f"{t} {labels[t]}/{sizes[t]}" for t in PILOT))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
