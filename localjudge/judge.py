"""`Judge`: a loaded judge model, its grammars, and the batching runtime that serves them.

A `Judge` is what scorers share: load it once, hand it to any number of scorers and
producers. It owns native handles: `close()` it, or use it in a `with` block.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

from localjudge.engine import EngineConfig, LlamaEngine
from localjudge.errors import GenerationError, ModelError
from localjudge.grammar import (
    CompiledGrammar,
    TokenVocabulary,
    build_vocabulary,
    compile_grammar,
    load_schema,
)
from localjudge.paths import cache_dir
from localjudge.prompts import PromptParts
from localjudge.registry import ResolvedModel, check_checksum, resolve
from localjudge.scheduler import (
    BatchRuntime,
    GenerationRequest,
    GenerationResult,
    SamplingParams,
    Scheduler,
)

DEFAULT_MAX_TOKENS = 192
DEFAULT_SLOTS = 16  # sequences per decode; on 2 CPU cores 16 still beats 8 (see the README)
MAX_SEQUENCES = 256  # llama.cpp's limit of sequences in one context (LLAMA_MAX_SEQ)


def _vocabulary_for(engine: LlamaEngine) -> TokenVocabulary:
    """The engine's grammar vocabulary, cached on disk per model file (walking 262k tokens
    through ctypes takes seconds). The cache holds arrays only: loading it runs no code."""
    stat = engine.path.stat()
    key = f"v3|{engine.path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{engine.n_vocab}"
    name = hashlib.sha256(key.encode()).hexdigest()[:32]
    cache_file = cache_dir("vocab") / f"{name}.npz"
    if cache_file.exists():
        try:
            return TokenVocabulary.load(cache_file)
        except Exception:  # partial, foreign or stale: rebuild it
            cache_file.unlink(missing_ok=True)
    vocabulary = build_vocabulary(
        engine.vocabulary_pieces(), eos_id=engine.eos_id, n_vocab=engine.n_vocab
    )
    partial = cache_file.with_name(f"{name}.{os.getpid()}.{threading.get_ident()}.tmp")
    vocabulary.save(partial)
    partial.replace(cache_file)
    return vocabulary


def check_slots(slots: int, max_prefixes: int) -> None:
    """Refuse sequence counts llama.cpp cannot hold, before anything is loaded."""
    if slots < 1 or max_prefixes < 1:
        raise ModelError(f"slots ({slots}) and max_prefixes ({max_prefixes}) must be at least 1")
    if slots + max_prefixes > MAX_SEQUENCES:
        raise ModelError(
            f"slots ({slots}) + shared-prefix sequences ({max_prefixes}) exceed llama.cpp's "
            f"{MAX_SEQUENCES} sequences per context: use at most {MAX_SEQUENCES - max_prefixes} slots"
        )


class JudgeBase:
    """What scorers use: grammars, prompt splitting and batched constrained generation.

    Subclasses provide `runtime`, `scheduler`, `vocabulary`, `chat_template`, `name`,
    `meaningful`, `tokenize()` and `render()`; `Judge` does it with llama.cpp, the fake judge
    in `localjudge.testing` with a scripted engine.
    """

    runtime: BatchRuntime
    scheduler: Scheduler
    vocabulary: TokenVocabulary
    chat_template: str | None = None
    name: str = "judge"
    meaningful: bool = True

    def __init__(self) -> None:
        self._grammars: dict[str, CompiledGrammar] = {}
        self._grammar_lock = threading.Lock()

    @property
    def slots(self) -> int:
        return self.scheduler.max_num_seqs

    @property
    def n_ctx(self) -> int:
        return self.scheduler.n_ctx

    def tokenize(self, text: str) -> list[int]:
        raise NotImplementedError

    def render(self, messages: list[dict[str, str]]) -> str:
        raise NotImplementedError

    def defuse(self, text: str) -> str:
        """User text made safe to tokenize with special tokens parsed (identity here)."""
        return text

    def split_prompt(self, parts: PromptParts) -> tuple[tuple[str, str], str]:
        """((instructions, shared), own) text of a prompt for this model.

        The two prefix segments are shared at two levels: the instructions by every request,
        the shared part (an item's context) by the requests of that item.
        """
        if self.chat_template is None:
            return (parts.instructions + "\n\n", parts.shared), parts.own
        start, own = "\x00localjudge-shared\x00", "\x00localjudge-own\x00"
        rendered = self.render(parts.messages(own, shared_text=start + parts.shared))
        head, found_start, rest = rendered.partition(start)
        shared, found_own, tail = rest.partition(own)
        if not (found_start and found_own):  # a template that rewrites content: share nothing
            return ("",), self.render(parts.messages())
        return (head, shared), self.defuse(parts.own) + tail

    # -- grammars -------------------------------------------------------------------------

    def grammar(self, schema: str | dict) -> CompiledGrammar:
        """Compile (or fetch) the grammar of a schema name in `grammars/` or a schema dict."""
        if isinstance(schema, str):  # the common case, once per request: no JSON work
            grammar = self._grammars.get(schema)
            if grammar is None:
                grammar = self._grammars[schema] = self.grammar(load_schema(schema))
            return grammar
        schema_dict = schema
        key = json.dumps(schema_dict, sort_keys=True)
        with self._grammar_lock:
            grammar = self._grammars.get(key)
            if grammar is None:
                grammar = compile_grammar(schema_dict, self.vocabulary)
                self._grammars[key] = grammar
            return grammar

    # -- generation -----------------------------------------------------------------------

    def request(
        self,
        suffix: str,
        schema: str | dict | CompiledGrammar,
        *,
        prefix: str | tuple[str, ...] = "",
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> GenerationRequest:
        grammar = schema if isinstance(schema, CompiledGrammar) else self.grammar(schema)
        return GenerationRequest(
            prefix=prefix,
            suffix=suffix,
            grammar=grammar,
            max_tokens=max_tokens,
            sampling=SamplingParams(temperature=temperature, seed=seed),
        )

    def submit(self, request: GenerationRequest) -> Future:
        return self.runtime.submit(request)

    def submit_many(self, requests: Sequence[GenerationRequest]) -> list[Future]:
        """Queue requests together: they are admitted in the same scheduler step."""
        return self.runtime.submit_many(requests)

    def cancel(self, request_id: str) -> None:
        self.runtime.cancel(request_id)

    def generate_json(
        self,
        prompt: str,
        schema: str | dict | CompiledGrammar,
        *,
        prefix: str | tuple[str, ...] = "",
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float = 0.0,
        seed: int | None = None,
        timeout: float | None = None,
    ) -> GenerationResult:
        """One constrained generation: `prefix + prompt` in, schema-valid JSON out.

        `timeout` (seconds): past it the request is cancelled and `GenerationError` raised.
        """
        request = self.request(
            prompt, schema, prefix=prefix, max_tokens=max_tokens, temperature=temperature, seed=seed
        )
        future = self.submit(request)
        try:
            return future.result(timeout)
        except FutureTimeout:
            future.cancel()
            raise GenerationError(
                f"no reply within {timeout:g} s; the request was cancelled"
            ) from None

    def generate_many(
        self, requests: Sequence[GenerationRequest]
    ) -> list[GenerationResult | Exception]:
        """Run requests together (they share decode steps); an entry per request, in order."""
        return self.runtime.run(requests)

    # -- lifetime -------------------------------------------------------------------------

    def close(self) -> None:
        self.runtime.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


class Judge(JudgeBase):
    """A judge model loaded in-process through llama.cpp, serving constrained generations in
    batches. It owns native handles: `close()` it, or use it in a `with` block."""

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        slots: int | None = None,
        max_prefixes: int = 8,
        n_ctx: int | None = None,
        n_batch: int = 512,
        n_ubatch: int = 256,
        n_threads: int | None = None,
        n_gpu_layers: int | None = None,
        jump_forward: bool = True,
        verbose: bool = False,
    ) -> None:
        super().__init__()
        self.model: ResolvedModel = resolve(model)
        check_checksum(self.model)
        recommended = self.model.entry.recommended if self.model.entry else {}
        slots = slots or int(recommended.get("slots", DEFAULT_SLOTS))
        check_slots(slots, max_prefixes)
        config = EngineConfig(
            n_ctx=n_ctx or int(recommended.get("n_ctx", 8192)),
            n_seq_max=slots + max_prefixes,
            n_batch=n_batch,
            n_ubatch=n_ubatch,
            n_threads=n_threads,
            n_gpu_layers=n_gpu_layers,
            verbose=verbose,
        )
        self.engine = LlamaEngine(self.model.path, config)
        try:
            self.vocabulary = _vocabulary_for(self.engine)
            self.chat_template = self.engine.chat_template
            self.parse_special = self.chat_template is not None
            self._control_by_first: dict[str, list[str]] = {}  # longest first within a group
            for text in getattr(self.vocabulary, "control_texts", ()):
                self._control_by_first.setdefault(text[0], []).append(text)
            firsts = "".join(re.escape(c) for c in self._control_by_first)
            self._control_starts = re.compile(f"[{firsts}]") if firsts else None
            self.scheduler = Scheduler(
                vocabulary=self.vocabulary,
                n_ctx=self.engine.n_ctx,
                max_num_seqs=slots,
                max_num_prefixes=max_prefixes,
                token_budget=n_batch,
                jump_forward=jump_forward,
            )
            self.runtime = BatchRuntime(self.engine, self.scheduler, self.tokenize)
        except BaseException:
            self.engine.close()
            raise

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def meaningful(self) -> bool:
        """False for judges whose verdicts are not meaningful (the embedded base model)."""
        return self.model.meaningful

    def tokenize(self, text: str) -> list[int]:
        return self.engine.tokenize(text, add_special=True, parse_special=self.parse_special)

    def render(self, messages: list[dict[str, str]]) -> str:
        """Prompt text for `messages`: the GGUF chat template, or plain completion.

        With a chat template the prompt is tokenized with special tokens parsed (the
        template's `<start_of_turn>` must become one token), so control-token texts inside
        the messages are defused first: a zero-width space after their first character
        keeps "<end_of_turn>" written by a user from ending the turn.
        """
        if self.chat_template is not None:
            messages = [{**m, "content": self.defuse(m.get("content", ""))} for m in messages]
        return self.engine.render_chat(messages)

    def defuse(self, text: str) -> str:
        if self._control_starts is None or not text:
            return text
        out: list[str] = []
        done = 0
        for found in self._control_starts.finditer(text):
            i = found.start()
            if i < done:
                continue
            match = next(
                (c for c in self._control_by_first[text[i]] if text.startswith(c, i)), None
            )
            if match is not None:
                out.append(text[done:i] + match[0] + "\u200b" + match[1:])
                done = i + len(match)
        out.append(text[done:])
        return "".join(out)

    def close(self) -> None:
        self.runtime.close()
        self.engine.close()
