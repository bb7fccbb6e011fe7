"""`localjudge serve`'s scorer API with a real HTTP client (httpx): in process on the fake
judge for the semantics, and as a real server process for binding, SIGTERM and the model."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from localjudge.serve import create_app
from localjudge.testing import FakeJudge, assert_scheduler_idle

JSON_TYPE = {"content-type": "application/json"}
REPO = Path(__file__).resolve().parents[1]


def client_for(judge, **options) -> httpx.AsyncClient:
    app = create_app(judge, close_judge=False, **options)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


def run(coroutine):
    return asyncio.run(coroutine)


def test_scorer_run_list_health_and_metrics(tmp_home):
    judge = FakeJudge()

    async def main():
        async with client_for(judge) as client:
            listed = (await client.get("/v1/scorers")).json()["scorers"]
            assert {s["name"] for s in listed} >= {"hallucination", "toxicity"}
            assert "score_mode" in next(s for s in listed if s["name"] == "toxicity")["options"]
            reply = await client.post(
                "/v1/scorers/hallucination/run",
                json={
                    "input": "Sky?",
                    "output": "The sky is blue. The moon is cheese.",
                    "context": ["The sky is blue."],
                    "runId": "r1",
                    "requestContext": {"user": "u"},
                    "options": {"extraction": "sentences", "reason": "template", "scale": 10},
                },
            )
            assert reply.status_code == 200, reply.text
            result = reply.json()
            assert result["runId"] == "r1" and result["score"] == 5
            assert result["analyzeStepResult"]["verdicts"][1]["verdict"] == "yes"
            assert (await client.get("/health")).json()["status"] == "ok"
            metrics = (await client.get("/metrics")).text
            assert "localjudge_generated_tokens_total" in metrics
            assert 'localjudge_requests_total{route="/v1/scorers/run",status="200"} 1' in metrics

    run(main())
    judge.close()


def test_sentence_claims_over_http_say_what_they_left_out(tmp_home):
    judge = FakeJudge()
    body = {
        "output": "Thanks for waiting! The sky is blue. Anything else?",
        "context": ["The sky is blue."],
        "options": {"extraction": "sentence-claims", "reason": "template"},
    }

    async def main():
        async with client_for(judge) as client:
            claims = await client.post("/v1/scorers/hallucination/run", json=body)
            body["options"]["extraction"] = "sentences"
            every = await client.post("/v1/scorers/hallucination/run", json=body)
            body["options"]["extraction"] = "clauses"
            wrong = await client.post("/v1/scorers/hallucination/run", json=body)
            return claims, every, wrong

    claims, every, wrong = run(main())
    judge.close()
    assert claims.status_code == every.status_code == 200, claims.text + every.text
    assert claims.json()["score"] == 0 and every.json()["score"] > 0
    assert [s["why"] for s in claims.json()["preprocessStepResult"]["skipped"]] == [
        "courtesy",
        "courtesy",
    ]
    assert "skipped" not in every.json()["preprocessStepResult"]
    assert wrong.status_code == 422 and wrong.json()["error"]["type"] == "invalid_options"


def test_errors_are_json_with_the_right_status(tmp_home):
    judge = FakeJudge()

    async def main():
        async with client_for(judge, max_body_bytes=2000) as client:
            cases = [
                ("/v1/scorers/nope/run", {"output": "x"}, 404, "unknown_scorer"),
                ("/v1/scorers/toxicity/run", {"input": "no output"}, 400, "invalid_input"),
                ("/v1/scorers/toxicity/run", {"output": ["plain"]}, 400, "invalid_input"),
                ("/v1/scorers/toxicity/run", {"output": "x", "options": {"nope": 1}}, 422, "invalid_options"),
                ("/v1/scorers/toxicity/run", {"output": "x", "options": {"score_mode": "mean"}}, 422, "invalid_options"),
                ("/v1/scorers/toxicity/run", {"output": "x" * 5000}, 413, "too_large"),
                ("/v1/evals", {"scorers": "toxicity", "items": []}, 400, "invalid_input"),
            ]  # fmt: skip
            for path, body, status, kind in cases:
                reply = await client.post(path, json=body)
                assert reply.status_code == status, (path, body, reply.text)
                assert reply.json()["error"]["type"] == kind
            bad = await client.post(
                "/v1/scorers/toxicity/run", content=b"{not json", headers=JSON_TYPE
            )
            assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_json"
            context = await client.post(
                "/v1/scorers/hallucination/run", json={"output": "x", "context": "not a list"}
            )
            assert context.status_code == 400 and context.json()["error"]["field"] == "context"

    run(main())
    judge.close()


def test_evals_stream_ndjson_as_items_finish(tmp_home):
    judge = FakeJudge(slots=4)
    items = [{"id": i, "output": "You idiot." if i == 2 else f"Fine {i}."} for i in range(5)]
    items.append({"id": "bad", "output": ["plain"]})

    async def main():
        async with client_for(judge) as client:
            lines = []
            async with client.stream(
                "POST",
                "/v1/evals",
                json={
                    "scorers": ["toxicity"],
                    "items": items,
                    "options": {"toxicity": {"reason": "template"}},
                    "storeText": False,
                },
            ) as reply:
                assert reply.headers["content-type"] == "application/x-ndjson"
                async for line in reply.aiter_lines():
                    if line:
                        lines.append(json.loads(line))
            return lines

    lines = run(main())
    records, summary = lines[:-1], lines[-1]
    assert sorted(str(r["id"]) for r in records) == ["0", "1", "2", "3", "4", "bad"]
    by_id = {r["id"]: r for r in records}
    assert by_id[2]["scores"] == {"toxicity-scorer": pytest.approx(0.67)}
    assert by_id["bad"]["errorKinds"] == {"toxicity-scorer": "input"}
    assert (
        "output" not in by_id[0] and by_id[0]["results"]["toxicity-scorer"]["textsStored"] is False
    )
    assert summary["summary"]["total_items"] == 6 and summary["summary"]["failed_items"] == 1
    judge.close()


@pytest.mark.hostile
def test_bearer_key_timeout_and_overload(tmp_home):
    judge = FakeJudge(slots=1, step_seconds=0.05)
    output = " ".join(f"Sentence {i}." for i in range(40))

    async def main():
        async with client_for(judge, api_key="s3cret", request_timeout=0.3) as client:
            denied = await client.post("/v1/scorers/toxicity/run", json={"output": "x"})
            assert denied.status_code == 401 and denied.json()["error"]["type"] == "unauthorized"
            assert (await client.get("/health")).status_code == 200  # probes need no key
            slow = await client.post(
                "/v1/scorers/toxicity/run",
                json={"output": output, "options": {"reason": "template"}},
                headers={"Authorization": "Bearer s3cret"},
            )
            assert slow.status_code == 504 and slow.json()["error"]["type"] == "timeout"
        async with client_for(judge, max_in_flight=0) as client:
            busy = await client.post("/v1/scorers/toxicity/run", json={"output": "x"})
            assert busy.status_code == 503 and busy.json()["error"]["type"] == "overloaded"

    run(main())
    # the timed-out request left the scheduler
    assert_scheduler_idle(judge.scheduler, runtime=judge.runtime)
    judge.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(*args, env=None):
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "localjudge", "serve", "--port", str(port), *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the server exited: {process.stderr.read()[-2000:]}")
        try:
            if httpx.get(base + "/health", timeout=1).status_code == 200:
                return process, base
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    pytest.fail("the server did not come up")


def stop(process) -> int:
    """SIGTERM; uvicorn drains, closes the judge, then exits by the signal it was sent."""
    process.send_signal(signal.SIGTERM)
    try:
        code = process.wait(timeout=60)
    finally:
        process.stderr.close()
    return code


GRACEFUL = (0, -signal.SIGTERM)


@pytest.mark.hostile
def test_server_process_sigterm_finishes_in_flight_requests(tmp_home):
    import threading

    process, base = start_server(env={"LOCALJUDGE_ENGINE": "fake"})
    replies = []
    output = " ".join(f"Sentence number {i} is civil." for i in range(600)) + " You idiot."

    def slow_request():
        with httpx.Client(base_url=base, timeout=120) as client:
            replies.append(
                client.post(
                    "/v1/scorers/toxicity/run",
                    json={"output": output, "options": {"reason": "template"}},
                )
            )

    worker = threading.Thread(target=slow_request)
    worker.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the request is being judged (however busy the CPU)
        try:
            if "localjudge_requests_in_flight 1" in httpx.get(base + "/metrics", timeout=10).text:
                break
        except httpx.TimeoutException:  # a starved machine: ask again
            pass
        time.sleep(0.05)
    code = stop(process)
    worker.join(60)
    assert code in GRACEFUL
    assert replies and replies[0].status_code == 200, replies
    assert len(replies[0].json()["analyzeStepResult"]["verdicts"]) == 601


@pytest.mark.hostile
def test_binding_beyond_loopback_needs_a_key():
    done = subprocess.run(
        [sys.executable, "-m", "localjudge", "serve", "--host", "0.0.0.0", "--port", "1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "LOCALJUDGE_ENGINE": "fake"},
        timeout=60,
    )
    assert done.returncode == 2 and "give --api-key" in done.stderr


@pytest.mark.real
def test_server_on_the_real_model(tmp_home):
    process, base = start_server("--slots", "4", "--ctx", "4096")
    try:
        with httpx.Client(base_url=base, timeout=300) as client:
            reply = client.post(
                "/v1/scorers/toxicity/run",
                json={
                    "input": "Help?",
                    "output": "Thanks. Here it is.",
                    "options": {"reason": "template"},
                },
            )
            assert reply.status_code == 200, reply.text
            result = reply.json()
            assert result["judgedBy"]["model"] == "gemma-3-270m-judge" and 0 <= result["score"] <= 1
            assert len(result["analyzeStepResult"]["verdicts"]) == 2
            chat_body = {
                "messages": [
                    {
                        "role": "system",
                        "content": "List the claims of the text as JSON. A claim is one short "
                        "statement that can be checked on its own against the text; keep the "
                        "words of the text and leave out opinions and questions.",
                    },
                    {"role": "user", "content": "Text: The sky is blue. Grass is green."},
                ],
                "max_tokens": 40,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"schema": CLAIMS_SCHEMA},
                },
            }
            chat = client.post("/v1/chat/completions", json=chat_body)
            assert chat.status_code == 200, chat.text
            claims = json.loads(chat.json()["choices"][0]["message"]["content"])
            assert isinstance(claims["claims"], list)  # valid JSON of the schema, whatever it says
            # the same conversation again, streamed: its whole prompt is read from the kept
            # cells (nothing evaluated), and the text comes piece by piece
            with client.stream(
                "POST", "/v1/chat/completions", json={**chat_body, "stream": True}
            ) as stream:
                events = [line[6:] for line in stream.iter_lines() if line.startswith("data: ")]
            assert events[-1] == "[DONE]"
            chunks = [json.loads(e) for e in events[:-1]]
            pieces = [c["choices"][0]["delta"].get("content") for c in chunks]
            assert len([p for p in pieces if p]) > 3
            assert (
                "".join(p or "" for p in pieces) == chat.json()["choices"][0]["message"]["content"]
            )
            usage = chunks[-1]["usage"]
            assert usage["prompt_tokens"] == chat.json()["usage"]["prompt_tokens"]
            assert usage["prompt_tokens_details"]["cached_tokens"] == usage["prompt_tokens"]
            text = client.post("/v1/completions", json={"prompt": "The sky is", "max_tokens": 8})
            assert text.status_code == 200 and text.json()["usage"]["completion_tokens"] <= 8
    finally:
        assert stop(process) in GRACEFUL


# -- the OpenAI-compatible API ---------------------------------------------------------------


def openai_judge(reply: str, **options):
    """A fake judge whose prompts end where a chat prompt ends ("Answer:" + newline)."""
    from localjudge.engine.fake import FakeEngine
    from localjudge.judge import Judge

    engine = FakeEngine(lambda prompt: reply, marker="Answer:\n")
    return Judge(engine, slots=4, max_prefixes=6, token_budget=256, name="fake-judge", **options)


CHAT = [
    {"role": "system", "content": "You extract claims."},
    {"role": "user", "content": [{"type": "text", "text": "Text: The sky is blue.\nAnswer:"}]},
]
CLAIMS_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {"claims": {"type": "array", "items": {"type": "string"}}},
    "required": ["claims"],
    "additionalProperties": False,
}


def test_chat_completions_with_a_json_schema_always_parse(tmp_home):
    judge = openai_judge('{"claims":["The sky is blue."]}')

    async def main():
        async with client_for(judge) as client:
            models = (await client.get("/v1/models")).json()
            assert models["data"][0]["id"] == "fake-judge"
            reply = await client.post(
                "/v1/chat/completions",
                json={
                    "model": "anything",
                    "messages": CHAT,
                    "response_format": {
                        "type": "json_schema",
                        "json_schema": {"name": "claims", "schema": CLAIMS_SCHEMA, "strict": True},
                    },
                },
            )
            assert reply.status_code == 200, reply.text
            data = reply.json()
            assert data["object"] == "chat.completion"
            content = data["choices"][0]["message"]["content"]
            assert json.loads(content) == {"claims": ["The sky is blue."]}
            assert data["choices"][0]["finish_reason"] == "stop"
            usage = data["usage"]
            assert usage["completion_tokens"] > 0
            assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
            tight = await client.post(
                "/v1/chat/completions",
                json={
                    "messages": CHAT,
                    "max_tokens": 8,
                    "response_format": {
                        "type": "json_schema",
                        "json_schema": {"schema": CLAIMS_SCHEMA},
                    },
                },
            )
            assert tight.status_code == 200, tight.text
            json.loads(tight.json()["choices"][0]["message"]["content"])  # closed within 8 tokens

    run(main())
    judge.close()


def test_free_text_json_object_streaming_and_completions(tmp_home):
    judge = openai_judge("A plain answer.")

    async def main():
        async with client_for(judge) as client:
            text = await client.post("/v1/chat/completions", json={"messages": CHAT})
            assert text.json()["choices"][0]["message"]["content"] == "A plain answer."
            cut = await client.post(
                "/v1/chat/completions", json={"messages": CHAT, "max_tokens": 3}
            )
            choice = cut.json()["choices"][0]
            assert choice["finish_reason"] == "length" and choice["message"]["content"] == "A p"
            obj = await client.post(
                "/v1/chat/completions",
                json={
                    "messages": CHAT,
                    "response_format": {"type": "json_object"},
                    "max_tokens": 12,
                },
            )
            assert isinstance(json.loads(obj.json()["choices"][0]["message"]["content"]), dict)
            events = []
            async with client.stream(
                "POST", "/v1/chat/completions", json={"messages": CHAT, "stream": True}
            ) as stream:
                async for line in stream.aiter_lines():
                    if line.startswith("data: "):
                        events.append(line[6:])
            assert events[-1] == "[DONE]"
            chunks = [json.loads(e) for e in events[:-1]]
            pieces = [c["choices"][0]["delta"].get("content") for c in chunks]
            assert len([p for p in pieces if p]) > 3  # piece by piece, as chosen
            assert "".join(p or "" for p in pieces) == "A plain answer."
            assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
            assert chunks[-1]["usage"]["completion_tokens"] > 3
            # a stream that fails before its first piece is a plain JSON error
            refused = await client.post(
                "/v1/chat/completions",
                json={
                    "messages": CHAT,
                    "stream": True,
                    "max_tokens": 2,
                    "response_format": {
                        "type": "json_schema",
                        "json_schema": {"schema": CLAIMS_SCHEMA},
                    },
                },
            )
            assert refused.status_code == 400 and refused.json()["error"]["field"] == "max_tokens"
            completion = await client.post(
                "/v1/completions", json={"prompt": "Q: hi\nAnswer:\n", "max_tokens": 20}
            )
            assert completion.json()["choices"][0]["text"] == "A plain answer."

    run(main())
    judge.close()


def test_requests_that_start_alike_share_their_prefix_automatically(tmp_home):
    judge = openai_judge("A plain answer.", cache_prefixes=True)
    system = {"role": "system", "content": "You check claims against this long context. " * 8}

    def body(question: str) -> dict:
        return {"messages": [system, {"role": "user", "content": f"{question}\nAnswer:"}]}

    async def main():
        async with client_for(judge) as client:
            first = (await client.post("/v1/chat/completions", json=body("Is it blue?"))).json()
            second = (await client.post("/v1/chat/completions", json=body("Is it red?"))).json()
            together = await asyncio.gather(
                *(client.post("/v1/chat/completions", json=body(f"Q{i}?")) for i in range(4))
            )
            return first, second, [r.json() for r in together]

    first, second, together = run(main())
    system_tokens = len(judge.engine.tokenize(system["content"]))
    judge.close()
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached >= system_tokens  # the system prompt at least
    assert second["usage"]["prompt_tokens"] - cached < 30  # only the question was evaluated
    assert all(r["choices"][0]["message"]["content"] == "A plain answer." for r in together)
    assert all(
        r["usage"]["prompt_tokens_details"]["cached_tokens"] >= system_tokens for r in together
    )


def test_a_context_evicted_from_the_kv_cache_comes_back_from_the_prompt_cache(tmp_home):
    # as `serve` loads its judge: prefixes kept in the KV cache, a prompt cache behind it;
    # KV cells for about one item's prefixes, so each new context evicts the one before
    judge = FakeJudge(cache_prefixes=True, prompt_cache_mib=64, n_ctx=3300)
    contexts = [
        [f"Report {i}: " + " ".join(f"fact {k} of {i} holds." for k in range(60))] for i in range(3)
    ]

    def body(context):
        return {
            "output": "The fact holds. The moon is cheese.",
            "context": context,
            "options": {"extraction": "sentences", "reason": "template"},
        }

    async def main():
        async with client_for(judge) as client:
            replies = [
                await client.post("/v1/scorers/hallucination/run", json=body(c))
                for c in [*contexts, contexts[0]]
            ]
            return replies, (await client.get("/metrics")).text

    replies, metrics = run(main())
    judge.close()
    assert all(r.status_code == 200 for r in replies), replies[-1].text
    assert replies[-1].json()["score"] == replies[0].json()["score"]
    restored = {
        line.split()[0]: float(line.split()[1])
        for line in metrics.splitlines()
        if line.startswith("localjudge_prompt_cache")
    }
    assert restored["localjudge_prompt_cache_restored_total"] >= 1  # the first context, again
    assert restored["localjudge_prompt_cache_restored_tokens_total"] > 100
    assert restored["localjudge_prompt_cache_bytes"] > 0
    assert "\nlocaljudge_kept_prompts_used_total " in metrics


@pytest.mark.hostile
def test_openai_errors(tmp_home):
    judge = openai_judge("x")

    async def main():
        async with client_for(judge) as client:
            cases = [
                ({"messages": []}, 400, "messages"),
                ({"messages": [{"content": "no role"}]}, 400, "messages"),
                ({"messages": CHAT, "max_tokens": 0}, 400, "max_tokens"),
                ({"messages": CHAT, "response_format": {"type": "yaml"}}, 400, "response_format"),
                (
                    {"messages": CHAT, "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "array"}}}},
                    422,
                    "response_format",
                ),
                (
                    {"messages": CHAT, "max_tokens": 2, "response_format": {"type": "json_schema", "json_schema": {"schema": CLAIMS_SCHEMA}}},
                    400,
                    "max_tokens",
                ),
            ]  # fmt: skip
            for body, status, field in cases:
                reply = await client.post("/v1/chat/completions", json=body)
                assert reply.status_code == status, (body, reply.text)
                assert reply.json()["error"]["field"] == field
            bad_prompt = await client.post("/v1/completions", json={"prompt": 3})
            assert bad_prompt.status_code == 400

    run(main())
    judge.close()


def test_a_long_context_is_judged_in_evidence_windows_over_http(tmp_home):
    judge = FakeJudge(n_ctx=2400)  # the instructions and this context do not fit together
    facts = " ".join(f"Station {n} recorded {n + 3} frost days." for n in range(60))
    body = {
        "output": "Station 41 recorded 44 frost days.",
        "context": [facts],
        "options": {"extraction": "sentences", "windows": 2, "window_tokens": 100},
    }

    async def main():
        async with client_for(judge) as client:
            good = await client.post("/v1/scorers/hallucination/run", json=body)
            bad = await client.post(
                "/v1/scorers/hallucination/run",
                json={**body, "options": {**body["options"], "windows": 0}},
            )
            return good, bad

    good, bad = run(main())
    judge.close()
    assert good.status_code == 200, good.text
    (verdict,) = good.json()["analyzeStepResult"]["verdicts"]
    assert verdict["verdict"] == "no" and "Station 41 recorded" in verdict["evidence"]["text"]
    # its best window (of 2) supports it: the second is not judged
    assert good.json()["usage"]["analyze"]["requests"] == 1
    assert bad.status_code == 422 and "windows must be" in bad.json()["error"]["message"]


# -- issue 36: what a careless client or a hostile page must not be able to do -------------


def post_scope(path: str) -> dict:
    """The ASGI scope a server gives the app for a JSON POST from a loopback client."""
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "headers": [(b"host", b"127.0.0.1:8080"),
                                     (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8080),
    }  # fmt: skip


async def call_then_leave(app, path: str, body: dict, leave_when) -> tuple[list, asyncio.Task]:
    """Drive the ASGI app as a server would, and send `http.disconnect` once `leave_when()`
    is true (the client closed its connection mid-request)."""
    messages = [{"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}]
    gone = asyncio.Event()
    sent: list = []

    async def receive():
        if messages:
            return messages.pop(0)
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    task = asyncio.ensure_future(app(post_scope(path), receive, send))
    while not leave_when():
        assert not task.done(), f"the request ended before the client left: {sent}"
        await asyncio.sleep(0.005)
    gone.set()
    return sent, task


@pytest.mark.parametrize(
    "path,body",
    [
        ("/v1/scorers/toxicity/run", {"output": "", "options": {"reason": "template"}}),
        ("/v1/completions", {"prompt": "Tell a long story.\nAnswer:\n", "max_tokens": 4000}),
        ("/v1/chat/completions", {"messages": CHAT, "max_tokens": 4000}),
    ],
)  # fmt: skip
@pytest.mark.hostile
def test_a_client_that_goes_away_cancels_its_judge_work_within_a_few_steps(tmp_home, path, body):
    from localjudge.engine.fake import FakeEngine
    from localjudge.judge import Judge

    if "output" in body:  # 300 statements to judge
        judge = FakeJudge(slots=2, step_seconds=0.01)
        body = {**body, "output": " ".join(f"Sentence {i} is civil." for i in range(300))}
    else:  # free text that would run for 4,000 tokens
        engine = FakeEngine(lambda p: "and then " * 2000, marker="Answer:\n", step_seconds=0.01)
        judge = Judge(engine, slots=2, max_prefixes=4, token_budget=256, name="fake-judge")
    app = create_app(judge, close_judge=False)
    stats = judge.scheduler.stats

    async def main():
        sent, task = await call_then_leave(app, path, body, lambda: stats.num_steps >= 20)
        at_leave = stats.num_steps
        await asyncio.wait_for(task, 30)
        return sent, at_leave

    sent, at_leave = run(main())
    time.sleep(0.1)
    assert stats.num_steps - at_leave <= 3, (at_leave, stats.num_steps)
    assert_scheduler_idle(judge.scheduler, runtime=judge.runtime)
    judge.close()


@pytest.mark.hostile
def test_a_keyless_server_refuses_foreign_hosts_and_cross_site_pages(tmp_home):
    judge = FakeJudge()
    run_path = "/v1/scorers/toxicity/run"
    good = {"output": "Fine.", "options": {"reason": "template"}}

    async def main():
        async with client_for(judge) as client:
            rebound = await client.post(run_path, json=good, headers={"host": "evil.example"})
            assert rebound.status_code == 403
            assert rebound.json()["error"]["type"] == "forbidden_host"
            for origin in ("http://evil.example", "null", "http://127.0.0.1.evil.example"):
                page = await client.post(
                    run_path, content=json.dumps(good), headers={
                        "origin": origin, "content-type": "text/plain"},
                )  # fmt: skip
                assert page.status_code == 403, origin
                assert page.json()["error"]["type"] == "forbidden_origin"
            own = await client.post(
                run_path, json=good, headers={"origin": "http://localhost:8080"}
            )
            assert own.status_code == 200
            assert (await client.get("/health", headers={"host": "[::1]:8080"})).status_code == 200
        async with client_for(judge, api_key="k") as client:  # a key is the gate then
            keyed = await client.post(
                run_path, json=good,
                headers={"host": "judge.internal", "authorization": "Bearer k"},
            )  # fmt: skip
            assert keyed.status_code == 200

    run(main())
    judge.close()


@pytest.mark.hostile
def test_hostile_bodies_get_clear_errors_and_metrics_stay_well_formed(tmp_home):
    judge = FakeJudge()
    run_path = "/v1/scorers/toxicity/run"

    async def main():
        async with client_for(judge, api_key="k") as client:
            key = {"authorization": "Bearer k", **JSON_TYPE}
            deep = "[" * 100_000 + "]" * 100_000
            nested = await client.post(run_path, content=deep, headers=key)
            assert nested.status_code == 400 and "nested" in nested.json()["error"]["message"]
            for scale in (float("nan"), "abc", -1):
                bad = await client.post(
                    run_path,
                    content=json.dumps({"output": "Hi.", "options": {"scale": scale}}),
                    headers=key,
                )
                assert bad.status_code == 422, (scale, bad.text)
            as_text = await client.post(
                run_path, json={"output": "Hi.", "storeText": "false"}, headers=key
            )
            assert as_text.status_code == 400
            assert as_text.json()["error"]["field"] == "storeText"
            twice = await client.post(
                "/v1/evals",
                json={"scorers": ["toxicity", "toxicity"], "items": [{"output": "Hi."}]},
                headers=key,
            )
            assert twice.status_code == 400 and twice.json()["error"]["field"] == "scorers"
            for n in range(50):  # unauthenticated junk paths
                await client.post(f'/x"{{}}%0A{n}', json={})
            text = (await client.get("/metrics", headers=key)).text
        labels = [
            line for line in text.splitlines() if line.startswith("localjudge_requests_total{")
        ]
        assert 'localjudge_requests_total{route="other",status="401"} 50' in labels
        assert all(line.count('"') == 4 for line in labels)

    run(main())
    judge.close()


@pytest.mark.hostile
def test_the_scorer_pool_is_bounded(tmp_home):
    from localjudge.serve import MAX_POOLED_SCORERS

    judge = FakeJudge()
    app = create_app(judge, close_judge=False)

    async def main():
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
        ) as client:
            for n in range(MAX_POOLED_SCORERS + 6):
                options = {"reason": "template", "scale": 1 + n}
                reply = await client.post(
                    "/v1/scorers/toxicity/run", json={"output": "Hi.", "options": options}
                )
                assert reply.status_code == 200
            assert len(app.state.pool) == MAX_POOLED_SCORERS
            big = {"reason": "template", "context": ["word " * 40_000]}
            reply = await client.post(
                "/v1/scorers/hallucination/run", json={"output": "Hi.", "options": big}
            )
            assert reply.status_code == 200
            assert len(app.state.pool) == MAX_POOLED_SCORERS  # built for that request only

    run(main())
    judge.close()


@pytest.mark.hostile
def test_no_stored_text_means_no_text_of_the_run_in_any_reason(tmp_home):
    """`storeText: false` (and `--no-store-text`): the reasons, which quote statements and
    context windows, are rebuilt to name them by number; the judge's own words are dropped."""
    ssn = "078-05-1120"
    item = {
        "input": "What is on file?",
        "output": f"Your SSN is {ssn}, you idiot. The tower is red.",
        "context": [f"The file lists SSN {ssn}.", "The tower is blue."],
    }
    judge = FakeJudge()

    async def main():
        async with client_for(judge) as client:
            replies = []
            for name, reason in (
                ("toxicity", "judge"),
                ("hallucination", "judge"),
                ("toxicity", "template"),
                ("hallucination", "template"),
            ):
                options = {"reason": reason}
                if name == "hallucination":
                    options["context"] = item["context"]
                kept = await client.post(
                    f"/v1/scorers/{name}/run",
                    json={"output": item["output"], "input": item["input"], "options": options},
                )
                assert ssn in kept.text  # stored by default: the reason quotes it
                private = await client.post(
                    f"/v1/scorers/{name}/run",
                    json={"output": item["output"], "input": item["input"],
                          "options": options, "storeText": False},
                )  # fmt: skip
                replies.append(private)
            stream = await client.post(
                "/v1/evals",
                json={"scorers": ["toxicity", "hallucination"], "items": [item],
                      "storeText": False,
                      "options": {"hallucination": {"reason": "template"}}},
            )  # fmt: skip
            return replies, stream

    replies, stream = run(main())
    for reply in replies:
        assert reply.status_code == 200 and ssn not in reply.text, reply.text
        assert "idiot" not in reply.text and "tower" not in reply.text
        assert reply.json()["reason"].startswith("The score is")
    assert stream.status_code == 200 and ssn not in stream.text and "idiot" not in stream.text
    judge.close()


@pytest.mark.hostile
def test_client_schemas_are_capped_and_the_grammar_cache_is_reported(tmp_home):
    judge = openai_judge('{"pick": "a"}')

    def ask(options: list[str], name: str = "pick") -> dict:
        schema = {
            "type": "object",
            "properties": {name: {"type": "string", "enum": options}},
            "required": [name],
        }
        return {
            "messages": CHAT,
            "response_format": {"type": "json_schema", "json_schema": {"schema": schema}},
        }

    async def main():
        async with client_for(judge) as client:
            huge = await client.post(
                "/v1/chat/completions", json=ask([f"v{i}" for i in range(30_000)])
            )
            assert huge.status_code == 422
            assert huge.json()["error"]["type"] == "schema_too_large"
            many = await client.post(
                "/v1/chat/completions", json=ask([f"v{i}" for i in range(1500)])
            )
            assert many.status_code == 422 and "enum values" in many.json()["error"]["message"]
            fine = await client.post("/v1/chat/completions", json=ask(["a", "b"]))
            assert fine.status_code == 200, fine.text
            text = (await client.get("/metrics")).text
        assert "localjudge_grammars_in_memory " in text
        assert "localjudge_grammar_cache_disk_bytes " in text

    run(main())
    judge.close()


@pytest.mark.hostile
def test_a_half_sent_body_times_out_and_prompts_are_tokenized_off_the_event_loop(tmp_home):
    import threading

    judge = openai_judge("Fine.")
    app = create_app(judge, close_judge=False, body_timeout=0.2)
    loop_threads, submit_threads = set(), []
    real_submit = judge.submit

    def submit(request):
        submit_threads.append(threading.get_ident())
        return real_submit(request)

    judge.submit = submit

    async def main():
        loop_threads.add(threading.get_ident())
        sent: list = []
        parts = [{"type": "http.request", "body": b'{"prompt": "Hel', "more_body": True}]

        async def receive():
            if parts:
                return parts.pop(0)
            await asyncio.sleep(3600)  # the rest never comes

        async def send(message):
            sent.append(message)

        await asyncio.wait_for(app(post_scope("/v1/completions"), receive, send), 30)
        assert sent[0]["status"] == 408
        async with client_for(judge) as client:
            reply = await client.post("/v1/completions", json={"prompt": "Hi.\nAnswer:\n"})
            assert reply.status_code == 200

    run(main())
    assert submit_threads and loop_threads.isdisjoint(submit_threads)
    judge.close()


@pytest.mark.hostile
def test_scorer_requests_tokenize_off_the_event_loop(tmp_home):
    """A long context is cut into windows and its requests queued on worker threads: the
    event loop (other clients, /health) never waits on the tokenizer."""
    import threading

    judge = FakeJudge(window_tokens=64)
    threads: list[int] = []
    real_submit_many, real_tokenize = judge.submit_many, judge.tokenize

    def submit_many(requests):
        threads.append(threading.get_ident())
        return real_submit_many(requests)

    def tokenize(text):
        threads.append(threading.get_ident())
        return real_tokenize(text)

    judge.submit_many, judge.tokenize = submit_many, tokenize
    context = " ".join(f"Fact {i} is about the harbour." for i in range(200))

    async def main():
        loop_thread = threading.get_ident()
        async with client_for(judge) as client:
            reply = await client.post(
                "/v1/scorers/hallucination/run",
                json={"output": "Fact 7 is about the harbour.", "context": [context],
                      "options": {"reason": "template"}},
            )  # fmt: skip
            assert reply.status_code == 200, reply.text
        return loop_thread

    loop_thread = run(main())
    assert threads and loop_thread not in threads
    judge.close()


@pytest.mark.hostile
def test_a_page_cannot_post_form_or_text_bodies_and_hosts_and_origins_are_opt_in(tmp_home):
    """A form or text/plain POST needs no CORS preflight, so the server takes JSON bodies
    only (415); `allowed_hosts` and `cors_origins` open the keyless checks by name."""
    judge = FakeJudge()
    run_path = "/v1/scorers/toxicity/run"
    body = json.dumps({"output": "Hi.", "options": {"reason": "template"}})

    async def main():
        async with client_for(judge) as client:
            for media in ("text/plain", "application/x-www-form-urlencoded", None):
                headers = {} if media is None else {"content-type": media}
                sent = await client.post(run_path, content=body, headers=headers)
                assert sent.status_code == 415, media
                assert sent.json()["error"]["type"] == "unsupported_media_type"
            typed = {"content-type": "application/json; charset=utf-8"}
            assert (await client.post(run_path, content=body, headers=typed)).status_code == 200
            named = await client.post(
                run_path, content=body, headers={**typed, "host": "judge.lan"}
            )
            assert named.status_code == 403
        opened = {"allowed_hosts": ("judge.lan",), "cors_origins": ("https://app.example",)}
        async with client_for(judge, **opened) as client:
            named = await client.post(
                run_path, content=body, headers={**typed, "host": "judge.lan"}
            )
            assert named.status_code == 200
            page = {**typed, "origin": "https://app.example"}
            called = await client.post(run_path, content=body, headers=page)
            assert called.status_code == 200
            assert called.headers["access-control-allow-origin"] == "https://app.example"
            preflight = await client.options(
                run_path,
                headers={
                    "origin": "https://app.example",
                    "access-control-request-method": "POST",
                    "access-control-request-headers": "content-type",
                },
            )
            assert preflight.status_code == 200
            other = await client.post(
                run_path, content=body, headers={**typed, "origin": "https://evil.example"}
            )
            assert other.status_code == 403 and "access-control-allow-origin" not in other.headers

    run(main())
    judge.close()


@pytest.mark.hostile
def test_shutdown_cuts_running_work_with_a_final_line_and_refuses_the_rest(tmp_home):
    judge = FakeJudge(slots=1, step_seconds=0.02)
    items = [{"output": f"Sentence {i} is civil. Another one."} for i in range(200)]

    async def main():
        app = create_app(judge, close_judge=False)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:

            async def stop_soon():
                await asyncio.sleep(0.5)
                app.state.server.stop_in(0)  # what SIGTERM does, its grace over

            stopper = asyncio.ensure_future(stop_soon())
            started = time.monotonic()
            reply = await client.post(
                "/v1/evals",
                json={"scorers": ["toxicity"], "items": items,
                      "options": {"toxicity": {"reason": "template"}}},
            )  # fmt: skip
            await stopper
            assert time.monotonic() - started < 30  # cut, not run to the end
            lines = [json.loads(line) for line in reply.text.splitlines()]
            assert lines[-1]["error"]["type"] == "shutting_down"  # the final line
            assert len(lines) - 1 < len(items)
            late = await client.post("/v1/scorers/toxicity/run", json={"output": "Hi."})
            assert late.status_code == 503 and late.json()["error"]["type"] == "shutting_down"
        assert_scheduler_idle(judge.scheduler, runtime=judge.runtime)  # the cut work left

    run(main())
    judge.close()


@pytest.mark.hostile
def test_sigterm_ends_a_running_stream_with_a_final_line_within_the_grace(tmp_home):
    import threading

    process, base = start_server("--shutdown-seconds", "4", env={"LOCALJUDGE_ENGINE": "fake"})
    items = [{"output": " ".join(f"Sentence {j} of {i} is civil." for j in range(20))}
             for i in range(3000)]  # fmt: skip
    lines: list[dict] = []
    first = threading.Event()

    def stream():
        body = {
            "scorers": ["toxicity"],
            "items": items,
            "options": {"toxicity": {"reason": "template"}},
        }
        with httpx.stream("POST", base + "/v1/evals", json=body, timeout=120) as reply:
            for line in reply.iter_lines():
                if line:
                    lines.append(json.loads(line))
                    first.set()

    reader = threading.Thread(target=stream)
    reader.start()
    assert first.wait(120), "no item came back"
    signalled = time.monotonic()
    code = stop(process)
    reader.join(60)
    assert code == 0
    assert time.monotonic() - signalled < 4 + 10  # the grace, and the judge's close
    assert lines[-1].get("error", {}).get("type") == "shutting_down", lines[-1]
    assert len(lines) - 1 < len(items)


@pytest.mark.hostile
def test_a_planted_marker_is_in_no_byte_written_with_texts_not_stored(tmp_home, tmp_path):
    """Text storage off: the marker in the output, the input and the context is in no byte
    the eval command or the server writes: results, console, metrics, and every file under
    LOCALJUDGE_HOME (caches, registry) or beside the results."""
    marker = "ZQX-7741-MARKER"
    item = {
        "id": "m",
        "input": f"Tell me about {marker}.",
        "output": f"{marker} is red, you idiot. The tower is {marker}.",
        "context": [f"The file lists {marker}.", "The tower is blue."],
    }
    data = tmp_path / "in" / "data.jsonl"
    data.parent.mkdir()
    data.write_text(json.dumps(item) + "\n")
    out = tmp_path / "out" / "results.jsonl"
    out.parent.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "localjudge", "eval", str(data), "--scorer", "toxicity",
         "--scorer", "hallucination", "--out", str(out), "--no-store-text", "--quiet"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "LOCALJUDGE_ENGINE": "fake", "LOCALJUDGE_HOME": str(tmp_home)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["scores"]  # it was scored
    written = [done.stdout, done.stderr]
    judge = FakeJudge()

    async def main():
        async with client_for(judge) as client:
            for name in ("toxicity", "hallucination"):
                options = {"context": item["context"]} if name == "hallucination" else {}
                reply = await client.post(
                    f"/v1/scorers/{name}/run",
                    json={"output": item["output"], "input": item["input"],
                          "options": options, "storeText": False},
                )  # fmt: skip
                written.append(reply.text)
            written.append((await client.get("/metrics")).text)

    run(main())
    judge.close()
    for path in [*tmp_home.rglob("*"), *out.parent.rglob("*")]:  # not the models: read only
        if path.is_file() and path.suffix != ".gguf":
            written.append(path.read_bytes().decode("latin-1"))
    leaks = [text[:300] for text in written if marker in text or "idiot" in text]
    assert not leaks, leaks
