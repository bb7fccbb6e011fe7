"""The OpenAI-compatible API: `GET /v1/models`, `POST /v1/chat/completions`,
`POST /v1/completions`, whole or streamed, a `response_format` schema (or one the prompt
holds) compiled to a grammar."""

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from localjudge.errors import GenerationError, LocalJudgeError
from localjudge.scheduler import GenerationRequest, GenerationResult
from localjudge.scorers.steps import submit_off_loop
from localjudge.serve.errors import ServeError, error_of
from localjudge.serve.server import Server

MAX_SCHEMA_BYTES = 32 << 10  # a client's JSON schema, as JSON text
MAX_ENUM_VALUES = 1024  # enum and const values in one schema, all together


def check_schema_size(schema: dict) -> None:
    """Refuse (422) a schema too large to compile within a request: over `MAX_SCHEMA_BYTES`
    as JSON, or with more than `MAX_ENUM_VALUES` enum values."""
    size = len(json.dumps(schema, ensure_ascii=False).encode())
    if size > MAX_SCHEMA_BYTES:
        raise ServeError(
            422, "schema_too_large", f"the schema is {size} bytes; at most {MAX_SCHEMA_BYTES}",
            field="response_format",
        )  # fmt: skip
    count, stack = 0, [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("enum"), list):
                count += len(node["enum"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    if count > MAX_ENUM_VALUES:
        raise ServeError(
            422, "schema_too_large", f"the schema has {count} enum values; at most {MAX_ENUM_VALUES}",
            field="response_format",
        )  # fmt: skip


class OpenAIReply:
    """The OpenAI shapes of one completion ("chat" or "text"): whole, or as stream events."""

    def __init__(self, kind: str, model: str, result: GenerationResult | None = None) -> None:
        self.kind = kind
        self.model = model
        self.result = result
        self.created = int(time.time())
        self.id = ("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex

    def _ending(self) -> tuple[str, dict[str, int], dict[str, Any]]:
        result = self.result
        # JSON the budget closed is complete and valid: "stop", with the closing on record
        # (clients such as Mastra reject a structured reply whose finish reason is "length")
        finish = "length" if result.finish_reason == "length" else "stop"
        extra = {"x_closed_by_budget": True} if result.finish_reason == "budget" else {}
        prompt = result.counts.prefix_reused + result.counts.prompt_evaluated
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": result.counts.generated,
            "total_tokens": prompt + result.counts.generated,
            "prompt_tokens_details": {"cached_tokens": result.counts.prefix_reused},
        }
        return finish, usage, extra

    def whole(self) -> dict[str, Any]:
        finish, usage, extra = self._ending()
        if self.kind == "chat":
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": self.result.text},
                "finish_reason": finish,
            }
        else:
            choice = {"index": 0, "text": self.result.text, "finish_reason": finish}
            choice["logprobs"] = None
        return {
            "id": self.id,
            "object": "chat.completion" if self.kind == "chat" else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [choice | extra],
            "usage": usage,
        }

    def event(self, delta: dict[str, Any], *, last: bool = False) -> bytes:
        """One server-sent event; `last` carries the finish reason and the usage."""
        finish, usage, extra = self._ending() if last else (None, None, {})
        if self.kind == "chat":
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": delta.get("content", ""), "finish_reason": finish}
        data = {
            "id": self.id,
            "object": "chat.completion.chunk" if self.kind == "chat" else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [choice | extra],
        }
        if last:
            data["usage"] = usage
        return f"data: {json.dumps(data)}\n\n".encode()


DEFAULT_JSON_TOKENS = 256  # max_tokens when a request sets none: JSON closes within it
DEFAULT_TEXT_TOKENS = 128

# Clients that cannot send response_format put the schema in the prompt instead: Mastra's
# judges ("jsonPromptInjection", the default for a model Mastra does not know) end the user
# message with this line, the schema, and a request for JSON only.
_PROMPT_SCHEMA_CUES = ("Return your response as JSON matching this schema:", "JSON schema:")


def _schema_in_prompt(messages: list[dict[str, str]]) -> dict | None:
    """The JSON Schema a chat prompt asks the reply to match, when it states one after a
    known cue (in the last user or system message); None otherwise."""
    decoder = json.JSONDecoder()
    for message in reversed(messages):
        if message["role"] not in ("user", "system"):
            continue
        content = message["content"]
        for cue in _PROMPT_SCHEMA_CUES:
            at = content.rfind(cue)
            if at < 0:
                continue
            rest = content[at + len(cue) :].lstrip()
            try:
                schema, _ = decoder.raw_decode(rest)
            except ValueError:
                continue
            if isinstance(schema, dict) and schema.get("type") == "object":
                return {k: v for k, v in schema.items() if k != "$schema"}
        return None
    return None


def _response_schema(response_format: Any) -> dict | None:
    """The JSON Schema a response_format asks for (None: free text)."""
    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        raise ServeError(
            400, "invalid_input", "response_format must be an object", field="response_format"
        )
    kind = response_format.get("type")
    if kind in (None, "text"):
        return None
    if kind == "json_object":
        return {"type": "object"}
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise ServeError(
                400,
                "invalid_input",
                "json_schema.schema must be an object",
                field="response_format",
            )
        if schema.get("type") != "object":
            raise ServeError(
                422,
                "schema_not_supported",
                "the schema must describe an object (type: object)",
                field="response_format",
            )
        return {k: v for k, v in schema.items() if k != "$schema"}
    raise ServeError(
        400, "invalid_input", f"unknown response_format type {kind!r}", field="response_format"
    )


def _messages(value: Any) -> list[dict[str, str]]:
    """Chat messages as {role, content} with text content (text parts joined)."""
    if not isinstance(value, list) or not value:
        raise ServeError(
            400, "invalid_input", "messages must be a non-empty list", field="messages"
        )
    messages = []
    for index, message in enumerate(value):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ServeError(
                400, "invalid_input", f"messages[{index}] needs a role", field="messages"
            )
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(
                part.get("text", "")
                for part in content
                if isinstance(part, dict) and part.get("type") == "text"
            )
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise ServeError(
                400, "invalid_input", f"messages[{index}].content must be text", field="messages"
            )
        messages.append({"role": message["role"], "content": content})
    return messages


def openai_routes(server: Server):
    """The OpenAI-compatible routes over `server`'s judge."""
    from fastapi import APIRouter, Request
    from fastapi.responses import JSONResponse, StreamingResponse

    router = APIRouter()

    @router.get("/v1/models")
    async def models():
        server.counters.count("/v1/models", 200)
        return {
            "object": "list",
            "data": [{"id": server.judge.name, "object": "model", "owned_by": "localjudge"}],
        }

    async def prepare(
        body: dict[str, Any],
        prompt: str,
        prompt_schema: dict | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> GenerationRequest:
        """The generation an OpenAI request asks for. Without a response_format, a schema the
        client put in the prompt (`prompt_schema`) constrains the reply."""
        schema = _response_schema(body.get("response_format"))
        if schema is None and body.get("response_format") is None:
            schema = prompt_schema
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        if max_tokens is None:
            max_tokens = DEFAULT_JSON_TOKENS if schema is not None else DEFAULT_TEXT_TOKENS
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise ServeError(
                400, "invalid_input", "max_tokens must be a positive integer", field="max_tokens"
            )
        grammar = None
        if schema is not None:
            check_schema_size(schema)
            try:
                grammar = await asyncio.to_thread(server.judge.grammar, schema)
            except LocalJudgeError as error:
                raise ServeError(
                    422, "schema_not_supported", str(error), field="response_format"
                ) from None
        try:
            return server.judge.request(
                prompt,
                grammar,
                max_tokens=max_tokens,
                temperature=body.get("temperature") or 0.0,
                seed=body.get("seed"),
                on_text=on_text,
            )
        except (ValueError, TypeError) as error:
            raise ServeError(400, "invalid_input", str(error)) from None

    async def submit_one(gen_request: GenerationRequest):
        (future,) = await submit_off_loop(lambda: [server.judge.submit(gen_request)])
        return future

    def generation_error(error: Exception) -> Exception:
        if isinstance(error, GenerationError) and "max_tokens=" in str(error):
            return ServeError(400, "invalid_input", str(error), field="max_tokens")
        return error

    async def complete(
        kind: str, request: Request, body: dict[str, Any], prompt: str, prompt_schema=None
    ):
        """An OpenAI completion, whole or streamed as the tokens are chosen."""
        if body.get("stream"):
            return await stream_completion(kind, request, body, prompt, prompt_schema)

        async def work():  # the schema compiles inside the request's admission and timeout
            gen_request = await prepare(body, prompt, prompt_schema)
            return await asyncio.wrap_future(await submit_one(gen_request))

        try:
            result = await server.guarded(request, work)
        except LocalJudgeError as error:
            raise generation_error(error) from None
        reply_ = OpenAIReply(kind, server.judge.name, result)
        return JSONResponse(reply_.whole())

    async def stream_completion(kind, request, body, prompt, prompt_schema):
        """Server-sent events, one per piece of text as the scheduler chooses it. Errors
        before the first piece are plain JSON errors with their status; later ones are an
        error event. A client that goes away cancels the generation."""
        loop = asyncio.get_running_loop()
        pieces: asyncio.Queue[str] = asyncio.Queue()
        server.counters.enter(server.max_in_flight)  # admitted before its schema is compiled
        try:
            gen_request = await asyncio.wait_for(
                prepare(
                    body,
                    prompt,
                    prompt_schema,
                    on_text=lambda text: loop.call_soon_threadsafe(pieces.put_nowait, text),
                ),
                timeout=server.request_timeout,
            )
        except asyncio.TimeoutError:
            server.counters.in_flight -= 1
            raise ServeError(
                504, "timeout", f"no result within {server.request_timeout:g} s"
            ) from None
        except BaseException:
            server.counters.in_flight -= 1
            raise
        try:
            future = asyncio.wrap_future(await submit_one(gen_request))
        except BaseException:
            server.counters.in_flight -= 1
            raise
        deadline = loop.time() + server.request_timeout

        async def next_piece(watcher: asyncio.Future | None = None) -> str | None:
            """The next piece of text; None once the generation is over."""
            if not pieces.empty():
                return pieces.get_nowait()
            if future.done():
                return None
            getter = asyncio.ensure_future(pieces.get())
            waited = {getter, future} | ({watcher} if watcher is not None else set())
            done = await server.wait_any(waited, max(0.0, deadline - loop.time()))
            if getter in done:
                return getter.result()
            getter.cancel()
            if future in done:
                return pieces.get_nowait() if not pieces.empty() else None
            if watcher is not None and watcher in done:
                raise ServeError(499, "client_closed", "the client went away")
            if server.stopping():
                raise server.shutdown_error()
            raise ServeError(504, "timeout", f"no result within {server.request_timeout:g} s")

        def settle() -> None:
            if not future.done():
                future.cancel()  # the request leaves the scheduler
            server.counters.in_flight -= 1

        watcher = asyncio.ensure_future(server.until_disconnect(request))
        try:
            first = await next_piece(watcher)
            if first is None:
                future.result()  # failed before any text: a plain error reply
        except BaseException as error:
            settle()
            if isinstance(error, LocalJudgeError):
                raise generation_error(error) from None
            raise
        finally:
            watcher.cancel()
        reply_ = OpenAIReply(kind, server.judge.name)

        async def events() -> AsyncIterator[bytes]:
            try:
                if kind == "chat":
                    yield reply_.event({"role": "assistant", "content": ""})
                piece = first
                while piece is not None:
                    yield reply_.event({"content": piece})
                    piece = await next_piece()
                reply_.result = future.result()
                yield reply_.event({}, last=True)
            except Exception as error:  # after the headers: an error event
                yield f"data: {json.dumps(error_of(generation_error(error)).body())}\n\n".encode()
            finally:
                settle()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    @router.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        route = "/v1/chat/completions"
        try:
            body = await server.read_json(request)
            messages = _messages(body.get("messages"))
            # no explicit prefix: the judge shares the longest common token prefix with the
            # requests before it (the same system prompt, the same context) by itself
            prompt = server.judge.render(messages)
            reply_ = await complete("chat", request, body, prompt, _schema_in_prompt(messages))
        except Exception as error:
            return server.reply(route, error_of(error))
        server.counters.count(route, 200)
        return reply_

    @router.post("/v1/completions")
    async def completions(request: Request):
        route = "/v1/completions"
        try:
            body = await server.read_json(request)
            prompt = body.get("prompt")
            if isinstance(prompt, list) and len(prompt) == 1:
                prompt = prompt[0]
            if not isinstance(prompt, str) or not prompt:
                raise ServeError(
                    400, "invalid_input", "prompt must be a non-empty string", field="prompt"
                )
            reply_ = await complete("text", request, body, prompt)
        except Exception as error:
            return server.reply(route, error_of(error))
        server.counters.count(route, 200)
        return reply_

    return router
