"""Reading a labelled file (JSONL or CSV) into rows: verdict rows (`quality/labelled.py`)
or item rows (`quality/items.py`), and the rows that could not be read."""

from __future__ import annotations

from pathlib import Path

from localjudge.evals.dataset import DatasetError, read_records
from localjudge.quality.items import is_item_record, item_row_of
from localjudge.quality.labelled import DataError, RowError, as_task, row_of
from localjudge.scorers.task import VerdictTask


def read_rows(path: str | Path, task: VerdictTask | str) -> tuple[list, list[RowError]]:
    """The rows of a JSONL or CSV file (by its suffix), and the rows that could not be read.
    Verdict rows (`Row`: a claim or a text each), or item rows (`ItemRow`: an `output` to
    score whole) when the first readable row has an `output` and no `claim` or `text`."""
    task = as_task(task)
    rows: list = []
    errors: list[RowError] = []
    parse = None  # verdict rows, or item rows when the first readable row is an item
    try:
        records = list(read_records(path))
    except DatasetError as error:
        raise DataError(str(error)) from None
    for number, record, unreadable in records:
        if unreadable is not None:
            errors.append(RowError(number, unreadable))
            continue
        if parse is None and isinstance(record, dict):
            parse = item_row_of if is_item_record(record, task) else row_of
        try:
            rows.append((parse or row_of)(record, number, task))
        except ValueError as error:
            errors.append(RowError(number, str(error)))
    if not rows:
        detail = f" ({len(errors)} unreadable; first: row {errors[0].number}: {errors[0].message})"
        raise DataError(f"{path}: no usable {task.name} row" + (detail if errors else ""))
    return rows, errors
