"""Evaluations on a Ray cluster, with the same JSONL contract as the local `eval`: the
driver reads the dataset and the results file once (keys, duplicates and resume need one
ordered pass), Ray Data spreads the items over actors that each load ONE judge and batch
their rows through its scheduler, and the driver appends the records as they come back
(resume, `kill -9` and the summary work as locally). An actor that dies mid-batch is
restarted and its batch run again: no item is lost or written twice. The only module that
imports ray (the extra `localjudge[ray]`)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from localjudge.errors import LocalJudgeError, ModelError
from localjudge.evals.batch import FileEvalReport, item_record, plan_file
from localjudge.evals.dataset import DatasetRow
from localjudge.evals.runner import EvalItem, ItemResult, run_evals_async

_FORWARDED = ("LOCALJUDGE_ENGINE", "LOCALJUDGE_MODEL")  # the driver's settings that actors share


class DistributedError(LocalJudgeError):
    """The Ray cluster could not run the evaluation (no cluster, a worker lacks the model)."""


def _import_ray():
    try:
        import ray
        import ray.data
    except ImportError:
        raise DistributedError(
            "Ray is not installed: pip install 'localjudge[ray]' (make install includes it)"
        ) from None
    return ray


class ScoringActor:
    """One Ray actor: one judge, loaded once, and the scorers on it. Called with a batch of
    items, it returns their records."""

    def __init__(
        self,
        *,
        model: str | None,
        engine_options: dict[str, Any],
        scorer_names: Sequence[str],
        scorer_settings: dict[str, Any],
        store_text: bool,
        environment: dict[str, str],
    ) -> None:
        from localjudge.loading import load_judge
        from localjudge.scorers import make_scorer

        os.environ.update(environment)  # the driver's choice of engine and default model
        try:
            self.judge = load_judge(model, **engine_options)
        except ModelError as error:  # say which worker lacks the model
            raise ModelError(f"worker {socket.gethostname()}: {error}") from None
        self.scorers = {
            name: make_scorer(name, self.judge, **scorer_settings) for name in scorer_names
        }
        self.names = {scorer.id: name for name, scorer in self.scorers.items()}
        self.store_text = store_text

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[str]]:
        rows = [
            DatasetRow(int(line), str(key), item=EvalItem(**json.loads(item)))
            for key, line, item in zip(batch["key"], batch["line"], batch["item"], strict=True)
        ]
        records: list[str] = []

        def collect(result: ItemResult) -> None:
            record = item_record(rows[result.index], result, self.names, self.store_text)
            records.append(json.dumps(record, ensure_ascii=True, default=str))

        asyncio.run(
            run_evals_async(
                [row.item for row in rows], list(self.scorers.values()), on_item_result=collect
            )
        )
        return {"record": records}


def run_evals_ray(
    data: str | Path,
    out: str | Path,
    scorer_names: Sequence[str],
    *,
    address: str | None = None,
    model: str | None = None,
    engine_options: dict[str, Any] | None = None,
    scorer_settings: dict[str, Any] | None = None,
    num_actors: int = 1,
    num_cpus: float = 1,
    num_gpus: float = 0,
    batch_size: int = 16,
    limit: int | None = None,
    fields: dict[str, str] | None = None,
    retry_errors: bool = False,
    store_text: bool = True,
    on_start: Callable[[int], Any] | None = None,
    on_item: Callable[[dict], Any] | None = None,
) -> FileEvalReport:
    """Score the items of `data` that `out` does not hold yet on a Ray cluster.

    `address`: a running cluster (`"auto"`, `"ray://host:10001"`, ...), or None for a local
    one (or the one `ray.init` already joined). `model` is resolved on each worker: a
    registry name needs the model file on every node (a worker without it says so); a
    path is used as is. Each of `num_actors` actors takes `num_cpus`/`num_gpus` and loads
    one judge with `engine_options` (n_threads, n_gpu_layers, n_ctx, slots). The results
    file, its records, resume and the report are those of the local `evaluate_file`. Ray
    Data restarts an actor that dies and runs its batch again.
    """
    from localjudge.scorers import scorer_names as known_scorers

    unknown = [name for name in scorer_names if name not in known_scorers()]
    if unknown:
        raise ValueError(f"unknown scorer {unknown[0]!r}; known: {', '.join(known_scorers())}")
    ray = _import_ray()
    plan = plan_file(data, out, limit=limit, fields=fields, retry_errors=retry_errors)
    if on_start is not None:
        on_start(len(plan.todo))
    if plan.todo:
        if not ray.is_initialized():
            try:
                ray.init(
                    address=address,
                    log_to_driver=False,
                    include_dashboard=False,
                    logging_level=logging.WARNING,
                )
            except (ConnectionError, RuntimeError, ValueError) as error:
                raise DistributedError(
                    f"cannot join the Ray cluster {address!r}: {error}"
                ) from None
        ray.data.DataContext.get_current().enable_progress_bars = False
        items = [
            {
                "key": row.key,
                "line": row.line,
                "item": json.dumps(dataclasses.asdict(row.item), ensure_ascii=True, default=str),
            }
            for row in plan.todo
        ]
        scored = ray.data.from_items(items).map_batches(
            ScoringActor,
            fn_constructor_kwargs={
                "model": model,
                "engine_options": engine_options or {},
                "scorer_names": list(scorer_names),
                "scorer_settings": scorer_settings or {},
                "store_text": store_text,
                "environment": {k: os.environ[k] for k in _FORWARDED if k in os.environ},
            },
            compute=ray.data.ActorPoolStrategy(size=num_actors),
            batch_size=batch_size,
            num_cpus=num_cpus,
            num_gpus=num_gpus,
        )
        try:
            for batch in scored.iter_batches(batch_size=None, batch_format="numpy"):
                for text in batch["record"]:
                    record = json.loads(str(text))
                    plan.results.append(record)
                    if on_item is not None:
                        on_item(record)
        except Exception as error:
            if isinstance(error, LocalJudgeError):
                raise
            message = str(error).strip().splitlines()
            detail = next(
                (line for line in message if "Error:" in line), message[-1] if message else ""
            )
            raise DistributedError(f"the Ray evaluation failed: {detail}") from None
    return plan.report(list(scorer_names))
