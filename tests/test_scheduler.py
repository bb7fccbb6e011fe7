"""The scheduler state machine, driven by the fake engine: exact and fast."""

from __future__ import annotations

import itertools
import json
import threading

import pytest

from localjudge.errors import GenerationError, PromptTooLongError, RequestCancelled
from localjudge.grammar import compile_grammar, load_schema
from localjudge.scheduler import (
    BatchRuntime,
    GenerationRequest,
    Scheduler,
    prefix_cache,
    split_shared_prefix,
)
from localjudge.testing import FakeEngine, assert_scheduler_idle

PREFIX = "Context: the sky is blue and grass is green.\n"


def verdict_script(prompt: str) -> str:
    claim = prompt.split("Claim:")[-1].split("\n")[0].strip()
    verdict = "yes" if "moon" in claim else "no"
    return json.dumps({"verdict": verdict, "reason": f"checked {claim}"}, separators=(",", ":"))


@pytest.fixture
def grammar(fake_vocabulary, tmp_home):
    return compile_grammar(load_schema("hallucination_verdict"), fake_vocabulary)


def make_runtime(vocabulary, script=verdict_script, **kwargs):
    engine = FakeEngine(
        script,
        prefill_cells=kwargs.get("prefill_cells", 0),
        swa_window=kwargs.get("swa_window", 0),
    )
    options = {"n_ctx": 4000, "max_num_seqs": 4, "max_num_prefixes": 2, "token_budget": 64} | kwargs
    scheduler = Scheduler(vocabulary=vocabulary, **options)
    return engine, scheduler, BatchRuntime(engine, scheduler, engine.tokenize)


def claim_request(grammar, claim, *, prefix=PREFIX, max_tokens=60):
    return GenerationRequest(
        prefix=prefix, suffix=f"Claim: {claim}\n>", grammar=grammar, max_tokens=max_tokens
    )


def test_split_shared_prefix():
    assert split_shared_prefix([1, 2, 3], [1, 2, 3, 4]) == 3
    assert split_shared_prefix([1, 2, 9], [1, 2, 3, 4]) == 2
    assert split_shared_prefix([1, 2, 3], [1, 2, 3]) == 2  # keep one prompt token
    assert split_shared_prefix([], [1]) == 0


def test_many_claims_share_one_prefix_and_all_answer(fake_vocabulary, grammar):
    engine, scheduler, runtime = make_runtime(fake_vocabulary)
    claims = [f"c{i} {'moon' if i % 3 == 0 else 'sky'}" for i in range(10)]
    results = runtime.run([claim_request(grammar, c) for c in claims])
    runtime.close()
    for claim, result in zip(claims, results, strict=True):
        assert result.value == json.loads(verdict_script(f"Claim: {claim}\n"))
        assert result.finish_reason == "stop"
        choice = result.choice("verdict")
        assert choice.chosen == result.value["verdict"]
        assert choice.probabilities[choice.chosen] > 0.99
    prefix_len = len(engine.tokenize(PREFIX))
    # reused + evaluated is each request's whole prompt; the first user paid for the prefix
    for claim, result in zip(claims, results, strict=True):
        prompt = len(engine.tokenize(PREFIX + f"Claim: {claim}\n>"))
        assert result.counts.prefix_reused + result.counts.prompt_evaluated == prompt
    assert sum(r.counts.prefix_reused == prefix_len for r in results) >= len(claims) - 2
    # the prefix is evaluated once per prefix group lifetime, not once per claim
    prefix_evals = sum(r.counts.prompt_evaluated for r in results) - sum(
        len(engine.tokenize(PREFIX + f"Claim: {c}\n>")) - prefix_len for c in claims
    )
    assert prefix_evals < 3 * prefix_len
    assert max(len([t for t in p.tokens if t.logits]) for p in engine.plans) == 4  # 4 slots batched
    assert not scheduler.has_work() and scheduler.num_reserved_cells == 0


def test_several_prefix_groups_alive_at_once(fake_vocabulary, grammar):
    engine, scheduler, runtime = make_runtime(fake_vocabulary, max_num_seqs=6, max_num_prefixes=3)
    prefixes = [f"Context: fact number {i} is true.\n" for i in range(3)]
    requests = [
        claim_request(grammar, f"p{i} c{j}", prefix=p)
        for i, p in enumerate(prefixes)
        for j in range(3)
    ]
    results = runtime.run(requests)
    runtime.close()
    assert all(not isinstance(r, Exception) for r in results)
    assert max(len(p.copies) for p in engine.plans) >= 2
    assert engine.kv == {}  # every sequence and prefix was removed at the end


def test_output_is_deterministic_for_a_fixed_configuration(fake_vocabulary, grammar):
    outputs = []
    for _ in range(2):
        _, _, runtime = make_runtime(fake_vocabulary, script=lambda p: '{"verdict": "x"}')
        results = runtime.run([claim_request(grammar, f"c{i}") for i in range(5)])
        runtime.close()
        outputs.append([r.text for r in results])
    assert outputs[0] == outputs[1]


def test_budget_forces_a_valid_closing(fake_vocabulary, grammar):
    def long_script(prompt):
        return json.dumps({"verdict": "no", "reason": "x" * 200}, separators=(",", ":"))

    _, _, runtime = make_runtime(fake_vocabulary, script=long_script)
    for budget in range(grammar.min_tokens, grammar.min_tokens + 12):
        result = runtime.submit(claim_request(grammar, "c", max_tokens=budget)).result()
        assert result.counts.generated <= budget
        assert result.value["verdict"] == "no"
        assert result.finish_reason == "budget"
    runtime.close()


def test_budget_below_schema_minimum_fails_alone(fake_vocabulary, grammar):
    _, _, runtime = make_runtime(fake_vocabulary)
    bad = runtime.submit(claim_request(grammar, "c", max_tokens=grammar.min_tokens - 1))
    good = runtime.submit(claim_request(grammar, "d"))
    with pytest.raises(GenerationError, match="shortest valid JSON"):
        bad.result()
    assert good.result().value["verdict"] == "no"
    runtime.close()


def test_admission_waits_for_kv_space(fake_vocabulary, grammar):
    # room for the prefix and about two requests at a time, not four
    prompt_len = len(FakeEngine(verdict_script).tokenize(PREFIX + "Claim: c0 sky\n>"))
    engine, scheduler, runtime = make_runtime(fake_vocabulary, n_ctx=prompt_len + 2 * 60 + 10)
    results = runtime.run([claim_request(grammar, f"c{i} sky") for i in range(6)])
    runtime.close()
    assert all(r.value["verdict"] == "no" for r in results)
    assert max(len([t for t in p.tokens if t.logits]) for p in engine.plans) <= 2


def test_request_that_cannot_fit_fails_while_others_finish(fake_vocabulary, grammar):
    _, _, runtime = make_runtime(fake_vocabulary, n_ctx=300)
    huge = runtime.submit(claim_request(grammar, "x" * 400))
    small = [runtime.submit(claim_request(grammar, f"c{i}")) for i in range(3)]
    with pytest.raises(PromptTooLongError, match="exceeds the judge context of 300 tokens"):
        huge.result()
    assert [f.result().value["verdict"] for f in small] == ["no"] * 3
    runtime.close()


def test_empty_prompt_is_an_error(fake_vocabulary, grammar):
    _, _, runtime = make_runtime(fake_vocabulary)
    with pytest.raises(GenerationError, match="empty prompt"):
        runtime.submit(GenerationRequest(prefix="", suffix="  ", grammar=grammar)).result()
    runtime.close()


def test_a_prompt_sent_again_is_not_tokenized_again(fake_vocabulary, grammar):
    engine, _, _ = make_runtime(fake_vocabulary)
    calls: list[str] = []

    def tokenize(text: str) -> list[int]:
        calls.append(text)
        return engine.tokenize(text)

    runtime = BatchRuntime(engine, Scheduler(vocabulary=fake_vocabulary, n_ctx=4000), tokenize)
    runtime.max_seen_tokens = 2 * len(engine.tokenize(PREFIX + "Claim: c0 sky\n>"))
    first = runtime.tokenize_request(claim_request(grammar, "c0 sky"))
    assert calls == [PREFIX + "Claim: c0 sky\n>", PREFIX]
    again = runtime.tokenize_request(claim_request(grammar, "c0 sky"))
    assert len(calls) == 2  # neither the prompt nor its prefix tokenized again
    assert (again.prefix_tokens, again.prompt_tokens, again.prefix_cuts) == (
        first.prefix_tokens,
        first.prompt_tokens,
        first.prefix_cuts,
    )
    again.prompt_tokens.append(-1)  # each request gets lists of its own
    assert runtime.tokenize_request(claim_request(grammar, "c0 sky")).prompt_tokens == (
        first.prompt_tokens
    )
    runtime.tokenize_request(claim_request(grammar, "c1 sky"))
    runtime.tokenize_request(claim_request(grammar, "c2 sky"))  # bounded: c0 leaves
    runtime.tokenize_request(claim_request(grammar, "c0 sky"))
    assert calls.count(PREFIX + "Claim: c0 sky\n>") == 2
    # the same text cut into other prefix segments is another request
    runtime.tokenize_request(
        GenerationRequest(prefix="", suffix=PREFIX + "Claim: c0 sky\n>", grammar=grammar)
    )
    assert calls.count(PREFIX + "Claim: c0 sky\n>") == 3
    runtime.close()


def test_cancel_mid_run(fake_vocabulary, grammar):
    engine, scheduler, runtime = make_runtime(fake_vocabulary, max_num_seqs=2)
    requests = [claim_request(grammar, f"c{i}") for i in range(4)]
    # drive the state machine by hand: cancel one running and one waiting request
    for request in requests:
        scheduler.add(runtime.tokenize_request(request))
    for _ in range(3):
        step = scheduler.schedule()
        scheduler.update_from_output(step, engine.execute(step.plan))
    assert scheduler.cancel(requests[0].request_id)
    assert scheduler.cancel(requests[3].request_id)
    while scheduler.has_work():
        step = scheduler.schedule()
        scheduler.update_from_output(step, engine.execute(step.plan))
    finished = {f.request_id: f for f in scheduler.take_finished()}
    assert isinstance(finished[requests[0].request_id].error, RequestCancelled)
    assert isinstance(finished[requests[3].request_id].error, RequestCancelled)
    assert finished[requests[1].request_id].result.value["verdict"] == "no"
    assert finished[requests[2].request_id].result.value["verdict"] == "no"
    assert engine.kv == {} and scheduler.num_reserved_cells == 0


def test_jump_forward_gives_identical_output_and_skips_logits(fake_vocabulary, tmp_home):
    # a vocabulary where the verdict boilerplate has only one spelling, so tokens are forced
    from localjudge.grammar import build_vocabulary
    from localjudge.testing import FakeTokenizer

    tokenizer = FakeTokenizer()
    vocabulary = build_vocabulary(
        [
            (i, p.encode(), 0 if i > 1 else 8)
            for i, p in enumerate(tokenizer.pieces)
            if p not in ('{"', '": "', '", "')
        ],
        eos_id=1,
        n_vocab=tokenizer.n_vocab,
    )
    grammar = compile_grammar(load_schema("hallucination_verdict"), vocabulary)
    runs = {}
    for jump in (False, True):
        engine = FakeEngine(verdict_script, tokenizer=tokenizer)
        scheduler = Scheduler(
            vocabulary=vocabulary, n_ctx=4000, max_num_seqs=3, token_budget=64, jump_forward=jump
        )
        runtime = BatchRuntime(engine, scheduler, engine.tokenize)
        results = runtime.run([claim_request(grammar, f"c{i} moon") for i in range(5)])
        runtime.close()
        runs[jump] = (
            [r.text for r in results],
            sum(p.num_logits for p in engine.plans),
            scheduler.stats.num_forced_tokens,
        )
    assert runs[True][0] == runs[False][0]
    assert runs[True][2] > 0 and runs[False][2] == 0
    assert runs[True][1] < runs[False][1]


class TimedFakeEngine(FakeEngine):
    """Reports 1 ms per token plus 10 ms per step as each step's engine time."""

    def execute(self, plan):
        output = super().execute(plan)
        output.seconds = 0.001 * len(plan.tokens) + 0.01
        return output


def test_phase_counters_read_as_llama_batched_bench_does(fake_vocabulary, grammar):
    # steps of prompt tokens only are its prompt phase; steps in which n sequences feed one
    # token each with logits are its generation phase at batch size n. With the head (the
    # default): prefix and claims' prompts go in steps without logits, the heads in a step
    # of their own; forced tokens (several for a sequence, one logits row) are neither
    engine = TimedFakeEngine(verdict_script)
    scheduler = Scheduler(vocabulary=fake_vocabulary, n_ctx=4000, max_num_seqs=4, token_budget=64)
    runtime = BatchRuntime(engine, scheduler, engine.tokenize)
    claims = ["c1 moon", "c2 sky", "c3 moon is far away", "c4"]  # replies of four lengths
    runtime.run([claim_request(grammar, claim) for claim in claims])
    first = runtime.stats
    prompt_plans = [p for p in engine.plans if p.tokens and not p.num_logits]
    assert first.prompt_phase_steps == len(prompt_plans) >= 2  # the prefix, then the claims
    assert first.prompt_phase_tokens == sum(len(p.tokens) for p in prompt_plans)
    # the claims' prompts overflow the 64-token budget: the rest goes with the heads, and
    # that step is not counted
    assert 0 < first.prompt_phase_tokens < first.num_prompt_tokens
    assert first.prompt_phase_tokens_per_s == pytest.approx(
        first.prompt_phase_tokens / (0.001 * first.prompt_phase_tokens + 0.01 * len(prompt_plans))
    )
    shapes = {}
    for plan in engine.plans:
        if plan.tokens and plan.num_logits == len(plan.tokens):
            shapes[len(plan.tokens)] = shapes.get(len(plan.tokens), 0) + 1
    assert len(shapes) >= 3  # as the replies end, the steps shrink: 4, 3, 2 (and 1) sequences
    assert first.num_head_tokens > 0 and first.num_forced_tokens > first.num_head_tokens
    assert {n: steps for n, (steps, _) in first.generation_by_batch.items()} == shapes
    for n in shapes:
        assert first.generation_tokens_per_s_at(n) == pytest.approx(n / (0.001 * n + 0.01))
    assert first.generation_tokens_per_s_at(5) is None

    # a snapshot is not changed by later steps, and `since` counts what happened after it
    runtime.run([claim_request(grammar, "c9 sky")])
    runtime.close()
    assert {n: steps for n, (steps, _) in first.generation_by_batch.items()} == shapes
    later = runtime.stats.since(first)
    assert set(later.generation_by_batch) == {1} and later.num_steps > 0
    assert later.generation_by_batch[1][0] == runtime.stats.generation_by_batch[1][0] - (
        shapes.get(1, 0)
    )


def test_the_head_is_evaluated_with_the_prompt(fake_vocabulary, grammar):
    # `{"verdict":"` is fixed by the schema: it goes into the batch with the prompt, and the
    # prompt's logits are read where the verdict is chosen; the output is the same
    requests = [claim_request(grammar, f"c{i} {'moon' if i % 2 else 'sky'}") for i in range(3)]
    runs = {}
    for jump, heads in ((False, True), (True, False), (True, True)):
        engine, scheduler, runtime = make_runtime(fake_vocabulary, jump_forward=jump, heads=heads)
        runs[jump, heads] = (runtime.run(requests), engine, scheduler)
        runtime.close()
    plain, _, _ = runs[False, True]  # no jump-forward: no head either
    headless, _, without = runs[True, False]  # the head fed after the prompt's logits
    headed, engine, scheduler = runs[True, True]
    assert without.stats.num_head_tokens == 0
    for other in (plain, headless):
        assert [r.text for r in headed] == [r.text for r in other]
        assert [r.choices for r in headed] == [r.choices for r in other]
    head_len = scheduler.stats.num_head_tokens // len(requests)
    assert head_len >= 2 and scheduler.stats.num_head_tokens == head_len * len(requests)
    for result, request in zip(headed, requests, strict=True):
        assert result.text.startswith('{"verdict":"')
        # the head is output (forced), not prompt: the prompt counts are the prompt's
        prompt = engine.tokenize(request.prompt)
        assert result.counts.prefix_reused + result.counts.prompt_evaluated == len(prompt)
        assert result.counts.forced >= head_len
    assert sum(r.counts.prompt_evaluated for r in headed) == scheduler.stats.num_prompt_tokens
    # each request's first logits row is read after the head's last token
    first_rows = {}
    for plan in engine.plans:
        for token in plan.tokens:
            if token.logits and token.seq_id < scheduler.max_num_seqs:
                first_rows.setdefault(token.seq_id, token.token)
    assert len(first_rows) == len(requests)
    assert all(
        b'{"verdict":"'.endswith(fake_vocabulary.token_bytes[token])
        for token in first_rows.values()
    )


def test_thread_safe_submission_from_many_producers(fake_vocabulary, grammar):
    _, _, runtime = make_runtime(fake_vocabulary)
    results: dict[str, str] = {}
    lock = threading.Lock()

    def producer(n):
        for j in range(5):
            claim = f"t{n} c{j} {'moon' if j % 2 else 'sky'}"
            value = runtime.submit(claim_request(grammar, claim)).result().value
            with lock:
                results[claim] = value["verdict"]

    threads = [threading.Thread(target=producer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    runtime.close()
    assert len(results) == 20
    assert all((v == "yes") == ("moon" in k) for k, v in results.items())


def test_closed_runtime_rejects_and_fails_pending(fake_vocabulary, grammar):
    _, _, runtime = make_runtime(fake_vocabulary)
    runtime.close()
    with pytest.raises(GenerationError, match="closed"):
        runtime.submit(claim_request(grammar, "c")).result()


def drive(scheduler, engine, max_steps=100_000):
    """Run the state machine by hand until it is idle (a stalled request fails the test
    after `max_steps`); results by request id."""
    for _ in range(max_steps):
        if not scheduler.has_work():
            break
        step = scheduler.schedule()
        scheduler.update_from_output(step, engine.execute(step.plan))
    assert not scheduler.has_work(), f"still busy after {max_steps} steps"
    return {f.request_id: f.result or f.error for f in scheduler.take_finished()}


def test_prefix_is_kept_for_queued_requests_with_one_slot(fake_vocabulary, grammar):
    engine, scheduler, runtime = make_runtime(fake_vocabulary, max_num_seqs=1)
    requests = [claim_request(grammar, f"c{i}") for i in range(4)]
    for request in requests:
        scheduler.add(runtime.tokenize_request(request))
    outcomes = drive(scheduler, engine)
    results = [outcomes[r.request_id] for r in requests]
    prefix_len = len(engine.tokenize(PREFIX))
    assert results[0].counts.prompt_evaluated > prefix_len  # the first request paid for the prefix
    assert all(r.counts.prompt_evaluated < prefix_len for r in results[1:])
    assert results[0].counts.prefix_reused == 0  # what it paid for is not reuse
    assert all(r.counts.prefix_reused == prefix_len for r in results[1:])
    assert scheduler.stats.num_prompt_tokens == sum(r.counts.prompt_evaluated for r in results)
    assert engine.kv == {} and not scheduler.groups


def test_interleaved_prefixes_with_one_prefix_slot_do_not_stall(fake_vocabulary, grammar):
    _, scheduler, runtime = make_runtime(fake_vocabulary, max_num_seqs=1, max_num_prefixes=1)
    prefixes = ["Context: alpha is first.\n", "Context: beta is second.\n"]
    requests = [claim_request(grammar, f"c{i}", prefix=prefixes[i % 2]) for i in range(6)]
    results = runtime.run(requests)
    runtime.close()
    assert all(r.value["verdict"] == "no" for r in results)
    assert not scheduler.groups and scheduler.num_reserved_cells == 0


def test_nested_prefixes_share_instructions_across_items(fake_vocabulary, grammar):
    engine, scheduler, runtime = make_runtime(fake_vocabulary, max_num_seqs=4, max_num_prefixes=4)
    instructions = "Judge each claim against its context. Reply in JSON.\n"
    contexts = [f"Context: item {i} says the sky is blue.\n" for i in range(3)]
    requests = [
        claim_request(grammar, f"i{i} c{j}", prefix=(instructions, context))
        for i, context in enumerate(contexts)
        for j in range(3)
    ]
    for request in requests:
        scheduler.add(runtime.tokenize_request(request))
    outcomes = drive(scheduler, engine)
    assert all(outcomes[r.request_id].value["verdict"] == "no" for r in requests)
    instructions_len = len(engine.tokenize(instructions))
    prompt_lens = [len(engine.tokenize(r.prompt)) for r in requests]
    # every prompt token is evaluated exactly once, except the instructions, shared by all items
    total_prefixes = sum(
        len(engine.tokenize(instructions + c)) - instructions_len for c in contexts
    )
    own = sum(
        n - len(engine.tokenize(instructions + contexts[k // 3])) for k, n in enumerate(prompt_lens)
    )
    assert scheduler.stats.num_prompt_tokens == instructions_len + total_prefixes + own
    parent_copies = [c for plan in engine.plans for c in plan.copies if c.p1 == instructions_len]
    assert len(parent_copies) == 3  # each item's context group starts from the instructions
    assert engine.kv == {} and not scheduler.groups and scheduler.num_reserved_cells == 0


def test_nested_prefixes_with_a_single_prefix_slot(fake_vocabulary, grammar):
    engine, scheduler, runtime = make_runtime(fake_vocabulary, max_num_seqs=2, max_num_prefixes=1)
    requests = [
        claim_request(grammar, f"c{i}", prefix=("Rules first.\n", f"Context: item {i % 2}.\n"))
        for i in range(4)
    ]
    results = runtime.run(requests)
    runtime.close()
    assert all(r.value["verdict"] == "no" for r in results)
    assert engine.kv == {} and not scheduler.groups


def test_cached_prefixes_serve_later_requests_and_are_evicted_when_needed(fake_vocabulary, grammar):
    engine, scheduler, runtime = make_runtime(fake_vocabulary, n_ctx=400, cache_prefixes=True)
    prefix_len = len(engine.tokenize(PREFIX)) - 1  # the shared part keeps one prompt token back
    first = runtime.run([claim_request(grammar, f"c{i}") for i in range(3)])
    evaluated = scheduler.stats.num_prompt_tokens
    assert scheduler.num_cached_prefixes == 1 and scheduler.num_reserved_cells > 0
    second = runtime.run([claim_request(grammar, f"c{i}") for i in range(3)])
    assert [r.value for r in second] == [r.value for r in first]
    assert (
        scheduler.stats.num_prompt_tokens - evaluated < evaluated - prefix_len
    )  # no prefill again
    assert all(r.counts.prefix_reused > 0 for r in second)
    other = "Context: a different document about the moon, long enough to need room.\n" * 3
    third = runtime.run([claim_request(grammar, "moon c", prefix=other) for _ in range(2)])
    assert all(r.value["verdict"] == "yes" for r in third)
    assert len(scheduler.groups) == 1  # the old prefix was evicted to make room
    scheduler.fail_all(GenerationError("reset"))
    assert not scheduler.groups and scheduler.num_reserved_cells == 0
    runtime.close()


# -- automatic prefixes: longest common token prefix across requests -----------------------

CONTEXT = "Context: " + " ".join(f"fact {i} holds." for i in range(12)) + "\n"


def plain_request(grammar, text, claim, max_tokens=60):
    """A request that names no prefix: the whole prompt is its own."""
    return GenerationRequest(
        prefix="", suffix=f"{text}Claim: {claim}\n>", grammar=grammar, max_tokens=max_tokens
    )


def test_auto_prefix_shares_the_common_prefix_of_concurrent_requests(fake_vocabulary, grammar):
    claims = [f"c{i} {'moon' if i % 2 else 'sky'}" for i in range(8)]
    outcomes = {}
    for auto in (0, 8):
        engine, scheduler, runtime = make_runtime(
            fake_vocabulary, max_num_prefixes=8, auto_prefix=auto
        )
        results = runtime.run([plain_request(grammar, CONTEXT, c) for c in claims])
        outcomes[auto] = (results, scheduler.stats.num_prompt_tokens)
        runtime.close()
    plain, shared = outcomes[0], outcomes[8]
    assert [r.value for r in shared[0]] == [r.value for r in plain[0]]
    context = len(FakeEngine(verdict_script).tokenize(CONTEXT))
    # without sharing the context is evaluated once per claim; with it about once
    assert plain[1] - shared[1] > 5 * context
    assert all(r.counts.prefix_reused >= context for r in shared[0][1:])


def test_auto_prefix_reuses_the_prompts_of_finished_requests(fake_vocabulary, grammar):
    engine, scheduler, runtime = make_runtime(fake_vocabulary, max_num_prefixes=8, auto_prefix=8)
    first = runtime.run([plain_request(grammar, CONTEXT, "c0 sky")])[0]
    assert first.counts.prefix_reused == 0  # it paid for its own prompt's group
    again = runtime.run([plain_request(grammar, CONTEXT, "c0 sky")])[0]
    assert again.value == first.value
    # everything but the last token was kept: that is the head's (`{"verdict":"`), not the
    # prompt's, so the whole prompt is reused
    assert again.counts.prompt_evaluated == 0
    assert again.counts.prefix_reused == first.counts.prompt_evaluated
    other = runtime.run([plain_request(grammar, CONTEXT, "c1 moon")])[0]
    assert other.value["verdict"] == "yes"
    context = len(engine.tokenize(CONTEXT))
    assert other.counts.prefix_reused >= context  # the kept prompt was split at the context
    runtime.close()


@pytest.mark.parametrize("window", [0, 8])
def test_a_long_group_is_never_split_where_its_sliding_window_may_be_gone(
    fake_vocabulary, grammar, window
):
    # llama.cpp gives cells a window behind a sequence's end to other tokens (and a saved
    # state omits them): a copy of a group's cells up to a point inside it may lack the
    # window before that point, which the fake engine leaves as holes
    engine, scheduler, runtime = make_runtime(
        fake_vocabulary, max_num_prefixes=8, auto_prefix=8, swa_window=window
    )
    first = runtime.run([plain_request(grammar, CONTEXT, "c0 sky")])[0]
    other = runtime.run([plain_request(grammar, CONTEXT, "c1 moon")])[0]
    third = runtime.run([plain_request(grammar, CONTEXT, "c2 moon")])[0]
    verdicts = [r.value["verdict"] for r in (first, other, third)]
    assert verdicts == ["no", "yes", "yes"]
    context = len(engine.tokenize(CONTEXT))
    if window:  # the context is evaluated afresh beside the first prompt's group, once
        assert other.counts.prefix_reused == 0
        assert other.counts.prompt_evaluated > context
    else:  # the first prompt's group is split at the context
        assert other.counts.prefix_reused >= context
    assert third.counts.prefix_reused >= context  # the context's group, either way
    assert_scheduler_idle(scheduler, engine, runtime=runtime)
    runtime.close()


def test_auto_prefix_splits_a_group_still_being_evaluated(fake_vocabulary, grammar):
    engine, scheduler, runtime = make_runtime(
        fake_vocabulary, max_num_prefixes=8, auto_prefix=8, token_budget=16
    )
    first = runtime.tokenize_request(plain_request(grammar, CONTEXT + CONTEXT, "c0 sky"))
    scheduler.add(first)
    for _ in range(3):  # the first prompt's group is part-way through its prefill
        step = scheduler.schedule()
        scheduler.update_from_output(step, engine.execute(step.plan))
    (group,) = scheduler.groups.values()
    assert 0 < group.num_evaluated < len(CONTEXT)
    second = runtime.tokenize_request(plain_request(grammar, CONTEXT, "c1 moon"))
    scheduler.add(second)
    finished = drive(scheduler, engine)
    assert finished[first.request.request_id].value["verdict"] == "no"
    assert finished[second.request.request_id].value["verdict"] == "yes"
    assert len(scheduler.groups) == 3  # the shared context, and each prompt below it
    assert_scheduler_idle(scheduler, engine, runtime=runtime)
    runtime.close()


def test_a_request_sent_again_while_its_prompt_is_split_is_served(fake_vocabulary, grammar):
    # the first request's prompt is evaluated whole, then split by a second request sharing
    # its context; a copy of the first, admitted in the same step, shares the split prompt
    # (it once made a second group of the same key, and the first waited forever)
    engine, scheduler, runtime = make_runtime(
        fake_vocabulary, max_num_prefixes=8, auto_prefix=8, token_budget=512
    )
    first = plain_request(grammar, CONTEXT, "c0 sky")
    scheduler.add(runtime.tokenize_request(first))
    step = scheduler.schedule()  # the first's whole prompt, but its last token, in its group
    scheduler.update_from_output(step, engine.execute(step.plan))
    again = plain_request(grammar, CONTEXT, "c0 sky")
    requests = [first, plain_request(grammar, CONTEXT, "c1 moon"), again]
    for request in requests[1:]:
        scheduler.add(runtime.tokenize_request(request))
    outcomes = drive(scheduler, engine, max_steps=200)  # a stalled request: busy forever
    results = [outcomes[r.request_id] for r in requests]
    assert results[2].value == results[0].value and results[1].value["verdict"] == "yes"
    # it shared the first's prompt: all of it (the token it evaluates is the head's)
    assert results[2].counts.prompt_evaluated == 0
    assert results[2].counts.prefix_reused == results[0].counts.prompt_evaluated
    assert_scheduler_idle(scheduler, runtime=runtime)


@pytest.mark.parametrize("seed", range(6))
def test_auto_prefix_random_arrivals_evictions_and_cancels(
    fake_vocabulary, grammar, seed, monkeypatch
):
    import random

    monkeypatch.setattr(
        prefix_cache, "MIN_PREFILL_CONTEXT_TOKENS", 8
    )  # the fake prefixes are short

    rng = random.Random(seed)
    stems = ["", CONTEXT, CONTEXT[:40], CONTEXT + "Extra: the moon is far.\n", "Short.\n"]
    engine, scheduler, runtime = make_runtime(
        fake_vocabulary,
        n_ctx=rng.choice([700, 1200, 4000]),
        max_num_seqs=rng.choice([1, 2, 4]),
        max_num_prefixes=rng.choice([1, 2, 3, 8]),
        token_budget=rng.choice([7, 16, 64]),
        auto_prefix=rng.choice([1, 4, 16]),
        max_kept_prompts=(0, 1, 3, 8)[seed % 4],  # not from rng: the streams stay as they were
        prefill_cells=(0, 300, 4000)[seed % 3],  # only named prefixes go apart: none here
        swa_window=(0, 16, 64)[seed // 2 % 3],
    )

    def new_request(n):
        stem = rng.choice(stems) + rng.choice(stems)
        claim = f"c{n % 5} {rng.choice(['moon', 'sky'])}"  # repeats: kept prompts
        return plain_request(grammar, stem, claim), claim

    run_random_arrivals(rng, engine, scheduler, runtime, new_request, steps=6, cancel_rate=0.15)


def run_random_arrivals(rng, engine, scheduler, runtime, new_request, *, steps, cancel_rate):
    """40 requests arriving between random numbers of steps, some cancelled; every one ends
    with its expected verdict or its cancellation, and the kept groups stay consistent."""
    expected, cancelled, finished = {}, set(), {}
    for n in range(40):
        request, claim = new_request(n)
        item = runtime.tokenize_request(request)
        scheduler.add(item)
        expected[item.request.request_id] = json.loads(verdict_script(f"Claim: {claim}\n"))
        for _ in range(rng.randint(0, steps)):
            if not scheduler.has_work():
                break
            step = scheduler.schedule()
            scheduler.update_from_output(step, engine.execute(step.plan))
            for done in scheduler.take_finished():
                finished[done.request_id] = done.result or done.error
        if rng.random() < cancel_rate:
            victim = rng.choice(list(expected))
            if victim not in finished and scheduler.cancel(victim):
                cancelled.add(victim)
    finished.update(drive(scheduler, engine))
    assert set(finished) == set(expected)
    for request_id, outcome in finished.items():
        if request_id in cancelled:
            assert isinstance(outcome, RequestCancelled)
        else:
            assert not isinstance(outcome, Exception), outcome
            assert outcome.value == expected[request_id]
    assert_scheduler_idle(scheduler, engine, runtime=runtime)
    scheduler.fail_all(GenerationError("reset"))
    assert not scheduler.groups and scheduler.num_reserved_cells == 0
    runtime.close()


def test_verdict_first_closes_the_json_when_no_reason_is_wanted(fake_vocabulary, grammar):
    engine, scheduler, runtime = make_runtime(fake_vocabulary)
    claims = ["c0 moon", "c1 sky", "c2 moon", "c3 sky"]
    every = runtime.run([claim_request(grammar, c) for c in claims])
    flagged = [claim_request(grammar, c) for c in claims]
    for request in flagged:
        request.reasons_for = frozenset({"yes"})
    lazy = runtime.run(flagged)
    runtime.close()
    for full, short in zip(every, lazy, strict=True):
        assert short.value["verdict"] == full.value["verdict"]
        assert short.choice("verdict").probabilities == pytest.approx(
            full.choice("verdict").probabilities
        )
        if full.value["verdict"] == "yes":  # explained as before
            assert short.value == full.value and not short.reason_skipped
        else:  # closed right after the verdict: valid JSON, an empty reason, fewer tokens
            assert short.value == {"verdict": "no", "reason": ""} and short.reason_skipped
            assert short.counts.generated < full.counts.generated
            assert short.finish_reason == "stop"


# -- the prompt cache: prefix states saved to host memory and restored ---------------------

from localjudge.scheduler.prompt_cache import PromptCache  # noqa: E402

RULES = "Judge each claim against its context and reply in JSON. " * 4 + "\n"


def report(i: int) -> str:
    return (
        f"Context: report {i}. "
        + " ".join(f"Figure {k} of report {i} is {k * i}." for k in range(8))
        + "\n"
    )


def item_requests(grammar, items, claims=2):
    return [
        claim_request(grammar, f"r{i} c{j}", prefix=(RULES, report(i)))
        for i in items
        for j in range(claims)
    ]


def run_round(scheduler, runtime, engine, requests):
    for request in requests:
        scheduler.add(runtime.tokenize_request(request))
    outcomes = drive(scheduler, engine)
    return [outcomes[r.request_id] for r in requests]


def test_long_prefixes_are_evaluated_apart_and_moved_in(fake_vocabulary, grammar, monkeypatch):
    """With a prefill context, the rules and each item's context are evaluated there, chunk
    by chunk, and their cells moved into their sequences: the same results and counts as
    in the batch, and no prefix token in any batch."""
    monkeypatch.setattr(
        prefix_cache, "MIN_PREFILL_CONTEXT_TOKENS", 8
    )  # the fake prefixes are short
    runs = {}
    for cells in (0, 4000):
        engine, scheduler, runtime = make_runtime(
            fake_vocabulary, max_num_prefixes=4, prefill_cells=cells
        )
        results = run_round(scheduler, runtime, engine, item_requests(grammar, range(3), 3))
        assert engine.kv == {} and not scheduler.groups and scheduler.num_reserved_cells == 0
        runs[cells] = (engine, scheduler, results)
    (plain, plain_scheduler, expected), (engine, scheduler, results) = runs[0], runs[4000]
    assert [r.value for r in results] == [r.value for r in expected]
    assert [r.counts for r in results] == [r.counts for r in expected]
    assert scheduler.stats.num_prompt_tokens == plain_scheduler.stats.num_prompt_tokens
    items = [runtime.tokenize_request(r) for r in item_requests(grammar, range(3))]
    rules = items[0].level_keys[0]
    contexts = {item.level_keys[1] for item in items}
    prefills = [p for plan in engine.plans for p in plan.prefills]
    assert {p.key for p in prefills} == {rules} | contexts
    for key, parent_len in [(rules, 0)] + [(key, len(rules)) for key in contexts]:
        chunks = [p for p in prefills if p.key == key]  # in order, each token once
        bounds = [parent_len] + [p.end for p in chunks]
        assert [(p.start, p.end) for p in chunks] == list(itertools.pairwise(bounds))
        assert bounds[-1] == len(key) and all(p.end - p.start <= 64 for p in chunks)
        assert all(p.parent_len == parent_len for p in chunks)
        assert len(chunks) > 1  # the budget of 64 tokens cuts them
    groups = range(4, 8)  # the prefix groups' sequence ids: after the 4 slots'
    assert not [t for plan in engine.plans for t in plan.tokens if t.seq_id in groups]
    assert [t for plan in plain.plans for t in plan.tokens if t.seq_id in groups]


def test_prompt_cache_is_bounded_by_bytes_least_recently_used_first():
    cache = PromptCache(100)
    cache.put((1,), bytearray(40))
    cache.put((2,), bytearray(40))
    assert cache.get((1,)) is not None  # (2,) is now the least recently used
    cache.put((3,), bytearray(40))
    assert (1,) in cache and (3,) in cache and (2,) not in cache
    assert cache.num_bytes == 80 and cache.stats.evicted == 1
    cache.put((4,), bytearray(101))  # larger than the whole budget: never stored
    assert (4,) not in cache and cache.stats.refused == 1 and len(cache) == 2
    cache.put((1,), bytearray(10))  # a new state for the same prefix replaces the old
    assert cache.num_bytes == 50
    with pytest.raises(ValueError):
        PromptCache(-1)


def test_saved_prefixes_are_restored_instead_of_evaluated_again(fake_vocabulary, grammar):
    engine, scheduler, runtime = make_runtime(
        fake_vocabulary, max_num_prefixes=4, prompt_cache_bytes=1 << 20
    )
    assert len(engine.tokenize(RULES + report(0))) >= 64  # long enough to be saved
    first = run_round(scheduler, runtime, engine, item_requests(grammar, range(3)))
    evaluated = scheduler.stats.num_prompt_tokens
    assert engine.kv == {} and not scheduler.groups  # nothing kept in the KV cache...
    # ...but each item's prefix (the rules and its report) was saved before it left
    assert scheduler.stats.num_states_saved == len(scheduler.prompt_cache) >= 3
    plans_before = len(engine.plans)
    second = run_round(scheduler, runtime, engine, item_requests(grammar, range(3)))
    assert [r.value for r in second] == [r.value for r in first]
    restores = [r for plan in engine.plans[plans_before:] for r in plan.restores]
    # the rules once, then each report's own cells, with the rules' cells copied in behind
    assert len(restores) == 4 and scheduler.stats.num_states_restored == 4
    # the second round evaluated each claim's own tokens and nothing else
    items = [runtime.tokenize_request(r) for r in item_requests(grammar, range(3))]
    assert [r.counts.prompt_evaluated for r in second] == [len(i.prompt_tokens) for i in items]
    assert scheduler.stats.num_prompt_tokens - evaluated == sum(len(i.prompt_tokens) for i in items)
    assert scheduler.stats.num_tokens_restored == sum(len(i.level_keys[-1]) for i in items[::2]) - (
        2 * len(items[0].level_keys[0])  # each item's share of the rules, restored once
    )
    rules = len(items[0].level_keys[0])
    sizes = sorted(len(r.data) // 4 - 1 for r in restores)  # fake states: start, then cells
    assert sizes == [rules] + sorted(len(i.prefix_tokens) - rules for i in items[::2])
    assert all(
        r.counts.prefix_reused == len(i.prefix_tokens) for r, i in zip(second, items, strict=True)
    )
    assert engine.kv == {} and scheduler.num_reserved_cells == 0


def test_a_saved_context_waits_for_instructions_evaluated_again(fake_vocabulary, grammar):
    engine, scheduler, runtime = make_runtime(
        fake_vocabulary, max_num_prefixes=4, prompt_cache_bytes=1 << 20
    )
    rules = "Rules.\n"  # under 64 tokens: evaluated again, not saved

    def requests():
        return [
            claim_request(grammar, f"r{i} c{j}", prefix=(rules, report(i)))
            for i in range(2)
            for j in range(2)
        ]

    first = run_round(scheduler, runtime, engine, requests())
    evaluated = scheduler.stats.num_prompt_tokens
    plans_before = len(engine.plans)
    second = run_round(scheduler, runtime, engine, requests())
    assert [r.value for r in second] == [r.value for r in first]
    items = [runtime.tokenize_request(r) for r in requests()]
    head = len(items[0].level_keys[0])
    # the rules are evaluated again (once per group lifetime), each report's own cells are
    # restored and get the rules' cells copied in once they are evaluated
    assert scheduler.stats.num_states_restored == 2
    own = sum(len(i.prompt_tokens) for i in items)
    assert head <= scheduler.stats.num_prompt_tokens - evaluated - own <= 2 * head
    restores = [r for plan in engine.plans[plans_before:] for r in plan.restores]
    assert all(int.from_bytes(r.data[:4], "little") == head for r in restores)
    assert_scheduler_idle(scheduler, engine, runtime=runtime)
    runtime.close()


def test_without_a_prompt_cache_a_second_round_evaluates_everything(fake_vocabulary, grammar):
    engine, scheduler, runtime = make_runtime(fake_vocabulary, max_num_prefixes=4)
    run_round(scheduler, runtime, engine, item_requests(grammar, range(3)))
    evaluated = scheduler.stats.num_prompt_tokens
    run_round(scheduler, runtime, engine, item_requests(grammar, range(3)))
    assert scheduler.stats.num_prompt_tokens == 2 * evaluated
    assert not any(plan.saves or plan.restores for plan in engine.plans)


def test_a_small_prompt_cache_keeps_the_most_recent_prefixes(fake_vocabulary, grammar):
    engine, scheduler, runtime = make_runtime(
        fake_vocabulary, max_num_seqs=2, max_num_prefixes=2, prompt_cache_bytes=1 << 20
    )
    run_round(scheduler, runtime, engine, item_requests(grammar, range(4)))
    sizes = {
        key: len(scheduler.prompt_cache.get(key)) for key in list(scheduler.prompt_cache._states)
    }
    assert len(sizes) >= 4
    # a budget for about two item states: the rules alone and the last items stay
    scheduler.prompt_cache = PromptCache(2 * max(sizes.values()) + 8)
    run_round(scheduler, runtime, engine, item_requests(grammar, range(4)))
    restored = scheduler.stats.num_states_restored
    results = run_round(scheduler, runtime, engine, item_requests(grammar, [3, 2]))
    assert scheduler.stats.num_states_restored - restored == 2  # the two most recent items
    assert all(r.value["verdict"] == "no" for r in results)


def test_admission_waits_for_the_save_of_the_prefix_it_needs(fake_vocabulary, grammar):
    engine, scheduler, runtime = make_runtime(
        fake_vocabulary, max_num_prefixes=4, prompt_cache_bytes=1 << 20
    )
    for request in item_requests(grammar, [0]):
        scheduler.add(runtime.tokenize_request(request))
    while scheduler.running or scheduler.waiting:  # run until the requests are done...
        step = scheduler.schedule()
        scheduler.update_from_output(step, engine.execute(step.plan))
    assert scheduler.has_work()  # ...the save of their prefix is still to come
    for request in item_requests(grammar, [0]):  # the same item again, before that step
        scheduler.add(runtime.tokenize_request(request))
    step = scheduler.schedule()
    assert step.plan.saves and not scheduler.running  # saved first, admitted after
    scheduler.update_from_output(step, engine.execute(step.plan))
    step = scheduler.schedule()
    # the rules, and the report's own cells with the rules' copied in behind them
    assert len(step.plan.restores) == 2 and len(step.plan.copies) >= 2 and scheduler.running
    scheduler.update_from_output(step, engine.execute(step.plan))
    results = drive(scheduler, engine)
    assert all(r.value["verdict"] == "no" for r in results.values())


def test_an_engine_failure_drops_the_saved_states(fake_vocabulary, grammar):
    engine, scheduler, runtime = make_runtime(
        fake_vocabulary, max_num_prefixes=4, prompt_cache_bytes=1 << 20
    )
    run_round(scheduler, runtime, engine, item_requests(grammar, range(2)))
    assert len(scheduler.prompt_cache) > 0
    for request in item_requests(grammar, range(2)):
        scheduler.add(runtime.tokenize_request(request))
    scheduler.schedule()  # restores planned, then the step fails
    engine.clear()
    scheduler.requeue_running(GenerationError("step failed"))
    assert len(scheduler.prompt_cache) == 0
    results = drive(scheduler, engine)
    assert all(r.value["verdict"] == "no" for r in results.values())


@pytest.mark.parametrize("seed", range(8))
def test_prompt_cache_random_arrivals_evictions_and_cancels(
    fake_vocabulary, grammar, seed, monkeypatch
):
    import random

    monkeypatch.setattr(
        prefix_cache, "MIN_PREFILL_CONTEXT_TOKENS", 8
    )  # the fake prefixes are short

    rng = random.Random(seed)
    engine, scheduler, runtime = make_runtime(
        fake_vocabulary,
        n_ctx=rng.choice([1200, 2000, 4000]),
        max_num_seqs=rng.choice([1, 2, 4]),
        max_num_prefixes=rng.choice([1, 2, 3, 8]),
        token_budget=rng.choice([16, 64, 256]),
        cache_prefixes=rng.random() < 0.5,
        prompt_cache_bytes=rng.choice([3000, 6000, 1 << 20]),
        max_kept_prompts=seed % 2,  # not from rng: the seeds' streams stay as they were
        prefill_cells=(0, 300, 4000)[seed % 3],  # 300: the rules go apart, reports do not fit
    )

    def new_request(n):
        item = rng.randrange(6)
        claim = f"r{item} c{n % 3} {rng.choice(['moon', 'sky'])}"  # some repeat
        prefix = (RULES, report(item)) if rng.random() < 0.8 else report(item)
        return claim_request(grammar, claim, prefix=prefix), claim

    run_random_arrivals(rng, engine, scheduler, runtime, new_request, steps=8, cancel_rate=0.1)
    assert scheduler.stats.num_states_restored > 0  # the cache was used, not bypassed
    assert scheduler.stats.num_prompts_kept > 0 or not scheduler.max_kept_prompts
    assert scheduler.prompt_cache.num_bytes <= scheduler.prompt_cache.max_bytes


# -- kept prompts: a finished request's prompt stays for the same request sent again -------


def test_kept_prompt_makes_a_repeated_request_evaluate_nothing(fake_vocabulary, grammar):
    claims = [f"c{i} {'moon' if i % 2 else 'sky'}" for i in range(4)]
    rounds = {}
    for kept in (0, 4):
        engine, scheduler, runtime = make_runtime(
            fake_vocabulary, max_num_prefixes=4, max_kept_prompts=kept
        )
        first = runtime.run([claim_request(grammar, c) for c in claims])
        before = scheduler.stats.num_prompt_tokens
        second = runtime.run([claim_request(grammar, c) for c in claims])
        rounds[kept] = (first, second, scheduler.stats.num_prompt_tokens - before)
        assert [r.value for r in second] == [r.value for r in first]
        if kept:
            assert all(r.counts.prompt_evaluated == 0 for r in second)
            assert len([g for g in scheduler.groups.values() if g.kept]) == len(claims)
            assert_scheduler_idle(scheduler, engine, runtime=runtime)
        runtime.close()
    assert rounds[4][2] == 0  # the cells and the logits were kept
    own = [
        len(FakeEngine(verdict_script).tokenize(f"Claim: {c}\n>", add_special=False))
        for c in claims
    ]
    # without kept prompts each claim is evaluated again, and the prefix (not cached) too
    assert rounds[0][2] == sum(own) + len(FakeEngine(verdict_script).tokenize(PREFIX))
    assert [r.value for r in rounds[4][1]] == [r.value for r in rounds[0][1]]


def test_kept_prompt_gives_a_repeated_request_the_numbers_of_the_first(fake_vocabulary, grammar):
    def verdict_odds(requests, kept):
        engine = FakeEngine(verdict_script, shape_noise=1e-3)
        scheduler = Scheduler(
            vocabulary=fake_vocabulary, n_ctx=4000, max_num_prefixes=2, max_kept_prompts=kept
        )
        runtime = BatchRuntime(engine, scheduler, engine.tokenize)
        rounds = [runtime.run([claim_request(grammar, c) for c in claims]) for claims in requests]
        runtime.close()
        return [[r.choice("verdict").probabilities for r in results] for results in rounds]

    # a logit's rounding moves with the batch shape (emulated), and the repeat is evaluated
    # in another shape than the first request, which read its prompt's logits with the prefill
    first, again = verdict_odds([["c1 moon"], ["c1 moon"]], kept=1)
    assert again == first  # exactly: the kept cells and logits, and the same steps after
    ((_, mixed),) = verdict_odds([["c2 sky", "c1 moon"]], kept=0)
    assert mixed["no"] != first[0]["no"]  # in another batch the same request reads other numbers


def test_a_rerun_judges_the_requests_still_kept_first(fake_vocabulary, grammar):
    engine, scheduler, runtime = make_runtime(
        fake_vocabulary, max_num_seqs=2, max_num_prefixes=2, max_kept_prompts=2
    )
    claims = [f"c{i} sky" for i in range(4)]
    runtime.run([claim_request(grammar, c) for c in claims])  # c2 and c3 stay kept
    again = runtime.run([claim_request(grammar, c) for c in claims])
    # in turn, c0 and c1 would have evicted them on finishing; before their turn, they
    # evaluate nothing
    assert [r.counts.prompt_evaluated for r in again[2:]] == [0, 0]
    assert all(r.counts.prompt_evaluated > 0 for r in again[:2])
    assert scheduler.stats.num_kept_prompts_used == 2
    assert_scheduler_idle(scheduler, engine, runtime=runtime)
    runtime.close()


def test_requests_admitted_before_their_turn_never_starve_the_head(fake_vocabulary, grammar):
    engine, scheduler, runtime = make_runtime(
        fake_vocabulary, max_num_seqs=1, max_num_prefixes=2, max_kept_prompts=3
    )
    # driven by hand, both rounds (a runtime's worker would race this test for the steps)
    run_round(
        scheduler, runtime, engine, [claim_request(grammar, c) for c in ("a sky", "b sky", "c sky")]
    )
    requests = [claim_request(grammar, c) for c in ("x sky", "a sky", "b sky", "c sky")]
    for request in requests:
        scheduler.add(runtime.tokenize_request(request))
    order = list(drive(scheduler, engine))  # one slot: finished in admission order
    # one request (as many as there are slots) passes x; then x's turn comes. x's prompt,
    # kept in turn, evicted b's (least recently used), so c, still kept, passes b
    assert order == [requests[i].request_id for i in (1, 0, 3, 2)]
    assert_scheduler_idle(scheduler, engine, runtime=runtime)
    runtime.close()


def test_kept_prompts_are_bounded_least_recently_used_out_first(fake_vocabulary, grammar):
    engine, scheduler, runtime = make_runtime(
        fake_vocabulary, max_num_seqs=1, max_num_prefixes=2, max_kept_prompts=2
    )
    runtime.run([claim_request(grammar, f"c{i} sky") for i in range(4)])
    kept = sorted(g.key[-8:] for g in scheduler.groups.values() if g.kept)
    assert len(kept) == 2 and len(scheduler.prefixes.free_kept_ids) == 0
    again = runtime.run([claim_request(grammar, f"c{i} sky") for i in (3, 2, 0)])
    # the last two are kept; the first one was evicted and is evaluated whole
    assert [r.counts.prompt_evaluated for r in again][:2] == [0, 0]
    assert again[2].counts.prompt_evaluated > 1
    assert_scheduler_idle(scheduler, engine, runtime=runtime)
    runtime.close()


def test_kept_prompts_give_way_when_cells_are_needed(fake_vocabulary, grammar):
    engine, scheduler, runtime = make_runtime(
        fake_vocabulary, n_ctx=700, max_num_prefixes=2, max_kept_prompts=8
    )
    for round_ in range(3):
        results = runtime.run([claim_request(grammar, f"c{i} r{round_}") for i in range(8)])
        assert all(r.value["verdict"] in ("yes", "no") for r in results)
        assert scheduler.num_reserved_cells <= scheduler.n_ctx
    assert_scheduler_idle(scheduler, engine, runtime=runtime)
    runtime.close()


def test_kept_prompts_leaving_the_kv_cache_come_back_from_host_memory(fake_vocabulary, grammar):
    engine, scheduler, runtime = make_runtime(
        fake_vocabulary,
        max_num_seqs=2,
        max_num_prefixes=2,
        max_kept_prompts=2,
        prompt_cache_bytes=1 << 20,
    )
    first = run_round(scheduler, runtime, engine, item_requests(grammar, range(3)))
    evaluated = scheduler.stats.num_prompt_tokens
    plans_before = len(engine.plans)
    second = run_round(scheduler, runtime, engine, item_requests(grammar, range(3)))
    assert [r.value for r in second] == [r.value for r in first]
    # nothing evaluated: two claims were still kept; the other four got their own cells
    # back from host memory, behind their context (restored too, or still alive)
    assert scheduler.stats.num_prompt_tokens == evaluated
    assert all(r.counts.prompt_evaluated == 0 for r in second)
    assert scheduler.stats.num_kept_prompts_used == 2
    assert scheduler.stats.num_kept_prompts_restored == 4
    items = [runtime.tokenize_request(r) for r in item_requests(grammar, range(3))]
    for item in items:  # its prompt tokens end with the head its sequence takes
        scheduler._new_sequence(item)
    own = {len(i.prefix_tokens): len(i.prompt_tokens) for i in items}
    # the fake's saved states begin with their first position: a tail starts after its prefix
    starts = [
        (int.from_bytes(r.data[:4], "little"), len(r.data) // 4 - 1)
        for plan in engine.plans[plans_before:]
        for r in plan.restores
    ]
    rules = len(items[0].level_keys[0])
    tails = [(start, size) for start, size in starts if start > rules]  # after a report
    assert len(tails) == 4
    assert all(size == own[start] for start, size in tails)  # its own cells, not its prefix's
    assert_scheduler_idle(scheduler, engine, runtime=runtime)
    runtime.close()


def test_saved_logits_serve_only_requests_whose_first_choice_they_hold(fake_vocabulary, grammar):
    # without jump-forward no head is taken: the schema's request and the free text one
    # have the same prompt tokens (with it, the schema's ends with `{"verdict":"`)
    engine, scheduler, runtime = make_runtime(
        fake_vocabulary,
        max_num_seqs=1,
        max_kept_prompts=1,
        prompt_cache_bytes=1 << 20,
        jump_forward=False,
    )
    prefix, suffix = (RULES, report(0)), "Claim: c0 sky\n>"

    def judged(request):
        (result,) = runtime.run([request, claim_request(grammar, "c9 sky", prefix=prefix)])[:1]
        return result  # the second request evicts the first one's kept prompt

    claim = judged(GenerationRequest(prefix=prefix, suffix=suffix, grammar=grammar))
    assert claim.counts.prompt_evaluated > 0
    # the same prompt as free text: the saved logits hold only what the schema's first
    # choice reads, not the whole row free text chooses from, so it is evaluated again
    text = judged(GenerationRequest(prefix=prefix, suffix=suffix, grammar=None, max_tokens=60))
    assert text.counts.prompt_evaluated > 0 and json.loads(text.value) == claim.value
    assert scheduler.stats.num_kept_prompts_restored == 0
    # its whole row replaced the saved one, and serves the schema too
    again = judged(GenerationRequest(prefix=prefix, suffix=suffix, grammar=grammar))
    assert again.counts.prompt_evaluated == 0 and again.value == claim.value
    assert scheduler.stats.num_kept_prompts_restored == 1
    assert_scheduler_idle(scheduler, engine, runtime=runtime)
    runtime.close()


def test_engine_failure_with_kept_prompts_starts_every_pool_afresh(fake_vocabulary, grammar):
    engine, scheduler, runtime = make_runtime(fake_vocabulary, max_kept_prompts=4)
    run_round(scheduler, runtime, engine, [claim_request(grammar, f"c{i} sky") for i in range(4)])
    assert any(g.kept for g in scheduler.groups.values())
    for request in [claim_request(grammar, f"c{i} moon") for i in range(2)]:
        scheduler.add(runtime.tokenize_request(request))
    scheduler.schedule()  # admitted: they hold slot ids swapped in by the kept prompts
    engine.clear()
    scheduler.requeue_running(GenerationError("lost the cache"))
    ids = scheduler._free_seq_ids + scheduler.prefixes.free_ids + scheduler.prefixes.free_kept_ids
    assert sorted(ids) == list(range(4 + 2 + 4)) and not scheduler.groups
    results = drive(scheduler, engine)
    assert all(not isinstance(r, Exception) for r in results.values()) and len(results) == 2
    assert_scheduler_idle(scheduler, engine, runtime=runtime)
    runtime.close()


@pytest.mark.parametrize("seed", range(6))
def test_kept_prompts_random_arrivals_evictions_and_cancels(
    fake_vocabulary, grammar, seed, monkeypatch
):
    import random

    monkeypatch.setattr(
        prefix_cache, "MIN_PREFILL_CONTEXT_TOKENS", 8
    )  # the fake prefixes are short

    rng = random.Random(seed)
    engine, scheduler, runtime = make_runtime(
        fake_vocabulary,
        n_ctx=rng.choice([1500, 2500, 4000]),
        max_num_seqs=rng.choice([1, 2, 4]),
        max_num_prefixes=rng.choice([1, 2, 8]),
        token_budget=rng.choice([16, 64]),
        cache_prefixes=rng.random() < 0.5,
        prompt_cache_bytes=rng.choice([0, 6000]),
        max_kept_prompts=rng.choice([1, 2, 8]),
        prefill_cells=(0, 300, 4000)[seed % 3],
    )

    def new_request(n):  # few distinct requests: most are sent again
        item = rng.randrange(3)
        claim = f"r{item} c{rng.randrange(3)} {'moon' if item else 'sky'}"
        prefix = (RULES, report(item)) if rng.random() < 0.7 else ""
        return claim_request(grammar, claim, prefix=prefix), claim

    run_random_arrivals(rng, engine, scheduler, runtime, new_request, steps=8, cancel_rate=0.1)
    assert scheduler.stats.num_kept_prompts_used > 0


def test_the_field_that_decides_reasons_comes_from_the_request(tmp_home):
    """A schema of the user's own (`label`, `note`): the scheduler reads the decision from
    the field the request names, not from a literal "verdict"."""
    from localjudge.testing import FakeJudge

    schema = {
        "type": "object",
        "properties": {
            "label": {"type": "string", "enum": ["ok", "bad"]},
            "note": {"type": "string"},
        },
        "required": ["label", "note"],
        "additionalProperties": False,
    }
    with FakeJudge(
        lambda prompt: '{"label":"ok","note":"A long note on why it is fine."}'
    ) as judge:

        def ask(**fields):
            request = judge.request("Text: x\nAnswer: ", schema, max_tokens=64, **fields)
            (result,) = judge.generate_many([request])
            return result

        named = ask(reasons_for=frozenset({"bad"}), decision_field="label", reason_field="note")
        default = ask(reasons_for=frozenset({"bad"}))  # "verdict" is not in this schema
    assert named.value == {"label": "ok", "note": ""} and named.reason_skipped
    assert default.value["note"] == "A long note on why it is fine."
    assert named.choice("label").probabilities.keys() == {"ok", "bad"}
