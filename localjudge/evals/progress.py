"""A progress bar for `run_evals`: items scored, of all, and the rate, on stderr."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def wanted(progress: bool | None) -> bool:
    """As asked, else on only where stderr is a terminal (not in pipes, CI logs or a
    notebook's captured output)."""
    if progress is not None:
        return bool(progress)
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


@contextmanager
def item_progress(total: int | None, enabled: bool) -> Iterator[Callable[[], None]]:
    """A bar of `total` items (None: not known ahead) while the block runs; call the
    yielded function per item."""
    if not enabled:
        yield lambda: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    bar = Progress(
        TextColumn("scoring"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
    )
    task = bar.add_task("run_evals", total=total, rate="")
    started, done = time.perf_counter(), [0]

    def advance() -> None:
        done[0] += 1
        rate = done[0] / max(time.perf_counter() - started, 1e-9)
        bar.update(task, advance=1, rate=f"{rate:.2f} items/s")

    with bar:
        yield advance
