"""llama.cpp through llama-cpp-python's low-level API: load a GGUF, tokenize, decode batches.

One `LlamaEngine` owns one model and one context with a unified KV cache holding several
sequences (and, optionally, a small second context where long shared prefixes are
evaluated apart, their cells then moved into the first). It executes `StepPlan`s built by
the scheduler and frees its native handles deterministically (`close()` or a `with`
block). It never downloads anything.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import llama_cpp
import numpy as np

from localjudge.engine.base import ATTR_CONTROL
from localjudge.engine.gguf import GGUFHeader, read_gguf_header
from localjudge.engine.plan import BatchToken, PrefixPrefill, StepOutput, StepPlan
from localjudge.errors import GenerationError, ModelError

_backend_lock = threading.Lock()
_backend_ready = False


@llama_cpp.llama_log_callback
def _quiet_log(level, text, user_data):  # noqa: ARG001 - signature fixed by llama.cpp
    return None


@llama_cpp.llama_log_callback
def _stderr_log(level, text, user_data):  # noqa: ARG001 - signature fixed by llama.cpp
    sys.stderr.write(text.decode("utf-8", "replace"))


def _init_backend(verbose: bool | None) -> None:
    """llama.cpp's backends, once; its log to stderr or nowhere (None: left as it is)."""
    global _backend_ready
    with _backend_lock:
        if not _backend_ready:
            llama_cpp.llama_backend_init()
            _backend_ready = True
        if verbose is not None:
            llama_cpp.llama_log_set(_stderr_log if verbose else _quiet_log, ctypes.c_void_p(0))


def physical_cores() -> int:
    """Physical core count (llama.cpp's default of 4 threads is slower on 2 cores)."""
    try:
        import psutil

        count = psutil.cpu_count(logical=False)
    except ImportError:  # pragma: no cover - psutil is a dependency
        count = None
    return max(1, count or os.cpu_count() or 1)


def default_threads() -> int:
    """The threads a judge uses when none are given: `LOCALJUDGE_THREADS` when set (a
    positive integer), else the physical core count."""
    value = os.environ.get("LOCALJUDGE_THREADS", "").strip()
    if not value:
        return physical_cores()
    if not value.isdigit() or int(value) < 1:
        raise ModelError(f"LOCALJUDGE_THREADS must be a positive integer, not {value!r}")
    return int(value)


def gpu_offload_available() -> bool:
    """Whether this llama.cpp build has a GPU backend that can take layers."""
    return bool(llama_cpp.llama_supports_gpu_offload())


def amx_kernels_in_build() -> bool:
    """Whether this llama.cpp build holds ggml's AMX matrix kernels (`AMX_INT8 = 1` in its
    system info: built with -march=native on a CPU with AMX, or for one)."""
    _init_backend(verbose=None)  # a verbose engine being loaded keeps its log
    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
    return "AMX_INT8 = 1" in info


def extra_buffers_allowed() -> bool:
    """Whether models load with llama.cpp's extra CPU buffer types (weights repacked for
    this CPU's matrix kernels, AMX among them).

    Not in a build with ggml's AMX kernels, unless `LOCALJUDGE_LLAMA_AMX=1` says that build
    is known good: in the llama.cpp that llama-cpp-python 0.3.36 vendors, the compiler
    drops the stores that fill the AMX tile configuration (it is built on the stack and only
    its palette survives), so the first batched matrix product on a CPU with AMX dies with
    SIGILL, taking the user's process with it (measured with GCC 12 on a Xeon with AMX; the
    fix is llama.cpp pull request 26954, unmerged). Without extra buffers those products run
    on the plain AVX-512/AVX2 kernels, unrepacked: never a crash, the same verdicts, on the
    embedded judge about the same speed (README, "Failure behaviour"). `make install` builds
    llama.cpp without the AMX kernels, so this applies to builds from elsewhere."""
    if os.environ.get("LOCALJUDGE_LLAMA_AMX", "").strip() == "1":
        return True
    return not amx_kernels_in_build()


def llama_build_info() -> dict[str, object]:
    """What the installed llama.cpp can do: version, CPU features, GPU offload."""
    _init_backend(verbose=False)
    return {
        "llama_cpp_python": llama_cpp.__version__,
        "system_info": llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip(),
        "gpu_offload": gpu_offload_available(),
        "physical_cores": physical_cores(),
        "amx_kernels": amx_kernels_in_build(),
        "extra_buffers": extra_buffers_allowed(),
    }


@dataclass(frozen=True)
class EngineConfig:
    """How to load a judge model. `None` means "pick the sensible default for this machine"."""

    n_ctx: int = 8192  # KV cells shared by all sequences (unified cache)
    n_seq_max: int = 24  # sequences alive at once: request slots plus shared prefixes
    n_batch: int = 512  # most tokens in one llama_decode call
    n_ubatch: int = 256  # micro-batch; compute buffer ~ n_ubatch x vocab x 4 bytes
    n_threads: int | None = None  # None: default_threads()
    n_gpu_layers: int | None = None  # None: all layers when offload is available, else 0
    verbose: bool = False  # let llama.cpp print its own logs
    # LoRA adapters (GGUF file, scale) applied to every sequence of the context
    adapters: tuple[tuple[Path, float], ...] = ()
    # KV cells of a second, small context where long shared prefixes are evaluated apart
    # (`PrefixPrefill`), attending over their own cells only; 0: none
    n_ctx_prefill: int = 0


class LlamaEngine:
    """A loaded GGUF model with a multi-sequence llama.cpp context (an `Engine`)."""

    def __init__(self, path: str | Path, config: EngineConfig | None = None) -> None:
        self.config = config or EngineConfig()
        self.path = Path(path)
        self.name = self.path.name
        self.header: GGUFHeader = read_gguf_header(self.path)
        _init_backend(self.config.verbose)
        self._model = None
        self._ctx = None
        self._batch = None
        self._adapters: list[tuple[object, float]] = []  # LoRA handles, freed with the model
        # the prefill context: its cells, and the tokens its sequence 0 holds
        self._pctx = None
        self._pbatch = None
        self._prefill_held: tuple[int, ...] = ()
        self.prefill_cells = 0  # the longest prefix it takes (0: no prefill context)
        self.prefill_bytes = 0  # its KV cache's size
        self._decode_lock = threading.Lock()  # one llama_decode at a time
        self._users = 0  # calls inside the native library right now (any thread)
        self._users_changed = threading.Condition()
        self._closing = False
        n_gpu_layers = self.config.n_gpu_layers
        if n_gpu_layers is None:
            n_gpu_layers = -1 if gpu_offload_available() else 0
        self.n_gpu_layers = n_gpu_layers
        self.n_threads = self.config.n_threads or default_threads()

        model_params = llama_cpp.llama_model_default_params()
        model_params.n_gpu_layers = n_gpu_layers
        model_params.use_extra_bufts = extra_buffers_allowed()
        model = llama_cpp.llama_model_load_from_file(str(self.path).encode(), model_params)
        if not model:
            raise ModelError(
                f"{self.path}: llama.cpp could not load this GGUF (truncated or corrupt?)"
            )
        self._model = model
        self._vocab = llama_cpp.llama_model_get_vocab(model)
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self._vocab))
        self.n_ctx_train = int(llama_cpp.llama_model_n_ctx_train(model))
        # the sliding window of its SWA layers (0: none); see `Scheduler.swa_window`
        self.swa_window = int(llama_cpp.llama_model_n_swa(model))

        ctx_params = llama_cpp.llama_context_default_params()
        ctx_params.n_ctx = self.config.n_ctx
        ctx_params.n_batch = self.config.n_batch
        ctx_params.n_ubatch = min(self.config.n_ubatch, self.config.n_batch)
        ctx_params.n_seq_max = self.config.n_seq_max
        ctx_params.n_threads = self.n_threads
        ctx_params.n_threads_batch = self.n_threads
        ctx_params.kv_unified = True
        # the SWA layers' cache as large as the others' (llama.cpp still gives a sequence's
        # cells a window behind its end to other tokens: see `Scheduler.swa_window`)
        ctx_params.swa_full = True
        ctx_params.no_perf = True
        ctx = llama_cpp.llama_init_from_model(model, ctx_params)
        if not ctx:
            self.close()
            raise ModelError(
                f"{self.path}: llama.cpp could not create a context "
                f"(n_ctx={self.config.n_ctx}, n_seq_max={self.config.n_seq_max}; out of memory?)"
            )
        self._ctx = ctx
        self._load_adapters()
        if not self._set_adapters(ctx):
            self.close()
            raise ModelError(f"{self.name}: llama.cpp could not set the LoRA adapters")
        self.n_ctx = int(llama_cpp.llama_n_ctx(ctx))
        self._memory = llama_cpp.llama_get_memory(ctx)
        self._batch = llama_cpp.llama_batch_init(self.config.n_batch, 0, 1)
        if self.config.n_ctx_prefill > 0:  # opened when a prefix first needs it
            self._pparams = type(ctx_params).from_buffer_copy(ctx_params)
            self._pparams.n_ctx = min(self.config.n_ctx_prefill, self.n_ctx)
            self._pparams.n_seq_max = 2  # the prefix, and a view of its own cells for the move
            self.prefill_cells = int(self._pparams.n_ctx)
            self.prefill_bytes = self.prefill_cells * self.header.kv_bytes_per_cell
        self.eos_id = int(llama_cpp.llama_vocab_eos(self._vocab))
        self.add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self._vocab))
        self.chat_template = self.header.chat_template
        bos_id = int(llama_cpp.llama_vocab_bos(self._vocab))
        self._bos_text = self._token_bytes(bos_id, True).decode("utf-8", "replace")
        self._eos_text = self._token_bytes(self.eos_id, True).decode("utf-8", "replace")

    # -- lifetime -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _use(self):
        """Hold the native handles open for the duration of a call, from any thread.

        Tokenization runs on producers' threads while the worker decodes; `close()` waits
        until no call is inside llama.cpp, and calls after it raise `ModelError` instead of
        touching freed memory.
        """
        with self._users_changed:
            if self._closing or self._ctx is None:
                raise ModelError(f"{self.path}: engine is closed")
            self._users += 1
        try:
            yield
        finally:
            with self._users_changed:
                self._users -= 1
                self._users_changed.notify_all()

    def _load_adapters(self) -> None:
        """Load the configured LoRA adapters; they are freed with the model."""
        for path, scale in self.config.adapters:
            handle = llama_cpp.llama_adapter_lora_init(self._model, str(path).encode())
            if not handle:
                self.close()
                raise ModelError(
                    f"{path}: llama.cpp could not load this LoRA adapter for {self.name} "
                    "(not a GGUF LoRA, or made for another architecture or shape)"
                )
            self._adapters.append((handle, scale))

    def _set_adapters(self, ctx) -> bool:
        """Set the loaded adapters on a context (llama.cpp applies a context's adapters to
        all of its sequences); False if llama.cpp refused."""
        handles = self._adapters
        if not handles:
            return True
        adapters = (llama_cpp.llama_adapter_lora_p_ctypes * len(handles))(*(h for h, _ in handles))
        scales = (ctypes.c_float * len(handles))(*(float(s) for _, s in handles))
        return llama_cpp.llama_set_adapters_lora(ctx, adapters, len(handles), scales) == 0

    def _open_prefill_context(self) -> None:
        """The prefill context, opened for the first prefix evaluated apart (a judge of
        short contexts never pays its memory): the same model, adapters and settings,
        `prefill_cells` cells and two sequences."""
        ctx = llama_cpp.llama_init_from_model(self._model, self._pparams)
        if not ctx:
            raise GenerationError(
                f"llama.cpp could not create the prefill context of {self.prefill_cells} cells "
                "(out of memory? Judge.load(prefill_cells=0) turns it off)"
            )
        if int(llama_cpp.llama_n_ctx(ctx)) < self.prefill_cells or not self._set_adapters(ctx):
            llama_cpp.llama_free(ctx)
            raise GenerationError(
                "llama.cpp could not set up the prefill context like the main one"
            )
        self._pctx = ctx
        self._pmemory = llama_cpp.llama_get_memory(ctx)
        self._pbatch = llama_cpp.llama_batch_init(self.config.n_batch, 0, 1)

    def close(self) -> None:
        """Free the batch, context and model (idempotent); waits for calls in progress."""
        with self._users_changed:
            self._closing = True
            while self._users:
                self._users_changed.wait()
        with self._decode_lock:
            for name, free in (
                ("_pbatch", llama_cpp.llama_batch_free),
                ("_pctx", llama_cpp.llama_free),
                ("_batch", llama_cpp.llama_batch_free),
                ("_ctx", llama_cpp.llama_free),
                ("_model", llama_cpp.llama_model_free),  # last: the contexts use it
            ):
                handle = getattr(self, name)
                if handle is not None:
                    free(handle)
                    setattr(self, name, None)

    @property
    def closed(self) -> bool:
        return self._ctx is None

    @property
    def cache_key(self) -> str:
        """The model file, as it is now, read by this llama.cpp: a changed file, or a
        llama.cpp whose rules for special tokens may differ, gets a new vocabulary cache (an
        adapter changes no token, so it is not part of the key)."""
        stat = self.path.stat()
        version = getattr(llama_cpp, "__version__", "")
        return f"{self.path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{version}"

    @functools.cached_property
    def eog_ids(self) -> frozenset[int]:
        """Every token that ends a generation. Asked of llama.cpp token by token (0.3 s for
        262k tokens), so only when first needed: the grammar vocabulary's cache keeps it."""
        with self._use():
            return frozenset(
                t for t in range(self.n_vocab) if llama_cpp.llama_vocab_is_eog(self._vocab, t)
            )

    def __enter__(self) -> LlamaEngine:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __del__(self) -> None:  # a safety net; close() is the real contract
        with contextlib.suppress(Exception):
            self.close()

    # -- model facts ----------------------------------------------------------------------

    def describe(self) -> dict[str, object]:
        """Architecture, size, quantisation and context facts of the loaded model."""
        with self._use():
            return self._describe()

    def _describe(self) -> dict[str, object]:
        buf = ctypes.create_string_buffer(256)
        llama_cpp.llama_model_desc(self._model, buf, len(buf))
        return {
            "path": str(self.path),
            "architecture": self.header.architecture,
            "description": buf.value.decode("utf-8", "replace"),
            "parameters": int(llama_cpp.llama_model_n_params(self._model)),
            "size_bytes": int(llama_cpp.llama_model_size(self._model)),
            "quantisation": _ftype_name(self.header.metadata.get("general.file_type")),
            "context_length": self.n_ctx_train,
            "chat_template": self.chat_template is not None,
            "n_vocab": self.n_vocab,
            "n_layers": int(llama_cpp.llama_model_n_layer(self._model)),
            "gpu_layers": self.n_gpu_layers,
        }

    # -- text <-> tokens ------------------------------------------------------------------

    def tokenize(
        self, text: str, *, add_special: bool = True, parse_special: bool = False
    ) -> list[int]:
        """Tokenize `text`; `add_special` adds BOS as the model wants it."""
        with self._use():
            return self._tokenize(text, add_special, parse_special)

    def _tokenize(self, text: str, add_special: bool, parse_special: bool) -> list[int]:
        data = text.encode("utf-8", errors="surrogatepass")
        capacity = len(data) + 8
        tokens = (llama_cpp.llama_token * capacity)()
        count = llama_cpp.llama_tokenize(
            self._vocab, data, len(data), tokens, capacity, add_special, parse_special
        )
        if count < 0:
            capacity = -count
            tokens = (llama_cpp.llama_token * capacity)()
            count = llama_cpp.llama_tokenize(
                self._vocab, data, len(data), tokens, capacity, add_special, parse_special
            )
        if count < 0:
            raise GenerationError(f"tokenization failed for a text of {len(data)} bytes")
        return list(tokens[:count])

    def token_bytes(self, token: int, *, special: bool = False) -> bytes:
        """The raw bytes of one token (a piece may be part of a UTF-8 character)."""
        with self._use():
            return self._token_bytes(token, special)

    def _token_bytes(self, token: int, special: bool) -> bytes:
        buf = ctypes.create_string_buffer(64)
        size = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, special)
        if size < 0:
            buf = ctypes.create_string_buffer(-size)
            size = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, special)
        return buf.raw[:size]

    def detokenize(self, tokens: list[int]) -> str:
        """Text of a token list, without BOS/EOS."""
        with self._use():
            data = b"".join(self._token_bytes(t, False) for t in tokens)
        return data.decode("utf-8", errors="replace")

    def vocabulary_pieces(self) -> list[tuple[int, bytes, int]]:
        """Every token as (id, bytes, attribute flags): the input of grammar compilation."""
        pieces = []
        with self._use():
            for token in range(self.n_vocab):
                attr = int(llama_cpp.llama_vocab_get_attr(self._vocab, token))
                control = bool(attr & ATTR_CONTROL)  # rendered only with special=True
                pieces.append((token, self._token_bytes(token, control), attr))
        return pieces

    # -- prompts --------------------------------------------------------------------------

    def render_chat(
        self, messages: list[dict[str, str]], *, add_generation_prompt: bool = True
    ) -> str:
        """Render messages with the GGUF's own chat template, or a plain completion format."""
        from localjudge.engine.template import render_messages

        return render_messages(
            self.chat_template,
            messages,
            bos_token=self._bos_text,
            eos_token=self._eos_text,
            add_generation_prompt=add_generation_prompt,
        )

    # -- execution ------------------------------------------------------------------------

    def clear(self) -> None:
        """Drop every sequence's KV cells."""
        with self._use(), self._decode_lock:
            llama_cpp.llama_memory_clear(self._memory, True)
            if self._pctx is not None:
                llama_cpp.llama_memory_clear(self._pmemory, True)
                self._prefill_held = ()

    @staticmethod
    def _save_state(ctx, seq_id: int) -> bytearray:
        """A sequence's KV cells as llama.cpp serialises them (`llama_state_seq_get_data`)."""
        size = llama_cpp.llama_state_seq_get_size(ctx, seq_id)
        data = bytearray(size)
        if size:
            buffer = (ctypes.c_uint8 * size).from_buffer(data)
            written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, seq_id)
            if written != size:
                raise GenerationError(f"saving sequence {seq_id}: {written} of {size} bytes")
        return data

    @staticmethod
    def _restore_state(ctx, seq_id: int, data: bytearray) -> None:
        buffer = (ctypes.c_uint8 * len(data)).from_buffer(data)
        if not llama_cpp.llama_state_seq_set_data(ctx, buffer, len(data), seq_id):
            raise GenerationError(
                f"llama.cpp could not restore a saved state into sequence {seq_id}"
            )

    @staticmethod
    def _fill(batch, tokens: list[BatchToken]) -> None:
        """Put `tokens` into a `llama_batch`."""
        for i, item in enumerate(tokens):
            batch.token[i] = item.token
            batch.pos[i] = item.pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = item.seq_id
            batch.logits[i] = 1 if item.logits else 0
        batch.n_tokens = len(tokens)

    def _prefill_apart(self, item: PrefixPrefill) -> float:
        """Evaluate one chunk of a prefix in the prefill context; with the last chunk, move
        the prefix's own cells into the main context behind a copy of its parent's. Seconds
        taken (the transfers are copies of KV rows: milliseconds)."""
        if not self.prefill_cells:
            raise GenerationError("this engine has no prefill context (n_ctx_prefill=0)")
        if item.end > self.prefill_cells:
            raise GenerationError(
                f"a prefix of {len(item.key)} tokens exceeds the prefill context's "
                f"{self.prefill_cells} cells"
            )
        if self._pctx is None:
            self._open_prefill_context()
        start = time.perf_counter()
        key, held = item.key, self._prefill_held
        self._prefill_held = ()  # until this chunk is done: a failure leaves nothing to trust
        if item.start == item.parent_len:  # a new prefix: from its parent's cells
            parent = key[: item.parent_len]
            if len(held) >= item.parent_len and held[: item.parent_len] == parent:
                llama_cpp.llama_memory_seq_rm(self._pmemory, 0, item.parent_len, -1)
            else:
                llama_cpp.llama_memory_clear(self._pmemory, True)
                if item.parent is not None:  # its cells, as the main context holds them
                    state = self._save_state(self._ctx, item.parent)
                    self._restore_state(self._pctx, 0, state)
        elif held != key[: item.start]:
            raise GenerationError(
                "the prefill context does not hold the prefix whose evaluation goes on"
            )
        for first in range(item.start, item.end, self.config.n_batch):
            last = min(first + self.config.n_batch, item.end)
            self._fill(self._pbatch, [BatchToken(key[p], p, 0, False) for p in range(first, last)])
            status = llama_cpp.llama_decode(self._pctx, self._pbatch)
            if status != 0:
                raise GenerationError(f"llama_decode of a prefix failed with status {status}")
        self._prefill_held = key[: item.end]
        if item.last:  # its own cells move; seq 1 sees only them
            llama_cpp.llama_memory_seq_cp(self._pmemory, 0, 1, item.parent_len, item.end)
            state = self._save_state(self._pctx, 1)
            llama_cpp.llama_memory_seq_rm(self._pmemory, 1, -1, -1)
            self._restore_state(self._ctx, item.seq_id, state)  # replaces what it held
            if item.parent is not None:
                llama_cpp.llama_memory_seq_cp(
                    self._memory, item.parent, item.seq_id, 0, item.parent_len
                )
        return time.perf_counter() - start

    def execute(self, plan: StepPlan) -> StepOutput:
        """Run one step: state saves, removals, trims, state restores, prefix copies,
        prefixes evaluated apart, then one `llama_decode` of `plan.tokens`."""
        with self._use(), self._decode_lock:
            states = {}
            for save in plan.saves:  # the sequence is removed below: its cells may be cut
                if save.p0 > 0:
                    llama_cpp.llama_memory_seq_rm(self._memory, save.seq_id, 0, save.p0)
                llama_cpp.llama_memory_seq_rm(self._memory, save.seq_id, save.p1, -1)
                states[save.seq_id] = self._save_state(self._ctx, save.seq_id)
            for seq_id in plan.removals:
                llama_cpp.llama_memory_seq_rm(self._memory, seq_id, -1, -1)
            for trim in plan.trims:
                llama_cpp.llama_memory_seq_rm(self._memory, trim.seq_id, trim.pos, -1)
            for restore in plan.restores:
                self._restore_state(self._ctx, restore.seq_id, restore.data)
            for copy in plan.copies:
                llama_cpp.llama_memory_seq_cp(self._memory, copy.src, copy.dst, copy.p0, copy.p1)
            apart = sum(self._prefill_apart(prefill) for prefill in plan.prefills)
            num_tokens = len(plan.tokens)
            if num_tokens == 0:
                return StepOutput(
                    logits=np.empty((0, self.n_vocab), dtype=np.float32),
                    seconds=apart,
                    states=states,
                )
            if num_tokens > self.config.n_batch:
                raise GenerationError(
                    f"step of {num_tokens} tokens exceeds n_batch={self.config.n_batch}"
                )
            self._fill(self._batch, plan.tokens)
            start = time.perf_counter()
            status = llama_cpp.llama_decode(self._ctx, self._batch)
            seconds = time.perf_counter() - start + apart
            if status != 0:
                raise GenerationError(f"llama_decode failed with status {status} (KV cache full?)")
            num_logits = plan.num_logits
            if num_logits == 0:
                return StepOutput(
                    logits=np.empty((0, self.n_vocab), dtype=np.float32),
                    seconds=seconds,
                    states=states,
                )
            pointer = llama_cpp.llama_get_logits(self._ctx)
            logits = np.ctypeslib.as_array(pointer, shape=(num_logits, self.n_vocab))
            return StepOutput(logits=logits, seconds=seconds, states=states)


# llama_ftype values of the quantisations users meet most (llama.h)
_FTYPES = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
}


def _ftype_name(value: object) -> str:
    if isinstance(value, int):
        return _FTYPES.get(value, f"ftype {value}")
    return "unknown"


def open_llama(
    path: Path,
    *,
    n_ctx: int,
    n_threads: int | None,
    n_gpu_layers: int | None,
    adapter: tuple[Path, float] | None = None,
):
    """llama-cpp-python's high-level `Llama` on `path`, for baselines that need it (the
    benchmark's outlines way), so that nothing outside `engine/` imports llama_cpp.
    `adapter`: one LoRA adapter (path, scale), as the judge applies it."""
    threads = n_threads or default_threads()
    if n_gpu_layers is None:
        n_gpu_layers = -1 if gpu_offload_available() else 0
    with _model_defaults(use_extra_bufts=extra_buffers_allowed()):
        return llama_cpp.Llama(
            str(path),
            n_ctx=n_ctx,
            n_threads=threads,
            n_threads_batch=threads,
            n_batch=512,
            n_ubatch=256,
            n_gpu_layers=n_gpu_layers,
            lora_path=str(adapter[0]) if adapter else None,
            lora_scale=adapter[1] if adapter else 1.0,
            verbose=False,
        )


_defaults_lock = threading.Lock()


@contextlib.contextmanager
def _model_defaults(**fields):
    """`Llama` takes no `use_extra_bufts`: it starts from its bindings'
    `llama_model_default_params()`, which this gives `fields` while `Llama` is built (one
    build at a time)."""
    bindings = llama_cpp.llama_cpp  # the module `Llama` calls, not the package's re-export
    original = bindings.llama_model_default_params

    def defaults():
        params = original()
        for name, value in fields.items():
            setattr(params, name, value)
        return params

    with _defaults_lock:
        bindings.llama_model_default_params = defaults
        try:
            yield
        finally:
            bindings.llama_model_default_params = original
