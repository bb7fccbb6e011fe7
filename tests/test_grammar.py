from __future__ import annotations

import json

import pytest

from localjudge.errors import SchemaError
from localjudge.grammar import build_vocabulary, compile_grammar, load_schema, schema_names
from localjudge.grammar.vocabulary import ATTR_CONTROL, ATTR_UNKNOWN, ATTR_UNUSED, keep_token


def test_schemas_have_no_max_length():
    for name in schema_names():
        assert "maxLength" not in str(load_schema(name)), name


def test_vocabulary_filtering():
    assert keep_token(b"abc", 4)
    assert not keep_token(b"<end_of_turn>", ATTR_CONTROL)
    assert not keep_token(b"x", ATTR_UNUSED)
    assert not keep_token(b"?", ATTR_UNKNOWN)
    assert keep_token(b"\xc3", 32)  # a raw byte: BPE vocabularies spell characters with them
    assert keep_token(b"\xc3\xa9", 4)  # a whole UTF-8 character
    assert not keep_token(b"", 4)
    vocab = build_vocabulary(
        [
            (0, b"a", 4),
            (1, b"</s>", 4),
            (2, b"a", 4),
            (3, b"\x9f", 32),
            (4, b"<eot>", ATTR_CONTROL),
        ],
        eos_id=1,
        n_vocab=5,
    )
    assert vocab.pieces == {b"a": [0, 2], b"\x9f": [3]}
    assert set(vocab.token_bytes) == {0, 2, 3}


def test_a_saved_vocabulary_loads_with_the_same_pieces_and_end_tokens(tmp_path):
    from localjudge.grammar.vocabulary import TokenVocabulary

    vocab = build_vocabulary(
        [(0, b"a", 4), (1, b"</s>", 4), (2, b"a", 4), (3, b"\x9f", 32), (4, b"bc", 4)],
        eos_id=1,
        n_vocab=6,
        eog_ids=[1, 5],
    )
    vocab.save(tmp_path / "v.npz")
    loaded = TokenVocabulary.load(tmp_path / "v.npz")
    assert loaded.fingerprint == vocab.fingerprint
    assert loaded.eog_ids == vocab.eog_ids == frozenset({1, 5})
    assert loaded.ids.tolist() == [0, 2, 3, 4]
    pieces = [b"", b"a", b"", b"a", b"\x9f", b"bc"] + [b""] * 3
    assert [loaded.piece(t) for t in range(-1, 8)] == pieces
    assert loaded.token_bytes == vocab.token_bytes == {0: b"a", 2: b"a", 3: b"\x9f", 4: b"bc"}
    assert loaded.pieces == vocab.pieces == {b"a": [0, 2], b"\x9f": [3], b"bc": [4]}


@pytest.mark.parametrize(
    "ids, offsets, data",
    [
        ([2, 0], [0, 1, 2], b"ab"),  # not increasing
        ([0, 6], [0, 1, 2], b"ab"),  # an id past n_vocab
        ([0, 2], [0, 1], b"ab"),  # an offset missing
        ([0, 2], [0, 1, 3], b"ab"),  # past the bytes
        ([0, 2], [0, 2, 1], b"ab"),  # a negative length
    ],
)
def test_a_vocabulary_with_inconsistent_arrays_is_refused(ids, offsets, data):
    import numpy as np

    from localjudge.grammar.vocabulary import TokenVocabulary

    with pytest.raises(ValueError):
        TokenVocabulary(
            eos_id=1,
            n_vocab=6,
            ids=np.array(ids),
            offsets=np.array(offsets),
            data=data,
            fingerprint="x",
        )


def test_distances_and_closing(fake_vocabulary, tmp_home):
    grammar = compile_grammar(load_schema("hallucination_verdict"), fake_vocabulary)
    assert grammar.min_tokens > 0
    for state, dist in grammar.distance.items():
        if dist == 0:
            assert grammar.is_final(state)
            continue
        # every closing token moves exactly one step closer to a final state
        for token in grammar.closing[state][:5]:
            assert grammar.distance[grammar.next_state(state, int(token))] == dist - 1


def _bpe_like_vocabulary():
    """Printable characters, the JSON keys, and the run-on pieces a BPE vocabulary has."""
    pieces = [chr(c) for c in range(32, 127)] + ['{"', "claims", "verdict", "reason", "yes", "no"]
    pieces += ['":', '":[', '":["', '":"', '":"y', '":"T', '","', '"]}']
    vocabulary = build_vocabulary(
        [(0, b"</s>", 4)] + [(i + 1, p.encode(), 4) for i, p in enumerate(pieces)],
        eos_id=0,
        n_vocab=len(pieces) + 1,
    )
    return vocabulary, {p: i + 1 for i, p in enumerate(pieces)}


def _walk(grammar, ids, pieces):
    state = grammar.initial_state
    for piece in pieces:
        assert grammar.forced_token(state) == ids[piece], piece
        state = grammar.next_state(state, ids[piece])
    return state


def test_a_token_running_on_past_fixed_text_into_open_punctuation_is_the_models_choice(tmp_home):
    # Qwen's and Gemma's tokenizers write `":["` as one token: after `{"claims` the model
    # chooses between it and `":[`, never forced to continue after `":[`
    vocabulary, ids = _bpe_like_vocabulary()
    grammar = compile_grammar(load_schema("claims"), vocabulary)
    state = _walk(grammar, ids, ['{"', "claims"])
    assert grammar.forced_token(state) is None and state in grammar.narrowed
    assert sorted(grammar.allowed[state].tolist()) == [ids['":['], ids['":["']]
    assert (
        grammar.narrows_out(state, ids['":']) and grammar.next_state(state, ids['":']) is not None
    )
    assert not grammar.narrows_out(state, ids['":["'])
    # the same strings stay reachable: the empty list through the canonical token
    after = grammar.next_state(state, ids['":['])
    assert grammar.is_final(grammar.next_state(grammar.next_state(after, ids["]"]), ids["}"]))
    # kept with the grammar in the disk cache
    assert compile_grammar(load_schema("claims"), vocabulary).narrowed == grammar.narrowed

    # an enum value and free text start with other bytes: `":"` stays forced before them,
    # so the verdict's choice point and the reason's first token are read where they were
    verdict = compile_grammar(load_schema("hallucination_verdict"), vocabulary)
    state = _walk(verdict, ids, ['{"', "verdict", '":"'])
    assert verdict.choice_at(state, b'{"verdict":"') == "verdict"
    assert not verdict.narrowed
    reason = compile_grammar(load_schema("reason"), vocabulary)
    _walk(reason, ids, ['{"', "reason", '":"'])
    assert not reason.narrowed


def test_walking_the_closing_path_gives_valid_json(fake_vocabulary, fake_tokenizer, tmp_home):
    import json

    grammar = compile_grammar(load_schema("toxicity_verdict"), fake_vocabulary)
    state, text = grammar.initial_state, ""
    while not grammar.is_final(state):
        token = int(grammar.closing[state][0])
        state = grammar.next_state(state, token)
        text += fake_tokenizer.pieces[token]
    value = json.loads(text)
    assert set(value) == {"verdict", "category", "severity", "reason"}


def test_compiled_grammar_is_cached_on_disk(fake_vocabulary, tmp_home):
    schema = load_schema("claims")
    first = compile_grammar(schema, fake_vocabulary)
    files = list((tmp_home / "cache" / "grammars").glob("*.npz"))
    assert len(files) == 1
    second = compile_grammar(schema, fake_vocabulary)
    assert second.regex == first.regex and second.distance == first.distance
    assert second.forced == first.forced and second.final_states == first.final_states
    assert second.allowed.keys() == first.allowed.keys()
    assert all((second.allowed[k] == first.allowed[k]).all() for k in first.allowed)
    assert all((second.closing[k] == first.closing[k]).all() for k in first.closing)
    assert second.index.get_transitions() == first.index.get_transitions()
    with files[0].open("rb") as handle:  # plain arrays: numpy refuses to unpickle anything
        import numpy as np

        with np.load(handle, allow_pickle=False) as arrays:
            assert {"index", "allowed_ids", "meta"} <= set(arrays.files)


def test_invalid_schema(fake_vocabulary, tmp_home):
    with pytest.raises(SchemaError):
        compile_grammar({"type": "string"}, fake_vocabulary)
    with pytest.raises(SchemaError, match="not a valid JSON Schema"):
        compile_grammar(
            {"type": "object", "properties": {"a": {"type": "nonsense"}}}, fake_vocabulary
        )
    with pytest.raises(SchemaError, match="unknown schema"):
        load_schema("no_such_schema")


def schema_with(field: str, options: list[str]) -> dict:
    return {
        "type": "object",
        "properties": {field: {"type": "string", "enum": options}},
        "required": [field],
    }


def test_a_schema_asked_for_at_once_compiles_once_and_different_ones_side_by_side(
    tmp_home, monkeypatch
):
    """Single flight per schema, no lock across schemas: two different schemas must be
    inside compile_grammar together (a barrier of two would break if they were serialised)."""
    import threading

    import localjudge.judge as judge_module
    from localjudge.testing import FakeJudge

    real = judge_module.compile_grammar
    calls: list[str] = []
    together = threading.Barrier(2, timeout=30)

    def slow_compile(schema, vocabulary):
        calls.append(json.dumps(schema, sort_keys=True))
        together.wait()  # the other schema's compile must be running now
        return real(schema, vocabulary, use_disk_cache=False)

    monkeypatch.setattr(judge_module, "compile_grammar", slow_compile)
    judge = FakeJudge()
    a, b = schema_with("pick", ["alpha", "beta"]), schema_with("pick", ["gamma", "delta"])
    got: list = []
    threads = [threading.Thread(target=lambda s=s: got.append(judge.grammar(s))) for s in (a, a, b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(calls) == 2 and len(got) == 3  # a once, b once
    assert got.count(judge.grammar(a)) == 2 and judge.grammar(b) in got
    judge.close()


def test_compiled_schemas_are_bounded_in_memory_and_on_disk(tmp_home, tmp_path):
    import os

    from localjudge.grammar.compiled import _enum_fields, prune_disk_cache
    from localjudge.testing import FakeJudge

    judge = FakeJudge()
    judge.max_grammars = 2
    named = judge.grammars_in_memory
    for n in range(4):
        judge.grammar(schema_with("pick", [f"a{n}", f"b{n}"]))
    assert judge.grammars_in_memory == named + 2
    judge.close()
    folder = tmp_path / "grammars"
    folder.mkdir()
    for n in range(5):  # 5 files of 100 bytes, the oldest first
        path = folder / f"{n}.npz"
        path.write_bytes(b"x" * 100)
        os.utime(path, (1_000_000 + n, 1_000_000 + n))
    prune_disk_cache(folder, 250, keep=folder / "0.npz")
    assert sorted(p.name for p in folder.glob("*.npz")) == ["0.npz", "4.npz"]
    many = [f"v{i}" for i in range(30_000)]  # linear: this used to take seconds
    assert _enum_fields(schema_with("pick", many + many[:10])) == {"pick": many}


def cached_fake_engine(key: str, eog_ids: frozenset[int] | None = None):
    """A fake engine whose vocabulary is cached on disk, as a real engine's is."""
    from localjudge.engine.fake import FakeEngine

    engine = FakeEngine(lambda *args: None)
    engine.cache_key = key
    if eog_ids is not None:
        engine.eog_ids = eog_ids
    return engine


def test_a_vocabulary_cache_file_that_does_not_load_is_rebuilt(tmp_home):
    import numpy as np

    from localjudge.judge import _vocabulary_for

    engine = cached_fake_engine("cached-fake|1", eog_ids=frozenset({1, 3}))
    built = _vocabulary_for(engine)
    (cache_file,) = (tmp_home / "cache" / "vocab").glob("*.npz")
    assert _vocabulary_for(engine).token_bytes == built.token_bytes
    older = tmp_home / "older.npz"  # a file without the end-of-generation tokens
    with np.load(cache_file, allow_pickle=False) as arrays:
        meta = json.loads(str(arrays["meta"]))
        del meta["eog_ids"]
        np.savez(older, **{k: arrays[k] for k in ("ids", "offsets", "data")}, meta=json.dumps(meta))
    for damaged in (b"not a vocabulary", older.read_bytes()):
        cache_file.write_bytes(damaged)
        again = _vocabulary_for(engine)
        assert again.eog_ids == frozenset({1, 3}) and again.token_bytes == built.token_bytes
        assert cache_file.read_bytes() != damaged  # rewritten whole


def test_the_vocabulary_cache_keeps_its_recently_used_files_within_its_limit(tmp_home, monkeypatch):
    import os

    from localjudge import judge

    folder = tmp_home / "cache" / "vocab"
    folder.mkdir(parents=True)
    for n in range(3):  # files of model files long gone, least recently used first
        (folder / f"old{n}.npz").write_bytes(b"x" * 1000)
        os.utime(folder / f"old{n}.npz", (1_000_000 + n, 1_000_000 + n))
    engines = [cached_fake_engine(f"cached-fake|{n}") for n in range(2)]
    judge._vocabulary_for(engines[0])
    size = max(f.stat().st_size for f in folder.glob("*.npz"))
    monkeypatch.setattr(judge, "VOCABULARY_CACHE_BYTES", 2 * size + 1500)
    judge._vocabulary_for(engines[1])  # written: the oldest files go, down to the limit
    assert sorted(f.name for f in folder.glob("old*.npz")) == ["old2.npz"]
    assert len(list(folder.glob("*.npz"))) == 3
