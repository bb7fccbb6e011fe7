"""The JSON Schemas of the judge steps, as stored in `grammars/`."""

from __future__ import annotations

import json
from functools import lru_cache

from localjudge.errors import SchemaError
from localjudge.paths import grammars_dir


def schema_names() -> list[str]:
    return sorted(p.stem for p in grammars_dir().glob("*.json"))


@lru_cache(maxsize=32)
def _load(name: str) -> str:
    path = grammars_dir() / f"{name}.json"
    if not path.exists():
        raise SchemaError(f"unknown schema {name!r}; known: {', '.join(schema_names())}")
    return path.read_text(encoding="utf-8")


def load_schema(name: str) -> dict:
    """A fresh copy of the schema named `name` (file stem in `grammars/`)."""
    return json.loads(_load(name))
