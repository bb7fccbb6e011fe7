"""Getting the texts out of what agents produce: plain strings, OpenAI chat messages, and
Mastra's message shapes (`{"inputMessages": [...]}`, messages with `content.parts`)."""

from __future__ import annotations

import contextlib
import json
from typing import Any


def _text_of_content(content: Any) -> str | None:
    """The text of a message's `content` in any of the shapes agents use."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI/AI SDK parts: the last text part, as Mastra does
        texts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        texts = [t for t in texts if isinstance(t, str)]
        return texts[-1] if texts else None
    if isinstance(content, dict):  # Mastra DB message content: {content, parts, ...}
        if isinstance(content.get("content"), str) and content["content"]:
            return content["content"]
        if isinstance(content.get("text"), str) and content["text"]:
            return content["text"]
        if isinstance(content.get("parts"), list):
            return _text_of_content(content["parts"])
    return None


def _text_of_message(message: Any) -> str | None:
    if isinstance(message, str):
        return message
    if not isinstance(message, dict):
        return None
    for key in ("content", "text", "body"):
        if key in message:
            text = _text_of_content(message[key]) if key == "content" else message[key]
            if isinstance(text, str):
                return text
    return None


def _text_with_role(messages: Any, role: str, *, last: bool = False) -> str | None:
    """The first (or `last`) text of a `role` message (skipping tool-call-only ones): ""
    when messages of that role exist but none has text, None when there is no such
    message."""
    if not isinstance(messages, list):
        return None
    found = False
    for message in reversed(messages) if last else messages:
        if isinstance(message, dict) and message.get("role") == role:
            found = True
            text = _text_of_message(message)
            if text:
                return text
    return "" if found else None


def user_text(value: Any) -> str | None:
    """The first user text of a run's input (string, messages, or Mastra's agent input)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        return _text_with_role(value, "user")
    if isinstance(value, dict):
        for key in ("inputMessages", "input_messages", "messages"):
            text = _text_with_role(value.get(key), "user")
            if text is not None:
                return text
        for key in ("prompt", "text", "content", "input", "user"):
            if key in value:
                text = _text_of_message({"content": value[key]}) if key != "text" else value[key]
                if isinstance(text, str):
                    return text
    return None


def assistant_text(value: Any) -> str | None:
    """The assistant text of a run's output (string, messages, or one message): in a message
    list the last assistant message with text, as Mastra (`@mastra/evals` 1.10.2) scores a
    multi-step reply on its final answer, not on an intermediate "Let me check…".

    "" means an empty output (an empty string, or assistant turns without text); None means
    there is no assistant text to read at all (a user-only transcript, plain strings in a
    list, a dict with no content): the caller must not treat that as empty.
    """
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        return _text_with_role(value, "assistant", last=True)
    if isinstance(value, dict) and value.get("role") in (None, "assistant"):
        if value.get("role") == "assistant" and value.get("content") is None:
            return ""  # a tool-call-only assistant message
        return _text_of_message(value)
    return None


def describe_shape(value: Any) -> str:
    """A few words on what a value is, for error messages (never its text)."""
    if isinstance(value, list):
        kinds = sorted({type(v).__name__ for v in value})
        roles = sorted({str(v.get("role")) for v in value if isinstance(v, dict)})
        detail = f" with roles {', '.join(roles)}" if roles else ""
        return f"a list of {len(value)} {'/'.join(kinds) or 'items'}{detail}"
    if isinstance(value, dict):
        keys = ", ".join(sorted(map(str, value))[:6])
        return f"a dict with keys {keys}" if keys else "an empty dict"
    return type(value).__name__


def extract_tool_results(output: Any) -> list[dict[str, Any]]:
    """Finished tool calls of an agent transcript: `[{tool_name, tool_call_id, args, result}]`.

    Reads Mastra messages (`content.toolInvocations`, or `content.parts` items of type
    `tool-invocation`, keeping state "result") and OpenAI chat messages (an assistant's
    `tool_calls` answered by a `role: "tool"` message with the same `tool_call_id`).
    """
    if not isinstance(output, list):
        return []
    results: list[dict[str, Any]] = []
    openai_calls: dict[str, tuple[str, Any]] = {}
    openai_order: list[str] = []
    openai_results: dict[str, Any] = {}
    for message in output:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if isinstance(content, dict):
            invocations = content.get("toolInvocations")
            if invocations is None and isinstance(content.get("parts"), list):
                invocations = [
                    p.get("toolInvocation")
                    for p in content["parts"]
                    if isinstance(p, dict) and p.get("type") == "tool-invocation"
                ]
            for invocation in invocations or []:
                if (
                    isinstance(invocation, dict)
                    and invocation.get("state") == "result"
                    and "result" in invocation
                ):
                    results.append(
                        {
                            "tool_name": invocation.get("toolName", ""),
                            "tool_call_id": invocation.get("toolCallId") or "",
                            "args": invocation.get("args") or {},
                            "result": invocation["result"],
                        }
                    )
        for call in message.get("tool_calls") or []:
            if not isinstance(call, dict):
                continue
            function = call.get("function") or {}
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments) if arguments else {}
                except ValueError:
                    arguments = {"_raw": arguments}
            call_id = call.get("id") or ""
            openai_calls[call_id] = (function.get("name", ""), arguments or {})
            openai_order.append(call_id)
        if message.get("role") == "tool" and "tool_call_id" in message:
            result = message.get("content")
            if isinstance(result, str):
                with contextlib.suppress(ValueError):
                    result = json.loads(result)
            openai_results[message["tool_call_id"]] = result
    for call_id in openai_order:
        if call_id in openai_results:
            name, args = openai_calls[call_id]
            results.append(
                {
                    "tool_name": name,
                    "tool_call_id": call_id,
                    "args": args,
                    "result": openai_results[call_id],
                }
            )
    return results
