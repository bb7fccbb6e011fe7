"""Evidence windows: a long context cut into windows the size the judge reads well, and for
each claim the few windows worth judging it against (BM25 over the windows' words).

A claim is supported when its best window supports it; that window is its evidence.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from localjudge.scorers.text import sentence_spans

WINDOW_MODES = ("all", "off")  # or an integer k: the k best windows by BM25
DEFAULT_TOP_K = 4
MAX_WINDOWS = 32  # windows judged per claim at most, with windows="all" too


GAP = " … "  # between the sentences of a gathered window that are not neighbours


@dataclass(frozen=True)
class Window:
    """A span of the context text (the entries, stripped, joined by newlines), or, gathered
    for one claim (`gathered_window`), the sentences in `spans`, in the text's order, those
    not neighbours joined by `GAP`."""

    index: int
    start: int
    end: int
    text: str
    spans: tuple[tuple[int, int], ...] = ()

    def evidence(self, p_yes: float | None) -> dict:
        out = {
            "window": self.index,
            "start": self.start,
            "end": self.end,
            "text": self.text,
            "pYes": None if p_yes is None else round(p_yes, 4),
        }
        if self.spans:
            out["spans"] = [list(span) for span in self.spans]
        return out


def context_text(context: Sequence[str]) -> str:
    """The text windows are cut from: the context entries, stripped, one per line."""
    return "\n".join(entry.strip() for entry in context if entry.strip())


def check_windows(windows: object) -> str | int:
    """ "all", "off", or a positive integer k."""
    if windows in WINDOW_MODES:
        return windows  # type: ignore[return-value]
    if isinstance(windows, bool) or not isinstance(windows, int) or windows < 1:
        raise ValueError(f'windows must be "all", "off" or an integer >= 1, not {windows!r}')
    return windows


def windows_from_text(value: str) -> str | int:
    """`windows` as a command line writes it ("all", "off" or k), checked as the scorers
    check it (`check_windows`)."""
    return check_windows(int(value) if value.isdigit() else value)


def split_windows(
    text: str, count_tokens: Callable[[str], int], window_tokens: int
) -> list[Window]:
    """Windows of whole sentences, each at most `window_tokens` tokens (a longer sentence
    is cut at spaces), consecutive windows sharing their boundary sentence so that a claim
    resting on two neighbouring sentences finds them together. A text that fits is one
    window."""
    if not text:
        return []
    if count_tokens(text) <= window_tokens:
        return [Window(0, 0, len(text), text)]
    return _windows(text, sentence_pieces(text, count_tokens, window_tokens), window_tokens)


def _windows(text: str, pieces: Sequence[tuple[int, int, int]], window_tokens: int) -> list[Window]:
    """Consecutive pieces joined into windows of at most `window_tokens`, each window after
    the first starting with the last piece of the one before."""
    windows: list[Window] = []
    first = 0
    while first < len(pieces):
        last, total = first, pieces[first][2]
        while last + 1 < len(pieces) and total + pieces[last + 1][2] <= window_tokens:
            last += 1
            total += pieces[last][2]
        start, end = pieces[first][0], pieces[last][1]
        windows.append(Window(len(windows), start, end, text[start:end]))
        if last == len(pieces) - 1:
            break
        first = last if last > first else last + 1
    return windows


def sentence_pieces(
    text: str, count_tokens: Callable[[str], int], window_tokens: int
) -> list[tuple[int, int, int]]:
    """The text's sentences as (start, end, tokens), a sentence longer than `window_tokens`
    cut at spaces into pieces that fit: what windows are made of."""
    pieces: list[tuple[int, int, int]] = []
    for start, end in sentence_spans(text):
        pieces.extend(_cut(text, start, end, count_tokens, window_tokens))
    return pieces


def gathered_window(
    text: str,
    pieces: Sequence[tuple[int, int, int]],
    scores: Sequence[float],
    window_tokens: int,
    gap_tokens: int,
    index: int,
) -> Window | None:
    """For one claim, the sentences (`pieces`) that share its words most (`scores`, BM25 of
    the claim over the pieces), best first while they fit in `window_tokens` (`gap_tokens`
    for each `GAP`), set back in the text's order: what a claim that sums up sentences far
    apart is judged against. Neighbouring sentences keep the text between them; others are
    joined by `GAP`. None when no sentence shares a word with the claim."""
    taken: list[int] = []
    total = 0
    for i in sorted(range(len(pieces)), key=lambda i: (-scores[i], i)):
        if scores[i] <= 0:
            break
        cost = pieces[i][2] + (gap_tokens if taken else 0)
        if total + cost <= window_tokens:
            taken.append(i)
            total += cost
    if not taken:
        return None
    taken.sort()
    spans: list[list[int]] = []
    for i in taken:
        start, end, _ = pieces[i]
        if spans and spans[-1][2] == i - 1:  # the sentence before: one span
            spans[-1][1], spans[-1][2] = end, i
        else:
            spans.append([start, end, i])
    body = GAP.join(text[start:end] for start, end, _ in spans)
    return Window(
        index, spans[0][0], spans[-1][1], body, tuple((start, end) for start, end, _ in spans)
    )


def _cut(
    text: str, start: int, end: int, count_tokens: Callable[[str], int], limit: int
) -> list[tuple[int, int, int]]:
    """A sentence as pieces of at most `limit` tokens, cut at spaces where it has them."""
    tokens = count_tokens(text[start:end])
    if tokens <= limit or end - start < 2:
        return [(start, end, tokens)]
    middle = start + (end - start) // 2
    space = text.rfind(" ", start + 1, middle + 1)
    if space <= start:
        space = text.find(" ", middle, end - 1)
    cut = space if space > start else middle
    head_end = cut
    while head_end > start and text[head_end - 1].isspace():
        head_end -= 1
    tail_start = cut
    while tail_start < end and text[tail_start].isspace():
        tail_start += 1
    return _cut(text, start, head_end, count_tokens, limit) + _cut(
        text, tail_start, end, count_tokens, limit
    )


_WORD = re.compile(r"\w+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def terms(text: str) -> list[str]:
    """Lower-case words; runs of CJK characters (no spaces between words) as bigrams."""
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        if _CJK.search(word) and len(word) > 1:
            out.extend(word[i : i + 2] for i in range(len(word) - 1))
        else:
            out.append(word)
    return out


class BM25:
    """Okapi BM25 over a fixed list of texts (k1 1.2, b 0.75)."""

    def __init__(self, texts: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [Counter(terms(t)) for t in texts]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.average = (sum(self.lengths) / len(self.docs)) if self.docs else 0.0
        frequency: Counter[str] = Counter()
        for doc in self.docs:
            frequency.update(doc.keys())
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in frequency.items()}
        self.k1, self.b = k1, b

    def scores(self, query: str) -> list[float]:
        wanted = set(terms(query))
        out = []
        for doc, length in zip(self.docs, self.lengths, strict=True):
            norm = self.k1 * (1 - self.b + self.b * length / (self.average or 1))
            out.append(
                sum(
                    self.idf[t] * doc[t] * (self.k1 + 1) / (doc[t] + norm)
                    for t in wanted
                    if t in doc
                )
            )
        return out


def plan_windows(
    judge,
    context: Sequence[str],
    claims: Sequence[str],
    *,
    mode: str | int = DEFAULT_TOP_K,
    window_tokens: int | None = None,
    max_tokens: int = 96,
    gather: bool = False,
) -> tuple[list[Window], list[list[int]], list[int]]:
    """The windows of `context` and, for each claim, the windows to judge it against and
    how many `MAX_WINDOWS` left out (`candidate_windows`). Windows are `window_tokens` long
    (else the judge's own size, else as long as fits in its context beside the longest
    claim's prompt and `max_tokens`); a context that fits is one window, none is none, and
    `mode` "off" keeps the whole context as one window whatever its length. With `gather`,
    a claim of a context cut into windows is also judged, last, against the window of its
    own best sentences (`gathered_window`) unless those lie in one of its windows already;
    gathered windows are numbered after the context's."""
    from localjudge.prompts import claim_verdict_prompt

    @functools.cache  # gathering cuts the same sentences again: each is tokenized once
    def count_tokens(piece: str) -> int:
        return len(judge.tokenize(piece))

    text = context_text(context)
    if mode == "off" and text:
        windows = [Window(0, 0, len(text), text)]
    else:
        size = window_tokens or judge.window_tokens
        if size is None and claims:
            room = claim_verdict_prompt(["."], max(claims, key=len))
            used = len(judge.tokenize("".join(judge.split_prompt(room)[0]) + room.own))
            size = max(judge.n_ctx - used - max_tokens - 8, 16)
        size = size or len(text) + 1
        windows = split_windows(text, count_tokens, size)
    if len(windows) <= 1:
        return windows, [list(range(len(windows))) for _ in claims], [0] * len(claims)
    chosen, left_out = candidate_windows(windows, claims, mode)
    if gather:
        gather_windows(text, windows, claims, chosen, count_tokens, size)
    return windows, chosen, left_out


def gather_windows(
    text: str,
    windows: list[Window],
    claims: Sequence[str],
    chosen: list[list[int]],
    count_tokens: Callable[[str], int],
    window_tokens: int,
) -> None:
    """Adds each claim's gathered window (`gathered_window`) to `windows` and, last, to its
    `chosen`, unless it lies within a window the claim is judged against already; claims
    that gather the same sentences share one window."""
    pieces = sentence_pieces(text, count_tokens, window_tokens)
    index = BM25([text[start:end] for start, end, _ in pieces])
    gap = count_tokens(GAP)
    known: dict[tuple[tuple[int, int], ...], int] = {}
    for claim, mine in zip(claims, chosen, strict=True):
        found = gathered_window(text, pieces, index.scores(claim), window_tokens, gap, len(windows))
        if found is None or any(
            windows[w].start <= found.start and found.end <= windows[w].end for w in mine
        ):
            continue
        if found.spans not in known:
            known[found.spans] = found.index
            windows.append(found)
        mine.append(known[found.spans])


def claim_contexts(
    context: Sequence[str], windows: Sequence[Window], chosen: Sequence[int]
) -> list[list[str]]:
    """What one claim is judged against, a context per request: the whole context when it
    is one window (or there is none), else each chosen window's text."""
    if len(windows) <= 1:
        return [list(context)]
    return [[windows[w].text] for w in chosen]


def candidate_windows(
    windows: Sequence[Window], claims: Sequence[str], mode: str | int, index: BM25 | None = None
) -> tuple[list[list[int]], list[int]]:
    """For each claim, the indices of the windows to judge it against (best BM25 first; a
    tie keeps the text's order), and how many windows each claim left out because of
    `MAX_WINDOWS` (0 when `mode` chose fewer on purpose)."""
    if len(windows) <= 1:
        return [list(range(len(windows))) for _ in claims], [0] * len(claims)
    index = index or BM25([w.text for w in windows])
    k = MAX_WINDOWS if mode == "all" else min(int(mode), MAX_WINDOWS)
    chosen, left_out = [], []
    for claim in claims:
        scores = index.scores(claim)
        ranked = sorted(range(len(windows)), key=lambda i: (-scores[i], i))
        chosen.append(ranked[:k])  # best first: a claim stops at the first that supports it
        left_out.append(max(0, len(windows) - MAX_WINDOWS) if mode == "all" else 0)
    return chosen, left_out


def claim_template_reason(verdict: str, evidence: dict | None, *, quoted: bool = True) -> str:
    """A claim's reason built from its verdict and the window that decided it, quoting the
    window (or, `quoted=False`, naming it by its index)."""
    if evidence is None:
        return "No context was given, so nothing supports this claim."
    where = f'"{quote(evidence["text"])}"' if quoted else f"window {evidence['window']}"
    if verdict == "no":
        return f"Supported by the context: {where}"
    return f"No part of the context states this; closest: {where}"


def quote(text: str, limit: int = 600) -> str:
    """`text` on one line, its middle left out past `limit` characters."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    half = (limit - 1) // 2
    return f"{text[:half].rstrip()} … {text[len(text) - half :].lstrip()}"


def p_yes(result) -> float:
    """P("yes") of a verdict result (1 or 0 when the judge gave no choice)."""
    choice = result.choice("verdict")
    if choice is None:
        return 1.0 if result.value.get("verdict") == "yes" else 0.0
    return float(choice.probabilities.get("yes", 0.0))
