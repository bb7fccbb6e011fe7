"""Prompt rendering: the GGUF's own chat template (jinja2, sandboxed), or plain completion."""

from __future__ import annotations

from functools import lru_cache

from localjudge.errors import ModelError


@lru_cache(maxsize=8)
def _compile(template: str):
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise ModelError(f"chat template refused the messages: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template)


def render_completion(messages: list[dict[str, str]]) -> str:
    """Plain completion format for base models: the texts in order, system first.

    A base model continues text, so the prompt is the instruction text itself; the role
    names would only be noise to it.
    """
    return "\n\n".join(m["content"] for m in messages if m.get("content")) + "\n"


def render_messages(
    template: str | None,
    messages: list[dict[str, str]],
    *,
    bos_token: str = "",
    eos_token: str = "",
    add_generation_prompt: bool = True,
) -> str:
    """Render `messages` with `template` (from GGUF metadata) or, without one, as completion.

    The BOS token is left out of the text: the tokenizer adds it.
    """
    if template is None:
        return render_completion(messages)
    text = _compile(template).render(
        messages=messages,
        bos_token=bos_token,
        eos_token=eos_token,
        add_generation_prompt=add_generation_prompt,
    )
    if bos_token and text.startswith(bos_token):
        text = text[len(bos_token) :]
    return text
