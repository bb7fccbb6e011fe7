"""Evaluating a dataset file into a resumable results file (what `localjudge eval` does)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localjudge.evals.dataset import DatasetRow, ResultsFile, read_dataset
from localjudge.evals.runner import ItemResult, run_evals_async
from localjudge.scorers.base import Scorer
from localjudge.scorers.steps import run_coroutine

BUCKETS = ((0.0, 0.0), (0.0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1.0))
BUCKET_LABELS = ("=0", "<=.25", "<=.5", "<=.75", "<=1")


@dataclass
class ScorerSummary:
    """One scorer over the whole results file."""

    name: str
    count: int = 0  # items it scored
    mean: float | None = None
    buckets: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))  # by score / scale
    failures: int = 0


@dataclass
class FileEvalReport:
    """What one `eval` run did, and the state of the whole results file afterwards."""

    processed: int  # items scored in this run
    skipped: int  # items the results file already held
    bad_rows: list[DatasetRow]  # dataset lines that could not be used (reported, not written)
    total: int  # items in the results file
    scorers: dict[str, ScorerSummary]
    failed: int = 0  # items of the results file whose record holds an error
    judge: dict | None = None  # the judge the latest record names ({"model", "meaningful"})

    def summary_line(self, where: str) -> str:
        return (
            f"{self.processed} item(s) scored, {self.skipped} already in {where}, "
            f"{len(self.bad_rows)} unusable line(s); {self.total} item(s) in {where}"
        )

    def table(self, judge_name: str):
        """The scorers' means and score buckets as a rich table."""
        from rich.table import Table

        table = Table(
            "scorer", "items", "mean", *BUCKET_LABELS, "failures", title=f"judge {judge_name}"
        )
        for summary in self.scorers.values():
            mean = "-" if summary.mean is None else f"{summary.mean:.3f}"
            buckets = map(str, summary.buckets)
            table.add_row(summary.name, str(summary.count), mean, *buckets, str(summary.failures))
        return table

    def breaches(self, fail_above: dict[str, float]) -> list[str]:
        """The gates breached: a scorer whose mean is above its limit."""
        return [
            f"{name} mean {self.scorers[name].mean:.3f} is above {limit:g}"
            for name, limit in fail_above.items()
            if self.scorers[name].mean is not None and self.scorers[name].mean > limit
        ]

    def unusable(self) -> str | None:
        """What could not be scored, in one sentence; None when everything was."""
        if not self.bad_rows and not self.failed:
            return None
        return (
            f"{len(self.bad_rows)} dataset line(s) could not be used and {self.failed} "
            "item(s) failed (see the records' errors)"
        )


def _bucket(fraction: float) -> int:
    if fraction <= 0:
        return 0
    for index, (low, high) in enumerate(BUCKETS[1:], start=1):
        if low < fraction <= high:
            return index
    return len(BUCKETS) - 1


def summarize_file(results: ResultsFile, scorer_names: Sequence[str]) -> dict[str, ScorerSummary]:
    summaries = {name: ScorerSummary(name) for name in scorer_names}
    for record in results.records.values():
        for name, summary in summaries.items():
            if name in record.get("errors", {}):
                summary.failures += 1
            result = record.get("results", {}).get(name)
            if result is None:
                continue
            summary.count += 1
            score, scale = result["score"], result.get("scale") or 1
            summary.mean = (summary.mean or 0.0) + score
            summary.buckets[_bucket(score / scale)] += 1
    for summary in summaries.values():
        if summary.count:
            summary.mean = summary.mean / summary.count
    return summaries


def item_record(
    row: DatasetRow, result: ItemResult, names: dict[str, str], store_text: bool
) -> dict[str, Any]:
    """The results-file record of one item (what `eval` appends, locally or on Ray)."""
    return {"key": row.key, "line": row.line, **result.fields(names, store_text=store_text)}


@dataclass
class FilePlan:
    """What a run over a dataset file has to do, after resume: shared by the local `eval`
    and the Ray one."""

    results: ResultsFile  # the results file, loaded
    bad_rows: list[DatasetRow]  # lines that cannot be used (reported, not written)
    todo: list[DatasetRow]  # items to score now, in file order
    skipped: int  # items the results file already holds

    def report(self, scorer_names: Sequence[str]) -> FileEvalReport:
        """The state of the whole results file, once the run is over."""
        records = self.results.records
        return FileEvalReport(
            processed=len(self.todo),
            skipped=self.skipped,
            bad_rows=self.bad_rows,
            total=len(records),
            scorers=summarize_file(self.results, list(scorer_names)),
            failed=sum(1 for r in records.values() if r.get("errors")),
            judge=next(
                (
                    result.get("judgedBy") or result["judge"]  # "judge": older records
                    for record in reversed(list(records.values()))
                    for result in (record.get("results") or {}).values()
                    if isinstance(result, dict)
                    and isinstance(result.get("judgedBy") or result.get("judge"), dict)
                ),
                None,
            ),
        )


def plan_file(
    data: str | Path,
    out: str | Path,
    *,
    limit: int | None = None,
    fields: dict[str, str] | None = None,
    retry_errors: bool = False,
) -> FilePlan:
    """Read `data` and `out`: which items still need scoring. Items whose record holds a
    transient error (an engine failure, a closed judge) are scored again; `retry_errors`
    retries input errors too. `fields` maps item fields to the dataset's own keys."""
    results = ResultsFile(out, retry_errors=retry_errors)
    rows = list(read_dataset(data, fields))
    if limit is not None:
        rows = rows[:limit]
    usable = [row for row in rows if row.item is not None]
    return FilePlan(
        results=results,
        bad_rows=[row for row in rows if row.error is not None],
        todo=[row for row in usable if not results.is_done(row.key)],
        skipped=sum(1 for row in usable if results.is_done(row.key)),
    )


def evaluate_file(
    data: str | Path,
    out: str | Path,
    scorers: dict[str, Scorer],
    *,
    limit: int | None = None,
    fields: dict[str, str] | None = None,
    scoring_concurrency: int | None = None,
    retry_errors: bool = False,
    store_text: bool = True,
    on_start: Callable[[int], Any] | None = None,
    on_item: Callable[[dict], Any] | None = None,
) -> FileEvalReport:
    """Score the items of `data` that `out` does not hold yet, appending one line each
    (see `plan_file` for what is retried). `store_text=False` keeps the input, output and
    other texts out of the records."""
    plan = plan_file(data, out, limit=limit, fields=fields, retry_errors=retry_errors)
    todo = plan.todo
    if on_start is not None:
        on_start(len(todo))
    names = {scorer.id: name for name, scorer in scorers.items()}

    def write(result: ItemResult) -> None:
        record = item_record(todo[result.index], result, names, store_text)
        plan.results.append(record)
        if on_item is not None:
            on_item(record)

    if todo:
        run_coroutine(
            run_evals_async(
                [row.item for row in todo],
                list(scorers.values()),
                scoring_concurrency=scoring_concurrency,
                on_item_result=write,
            )
        )
    return plan.report(list(scorers))
