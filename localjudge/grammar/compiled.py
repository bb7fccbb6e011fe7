"""A JSON Schema compiled into an outlines-core index plus the tables the scheduler needs.

Built once per (schema, vocabulary) and cached on disk. Beside the index it keeps, per
DFA state: the allowed token ids (for masking), the distance in tokens to the nearest final
state (so a token budget can always close the JSON), the tokens that make progress towards
closing, and whether exactly one token is allowed (jump-forward without logits).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import threading
from collections import deque
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import jsonschema
import numpy as np
import outlines_core
from outlines_core.json_schema import build_regex_from_schema

from localjudge.errors import SchemaError
from localjudge.grammar.vocabulary import TokenVocabulary
from localjudge.paths import cache_dir

# no whitespace between JSON tokens: compact output, a small index, and long stretches of
# text fixed by the schema (`{"verdict":"`) that jump-forward appends without logits
WHITESPACE_PATTERN = ""
_CACHE_VERSION = "5"
_MAX_FORCED_BYTES = 256
# the bytes after a fixed stretch where a token that runs on past it is the model's choice
_OPEN_PUNCTUATION = frozenset(b'"[]{},:')
try:  # the index's binary form is outlines-core's own: a new version means a new cache
    _OUTLINES_CORE_VERSION = version("outlines-core")
except PackageNotFoundError:  # pragma: no cover - installed without metadata
    _OUTLINES_CORE_VERSION = "unknown"
_ENUM_START = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)"[ ]?:[ ]?"$')


@dataclass
class CompiledGrammar:
    """One schema over one vocabulary: index, per-state tables, enum choice points."""

    schema: dict  # the JSON Schema it enforces
    regex: str  # the regular expression outlines built from it
    index: outlines_core.Index  # the token-level automaton
    initial_state: int
    final_states: frozenset[int]
    allowed: dict[int, np.ndarray]  # state -> allowed token ids (EOS excluded), sorted
    distance: dict[int, int]  # state -> fewest tokens to reach a final state
    closing: dict[int, np.ndarray]  # state -> tokens whose next state is nearest to final
    forced: dict[int, int]  # state -> the one canonical token where the schema fixes the text
    enum_fields: dict[str, list[str]]  # property name -> enum options (choice points)
    # states allowing fewer tokens than the index (a fixed stretch's end, `_forced_tokens`)
    narrowed: frozenset[int] = frozenset()
    token_text: dict[int, str] = field(repr=False, default_factory=dict)  # ids at choice points
    choice_states: dict[int, str | None] = field(repr=False, default_factory=dict)  # memo
    _choice_ids: dict[int, np.ndarray] = field(repr=False, default_factory=dict)  # memo

    # -- automaton ------------------------------------------------------------------------

    def next_state(self, state: int, token: int) -> int | None:
        """The state after `token`, or None when the grammar forbids it there."""
        return self.index.get_next_state(state, token)

    def is_final(self, state: int) -> bool:
        return state in self.final_states

    def choice_ids(self, state: int) -> np.ndarray:
        """The tokens whose logits a choice in `state` can read (allowed or closing there):
        all that logits saved for a first choice from `state` need to hold."""
        ids = self._choice_ids.get(state)
        if ids is None:
            empty = np.empty(0, dtype=np.int64)
            ids = np.union1d(self.allowed.get(state, empty), self.closing.get(state, empty))
            self._choice_ids[state] = ids
        return ids

    @functools.cached_property
    def validator(self) -> jsonschema.protocols.Validator:
        """Checks a finished reply against the schema; built once (building one checks the
        schema against its metaschema, which costs far more than checking a reply)."""
        return jsonschema.validators.validator_for(self.schema)(self.schema)

    def narrows_out(self, state: int, token: int) -> bool:
        """Whether `state` allows fewer tokens than the index (`narrowed`) and `token`,
        which the index may allow, is not one of them."""
        if state not in self.narrowed:
            return False
        ids = self.allowed[state]
        at = int(np.searchsorted(ids, token))
        return not (at < len(ids) and int(ids[at]) == token)

    def forced_token(self, state: int) -> int | None:
        """The only token allowed in `state`, if exactly one is (jump-forward).

        Where the schema fixes the next bytes (`","reason":"`), only their canonical
        (longest-match) tokenization is allowed, so exactly one token is.
        """
        return self.forced.get(state)

    @property
    def min_tokens(self) -> int:
        """The shortest valid output, in tokens: the smallest usable token budget."""
        return self.distance[self.initial_state]

    def new_guide(self) -> outlines_core.Guide:
        return outlines_core.Guide(self.index)

    # -- the on-disk cache ----------------------------------------------------------------

    def save(self, path: Path) -> None:
        """Write the grammar as plain arrays (`.npz`, no pickle): the index in outlines-core's
        own binary form, the tables as arrays, the rest as JSON. Loading it runs no code."""
        _, (index_bytes,) = self.index.__reduce__()
        allowed_keys, allowed_offsets, allowed_ids = _pack(self.allowed)
        closing_keys, closing_offsets, closing_ids = _pack(self.closing)
        meta = {
            "schema": self.schema,
            "regex": self.regex,
            "initial_state": self.initial_state,
            "enum_fields": self.enum_fields,
            "token_text": {str(k): v for k, v in self.token_text.items()},
        }
        with path.open("wb") as handle:
            np.savez(
                handle,
                index=np.frombuffer(bytes(index_bytes), dtype=np.uint8),
                final_states=np.array(sorted(self.final_states), dtype=np.int64),
                allowed_keys=allowed_keys,
                allowed_offsets=allowed_offsets,
                allowed_ids=allowed_ids,
                closing_keys=closing_keys,
                closing_offsets=closing_offsets,
                closing_ids=closing_ids,
                distance=np.array(sorted(self.distance.items()), dtype=np.int64).reshape(-1, 2),
                forced=np.array(sorted(self.forced.items()), dtype=np.int64).reshape(-1, 2),
                narrowed=np.array(sorted(self.narrowed), dtype=np.int64),
                meta=np.array(json.dumps(meta, ensure_ascii=False)),
            )

    @classmethod
    def load(cls, path: Path) -> CompiledGrammar:
        """Read what `save` wrote; raises `ValueError` (or `OSError`) on anything else."""
        with np.load(path, allow_pickle=False) as arrays:
            data = {name: arrays[name] for name in arrays.files}
        meta = json.loads(str(data["meta"]))
        index = outlines_core.Index.from_binary(data["index"].tobytes())
        return cls(
            schema=meta["schema"],
            regex=meta["regex"],
            index=index,
            initial_state=int(meta["initial_state"]),
            final_states=frozenset(data["final_states"].tolist()),
            allowed=_unpack(data["allowed_keys"], data["allowed_offsets"], data["allowed_ids"]),
            distance={int(k): int(v) for k, v in data["distance"].tolist()},
            closing=_unpack(data["closing_keys"], data["closing_offsets"], data["closing_ids"]),
            forced={int(k): int(v) for k, v in data["forced"].tolist()},
            narrowed=frozenset(data["narrowed"].tolist()),
            enum_fields={k: list(v) for k, v in meta["enum_fields"].items()},
            token_text={int(k): v for k, v in meta["token_text"].items()},
        )

    # -- choice points --------------------------------------------------------------------

    def choice_at(self, state: int, output: bytes) -> str | None:
        """The enum property whose value starts in `state`, if any.

        Decided from the output text the first time a state is seen, then remembered: a DFA
        state stands for one place in the JSON, so the answer is the same every time.
        """
        if not self.enum_fields:
            return None
        if state not in self.choice_states:
            self.choice_states[state] = self.choice_field(output.decode("utf-8", "replace"))
        return self.choice_states[state]

    def choice_field(self, text_so_far: str) -> str | None:
        """The enum property whose value starts right after `text_so_far`, if any."""
        match = _ENUM_START.search(text_so_far)
        if match and match.group(1) in self.enum_fields:
            return match.group(1)
        return None

    def option_of(self, field_name: str, piece: str) -> str | None:
        """Which enum option of `field_name` a token spelling `piece` commits to."""
        candidates = [
            o
            for o in self.enum_fields[field_name]
            if (o + '"').startswith(piece) or piece.startswith(o + '"')
        ]
        return candidates[0] if len(candidates) == 1 else None


def _pack(table: dict[int, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """state -> ids as three flat arrays: states, offsets, all ids (CSR)."""
    keys = sorted(table)
    lengths = [len(table[k]) for k in keys]
    offsets = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    ids = (
        np.concatenate([np.asarray(table[k], dtype=np.int64) for k in keys])
        if keys
        else np.zeros(0, dtype=np.int64)
    )
    return np.array(keys, dtype=np.int64), offsets, ids


def _unpack(keys: np.ndarray, offsets: np.ndarray, ids: np.ndarray) -> dict[int, np.ndarray]:
    if len(offsets) != len(keys) + 1 or int(offsets[-1]) != len(ids):
        raise ValueError("inconsistent grammar table arrays")
    return {int(k): ids[offsets[i] : offsets[i + 1]] for i, k in enumerate(keys.tolist())}


def _enum_fields(schema: dict) -> dict[str, list[str]]:
    """Properties whose value is one of a few strings (`enum` or `const`), merged across
    `oneOf`/`anyOf` branches: the choice points whose option probabilities are reported."""
    fields: dict[str, dict[str, None]] = {}
    branches = [schema] + [
        b for key in ("oneOf", "anyOf") for b in schema.get(key, []) if isinstance(b, dict)
    ]
    for branch in branches:
        for name, spec in branch.get("properties", {}).items():
            if not isinstance(spec, dict):
                continue
            options = spec.get("enum") if isinstance(spec.get("enum"), list) else None
            if options is None and "const" in spec:
                options = [spec["const"]]
            if options is not None:
                merged = fields.setdefault(name, {})  # a dict keeps order, checks in O(1)
                merged.update((str(o), None) for o in options)
    return {name: list(options) for name, options in fields.items() if len(options) > 1}


def _tables(index: outlines_core.Index, vocabulary: TokenVocabulary):
    eos_id = vocabulary.eos_id
    transitions: dict[int, dict[int, int]] = index.get_transitions()
    final_states = frozenset(index.get_final_states())
    allowed: dict[int, np.ndarray] = {}
    predecessors: dict[int, set[int]] = {}
    for state, edges in transitions.items():
        ids = np.fromiter((t for t in edges if t != eos_id), dtype=np.int64)
        ids.sort()
        allowed[state] = ids
        for token, target in edges.items():
            if token != eos_id:
                predecessors.setdefault(target, set()).add(state)
    distance = dict.fromkeys(final_states, 0)
    queue = deque(final_states)
    while queue:
        state = queue.popleft()
        for previous in predecessors.get(state, ()):
            if previous not in distance:
                distance[previous] = distance[state] + 1
                queue.append(previous)
    closing: dict[int, np.ndarray] = {}
    for state, edges in transitions.items():
        if state in final_states or state not in distance:
            continue
        best = distance[state] - 1
        closing[state] = np.array(
            sorted(
                t for t, target in edges.items() if t != eos_id and distance.get(target) == best
            ),
            dtype=np.int64,
        )
    forced, narrowed = _forced_tokens(transitions, allowed, final_states, vocabulary)
    for state, token in forced.items():
        allowed[state] = np.array([token], dtype=np.int64)
    return final_states, allowed, distance, closing, forced, narrowed


def _forced_tokens(
    transitions, allowed, final_states, vocabulary: TokenVocabulary
) -> tuple[dict[int, int], frozenset[int]]:
    """Per state, the canonical token of the bytes the schema fixes next, if any.

    The fixed bytes are found by walking single-byte tokens while every allowed token starts
    with the same byte; the canonical token is the longest allowed token spelling a prefix of
    them. Allowing only it keeps the language (the same strings stay reachable) and makes
    decoding the same with or without jump-forward.

    One exception keeps a model's own token boundaries: where the fixed bytes end in JSON
    punctuation that the schema leaves open (`{"claims":[` then `"` or `]`) and the
    vocabulary has tokens that spell the fixed bytes and run on into it (`":["`), the state
    is not forced. Its allowed tokens become the canonical one and those (the state is
    `narrowed`), and the model chooses among them: a BPE model that always writes `":["`
    is never made to go on after `":[`, a boundary it has hardly seen. Enum values and
    free text start with other bytes, so choice points and reasons are forced as before.
    """
    n_vocab = vocabulary.n_vocab
    first_byte = np.full(n_vocab, -1, dtype=np.int16)
    single: dict[int, int] = {}
    for token, piece in vocabulary.token_bytes.items():
        if token < n_vocab:
            first_byte[token] = piece[0]
        if len(piece) == 1:
            single.setdefault(piece[0], token)

    def fixed_bytes(state: int) -> tuple[bytes, int]:
        """The bytes fixed from `state`, and the state after them."""
        out = bytearray()
        while state not in final_states and len(out) < _MAX_FORCED_BYTES:
            ids = allowed.get(state)
            if ids is None or len(ids) == 0:
                break
            firsts = np.unique(first_byte[ids])
            if len(firsts) != 1 or firsts[0] < 0:
                break
            byte = int(firsts[0])
            token = single.get(byte)
            if token is None or token not in transitions[state]:
                break
            out.append(byte)
            state = transitions[state][token]
        return bytes(out), state

    def runs_into_punctuation(fixed: bytes, end: int, edges: dict[int, int]) -> list[int]:
        """The tokens allowed here that spell `fixed` and go on into the JSON punctuation
        the schema leaves open after it (none where anything else may follow)."""
        ids = allowed.get(end)
        if end in final_states or ids is None or len(ids) == 0:
            return []
        if not set(np.unique(first_byte[ids]).tolist()) <= _OPEN_PUNCTUATION:
            return []
        return sorted(
            t
            for t in edges
            if t != vocabulary.eos_id
            and len(piece := vocabulary.token_bytes.get(t, b"")) > len(fixed)
            and piece.startswith(fixed)
        )

    forced: dict[int, int] = {}
    narrowed: set[int] = set()
    for state, edges in transitions.items():
        if state in final_states:
            continue
        fixed, end = fixed_bytes(state)
        for size in range(len(fixed), 0, -1):
            candidates = [t for t in vocabulary.pieces.get(fixed[:size], ()) if t in edges]
            if candidates:
                forced[state] = min(candidates)
                break
        if state in forced and (run_on := runs_into_punctuation(fixed, end, edges)):
            allowed[state] = np.array(sorted({forced.pop(state), *run_on}), dtype=np.int64)
            narrowed.add(state)
    return forced, frozenset(narrowed)


def _cache_key(schema_text: str, vocabulary: TokenVocabulary) -> str:
    digest = hashlib.sha256()
    for part in (
        _CACHE_VERSION,
        _OUTLINES_CORE_VERSION,
        schema_text,
        WHITESPACE_PATTERN,
        vocabulary.fingerprint,
    ):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:32]


def compile_grammar(
    schema: dict, vocabulary: TokenVocabulary, *, use_disk_cache: bool = True
) -> CompiledGrammar:
    """Compile `schema` for `vocabulary`; reuse the on-disk cache when it has this pair."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise SchemaError("a verdict schema must be a JSON object schema (type: object)")
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as error:
        raise SchemaError(f"not a valid JSON Schema: {error.message}") from None
    schema_text = json.dumps(schema, sort_keys=True, ensure_ascii=False)
    key = _cache_key(schema_text, vocabulary)
    cache_file = cache_dir("grammars") / f"{key}.npz"
    if use_disk_cache and cache_file.exists():
        try:
            grammar = CompiledGrammar.load(cache_file)
            os.utime(cache_file)  # recently used: pruned last
            return grammar
        except Exception:
            cache_file.unlink(missing_ok=True)  # stale, partial or foreign: rebuild below
    try:
        regex = build_regex_from_schema(json.dumps(schema, ensure_ascii=False), WHITESPACE_PATTERN)
        index = outlines_core.Index(regex, vocabulary.to_outlines())
    except Exception as error:  # outlines raises ValueError/RuntimeError variants
        raise SchemaError(
            f"cannot compile schema {schema.get('$id', schema.get('title', ''))!r}: {error}"
        ) from None
    final_states, allowed, distance, closing, forced, narrowed = _tables(index, vocabulary)
    initial = index.get_initial_state()
    if initial not in distance:
        raise SchemaError("schema admits no finite JSON value over this vocabulary")
    enum_fields = _enum_fields(schema)
    option_starts = {o[:1].encode() for options in enum_fields.values() for o in options}
    token_text = {
        token_id: piece.decode("utf-8", "replace")
        for token_id, piece in vocabulary.token_bytes.items()
        if len(piece) <= 16 and piece[:1] in option_starts
    }
    grammar = CompiledGrammar(
        schema=schema,
        regex=regex,
        index=index,
        initial_state=initial,
        final_states=final_states,
        allowed=allowed,
        distance=distance,
        closing=closing,
        forced=forced,
        narrowed=narrowed,
        enum_fields=enum_fields,
        token_text=token_text,
    )
    if use_disk_cache:
        partial = cache_file.with_name(f"{key}.{os.getpid()}.{threading.get_ident()}.tmp")
        grammar.save(partial)
        partial.replace(cache_file)
        prune_disk_cache(cache_file.parent, disk_cache_limit(), keep=cache_file)
    return grammar


DEFAULT_DISK_CACHE_MIB = 1024


def disk_cache_limit() -> int:
    """Bytes the compiled-grammar cache on disk may hold: `LOCALJUDGE_GRAMMAR_CACHE_MIB`,
    else 1024 MiB (a grammar for a 262k-token vocabulary can take 200 MiB)."""
    value = os.environ.get("LOCALJUDGE_GRAMMAR_CACHE_MIB")
    try:
        mib = float(value) if value is not None else DEFAULT_DISK_CACHE_MIB
    except ValueError:
        raise SchemaError(f"LOCALJUDGE_GRAMMAR_CACHE_MIB must be a number, not {value!r}") from None
    return max(0, int(mib * (1 << 20)))


def disk_cache_bytes(folder: Path | None = None) -> int:
    folder = folder or cache_dir("grammars")
    return sum(f.stat().st_size for f in folder.glob("*.npz") if f.is_file())


def prune_disk_cache(folder: Path, limit: int, keep: Path | None = None) -> None:
    """Delete the least recently used cache files (`*.npz`: compiled grammars, or
    vocabularies) until the folder holds at most `limit` bytes (`keep`, the one just
    written, stays)."""
    files = []
    for entry in folder.glob("*.npz"):
        with contextlib.suppress(OSError):
            files.append((entry.stat().st_mtime, entry.stat().st_size, entry))
    total = sum(size for _, size, _ in files)
    for _, size, entry in sorted(files):
        if total <= limit:
            break
        if keep is not None and entry == keep:
            continue
        with contextlib.suppress(OSError):
            entry.unlink()
            total -= size
