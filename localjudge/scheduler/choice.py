"""Token choice, apart from planning: each sequence's next token under its grammar (greedy
fast path, masked choice, the closing path when the budget runs out), jump-forward tokens,
option probabilities at enum choice points, and validation of the finished JSON. A request
without a grammar is free text: any text token, until an end-of-generation token or the
budget."""

from __future__ import annotations

import functools
import json
import re
import time
from typing import Any

import jsonschema
import numpy as np

from localjudge.errors import GenerationError, VerdictError
from localjudge.grammar.vocabulary import TokenVocabulary
from localjudge.scheduler.request import ChoicePoint, GenerationResult, Timings
from localjudge.scheduler.state import Finished, Sequence
from localjudge.scheduler.stats import SchedulerStats


@functools.lru_cache(maxsize=32)
def _decided(field: str) -> re.Pattern[bytes]:
    """The value of the string property `field` once its closing quote is in."""
    name = re.escape(json.dumps(field).encode())
    return re.compile(name + rb'\s*:\s*"([^"\\]*)"')


@functools.lru_cache(maxsize=32)
def _opened(field: str) -> re.Pattern[bytes]:
    """Inside the string property `field` (or right before its value): where a skipped
    reason starts; the other fields (a category, a severity) are chosen as ever, and only
    the reason's text is closed at once."""
    name = re.escape(json.dumps(field).encode())
    return re.compile(name + rb'\s*:\s*(?:"(?:[^"\\]|\\.)*)?$')


class TokenChooser:
    """Decodes for the scheduler: it never plans, the scheduler never picks a token."""

    def __init__(
        self,
        vocabulary: TokenVocabulary,
        stats: SchedulerStats,
        *,
        jump_forward: bool = True,
        heads: bool = True,
    ) -> None:
        self.vocabulary = vocabulary
        self.stats = stats
        self.jump_forward = jump_forward
        self.heads = heads  # False: the head waits for the prompt's logits, as jump-forward
        self.eog_ids = vocabulary.eog_ids | {vocabulary.eos_id}
        self._text_mask: np.ndarray | None = None  # tokens free text may use (built once)

    def take_head(self, seq: Sequence) -> list[int]:
        """Accept the tokens the schema fixes before the first choice (`{"verdict":"`), as
        jump-forward would after the prompt's logits, and return them: the request evaluates
        them with its prompt, so its first logits are read where the first choice is made."""
        head: list[int] = []
        if seq.grammar is not None and self.heads:
            head = self._jump_forward(seq)
            seq.pending = []
        seq.start_state = seq.state
        return head

    def advance(self, seq: Sequence, logits: np.ndarray) -> bool:
        """Take this step's token (and any jump-forward tokens); True when the JSON (or the
        free text) is done."""
        grammar = seq.grammar
        if grammar is None:
            return self._advance_text(seq, logits)
        self._accept(seq, self._choose(seq, logits), forced=False)
        self._jump_forward(seq)
        return grammar.is_final(seq.state)

    def _jump_forward(self, seq: Sequence) -> list[int]:
        """Accept the tokens the grammar forces from here (none with jump-forward off)."""
        taken: list[int] = []
        grammar = seq.grammar
        while self.jump_forward and not grammar.is_final(seq.state):
            forced = self._forced(seq)
            if forced is None and self._skipping_reason(seq):
                # the reason's shortest closing: the same text by any of its tokens, so it
                # needs no logits, and the sequence ends without another decode step
                forced = int(grammar.closing[seq.state][0])
            if forced is None:
                break
            self._accept(seq, forced, forced=True)
            taken.append(forced)
        return taken

    def _advance_text(self, seq: Sequence, logits: np.ndarray) -> bool:
        """Free text: text tokens only (never a control token inside the text), until an
        end-of-generation token or `max_tokens`."""
        if self._text_mask is None:
            mask = np.zeros(logits.shape[0], dtype=bool)
            ids = np.concatenate([self.vocabulary.ids, np.fromiter(self.eog_ids, np.int64)])
            mask[ids[ids < len(mask)]] = True
            self._text_mask = mask
        scores = np.where(self._text_mask, logits, -np.inf)
        if seq.sampling.greedy:
            token = int(np.argmax(scores))
        else:
            allowed = np.flatnonzero(self._text_mask)
            probs = _softmax(scores[allowed] / seq.sampling.temperature)
            token = int(allowed[int(seq.rng.choice(len(allowed), p=probs))])
        if token in self.eog_ids:
            return True
        seq.output_tokens.append(token)
        seq.output_bytes += self.vocabulary.piece(token)
        seq.pending.append(token)
        seq.counts.generated += 1
        self.stats.num_generated_tokens += 1
        if len(seq.output_tokens) >= seq.max_tokens:
            seq.forced_close = True  # finish_reason "length"
            return True
        return False

    @staticmethod
    def _skipping_reason(seq: Sequence) -> bool:
        """Inside a reason that `reasons_for` skips (its verdict is not wanted)."""
        if not seq.close_early:
            return False
        return _opened(seq.item.request.reason_field).search(seq.output_bytes) is not None

    @staticmethod
    def _forced(seq: Sequence) -> int | None:
        """The grammar's only token here, if taking it still leaves room to close the JSON."""
        grammar = seq.grammar
        token = grammar.forced_token(seq.state)
        if token is None:
            return None
        limit = seq.max_tokens - len(seq.output_tokens) - 1
        next_state = grammar.next_state(seq.state, token)
        if next_state is None or grammar.distance.get(next_state, limit + 1) > limit:
            return None
        return token

    def _accept(self, seq: Sequence, token: int, *, forced: bool) -> None:
        try:
            seq.guide.advance(token, return_tokens=False)
        except ValueError:  # _choose only returns allowed tokens; this guards the invariant
            raise GenerationError(f"token {token} is not allowed by the grammar") from None
        seq.state = seq.guide.get_state()
        seq.output_tokens.append(token)
        seq.output_bytes += self.vocabulary.piece(token)
        seq.pending.append(token)
        seq.counts.generated += 1
        self.stats.num_generated_tokens += 1
        if forced:
            seq.counts.forced += 1
            self.stats.num_forced_tokens += 1
        wanted = seq.item.request.reasons_for
        if wanted is not None and not seq.verdict_read and seq.choices:
            found = _decided(seq.item.request.decision_field).search(seq.output_bytes)
            if found is not None:  # decided once, when the verdict's closing quote is in
                seq.verdict_read = True
                # verdict-first: no reason for a verdict outside `wanted`
                seq.close_early = found.group(1).decode("utf-8", "replace") not in wanted

    def _choose(self, seq: Sequence, logits: np.ndarray) -> int:
        """The next token: greedy fast path, else masked choice, else the closing path.

        A token is only taken if the JSON can still be closed within the budget left after
        it (`distance` of its next state <= tokens left - 1). The closing tokens always
        satisfy that, because the budget never drops below the current distance.
        """
        grammar = seq.grammar
        state = seq.state
        limit = seq.max_tokens - len(seq.output_tokens) - 1
        distance = grammar.distance

        field_name = grammar.choice_at(state, seq.output_bytes)
        if field_name is not None:
            self._record_choice(seq, field_name, logits)

        forced = self._forced(seq)
        if forced is not None:  # what jump-forward would have appended without logits
            return forced
        if self._skipping_reason(seq):
            closing = grammar.closing[state]
            return int(closing[int(np.argmax(logits[closing]))])
        if seq.sampling.greedy:
            token = int(np.argmax(logits))
            next_state = grammar.next_state(state, token)
            if (
                next_state is not None
                and distance.get(next_state, limit + 1) <= limit
                and not grammar.narrows_out(state, token)
            ):
                return token
        allowed = grammar.allowed[state]
        if len(allowed) == 0:
            raise GenerationError("grammar has no allowed token in a non-final state")
        scores = logits[allowed]
        if seq.sampling.greedy:
            token = int(allowed[int(np.argmax(scores))])
        else:
            probs = _softmax(scores / seq.sampling.temperature)
            token = int(allowed[int(seq.rng.choice(len(allowed), p=probs))])
        next_state = grammar.next_state(state, token)
        if next_state is not None and distance.get(next_state, limit + 1) <= limit:
            return token
        seq.forced_close = True
        closing = grammar.closing[state]
        return int(closing[int(np.argmax(logits[closing]))])

    def _record_choice(self, seq: Sequence, field_name: str, logits: np.ndarray) -> None:
        grammar = seq.grammar
        allowed = grammar.allowed[seq.state]
        probs = _softmax(logits[allowed].astype(np.float64))
        by_option: dict[str, float] = dict.fromkeys(grammar.enum_fields[field_name], 0.0)
        for token, prob in zip(allowed.tolist(), probs.tolist(), strict=True):
            option = grammar.option_of(field_name, grammar.token_text.get(token, ""))
            if option is not None:
                by_option[option] += prob
        total = sum(by_option.values()) or 1.0
        probabilities = {k: v / total for k, v in by_option.items()}
        seq.choices.append(ChoicePoint(field=field_name, probabilities=probabilities, chosen=""))

    @staticmethod
    def finish(seq: Sequence) -> Finished:
        """The finished request: its validated JSON, or why the reply could not be used."""
        now = time.perf_counter()
        text = seq.output_bytes.decode("utf-8", "replace")
        submitted = seq.item.submitted_at
        timings = Timings(
            queued_s=seq.admitted_at - submitted,
            first_token_s=seq.first_token_at - submitted,
            total_s=now - submitted,
        )
        if seq.grammar is None:  # free text: the text is the value
            value: Any = text
            choices: list[ChoicePoint] = []
            finish_reason = "length" if seq.forced_close else "stop"
        else:
            try:
                value = json.loads(text)
                seq.grammar.validator.validate(value)
            except (ValueError, jsonschema.ValidationError) as error:
                message = getattr(error, "message", str(error))
                return Finished(
                    request_id=seq.request_id,
                    error=VerdictError(f"judge reply failed validation: {message}"),
                )
            choices = [
                ChoicePoint(c.field, c.probabilities, chosen=str(value.get(c.field, "")))
                for c in seq.choices
            ]
            reread = seq.item.request.reread
            if reread is not None:
                value, choices = reread.value(value), [reread.choice(c) for c in choices]
            finish_reason = "budget" if seq.forced_close else "stop"
        result = GenerationResult(
            request_id=seq.request_id,
            value=value,
            text=text,
            counts=seq.counts,
            timings=timings,
            choices=choices,
            finish_reason=finish_reason,
            reason_skipped=seq.close_early,
        )
        return Finished(request_id=seq.request_id, result=result)


def _softmax(scores: np.ndarray) -> np.ndarray:
    shifted = np.exp(scores - np.max(scores))
    return shifted / shifted.sum()
