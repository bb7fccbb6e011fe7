"""One loaded judge per model file, shared by every scorer in the process that names the
model instead of passing a `Judge` (loading the same model twice is waste)."""

from __future__ import annotations

import atexit
import threading
from pathlib import Path

from localjudge.judge import Judge

_shared_judges: dict[str, Judge] = {}
_shared_lock = threading.Lock()


def shared_judge(model: Judge | str | Path | None) -> Judge:
    """A loaded judge: the one given, or one per model file shared by every scorer in the
    process (loading the same model twice is waste). Shared judges close at exit."""
    if isinstance(model, Judge):
        return model
    from localjudge.model_registry import resolve

    key = str(resolve(model).path.resolve())
    with _shared_lock:
        judge = _shared_judges.get(key)
        if judge is None:
            judge = Judge.load(model)
            _shared_judges[key] = judge
        return judge


@atexit.register
def _close_shared_judges() -> None:
    for judge in list(_shared_judges.values()):
        judge.close()
    _shared_judges.clear()
