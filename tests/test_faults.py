"""Fault injection: nothing a caller, an input or the engine does may crash the host, hang a
caller, or leave the scheduler holding slots. Fake engine unless marked `real`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import CancelledError
from pathlib import Path

import pytest

from localjudge.errors import GenerationError, ModelError, RequestCancelled
from localjudge.evals.live import LiveScorer
from localjudge.grammar import compile_grammar, load_schema
from localjudge.scheduler import BatchRuntime, GenerationRequest, SamplingParams, Scheduler
from localjudge.scorers import create_hallucination_scorer, create_toxicity_scorer
from localjudge.testing import FakeEngine, FakeJudge, assert_scheduler_idle

REPO = Path(__file__).resolve().parents[1]
PREFIX = "Context: the sky is blue.\n"


def verdict_script(prompt: str) -> str:
    return '{"verdict":"no","reason":"checked"}'


def judge_script(prompt: str) -> str:
    if prompt.endswith("Explanation: "):
        return '{"reason":"Explained."}'
    if "Statement: " in prompt.rsplit("\n\n", 1)[-1]:
        return '{"verdict":"no","category":"none","severity":"none","reason":"civil"}'
    return '{"verdict":"no","reason":"supported"}'


@pytest.fixture
def grammar(fake_vocabulary, tmp_home):
    return compile_grammar(load_schema("hallucination_verdict"), fake_vocabulary)


def make_runtime(vocabulary, engine=None, **kwargs):
    engine = engine or FakeEngine(verdict_script)
    options = {"n_ctx": 4000, "max_num_seqs": 4, "max_num_prefixes": 2, "token_budget": 64} | kwargs
    scheduler = Scheduler(vocabulary=vocabulary, **options)
    return engine, scheduler, BatchRuntime(engine, scheduler, engine.tokenize)


def request(grammar, claim="c", **kwargs):
    return GenerationRequest(prefix=PREFIX, suffix=f"Claim: {claim}\n>", grammar=grammar, **kwargs)


def assert_clean(scheduler: Scheduler) -> None:
    """Nothing held: every slot and prefix id free, no reserved KV cells, no queue."""
    assert not scheduler.waiting and not scheduler.running and not scheduler.groups
    assert scheduler.num_reserved_cells == 0
    assert sorted(scheduler._free_seq_ids) == list(range(scheduler.max_num_seqs))
    assert len(scheduler.prefixes.free_ids) == scheduler.max_num_prefixes
    assert not scheduler.prefixes.awaited


def test_wait_idle_waits_for_the_steps_finished_requests_left(fake_vocabulary, grammar):
    # a request's future resolves in the step that finishes it; the removal of its cells
    # runs in the next step, which `wait_idle` waits for
    release = threading.Event()

    class SlowRemovals(FakeEngine):
        def execute(self, plan):
            if plan.removals and not plan.tokens:
                release.wait(timeout=30)
            return super().execute(plan)

    engine, scheduler, runtime = make_runtime(fake_vocabulary, engine=SlowRemovals(verdict_script))
    runtime.cancel("never-submitted")  # no worker yet: nothing to wait for
    assert runtime.wait_idle(timeout=0)
    outcomes = runtime.run([request(grammar, f"c{i}") for i in range(3)])
    assert all(o.value == {"verdict": "no", "reason": "checked"} for o in outcomes)
    assert not runtime.wait_idle(timeout=0.2)  # the removal step is still running
    release.set()
    assert runtime.wait_idle(timeout=10)
    assert not scheduler.has_work() and engine.kv == {}
    assert_clean(scheduler)
    runtime.close()
    assert runtime.wait_idle(timeout=0)  # a closed runtime holds nothing


# -- 2. the worker survives anything --------------------------------------------------------


def test_bad_sampling_is_refused_at_the_call_site():
    with pytest.raises(ValueError, match="seed must be None or an integer >= 0"):
        SamplingParams(temperature=0.7, seed=-1)
    with pytest.raises(ValueError, match="temperature must be a finite number"):
        SamplingParams(temperature=float("nan"))
    with pytest.raises(ValueError, match="max_tokens must be at least 1"):
        GenerationRequest(prefix="", suffix="x", grammar=None, max_tokens=0)


def test_a_request_that_cannot_be_queued_fails_alone(fake_vocabulary, grammar, monkeypatch):
    engine, scheduler, runtime = make_runtime(fake_vocabulary)
    original = Scheduler._new_sequence

    def sometimes_broken(self, item):
        if item.request.suffix.startswith("Claim: poison"):
            raise RuntimeError("numpy refused the seed")
        return original(self, item)

    monkeypatch.setattr(Scheduler, "_new_sequence", sometimes_broken)
    outcomes = runtime.run([request(grammar, "ok1"), request(grammar, "poison"), request(grammar)])
    assert isinstance(outcomes[1], GenerationError) and "numpy refused" in str(outcomes[1])
    assert outcomes[0].value["verdict"] == outcomes[2].value["verdict"] == "no"
    assert runtime.wait_idle(timeout=10)
    assert_clean(scheduler)
    runtime.close()


def test_a_scheduler_bug_fails_the_batch_and_the_worker_keeps_serving(
    fake_vocabulary, grammar, monkeypatch
):
    engine, scheduler, runtime = make_runtime(fake_vocabulary)
    calls = {"n": 0}
    original = Scheduler.schedule

    def broken_once(self):
        calls["n"] += 1
        if calls["n"] == 2:
            raise IndexError("a bug in planning")
        return original(self)

    monkeypatch.setattr(Scheduler, "schedule", broken_once)
    first = runtime.run([request(grammar, f"c{i}") for i in range(3)])
    assert all(isinstance(o, GenerationError) and "a bug in planning" in str(o) for o in first)
    second = runtime.run([request(grammar, "after")])
    assert second[0].value["verdict"] == "no"  # the same worker thread is still serving
    assert runtime.wait_idle(timeout=10)
    assert_clean(scheduler)
    runtime.close()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_dead_worker_never_strands_a_caller(fake_vocabulary, grammar, monkeypatch):
    engine, scheduler, runtime = make_runtime(fake_vocabulary)

    def die(self):
        raise SystemExit("the worker thread is gone")

    monkeypatch.setattr(BatchRuntime, "_step", die)
    future = runtime.submit(request(grammar))
    dying = runtime._thread
    with pytest.raises(GenerationError, match="the scheduler worker stopped"):
        future.result(timeout=10)
    dying.join(10)  # its exception is reported within this test, where it is expected
    monkeypatch.undo()
    assert runtime.run([request(grammar)])[0].value["verdict"] == "no"  # a new worker starts
    runtime.close()


def test_one_failed_engine_step_fails_nothing(fake_vocabulary, grammar):
    class FlakyEngine(FakeEngine):
        def execute(self, plan):
            if len(self.plans) == 5 and not getattr(self, "failed", False):
                self.failed = True
                raise GenerationError("llama_decode failed with status -3")
            return super().execute(plan)

    engine = FlakyEngine(verdict_script)
    engine, scheduler, runtime = make_runtime(fake_vocabulary, engine=engine)
    outcomes = runtime.run([request(grammar, f"c{i}") for i in range(8)])
    assert engine.failed and runtime.num_step_failures == 1
    assert all(o.value == {"verdict": "no", "reason": "checked"} for o in outcomes)
    assert runtime.wait_idle(timeout=10)
    assert_clean(scheduler)
    runtime.close()


def test_a_step_failing_while_a_prefix_is_evaluated_apart_fails_nothing(
    fake_vocabulary, grammar, monkeypatch
):
    from localjudge.scheduler import prefix_cache

    monkeypatch.setattr(
        prefix_cache, "MIN_PREFILL_CONTEXT_TOKENS", 8
    )  # the fake prefixes are short

    class FlakyPrefill(FakeEngine):
        def execute(self, plan):  # the second chunk of the first prefix evaluated apart
            if plan.prefills and plan.prefills[0].start > 0 and not getattr(self, "failed", 0):
                self.failed = True
                raise GenerationError("llama_decode of a prefix failed with status -3")
            return super().execute(plan)

    engine = FlakyPrefill(verdict_script, prefill_cells=4000)
    engine, scheduler, runtime = make_runtime(
        fake_vocabulary, engine=engine, prefill_cells=4000, token_budget=8
    )
    outcomes = runtime.run([request(grammar, f"c{i}") for i in range(8)])
    assert engine.failed and runtime.num_step_failures == 1
    assert all(o.value == {"verdict": "no", "reason": "checked"} for o in outcomes)
    assert scheduler.stats.num_tokens_apart > 0 and scheduler.prefixes.in_prefill_context is None
    assert runtime.wait_idle(timeout=10)
    assert_clean(scheduler)
    runtime.close()


def test_an_engine_that_keeps_failing_fails_its_requests_after_retries(fake_vocabulary, grammar):
    class BrokenEngine(FakeEngine):
        def execute(self, plan):
            if plan.tokens:
                raise GenerationError("the device is gone")
            return super().execute(plan)

    engine, scheduler, runtime = make_runtime(fake_vocabulary, engine=BrokenEngine(verdict_script))
    outcomes = runtime.run([request(grammar, f"c{i}") for i in range(3)])
    assert all(isinstance(o, GenerationError) and "the device is gone" in str(o) for o in outcomes)
    assert runtime.num_step_failures == BatchRuntime.max_attempts
    assert runtime.wait_idle(timeout=10)
    assert_clean(scheduler)
    runtime.close()


def test_generate_json_times_out_and_cancels(tmp_home):
    judge = FakeJudge(judge_script, step_seconds=0.05)
    with pytest.raises(GenerationError, match="no reply within"):
        judge.generate_json("Claim: slow\nAnswer: ", "hallucination_verdict", timeout=0.01)
    assert judge.runtime.wait_idle(timeout=10)
    assert_clean(judge.scheduler)
    judge.close()


# -- 4. cancellation -------------------------------------------------------------------------


def test_cancelling_futures_at_random_moments_keeps_the_worker_alive(fake_vocabulary, grammar):
    engine, scheduler, runtime = make_runtime(fake_vocabulary, max_num_seqs=3)
    futures = [runtime.submit(request(grammar, f"c{i}")) for i in range(30)]
    for future in futures[::2]:  # races with the worker resolving them
        future.cancel()
        time.sleep(0.001)
    for future in futures:
        with contextlib.suppress(CancelledError, RequestCancelled):
            future.result(timeout=10)
    assert all(f.done() for f in futures)
    assert runtime.wait_idle(timeout=10)
    assert_clean(scheduler)
    assert runtime.run([request(grammar)])[0].value["verdict"] == "no"
    runtime.close()


def test_cancelled_scorer_calls_leave_the_scheduler(tmp_home):
    judge = FakeJudge(judge_script, slots=2, step_seconds=0.02)
    scorer = create_toxicity_scorer(judge, reason="template")
    output = " ".join(f"Sentence {i} is civil." for i in range(40))

    async def main():
        task = asyncio.ensure_future(scorer.run_async({"output": output}))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(scorer.run_async({"output": output}), timeout=0.1)

    asyncio.run(main())
    # nothing of the cancelled requests is left: every slot free and the engine holding only
    # idle groups; a statement that finished before the cancel keeps its prompt, as any
    # finished request does (keep_prompts), which a slow machine's timing sometimes allows
    assert_scheduler_idle(judge.scheduler, judge.engine, runtime=judge.runtime)
    judge.close()


def test_one_failing_request_cancels_the_rest_of_its_item(tmp_home):
    judge = FakeJudge(judge_script, slots=2, step_seconds=0.01)
    scorer = create_toxicity_scorer(judge, reason="template", verdict_max_tokens=5)
    with pytest.raises(GenerationError, match="max_tokens=5 is below"):
        scorer.run({"output": " ".join(f"Sentence {i}." for i in range(20))})
    assert judge.runtime.wait_idle(timeout=10)
    assert_clean(judge.scheduler)
    judge.close()


# -- 1. close while others submit ------------------------------------------------------------


def test_close_while_threads_submit_resolves_every_future(tmp_home):
    judge = FakeJudge(judge_script, slots=2, step_seconds=0.002)
    futures, errors = [], []
    stop = threading.Event()

    def producer():
        while not stop.is_set():
            try:
                futures.append(judge.submit(judge.request("Claim: x\nAnswer: ", "reason")))
            except Exception as error:  # the API must not raise for a closed judge
                errors.append(error)

    threads = [threading.Thread(target=producer) for _ in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    judge.close()
    stop.set()
    for thread in threads:
        thread.join(10)
    assert not errors
    for future in futures:
        assert future.done() or future.exception(timeout=10) is not None
    closed = [f for f in futures if f.exception() is not None]
    assert closed and all("closed" in str(f.exception()) for f in closed)
    assert_clean(judge.scheduler)


def test_calls_on_a_closed_engine_raise_instead_of_crashing(tmp_home):
    from localjudge.engine.llama import LlamaEngine

    engine = LlamaEngine.__new__(LlamaEngine)  # the guard alone, without a model
    engine.path = Path("x.gguf")
    engine._ctx = None
    engine._closing = True
    engine._users = 0
    engine._users_changed = threading.Condition()
    with pytest.raises(ModelError, match="engine is closed"):
        engine.tokenize("hello")
    with pytest.raises(ModelError, match="engine is closed"):
        engine.detokenize([1, 2])


# -- 3. live scoring -------------------------------------------------------------------------


def test_live_close_honours_its_timeout_on_a_full_queue(tmp_home):
    judge = FakeJudge(judge_script, slots=1, step_seconds=0.05)
    live = LiveScorer([create_toxicity_scorer(judge, reason="template")], max_queue=3)
    accepted = [live.submit(output=f"Sentence {i}.") for i in range(10)]
    # the worker may take items off the queue while they are submitted: only count them
    assert live.stats.dropped >= 1 and accepted.count(True) == 10 - live.stats.dropped
    started = time.monotonic()
    stats = live.close(drain=True, timeout=0.2)
    assert time.monotonic() - started < 2.0
    assert stats.pending >= 1  # the timeout passed with work left, and says so
    live.close(drain=False, timeout=5)
    judge.close()


def test_live_watch_wraps_async_functions(tmp_home):
    judge = FakeJudge(judge_script)
    seen = []
    live = LiveScorer(
        [create_toxicity_scorer(judge, reason="template")],
        on_result=lambda run, results, errors: seen.append((run.output, errors)),
    )

    @live.watch
    async def agent(question: str) -> str:
        await asyncio.sleep(0)
        return f"An answer to {question}."

    assert asyncio.run(agent("q")) == "An answer to q."
    stats = live.close(timeout=10)
    assert stats.scored == 1 and stats.failed == 0
    assert seen == [("An answer to q.", {})]
    judge.close()


LIVE_EXIT = """
import threading, time
from localjudge import create_toxicity_scorer, LiveScorer
scorer = create_toxicity_scorer(reason="template")
live = LiveScorer([scorer], max_queue=50)
def pipeline():
    for i in range(100000):
        live.submit(output=f"Sentence {i} is civil. Another one.")
        time.sleep(0.001)
threading.Thread(target=pipeline, daemon=True).start()
time.sleep(2.0)
print("main thread done", flush=True)
"""


@pytest.mark.real
def test_interpreter_exits_with_live_scoring_running(tmp_path):
    """A live scorer nobody closed, fed by a thread that is still submitting, while the
    shared real judge is closed at exit: the process ends, cleanly."""
    script = tmp_path / "live_exit.py"
    script.write_text(LIVE_EXIT)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "main thread done" in done.stdout


CLOSE_RACE = """
import sys, threading, time
from localjudge import Judge
judge = Judge.load(slots=4, max_prefixes=2, n_ctx=2048)
errors = []
def producer():
    while True:
        try:
            judge.generate_json("Text: a claim about the sky.\\nJSON: ", "reason", max_tokens=12)
        except Exception as error:
            errors.append(str(error))
            if "closed" in str(error):
                return
threads = [threading.Thread(target=producer) for _ in range(6)]
for thread in threads:
    thread.start()
time.sleep(float(sys.argv[1]))
judge.close()
for thread in threads:
    thread.join(60)
assert not any(thread.is_alive() for thread in threads), "a producer hangs"
print("closed cleanly", len(errors), flush=True)
"""


@pytest.mark.real
@pytest.mark.parametrize("delay", ["0.3", "0.9"])
def test_real_engine_close_while_threads_submit_exits_0(tmp_path, delay):
    script = tmp_path / "close_race.py"
    script.write_text(CLOSE_RACE)
    done = subprocess.run(
        [sys.executable, str(script), delay],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert "closed cleanly" in done.stdout


# -- 5. outputs nobody can read are errors, never scores -------------------------------------


@pytest.mark.parametrize(
    "output",
    [
        {"data": "no content"},
        ["plain", "strings"],
        [{"role": "user", "content": "no assistant turn"}],
        [],
        {"role": "tool", "content": "a tool result"},
    ],
)
def test_unreadable_output_is_an_input_error_for_both_scorers(tmp_home, output):
    from localjudge.errors import ScorerInputError
    from localjudge.evals.runner import run_evals

    judge = FakeJudge(judge_script)
    scorers = [
        create_hallucination_scorer(judge, extraction="sentences", reason="template"),
        create_toxicity_scorer(judge, reason="template"),
    ]
    for scorer in scorers:
        with pytest.raises(ScorerInputError, match="no assistant text"):
            scorer.run({"output": output})
    result = run_evals([{"id": 1, "output": output}], scorers)
    assert result.scores == {} and result.summary["failed_items"] == 1
    assert set(result.items[0].error_kinds.values()) == {"input"}
    assert judge.engine.plans == []  # the judge was never asked
    judge.close()


def test_empty_outputs_still_score_0_without_a_judge_call(tmp_home):
    judge = FakeJudge(judge_script)
    for scorer in (
        create_hallucination_scorer(judge, extraction="judge"),
        create_toxicity_scorer(judge),
    ):
        for output in ("", "  \n", [{"role": "assistant", "content": ""}], {"role": "assistant"}):
            result = scorer.run({"output": output})
            assert result.score == 0 and result.usage == {}
    assert judge.engine.plans == []
    judge.close()


# -- 6. every claim is judged, or the cap is on the record -----------------------------------


def test_all_claims_are_judged_and_a_cap_is_recorded(tmp_home):
    judge = FakeJudge(judge_script, slots=8)
    output = " ".join(f"Claim number {i} holds." for i in range(150))
    full = create_hallucination_scorer(judge, extraction="sentences", reason="template").run(
        {"output": output, "context": ["x"]}
    )
    assert len(full.analyze_step_result["verdicts"]) == 150 and "truncated" not in full.details
    capped = create_hallucination_scorer(
        judge, extraction="sentences", reason="template", max_claims=100
    ).run({"output": output, "context": ["x"]})
    assert len(capped.analyze_step_result["verdicts"]) == 100
    assert capped.to_dict()["truncated"] == {"claims": {"judged": 100, "leftOut": 50}}
    judge.close()


def test_claims_cut_by_the_extraction_budget_fall_back_to_sentences(tmp_home):
    claims = json.dumps({"claims": [f"claim {i}" for i in range(60)]}, separators=(",", ":"))
    judge = FakeJudge(
        lambda prompt: claims if prompt.endswith("Claims: ") else judge_script(prompt)
    )
    scorer = create_hallucination_scorer(judge, extraction="judge", claims_max_tokens=40)
    output = "The shop opens at nine. It closes at five on Sundays."
    result = scorer.run({"output": output, "context": ["The shop opens at nine."]})
    # the judge's cut list is not judged: every sentence of the output is
    assert result.preprocess_step_result["claims"] == [
        "The shop opens at nine.",
        "It closes at five on Sundays.",
    ]
    assert len(result.analyze_step_result["verdicts"]) == 2
    assert result.details["extraction"] == "sentences"
    assert result.details["extractionFallback"] == (
        "the judge's claims ran past claims_max_tokens=40"
    )
    assert result.preprocess_prompt is not None  # the judge was asked first
    judge.close()


# -- 7. a long user input is shortened by policy, and the result says so ---------------------


def test_long_input_is_cut_to_head_and_tail_for_toxicity(tmp_home):
    judge = FakeJudge(judge_script, n_ctx=3000)
    user_input = "START " + "filler text " * 3000 + " END"
    result = create_toxicity_scorer(judge, reason="template", max_input_tokens=200).run(
        {"input": user_input, "output": "A civil reply. Another one."}
    )
    assert result.score == 0 and len(result.analyze_step_result["verdicts"]) == 2
    shortened = result.details["inputShortened"]
    assert shortened["maxTokens"] == 200 and shortened["originalTokens"] > 20000
    prompt = result.analyze_prompt
    assert "START" in prompt and "END" in prompt and "characters left out" in prompt
    judge.close()


def test_a_long_input_is_counted_off_the_event_loop(tmp_home, monkeypatch):
    """Shortening counts the message's tokens, maybe many times: on a worker thread, so
    that `serve`'s other clients and /health are not stalled meanwhile."""
    import threading

    judge = FakeJudge(judge_script, n_ctx=3000)
    scorer = create_toxicity_scorer(judge, reason="template", max_input_tokens=200)
    threads = set()
    count = scorer.count_tokens
    monkeypatch.setattr(
        scorer, "count_tokens", lambda text: threads.add(threading.get_ident()) or count(text)
    )
    scorer.run({"input": "filler text " * 3000, "output": "A civil reply."})
    assert threads and threading.get_ident() not in threads
    judge.close()
