"""Which sentences of an output are claims, when no judge extracts them.

A claim states something a context could support or contradict. A question, a greeting, a
thank-you, an apology for the wait or an offer of more help states nothing of the kind, so
the hallucination scorer's "sentence-claims" extraction leaves it out (and says so), as a
judge that extracts claims would: a faithful support reply that ends "Is there anything else
I can help with?" is not half hallucinated. On DSTC9's task-oriented replies that close with
a question it lifts the default judge from 0.50 to 0.75 balanced accuracy; it is opt-in
because on knowledge-grounded dialogue (BEGIN), whose labels count a reply that only asks a
question as not attributable, it judged worse than every sentence (training/RESULTS.md,
"Questions and courtesies are not claims" and "The case the claim rule was written for").

The rules are deliberately narrow, so that anything checkable is still judged:
- a question is left out unless it presents a fact ("Did you know it opened in 1990?"),
  ends in a tag ("It opens at 9, right?") or has a second clause (";" or ":");
- a courtesy is left out only when the whole sentence is one (`_COURTESY`, English and
  Japanese); "Thanks, it arrives on Thursday." is judged;
- a Markdown heading ("## Return policy") is left out;
- a sentence with no letter or digit (an emoji, "...") is left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from localjudge.scorers.text import cut_long, split_sentences

QUESTION, COURTESY, HEADING, NO_WORDS = "question", "courtesy", "heading", "no words"
KINDS = (QUESTION, COURTESY, HEADING, NO_WORDS)  # the order a reason names them in

_CLOSERS = "\"')]」』）"
_QUESTION_END = re.compile(rf"[?？][{re.escape(_CLOSERS)}]*$")
_PRESENTS_A_FACT = re.compile(
    r"^(did|do|does) (you|he|she|they) (know|realise|realize|hear)( that| about)?\b"
    r"(?! (what|when|where|who|whom|which|why|how|if|whether)\b)"
    r"|^(have|has) (you|he|she|they) (heard|read|seen) (that|about)\b"
    r"|^(you know|guess what|isn't it (true|amazing|interesting))\b"
)
# a sentence end the splitter did not take (an abbreviation before it): judge it all
_MISSED_BOUNDARY = re.compile(r"[.!]\s+[A-Z0-9]")
# ", right?", ", isn't it?", ", don't you think?": a statement with a tag on the end
_TAG_WORDS = re.compile(r"\w+'?\w*( \w+'?\w*){0,2}")

_HEADING = re.compile(r"#{1,6}\s")
_WORDS_ONLY = re.compile(r"[^\w' ]+")
_THANKS_FOR = (
    r"(waiting|your patience|asking|your question|the question|reaching out|contacting us"
    r"|getting in touch|your message|your order|your understanding|your feedback|your time"
    r"|your interest|choosing us|your help|that|this|letting (me|us) know|sharing)"
)
_SORRY_FOR = (
    r"(the (wait|delay|inconvenience|confusion|trouble|mix ?up)|any (inconvenience|confusion)"
    r"|keeping you waiting|the late reply|that|this)"
)
_COURTESY = re.compile(
    "|".join(
        [
            r"(hi|hello|hey|greetings|welcome|good (morning|afternoon|evening|day))"
            r"( there| again| all| everyone| \w+)?",
            rf"((many |a thousand )?thanks|thank you|thank you (so|very) much|thanks (so|very) much"
            rf"|thanks a lot|thx)( again)?( for {_THANKS_FOR})?( again)?",
            rf"((i'?m|i am|we'?re|we are|so|very) )?sorry( (about|for) {_SORRY_FOR})?"
            rf"|(i|we) apologi[sz]e( for {_SORRY_FOR})?",
            r"(have|enjoy) a (nice|good|great|lovely|wonderful|pleasant|safe|fantastic)"
            r" (day|evening|night|weekend|week|trip|time|one|stay|meal|holiday)",
            r"take care|good ?bye|bye( for now)?|cheers|see you( soon| later| then)?"
            r"|best (wishes|regards)|kind regards|all the best|good luck|you'?re welcome"
            r"|no problem|my pleasure|any ?time|happy to help|glad (i|we) could help",
            r"(i |we )?hope (this|that|it) (helps|was helpful|is helpful|answers your question)",
            r"(please )?(let (me|us) know|feel free to (ask|reach out|contact (me|us)|get in touch))"
            r"( if [a-z' ]{0,60})?",
            r"(is there )?anything else( (i|we) can (help|do)( you)?( with)?)?",
            r"sure( thing)?|of course|certainly|absolutely|ok(ay)?|alright|all right|got it"
            r"|understood|i see|i understand|no worries|great question|good question",
        ]
    )
)
_COURTESY_JA = re.compile(
    r"(ありがとうございます|ありがとうございました|ありがとう|よろしくお願いします"
    r"|よろしくお願いいたします|こんにちは|こんばんは|おはようございます|どういたしまして"
    r"|お待たせしました|お待たせいたしました|承知しました|かしこまりました|すみません"
    r"|申し訳ありません|申し訳ございません|失礼します|お大事に)[。！!]*"
)


@dataclass(frozen=True)
class SentenceClaims:
    """An output's sentences, sorted into claims and the rest."""

    claims: list[str]  # judged against the context, in the output's order
    skipped: list[dict]  # {"sentence": ..., "why": one of KINDS}


def why_not_a_claim(sentence: str) -> str | None:
    """Why `sentence` states nothing a context could support or contradict (one of KINDS),
    or None when it is a claim."""
    text = sentence.strip()
    if not any(ch.isalnum() for ch in text):
        return NO_WORDS
    if _HEADING.match(text):
        return HEADING
    if _COURTESY_JA.fullmatch(text):
        return COURTESY
    words = " ".join(_WORDS_ONLY.sub(" ", text.lower().replace("’", "'")).split())
    if _COURTESY.fullmatch(words):
        return COURTESY
    if _QUESTION_END.search(text):
        body = text.rstrip(_CLOSERS + "?？ ")
        kept = (
            _PRESENTS_A_FACT.search(words)
            or ";" in body
            or ":" in body
            or _MISSED_BOUNDARY.search(body)
            or _ends_in_a_tag(body)
        )
        return None if kept else QUESTION
    return None


def left_out_text(skipped: list[dict]) -> str:
    """What a reason says of the sentences left out: "2 sentences state nothing to check:
    1 question, 1 courtesy"."""
    counts = {kind: sum(s["why"] == kind for s in skipped) for kind in KINDS}
    kinds = ", ".join(f"{n} {kind if n == 1 else _PLURAL[kind]}" for kind, n in counts.items() if n)
    verb = "sentence states" if len(skipped) == 1 else "sentences state"
    return f"{len(skipped)} {verb} nothing to check: {kinds}"


_PLURAL = {
    QUESTION: "questions",
    COURTESY: "courtesies",
    HEADING: "headings",
    NO_WORDS: "without words",
}


def _ends_in_a_tag(body: str) -> bool:
    """Whether a question's body (without its "?") is a statement of more than three words
    with a tag of one to three words after its last comma ("It opens at 9, right")."""
    head, comma, tag = body.rpartition(",")
    return bool(
        comma
        and len(body.split()) > 3
        and any(ch.isalnum() for ch in head)
        and _TAG_WORDS.fullmatch(tag.strip().lower())
    )


def sentence_claims(text: str, max_chars: int = 600) -> SentenceClaims:
    """The claims of `text` without a judge: its sentences less those that state nothing
    (`why_not_a_claim`), a claim over `max_chars` cut at spaces (`cut_long`)."""
    claims: list[str] = []
    skipped: list[dict] = []
    for sentence in split_sentences(text):
        why = why_not_a_claim(sentence)
        if why is None:
            claims.extend(cut_long(sentence, max_chars))
        else:
            skipped.append({"sentence": sentence, "why": why})
    return SentenceClaims(claims, skipped)
