"""A judge's reason that says the context lacks something the context holds ("The context
does not mention Cortana" of a context about Cortana): small judges that write their own
reasons give one of a flagged claim, whatever the context says. The scorers and `quality`
replace it with the reason built from the verdict and its evidence."""

from __future__ import annotations

import functools
import re

# what a result says where it dropped the judge's reason for this
HELD = "it said the context lacks what the context holds"

# "does not mention X", "does not provide any information about X", up to the end of X:
# punctuation, or a word that joins a second thing ("X or Y") or a clause
_SAYS_ABSENT = re.compile(
    r"\b(?:does not|doesn't|do not|don't|did not|never)\s+"
    r"(?:mentions?|names?|discuss(?:es)?|refers? to|talks? about|says? anything about|"
    r"(?:provides?|gives?) (?:any )?information (?:about|on))\s+"
    r"(.+?)(?=[.,;:!?\"]|\s+(?:or|and|nor|but|so|because|which|while)\b|$)"
)
# X that is a proposition or a pronoun, not a thing: whether it holds is not a matter of words
_NOT_A_THING = frozenset({
    "that", "whether", "if", "how", "when", "where", "why", "who", "whom", "what", "which",
    "this", "it", "them", "anything",
})  # fmt: skip
_SMALL = frozenset({
    "the", "a", "an", "any", "its", "it", "his", "her", "their", "our", "your", "my", "of",
    "in", "on", "at", "to", "for", "by", "with", "from", "about", "as", "and", "or", "other",
    "another", "such", "this", "that", "these", "those", "some",
})  # fmt: skip


def says_held_absent(reason: str, context: str) -> bool:
    """Whether an English `reason` says the context does not mention (name, discuss, give
    information about) a thing whose words `context` holds in the same order: the thing's
    words other than articles and other small words, each read without a plural "s" or a
    possessive "'s" ("burritos" is held by "a burrito"; "cold coffee" is not held by "hot
    and cold drinks"). Of "X or Y", X is read. A proposition ("does not mention that ...",
    "whether ...") is not read."""
    text = " ".join(reason.lower().split())
    held: tuple[str, ...] | None = None  # the context is read only when a reason says so
    for match in _SAYS_ABSENT.finditer(text):
        first = re.match(r"\W*(\w+)", match[1])
        if first is None or first[1] in _NOT_A_THING:
            continue
        thing = _content_words(match[1])
        if not thing:
            continue
        if held is None:
            held = _held_words(context)
        n = len(thing)
        if any(list(held[i : i + n]) == thing for i in range(len(held) - n + 1)):
            return True
    return False


@functools.lru_cache(maxsize=16)
def _held_words(context: str) -> tuple[str, ...]:
    """A context's content words, read once for all the reasons given against it."""
    return tuple(_content_words(context))


def _content_words(text: str) -> list[str]:
    words = []
    for word in re.findall(r"[^\W_]+(?:[-'’][^\W_]+)*", text.lower()):
        word = re.sub(r"['’]s$", "", word)
        if word in _SMALL or len(word) < 3:
            continue
        words.append(word[:-1] if word.endswith("s") and len(word) > 3 else word)
    return words
