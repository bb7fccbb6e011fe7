"""Continuous batching: requests, the scheduler state machine, and its runtime."""

from localjudge.scheduler.core import Finished, ScheduledStep, Scheduler, TokenizedRequest
from localjudge.scheduler.request import (
    ChoicePoint,
    GenerationRequest,
    GenerationResult,
    SamplingParams,
    Timings,
    TokenCounts,
)
from localjudge.scheduler.runtime import BatchRuntime, split_shared_prefix

__all__ = [
    "BatchRuntime",
    "ChoicePoint",
    "Finished",
    "GenerationRequest",
    "GenerationResult",
    "SamplingParams",
    "ScheduledStep",
    "Scheduler",
    "Timings",
    "TokenCounts",
    "TokenizedRequest",
    "split_shared_prefix",
]
