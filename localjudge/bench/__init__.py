"""`localjudge bench`: judge workloads run several ways in one run, reported as ratios
measured in that run. `workloads.py` the claims and contexts, `ways.py` our ways,
`external.py` llama-server, outlines and llama-batched-bench, `replay.py` the bare engine
replaying each round, `runner.py` the run, `results.py` what it measured (and `WAYS`, each
way's letter and meaning), `report.py` JSON and console tables."""

from localjudge.bench.results import (
    RATIO_PAIRS,
    WAYS,
    BatchedBenchCheck,
    WayResult,
    WorkloadReport,
)

__all__ = [
    "RATIO_PAIRS",
    "WAYS",
    "BatchedBenchCheck",
    "WayResult",
    "WorkloadReport",
    "run_bench",
]


def __getattr__(name: str):
    if name == "run_bench":  # the run loads the judge's stack; the catalogue above does not
        from localjudge.bench.runner import run_bench

        return run_bench
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
