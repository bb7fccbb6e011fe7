"""Sentences that restate a window of WiCE's cited pages in other words, written by a
registered instruct GGUF, for `make_data.py --add restated`.

The training data's supported claims mostly copy their window word for word (SNLI's and
the synthetic restatements, WiCE's copied page sentences), and the judge flags a summary
sentence the less of its words one window holds (RESULTS.md, "Which of BUMP's reference
sentences the judge flags"). This asks a model for sentences that join and reword what a
window says; `make_data.py` keeps those that pass its checks (`restated`) and makes half of
them wrong with a changed number, date, name or negation, so that rewording alone decides
nothing.

    LOCALJUDGE_HOME=/tmp/lj-qwen .venv/bin/python training/paraphrase.py --model qwen-unassessed --sources training/sources --windows 320 --out training/restated.jsonl

One window per cited page (WiCE's dev split, a trained source), drawn with a fixed seed
among the windows of 96 tokens that hold two prose sentences or more, as `make_data.py`
cuts them with the embedded model's tokenizer. Writes one JSON line per window: the page's
number, the window's text and the model's sentences, less those that bring in a word of the
worked examples the window does not hold (`make_data.py` checks the rest).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from make_data import SEED, cited_pages, recorded_hashes, source_path  # noqa: E402

from localjudge.judge import Judge  # noqa: E402
from localjudge.prompts.base import PromptParts  # noqa: E402

INSTRUCTIONS = """Restate what a text says, in new words.
Write two short sentences, each under 25 words. Each sentence joins two facts that the text states. Use your own words: never copy more than three words in a row from the text, and change the order of the facts. Keep every name, number and date exactly as the text gives it. Add nothing that the text does not say.
Reply with one JSON object: {"claims":["first sentence","second sentence"]}.

Text: The bridge opened to traffic in 1932 after six years of work. It carries eight lanes of cars and a railway line across the harbour, and it was designed by John Bradfield.
Sentences: {"claims":["Six years of building ended in 1932, when cars could first use the bridge.","John Bradfield's design takes trains and eight lanes of cars over the harbour."]}

Text: Mara Voss joined the orchestra as a violinist in 2004. She became its conductor in 2015 and has recorded eleven albums with it.
Sentences: {"claims":["Mara Voss, a violinist with the orchestra from 2004, has led it since 2015.","Under Mara Voss the orchestra has made eleven albums."]}"""
# the worked examples' own words: a sentence that brings one in where its window has none
# repeats the examples, not the window, and is left out here
EXAMPLE_WORDS = frozenset({
    "bridge", "harbour", "railway", "lanes", "traffic", "trains", "bradfield", "orchestra",
    "violinist", "violin", "conductor", "albums", "mara", "voss",
})  # fmt: skip
VERSION = "restate-2"
MAX_TOKENS = 160


def windows(sources: Path, count_tokens, wanted: int) -> list[tuple[int, str]]:
    """(page number, window text): one window per page, drawn with a fixed seed among its
    windows holding two prose sentences or more; `wanted` of them, pages in a drawn order."""
    rng = random.Random(f"{SEED}:restated")
    path = source_path(sources, "wice_dev", recorded_hashes())
    found = []
    for page, (_text, cut, prose) in enumerate(cited_pages(path, count_tokens)):
        full = [w for w in cut if sum(w.start <= s and e <= w.end for s, e in prose) >= 2]
        if full:
            found.append((page, rng.choice(full).text))
    rng.shuffle(found)
    return sorted(found[:wanted])


def from_examples(sentence: str, window: str) -> bool:
    """Whether `sentence` holds a word of the worked examples that `window` does not."""
    words = lambda text: set(re.findall(r"[a-z]+", text.lower()))  # noqa: E731
    return bool((words(sentence) - words(window)) & EXAMPLE_WORDS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a registered instruct model")
    parser.add_argument("--sources", type=Path, required=True)
    parser.add_argument("--windows", type=int, default=320)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)

    with Judge.load("gemma-3-270m", slots=1) as embedded:  # the windows make_data cuts
        picked = windows(args.sources, lambda t: len(embedded.tokenize(t)), args.windows)
    print(f"{len(picked)} windows", file=sys.stderr)
    with Judge.load(args.model) as judge:
        requests = [
            judge.prompt_request(
                PromptParts(
                    instructions=INSTRUCTIONS, shared="", own=f"Text: {text}\nSentences: ",
                    version=VERSION,
                ),
                "claims",
                MAX_TOKENS,
            )
            for _, text in picked
        ]  # fmt: skip
        results = judge.generate_many(requests)
    with args.out.open("w", encoding="utf-8") as f:
        for (page, text), result in zip(picked, results, strict=True):
            if isinstance(result, Exception) or result.finish_reason == "budget":
                continue  # no sentences to check
            sentences = [
                " ".join(s.split()) for s in result.value["claims"] if not from_examples(s, text)
            ]
            f.write(json.dumps({"page": page, "window": text, "sentences": sentences}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
