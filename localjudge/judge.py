"""`Judge`: a loaded judge model, its grammars, and the batching runtime that serves them.

A `Judge` is what scorers share: load it once, hand it to any number of scorers and
producers. It owns native handles: `close()` it, or use it in a `with` block.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from pathlib import Path

from localjudge.engine.base import Engine
from localjudge.errors import GenerationError, ModelError
from localjudge.grammar import (
    CompiledGrammar,
    TokenVocabulary,
    build_vocabulary,
    compile_grammar,
    load_schema,
)
from localjudge.grammar.compiled import prune_disk_cache
from localjudge.model_registry import (
    ResolvedModel,
    added_adapter_weights,
    check_checksum,
    resolve,
    stale_calibrations,
    threshold_in_use,
    weights_of,
)
from localjudge.paths import cache_dir
from localjudge.prompts import ChatQuestion, PromptParts
from localjudge.scheduler import (
    BatchRuntime,
    GenerationRequest,
    GenerationResult,
    Reread,
    SamplingParams,
    Scheduler,
)

DEFAULT_MAX_TOKENS = 192
DEFAULT_MAX_GRAMMARS = 32  # compiled schema dicts kept in memory (a named schema always is)
DEFAULT_SLOTS = 32  # sequences per decode (README: `bench --slots` compares)
AUTO_PREFIX_TOKENS = 32  # shortest token prefix worth a shared group of its own
# host memory for saved prefix states (the prompt cache; README: what a context takes)
DEFAULT_PROMPT_CACHE_MIB = 512
MAX_SEQUENCES = 256  # llama.cpp's limit of sequences in one context (LLAMA_MAX_SEQ)
# the vocabulary cache on disk: ~6 MiB a model file, least recently used pruned past this
VOCABULARY_CACHE_BYTES = 256 << 20


def _vocabulary_for(engine: Engine) -> TokenVocabulary:
    """The engine's grammar vocabulary, cached on disk under the engine's `cache_key`
    (walking 262k tokens through ctypes takes seconds). The cache holds arrays only:
    loading it runs no code."""
    key = engine.cache_key
    cache_file = None
    if key is not None:
        name = hashlib.sha256(f"v5|{key}|{engine.n_vocab}".encode()).hexdigest()[:32]
        cache_file = cache_dir("vocab") / f"{name}.npz"
        if cache_file.exists():
            try:
                vocabulary = TokenVocabulary.load(cache_file)
            except Exception:  # partial, foreign or stale: rebuild it
                cache_file.unlink(missing_ok=True)
            else:
                with contextlib.suppress(OSError):
                    os.utime(cache_file)  # recently used: pruned last
                return vocabulary
    vocabulary = build_vocabulary(
        engine.vocabulary_pieces(),
        eos_id=engine.eos_id,
        n_vocab=engine.n_vocab,
        eog_ids=engine.eog_ids,
    )
    if cache_file is None:
        return vocabulary
    partial = cache_file.with_name(f"{name}.{os.getpid()}.{threading.get_ident()}.tmp")
    vocabulary.save(partial)
    partial.replace(cache_file)
    # files of model files since changed or removed, or of an older cache format
    prune_disk_cache(cache_file.parent, VOCABULARY_CACHE_BYTES, keep=cache_file)
    return vocabulary


def check_slots(slots: int, max_prefixes: int, keep_prompts: int | None = None) -> int:
    """Refuse sequence counts llama.cpp cannot hold, before anything is loaded; the number
    of finished prompts to keep (`keep_prompts`; None: one per slot, as many as fit)."""
    if slots < 1 or max_prefixes < 1:
        raise ModelError(f"slots ({slots}) and max_prefixes ({max_prefixes}) must be at least 1")
    if slots + max_prefixes > MAX_SEQUENCES:
        raise ModelError(
            f"slots ({slots}) + shared-prefix sequences ({max_prefixes}) exceed llama.cpp's "
            f"{MAX_SEQUENCES} sequences per context: use at most {MAX_SEQUENCES - max_prefixes} slots"
        )
    room = MAX_SEQUENCES - slots - max_prefixes
    if keep_prompts is None:
        return min(slots, room)
    if not 0 <= keep_prompts <= room:
        raise ModelError(
            f"keep_prompts ({keep_prompts}) must be 0 to {room}: slots ({slots}), shared-prefix "
            f"sequences ({max_prefixes}) and kept prompts share llama.cpp's {MAX_SEQUENCES} "
            "sequences per context"
        )
    return keep_prompts


class Judge:
    """A loaded judge model: its engine, grammars, and the batching runtime that serves them.

    A composition: `Judge(engine, slots=...)` builds the grammar vocabulary, the scheduler
    and the runtime once over any `Engine`; `Judge.load(model)` resolves a registry name or
    a `.gguf` path and loads it with llama.cpp. Scorers share one judge. It owns native
    handles: `close()` it, or use it in a `with` block.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        slots: int = DEFAULT_SLOTS,
        max_prefixes: int = 8,
        token_budget: int = 512,
        jump_forward: bool = True,
        name: str | None = None,
        meaningful: bool = True,
        model: ResolvedModel | None = None,
        cache_prefixes: bool = False,
        extracts_claims: bool | None = None,
        writes_reasons: bool | None = None,
        prompt_cache_mib: float | None = None,
        keep_prompts: int | None = None,
        window_tokens: int | None = None,
        added_weights: dict[str, str] | None = None,
    ) -> None:
        keep_prompts = check_slots(slots, max_prefixes, keep_prompts)
        prefill_bytes = engine.prefill_bytes
        if prompt_cache_mib is None:  # the default host memory for prompts, both kinds
            prompt_cache_mib = max(0.0, DEFAULT_PROMPT_CACHE_MIB - prefill_bytes / (1 << 20))
        if not prompt_cache_mib >= 0:
            raise ValueError(f"prompt_cache_mib must be 0 or more, not {prompt_cache_mib!r}")
        self.engine = engine
        self.model = model  # the registry's view of it, when it came from there
        self.name = name or engine.name
        self.meaningful = meaningful  # False: a base model, its verdicts mean nothing
        # False: a judge tuned for verdicts only; the hallucination scorer splits sentences
        self.extracts_claims = meaningful if extracts_claims is None else extracts_claims
        # a judge marked fit for free text writes its own reasons (None: as it extracts claims)
        self.writes_reasons = self.extracts_claims if writes_reasons is None else writes_reasons
        # the context size it judges best, in tokens: longer contexts are cut into evidence
        # windows of this size (None: as large as its context allows)
        self.window_tokens = window_tokens
        # an adapter added at load (`load(adapter=...)`): its sha256 and scale
        self.added_weights = dict(added_weights or {})
        self.chat_template = engine.chat_template
        self.parse_special = self.chat_template is not None
        self._grammars: dict[str, CompiledGrammar] = {}  # named schemas, kept
        self._schema_grammars: OrderedDict[str, CompiledGrammar] = OrderedDict()  # LRU
        self._compiling: dict[str, Future] = {}  # key -> the compile under way
        self.max_grammars = DEFAULT_MAX_GRAMMARS
        self._thresholds: dict[str, tuple[float, str] | None] = {}
        self._grammar_lock = threading.Lock()
        try:
            self.vocabulary = _vocabulary_for(engine)
            self._control_by_first: dict[str, list[str]] = {}  # longest first within a group
            for text in self.vocabulary.control_texts:
                self._control_by_first.setdefault(text[0], []).append(text)
            firsts = "".join(re.escape(c) for c in self._control_by_first)
            self._control_starts = re.compile(f"[{firsts}]") if firsts else None
            self.scheduler = Scheduler(
                vocabulary=self.vocabulary,
                n_ctx=engine.n_ctx,
                max_num_seqs=slots,
                max_num_prefixes=max_prefixes,
                token_budget=token_budget,
                jump_forward=jump_forward,
                cache_prefixes=cache_prefixes,
                auto_prefix=AUTO_PREFIX_TOKENS if cache_prefixes else 0,
                prompt_cache_bytes=int(prompt_cache_mib * (1 << 20)),
                max_kept_prompts=keep_prompts,
                prefill_cells=engine.prefill_cells,
                swa_window=engine.swa_window,
            )
            self.runtime = BatchRuntime(engine, self.scheduler, self.tokenize)
        except BaseException:
            engine.close()
            raise

    @classmethod
    def load(
        cls,
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
        cache_prefixes: bool = False,
        adapter: str | Path | None = None,
        adapter_scale: float = 1.0,
        prompt_cache_mib: float | None = None,
        keep_prompts: int | None = None,
        prefill_cells: int = 0,
    ) -> Judge:
        """Load `model` (a registry name, a `.gguf` path, or None for the default) with
        llama.cpp (the front ends' `load_judge` gives the scripted fake judge instead when
        `LOCALJUDGE_ENGINE=fake`, for tests of everything above the engine). `cache_prefixes` keeps
        evaluated shared prefixes after their last request, and lets requests that name no
        prefix share their longest common token prefix with any request before them (a
        server's choice: requests that start the same way skip that prefill). `adapter`: a
        GGUF LoRA adapter applied to every sequence (beside any the registry entry names).
        `prompt_cache_mib`: host memory for the prompt cache, where a shared prefix
        (instructions, a context) is saved when it leaves the KV cache, so a later request
        with the same prefix restores its cells instead of evaluating it again (None, the
        default: `DEFAULT_PROMPT_CACHE_MIB` less the prefill context's KV cache, so that the
        two together take the same host memory; 0: off). `keep_prompts`: how many finished
        requests' prompts stay in the KV cache with the logits at their last token (least
        recently used out first, whenever cells are needed), so that the same request sent
        again evaluates nothing and starts from the very numbers the first one read (None,
        the default: one per slot, as many as llama.cpp's sequence limit allows; 0: off).
        Each costs a row of logits in host memory (vocabulary size x 4 bytes: 1 MiB for
        Gemma 3). `prefill_cells`: the KV cells of a second, small llama.cpp context where
        long shared prefixes (an item's context) are evaluated apart and then moved in:
        there, their tokens attend over their own cells only, not over the cells of every
        other context alive (0, the default: off; 4096 holds a 3,500-token context below
        its instructions; opened for the first such prefix; see the README for what it
        gains and costs)."""
        resolved = resolve(model)
        check_checksum(resolved)
        recommended = resolved.entry.recommended if resolved.entry else {}
        slots = slots or int(recommended.get("slots", DEFAULT_SLOTS))
        keep_prompts = check_slots(slots, max_prefixes, keep_prompts)
        adapters = resolved.adapters
        name = resolved.name
        added = None
        if adapter is not None:
            adapter = Path(adapter).expanduser()
            if not adapter.is_file():
                raise ModelError(f"adapter file not found: {adapter}")
            adapters += ((adapter, float(adapter_scale)),)
            name = f"{name}+{adapter.stem}"  # another judge: its own calibrations
            added = added_adapter_weights(adapter, float(adapter_scale))  # what was loaded
        if prefill_cells < 0:
            raise ValueError(f"prefill_cells must be 0 or more, not {prefill_cells!r}")
        from localjudge.engine import EngineConfig, open_engine  # llama_cpp, on first use

        config = EngineConfig(
            adapters=adapters,
            n_ctx_prefill=prefill_cells,
            n_ctx=n_ctx or int(recommended.get("n_ctx", 8192)),
            n_seq_max=slots + max_prefixes + keep_prompts,
            n_batch=n_batch,
            n_ubatch=n_ubatch,
            n_threads=n_threads,
            n_gpu_layers=n_gpu_layers,
            verbose=verbose,
        )
        return cls(
            open_engine("llama", resolved.path, config),
            slots=slots,
            max_prefixes=max_prefixes,
            token_budget=n_batch,
            jump_forward=jump_forward,
            name=name,
            meaningful=resolved.meaningful,
            extracts_claims=resolved.extracts_claims,  # False for mechanics-only entries too
            writes_reasons=resolved.writes_reasons,  # only a judge marked fit for them
            model=resolved,
            cache_prefixes=cache_prefixes,
            prompt_cache_mib=prompt_cache_mib,
            keep_prompts=keep_prompts,
            window_tokens=recommended.get("window_tokens"),
            added_weights=added,
        )

    @property
    def slots(self) -> int:
        return self.scheduler.max_num_seqs

    @property
    def n_ctx(self) -> int:
        return self.scheduler.n_ctx

    @property
    def weights(self) -> dict[str, str]:
        """What a stored calibration of this judge was fitted on: the sha256 of its model
        file and adapter as its own registry entry records them, and with an adapter added
        at load, the base's as its entry records them and that adapter's own sha256 and
        scale ({} for a judge with neither)."""
        entry = getattr(self.model, "entry", None)
        if entry is not None and entry.name == self.name:
            return weights_of(entry)
        if self.added_weights:
            return {**weights_of(entry), **self.added_weights}
        return {}

    def tokenize(self, text: str) -> list[int]:
        return self.engine.tokenize(text, add_special=True, parse_special=self.parse_special)

    def render(self, messages: list[dict[str, str]]) -> str:
        """Prompt text for `messages`: the model's chat template, or plain completion.

        With a chat template the prompt is tokenized with special tokens parsed (the
        template's `<start_of_turn>` must become one token), so control-token texts inside
        the messages are defused first: a zero-width space after their first character
        keeps "<end_of_turn>" written by a user from ending the turn.
        """
        if self.chat_template is not None:
            messages = [{**m, "content": self.defuse(m.get("content", ""))} for m in messages]
        return self.engine.render_chat(messages)

    def defuse(self, text: str) -> str:
        """User text made safe to tokenize with special tokens parsed."""
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

    def split_prompt(self, parts: PromptParts) -> tuple[tuple[str, str], str]:
        """((instructions, shared), own) text of a prompt for this model.

        The two prefix segments are shared at two levels: the instructions by every request,
        the shared part (an item's context) by the requests of that item.
        """
        return self._split(self.asked(parts)[0])

    def _split(self, parts: PromptParts) -> tuple[tuple[str, str], str]:
        """`split_prompt` of parts already put as this judge is asked (`asked`)."""
        if self.chat_template is None:
            return (parts.instructions + "\n\n", parts.shared), parts.own
        start, own = "\x00localjudge-shared\x00", "\x00localjudge-own\x00"
        rendered = self.render(parts.messages(own, shared_text=start + parts.shared))
        head, found_start, rest = rendered.partition(start)
        shared, found_own, tail = rest.partition(own)
        if not (found_start and found_own):  # a template that rewrites content: share nothing
            return ("",), self.render(parts.messages())
        return (head, shared), self.defuse(parts.own) + tail

    # -- calibration ----------------------------------------------------------------------

    def verdict_threshold(self, prompt_version: str) -> tuple[float, str] | None:
        """The P(yes) threshold for this judge and prompt version, and where it came from:
        one `localjudge calibrate` stored for it ("calibrate"), else the one its registry
        entry ships (`recommended.thresholds`, fitted on sources held out from its
        training: "registry"); None: the judge's own verdict stands."""
        cached = self._thresholds.get(prompt_version, False)
        if cached is False:
            entry = getattr(self.model, "entry", None)
            weights = self.weights
            cached = threshold_in_use(self.name, entry, prompt_version, weights)
            self._thresholds[prompt_version] = cached
            if prompt_version in stale_calibrations(self.name, entry, weights):
                warnings.warn(
                    f"{self.name}: the threshold `localjudge calibrate` stored for "
                    f"{prompt_version} was fitted on other weights (the model or its adapter "
                    "changed since), so it is not used; run calibrate again",
                    stacklevel=2,
                )
        return cached

    # -- grammars -------------------------------------------------------------------------

    def grammar(self, schema: str | dict) -> CompiledGrammar:
        """Compile (or fetch) the grammar of a schema name in `grammars/` or a schema dict.
        The same schema asked for by several threads at once is compiled once; different
        schemas compile side by side. Schema dicts stay compiled in memory up to
        `max_grammars` (least recently used out first); named schemas always stay."""
        if isinstance(schema, str):  # the common case, once per request: no JSON work
            grammar = self._grammars.get(schema)
            if grammar is None:
                grammar = self._compile_once(schema, lambda: load_schema(schema), self._grammars)
            return grammar
        key = json.dumps(schema, sort_keys=True)
        return self._compile_once(key, lambda: schema, self._schema_grammars)

    def _compile_once(self, key: str, schema_of, store: dict) -> CompiledGrammar:
        with self._grammar_lock:
            grammar = store.get(key)
            if grammar is not None:
                if store is self._schema_grammars:
                    self._schema_grammars.move_to_end(key)
                return grammar
            pending = self._compiling.get(key)
            owner = pending is None
            if owner:
                pending = self._compiling[key] = Future()
        if not owner:
            return pending.result()  # compiled by the thread that asked first
        try:
            grammar = compile_grammar(schema_of(), self.vocabulary)
        except BaseException as error:
            with self._grammar_lock:
                del self._compiling[key]
            pending.set_exception(error)
            raise
        with self._grammar_lock:
            del self._compiling[key]
            store[key] = grammar
            while len(self._schema_grammars) > self.max_grammars:
                self._schema_grammars.popitem(last=False)
        pending.set_result(grammar)
        return grammar

    @property
    def grammars_in_memory(self) -> int:
        """Compiled grammars held: the named schemas' and the schema dicts' kept."""
        return len(self._grammars) + len(self._schema_grammars)

    def request(
        self,
        suffix: str,
        schema: str | dict | CompiledGrammar | None,
        *,
        prefix: str | tuple[str, ...] = "",
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float = 0.0,
        seed: int | None = None,
        on_text: Callable[[str], None] | None = None,
        reasons_for: frozenset[str] | None = None,
        decision_field: str = "verdict",
        reason_field: str = "reason",
        reread: Reread | None = None,
    ) -> GenerationRequest:
        """A request for `prefix + suffix`; `schema` None asks for free text (stops at an
        end-of-generation token or `max_tokens`). `on_text` receives the output as it is
        chosen (on the worker thread). `reasons_for`: the values of `decision_field` whose
        `reason_field` is decoded (the others close it at once; None: all)."""
        if schema is None or isinstance(schema, CompiledGrammar):
            grammar = schema
        else:
            grammar = self.grammar(schema)
        return GenerationRequest(
            prefix=prefix,
            suffix=suffix,
            grammar=grammar,
            max_tokens=max_tokens,
            sampling=SamplingParams(temperature=temperature, seed=seed),
            on_text=on_text,
            reasons_for=reasons_for,
            decision_field=decision_field,
            reason_field=reason_field,
            reread=reread,
        )

    def prompt_request(
        self,
        parts: PromptParts,
        schema: str | dict | CompiledGrammar,
        max_tokens: int,
        *,
        reasons_for: frozenset[str] | None = None,
        decision_field: str = "verdict",
        reason_field: str = "reason",
    ) -> GenerationRequest:
        """A request for a prompt: rendered for this judge, split into its shared prefix
        and its own part."""
        parts, question = self.asked(parts)
        reread = None
        if question is not None:  # asked the chat way: read back in the caller's terms
            reread = Reread(question.decision_field, decision_field, question.means)
            schema, decision_field = question.schema, question.decision_field
            if reasons_for is not None:
                reasons_for = frozenset(
                    v for v, meant in question.means.items() if meant in reasons_for
                )
        prefix, suffix = self._split(parts)
        return self.request(
            suffix, schema, prefix=prefix, max_tokens=max_tokens, reasons_for=reasons_for,
            decision_field=decision_field, reason_field=reason_field, reread=reread,
        )  # fmt: skip

    def asked(self, parts: PromptParts) -> tuple[PromptParts, ChatQuestion | None]:
        """The prompt this judge is given: with a chat template, the question as `parts.chat`
        puts it (and that question, to read the reply back), else `parts` as they are."""
        question = parts.chat if self.chat_template is not None else None
        if question is None:
            return parts, None
        return replace(parts, instructions=question.instructions, chat=None), question

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
        """Stop the runtime (pending requests fail cleanly), then free the engine and the
        prompt cache's host memory."""
        self.runtime.close()
        self.engine.close()
        if self.scheduler.prompt_cache is not None:  # the worker has stopped: ours to clear
            self.scheduler.prompt_cache.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
