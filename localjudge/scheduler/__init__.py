"""Continuous batching: requests, the scheduler state machine, and its runtime."""

from localjudge.scheduler.core import Scheduler
from localjudge.scheduler.prefix_cache import PrefixCache
from localjudge.scheduler.request import (
    ChoicePoint,
    GenerationRequest,
    GenerationResult,
    Reread,
    SamplingParams,
    Timings,
    TokenCounts,
)
from localjudge.scheduler.runtime import BatchRuntime, split_shared_prefix
from localjudge.scheduler.state import Finished, ScheduledStep, TokenizedRequest
from localjudge.scheduler.stats import SchedulerStats

__all__ = [
    "PrefixCache",
    "Reread",
    "BatchRuntime",
    "ChoicePoint",
    "Finished",
    "GenerationRequest",
    "GenerationResult",
    "SamplingParams",
    "ScheduledStep",
    "Scheduler",
    "SchedulerStats",
    "Timings",
    "TokenCounts",
    "TokenizedRequest",
    "split_shared_prefix",
]
