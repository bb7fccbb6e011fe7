from __future__ import annotations

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
    assert not keep_token(b"\xc3", 32)  # raw high byte
    assert keep_token(b"\xc3\xa9", 4)  # a whole UTF-8 character
    assert not keep_token(b"", 4)
    vocab = build_vocabulary(
        [(0, b"a", 4), (1, b"</s>", 4), (2, b"a", 4), (3, b"\x9f", 32)], eos_id=1, n_vocab=4
    )
    assert vocab.pieces == {b"a": [0, 2]}
    assert set(vocab.token_bytes) == {0, 2}


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
