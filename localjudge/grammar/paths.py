"""Where localjudge keeps its files: the cache home and the repository's data folders."""

from __future__ import annotations

import os
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parents[2]


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


def grammars_dir() -> Path:
    return _REPO_ROOT / "grammars"


def models_dir() -> Path:
    return _REPO_ROOT / "models"
