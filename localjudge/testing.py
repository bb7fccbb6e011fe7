"""Fakes for exact, fast tests of the logic above the engine (STYLE: fakes ship in the
package): the scripted `FakeEngine`, and `FakeJudge`, a `Judge` composed on it."""

from __future__ import annotations

import json

from localjudge.engine.fake import BOS_ID, EOS_ID, FakeEngine, FakeTokenizer, Script
from localjudge.judge import Judge
from localjudge.scheduler import Scheduler
from localjudge.scheduler.runtime import BatchRuntime
from localjudge.scorers.text import split_sentences

__all__ = [
    "ANSWER_CUES",
    "BOS_ID",
    "EOS_ID",
    "FakeEngine",
    "FakeJudge",
    "FakeTokenizer",
    "assert_scheduler_idle",
    "rule_script",
]


ANSWER_CUES = ("Answer: ", "Claims: ", "Explanation: ")
TOXIC_WORDS = ("idiot", "stupid", "regret", "shut up")


def rule_script(prompt: str) -> str:
    """The default fake judge: plain rules a test can predict. A claim is hallucinated
    when the context does not contain it word for word; a statement is toxic when it holds
    one of `TOXIC_WORDS`; claims are the text's sentences."""
    last = prompt.rsplit("\n\n", 1)[-1]
    if prompt.endswith("Explanation: "):
        return '{"reason":"Explained by the fake judge."}'
    if prompt.endswith("Claims: "):
        text = last.rsplit("Text: ", 1)[-1].rsplit("\nClaims: ", 1)[0]
        return json.dumps({"claims": split_sentences(text)}, separators=(",", ":"))
    if "Statement: " in last:
        statement = last.rsplit("Statement: ", 1)[-1].split("\n")[0].lower()
        if any(word in statement for word in TOXIC_WORDS):
            return (
                '{"verdict":"yes","category":"personal_attack","severity":"moderate",'
                '"reason":"An insult."}'
            )
        return '{"verdict":"no","category":"none","severity":"none","reason":"Civil."}'
    context = last.split("Context: ", 1)[-1].split("\nClaim: ", 1)[0]
    claim = last.rsplit("Claim: ", 1)[-1].split("\n")[0]
    supported = claim.strip().rstrip(".") in context
    verdict = "no" if supported else "yes"
    return json.dumps({"verdict": verdict, "reason": "Checked."}, separators=(",", ":"))


class FakeJudge(Judge):
    """A judge on the fake engine: the scorers' whole pipeline, with scripted replies.

    `script(prompt)` returns the JSON text the fake model writes after the prompt's answer
    cue (the prompts end with "Answer: ", "Claims: " or "Explanation: "); the default,
    `rule_script`, follows plain rules a test can predict.
    """

    def __init__(
        self,
        script: Script = rule_script,
        *,
        slots: int = 4,
        n_ctx: int = 20000,
        meaningful: bool = True,
        step_seconds: float = 0.0,
        cache_prefixes: bool = False,
        extracts_claims: bool | None = None,
        prompt_cache_mib: float | None = 0,
        keep_prompts: int | None = None,
        window_tokens: int | None = None,
    ) -> None:
        engine = FakeEngine(script, marker=ANSWER_CUES, step_seconds=step_seconds, n_ctx=n_ctx)
        super().__init__(
            engine,
            slots=slots,
            max_prefixes=slots + 2,
            token_budget=256,
            name="fake-judge",
            meaningful=meaningful,
            cache_prefixes=cache_prefixes,
            extracts_claims=extracts_claims,
            prompt_cache_mib=prompt_cache_mib,
            keep_prompts=keep_prompts,
            window_tokens=window_tokens,
        )


def assert_scheduler_idle(
    scheduler: Scheduler, engine: FakeEngine | None = None, *, runtime: BatchRuntime | None = None
) -> None:
    """Nothing leaked once every request is done: no queue, no running sequence, every slot
    id free; what the KV cache still holds is idle groups kept for later requests (kept
    prompts, cached prefixes and the prefixes they start from), with their cells and ids
    accounted for. `engine`: a fake engine whose cache must hold exactly those groups.
    `runtime`: the worker driving `scheduler`, waited for first (the steps a finished
    request leaves behind run after its future resolves)."""
    if runtime is not None:
        assert runtime.wait_idle(timeout=60), "the scheduler's worker never went idle"
    groups = list(scheduler.groups.values())
    assert not scheduler.has_work() and not scheduler.waiting and not scheduler.running
    assert all(g.ready for g in groups)
    kept = [g for g in groups if g.kept]
    assert all(g.logits is not None for g in kept)  # what a repeat starts from
    # kept prompts swap ids with the slots' pool: counts per pool hold, and every id once
    assert len(scheduler._free_seq_ids) == scheduler.max_num_seqs
    assert len(scheduler.prefixes.free_kept_ids) + len(kept) == scheduler.max_kept_prompts
    assert len(scheduler.prefixes.free_ids) + len(groups) - len(kept) == scheduler.max_num_prefixes
    ids = [g.seq_id for g in groups] + scheduler._free_seq_ids
    ids += scheduler.prefixes.free_ids + scheduler.prefixes.free_kept_ids
    total = scheduler.max_num_seqs + scheduler.max_num_prefixes + scheduler.max_kept_prompts
    assert sorted(ids) == list(range(total))
    children = {id(g.parent) for g in groups if g.parent is not None}
    for group in groups:
        refs = sum(1 for g in groups if g.parent is group)
        assert group.num_refs == refs
        assert group.auto or scheduler.prefixes.cache_prefixes or id(group) in children
    assert scheduler.num_reserved_cells == sum(g.own_cells for g in groups)
    if engine is not None:  # nothing is pending (no work): the cache is exactly the groups
        assert engine.kv == {g.seq_id: list(g.key) for g in groups}
