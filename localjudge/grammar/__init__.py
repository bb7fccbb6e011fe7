"""JSON Schema -> outlines-core index over the judge's vocabulary, compiled once and cached."""

from localjudge.grammar.compiled import CompiledGrammar, compile_grammar
from localjudge.grammar.schemas import load_schema, schema_names
from localjudge.grammar.vocabulary import TokenVocabulary, build_vocabulary

__all__ = [
    "CompiledGrammar",
    "TokenVocabulary",
    "build_vocabulary",
    "compile_grammar",
    "load_schema",
    "schema_names",
]
