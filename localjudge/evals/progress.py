"""The progress bar of `run_evals` and `localjudge eval`: items scored, of all, and the
rate, on stderr."""

from __future__ import annotations

import sys
import time
from typing import Any


def wanted(progress: bool | None) -> bool:
    """As asked, else on only where stderr is a terminal (not in pipes, CI logs or a
    notebook's captured output)."""
    if progress is not None:
        return bool(progress)
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


class ItemBar:
    """A context manager: `start(total)` once the total is known (None: not known ahead),
    then `advance()` per item. Disabled, it does nothing and loads nothing."""

    def __init__(self, enabled: bool = True, console: Any = None) -> None:
        self._bar = None
        self._task = None
        self._done = 0
        self._started = time.perf_counter()
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(
            TextColumn("scoring"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeRemainingColumn(),
            console=console or Console(stderr=True),
        )

    def start(self, total: int | None) -> None:
        if self._bar is not None:
            self._task = self._bar.add_task("scoring", total=total, rate="")

    def advance(self) -> None:
        if self._bar is None or self._task is None:
            return
        self._done += 1
        rate = self._done / max(time.perf_counter() - self._started, 1e-9)
        self._bar.update(self._task, advance=1, rate=f"{rate:.2f} items/s")

    def __enter__(self) -> ItemBar:
        if self._bar is not None:
            self._bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
