"""Where localjudge keeps its files: its home folder, and the data it ships.

The verdict schemas (`grammars/`) and the built-in registry (`models/registry.json`) live
at the top of the repository. A wheel carries them inside the package
(`localjudge/_grammars`, `localjudge/_models`, mapped at build time by pyproject.toml), so
an installed localjudge finds them there; a checkout finds them in the repository.
"""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_REPO_ROOT = _PACKAGE.parent


def home() -> Path:
    """localjudge's own folder (models, caches, user registry); `LOCALJUDGE_HOME` overrides."""
    value = os.environ.get("LOCALJUDGE_HOME")
    path = Path(value).expanduser() if value else Path.home() / ".cache" / "localjudge"
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir(kind: str) -> Path:
    path = home() / "cache" / kind
    path.mkdir(parents=True, exist_ok=True)
    return path


def _shipped(packaged: str, in_repository: str) -> Path:
    inside = _PACKAGE / packaged
    return inside if inside.is_dir() else _REPO_ROOT / in_repository


def grammars_dir() -> Path:
    """The verdict JSON Schemas."""
    return _shipped("_grammars", "grammars")


def models_dir() -> Path:
    """The folder of the built-in registry, `registry.json`."""
    return _shipped("_models", "models")
