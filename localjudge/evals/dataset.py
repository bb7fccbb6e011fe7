"""Datasets on disk: JSONL (or CSV) items in, one JSONL result line per item out.

The results file is the run's memory: each finished item is appended as one flushed line,
so a run killed at any moment loses nothing already written, and a rerun skips the items
the file already holds (by `id`, or by line number for items without one).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localjudge.errors import LocalJudgeError, ScorerInputError
from localjudge.evals.run import EvalItem


class DatasetError(LocalJudgeError):
    """A dataset file cannot be read at all."""


@dataclass
class DatasetRow:
    """One line of a dataset: the parsed item, or why it could not be used."""

    line: int  # 1-based line (JSONL) or record (CSV) number
    key: str  # resume key: "id:<id>" or "line:<n>"
    item: EvalItem | None = None
    error: str | None = None


def _key(line: int, item_id: Any) -> str:
    return f"id:{item_id}" if item_id is not None else f"line:{line}"


def read_dataset(path: str | Path) -> Iterator[DatasetRow]:
    """Rows of a .jsonl (one JSON object per line) or .csv (columns input, output, context
    as a JSON list or plain text, ground_truth, id) file."""
    path = Path(path)
    if not path.exists():
        raise DatasetError(f"dataset not found: {path}")
    if path.suffix.lower() == ".csv":
        yield from _read_csv(path)
        return
    with path.open(encoding="utf-8", errors="strict") as handle:
        try:
            for number, text in enumerate(handle, start=1):
                if not text.strip():
                    continue
                try:
                    value = json.loads(text)
                except ValueError as error:
                    yield DatasetRow(
                        number,
                        f"line:{number}",
                        error=f"line {number}: malformed JSON ({error.msg})",
                    )
                    continue
                yield _row(number, value)
        except UnicodeDecodeError as error:
            raise DatasetError(f"{path}: not UTF-8 text ({error.reason})") from None


def _row(number: int, value: Any) -> DatasetRow:
    item_id = value.get("id") if isinstance(value, dict) else None
    try:
        item = EvalItem.from_value(value, where=f"line {number}")
    except ScorerInputError as error:
        return DatasetRow(number, _key(number, item_id), error=str(error))
    return DatasetRow(number, _key(number, item.id), item=item)


def _read_csv(path: Path) -> Iterator[DatasetRow]:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        for number, record in enumerate(reader, start=1):
            value: dict[str, Any] = {k: v for k, v in record.items() if k and v not in (None, "")}
            if "context" in value:
                text = value["context"]
                try:
                    parsed = json.loads(text)
                    value["context"] = parsed if isinstance(parsed, list) else [text]
                except ValueError:
                    value["context"] = [text]
            yield _row(number, value)


class ResultsFile:
    """An append-only JSONL results file that knows which items it already holds."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.done: dict[str, dict] = {}
        if self.path.exists():
            self._repair_and_load()

    def _repair_and_load(self) -> None:
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):  # a line cut short by a kill: drop the fragment
            data = data[: data.rfind(b"\n") + 1]
            with self.path.open("r+b") as handle:
                handle.truncate(len(data))
        for text in data.decode("utf-8", errors="replace").splitlines():
            try:
                record = json.loads(text)
            except ValueError:
                continue
            if isinstance(record, dict) and "key" in record:
                self.done[record["key"]] = record

    def append(self, record: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(record, ensure_ascii=False, default=str)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()
        self.done[record["key"]] = record
