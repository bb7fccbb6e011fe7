"""Evaluation runs: `run_evals` over items, datasets on disk with resumable results files,
and live scoring of a pipeline's outputs."""

from localjudge.evals.batch import evaluate_file
from localjudge.evals.dataset import DatasetError, ResultsFile, read_dataset
from localjudge.evals.live import LiveScorer, LiveStats
from localjudge.evals.runner import EvalItem, EvalResult, ItemResult, run_evals, run_evals_async

__all__ = [
    "DatasetError",
    "EvalItem",
    "EvalResult",
    "ItemResult",
    "LiveScorer",
    "LiveStats",
    "ResultsFile",
    "evaluate_file",
    "read_dataset",
    "run_evals",
    "run_evals_async",
]
