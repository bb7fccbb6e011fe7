"""Datasets on disk: JSONL (or CSV) items in, one JSONL result line per item out.

The results file is the run's memory: each finished item is appended as one flushed line,
so a run killed at any moment loses nothing already written, and a rerun skips the items
the file already holds. Items are keyed by their `id` (its JSON value, so `1` and `"1"`
differ), else by a hash of their content, so inserting or reordering lines never makes a
rerun score a shifted item.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localjudge.errors import LocalJudgeError, ScorerInputError
from localjudge.evals.runner import EvalItem


class DatasetError(LocalJudgeError):
    """A dataset file cannot be read at all."""


@dataclass
class DatasetRow:
    """One line of a dataset: the parsed item, or why it could not be used."""

    line: int  # 1-based line (JSONL) or record (CSV) number
    key: str  # resume key: 'id:<id as JSON>' or 'sha:<content hash>[#n]'
    item: EvalItem | None = None
    error: str | None = None


def json_line(record: dict) -> bytes:
    """One JSONL line, UTF-8, newline-terminated. Lone surrogates (broken UTF-16 in a
    text) are written as JSON escapes, so any Python string round-trips exactly."""
    text = json.dumps(record, ensure_ascii=False, default=str)
    return text.encode("utf-8", "backslashreplace") + b"\n"


def item_key(value: Any) -> str:
    """The resume key of a raw item: its id as JSON, else a hash of its content."""
    if isinstance(value, dict) and value.get("id") is not None:
        return "id:" + json.dumps(value["id"], sort_keys=True, ensure_ascii=False, default=str)
    canonical = json.dumps(
        value, sort_keys=True, ensure_ascii=True, default=str, separators=(",", ":")
    ).encode()
    return "sha:" + hashlib.sha256(canonical).hexdigest()[:32]


def read_dataset(path: str | Path, fields: dict[str, str] | None = None) -> Iterator[DatasetRow]:
    """Rows of a .jsonl (one JSON object per line) or .csv (columns input, output, context
    as a JSON list or plain text, ground_truth, id) file; "-" reads JSONL from stdin.

    A repeated id is an error on the later line; identical items without an id are kept
    apart by their occurrence (`#2`, `#3`...), so each is scored once. `fields` maps item
    fields to the record keys that hold them (`{"input": "question"}`).
    """
    seen: dict[str, int] = {}
    occurrences: Counter[str] = Counter()
    for number, value, error in read_records(path):
        if error is not None:
            yield DatasetRow(number, f"line:{number}", error=error)
            continue
        if fields and isinstance(value, dict):
            value = _mapped(value, fields)
        key = item_key(value)
        if key.startswith("id:"):
            if key in seen:
                yield DatasetRow(
                    number,
                    f"line:{number}",
                    error=f"line {number}: duplicate id {key[3:]} (first on line {seen[key]})",
                )
                continue
            seen[key] = number
        else:
            occurrences[key] += 1
            if occurrences[key] > 1:
                key = f"{key}#{occurrences[key]}"
        try:
            item = EvalItem.from_value(value, where=f"line {number}")
        except ScorerInputError as bad:
            yield DatasetRow(number, key, error=str(bad))
            continue
        yield DatasetRow(number, key, item=item)


def _mapped(value: dict, fields: dict[str, str]) -> dict:
    """The record with each mapped key renamed to its item field."""
    sources = set(fields.values())
    mapped = {k: v for k, v in value.items() if k not in sources}
    for name, source in fields.items():
        if source in value:
            mapped[name] = value[source]
    return mapped


def read_records(path: str | Path) -> Iterator[tuple[int, Any, str | None]]:
    """(line number, parsed value, error) per non-empty line of a JSONL file (`-`: stdin) or
    record of a CSV file (empty cells left out, `context` read as a JSON list or one text).
    A file that is missing, not UTF-8 or not CSV raises `DatasetError`."""
    if str(path) == "-":
        yield from _jsonl_records(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8"), "stdin")
        return
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"dataset not found: {path}")
    if path.suffix.lower() == ".csv":
        yield from _csv_records(path)
        return
    with path.open(encoding="utf-8", errors="strict", newline="\n") as handle:
        yield from _jsonl_records(handle, str(path))


def _jsonl_records(handle, name: str) -> Iterator[tuple[int, Any, str | None]]:
    try:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                yield number, json.loads(text), None
            except ValueError as error:
                yield number, None, f"line {number}: malformed JSON ({error.msg})"
    except UnicodeDecodeError as error:
        raise DatasetError(f"{name}: not UTF-8 text ({error.reason})") from None


def _csv_records(path: Path) -> Iterator[tuple[int, Any, str | None]]:
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            for number, record in enumerate(csv.DictReader(handle), start=1):
                value: dict[str, Any] = {
                    k: v for k, v in record.items() if k and v not in (None, "")
                }
                if "context" in value:
                    text = value["context"]
                    try:
                        parsed = json.loads(text)
                        value["context"] = parsed if isinstance(parsed, list) else [text]
                    except ValueError:
                        value["context"] = [text]
                yield number, value, None
    except UnicodeDecodeError as error:
        raise DatasetError(f"{path}: not UTF-8 text ({error.reason})") from None
    except csv.Error as error:
        raise DatasetError(f"{path}: malformed CSV ({error})") from None


class ResultsFile:
    """An append-only JSONL results file that knows which items it already holds.

    `records` keeps the last record per key (a retried item appends a newer one). An item
    counts as done unless its record holds an error that is not an input error: those
    (an engine failure, a closed judge) are retried by the next run.
    """

    def __init__(self, path: str | Path, *, retry_errors: bool = False) -> None:
        self.to_stdout = str(path) == "-"  # stream records to stdout: nothing to resume
        self.path = Path(path)
        self.retry_errors = retry_errors  # retry input errors too
        self.records: dict[str, dict] = {}
        if not self.to_stdout and self.path.exists():
            self._repair_and_load()

    def _repair_and_load(self) -> None:
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):  # a line cut short by a kill: drop the fragment
            data = data[: data.rfind(b"\n") + 1]
            with self.path.open("r+b") as handle:
                handle.truncate(len(data))
        for raw in data.split(b"\n"):  # only "\n" ends a line: texts may hold U+2028
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8", errors="replace"))
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("key"), str):
                self.records[record["key"]] = record

    def is_done(self, key: str) -> bool:
        record = self.records.get(key)
        if record is None:
            return False
        errors = record.get("errors") or {}
        if not errors:
            return True
        if self.retry_errors:
            return False
        kinds = record.get("errorKinds") or {}
        return all(kinds.get(name) == "input" for name in errors)

    def append(self, record: dict) -> None:
        if self.to_stdout:
            sys.stdout.buffer.write(json_line(record))
            sys.stdout.buffer.flush()
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("ab") as handle:
                handle.write(json_line(record))
                handle.flush()
        self.records[record["key"]] = record
