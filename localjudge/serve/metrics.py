"""Request counters and the Prometheus text of `GET /metrics`."""

import time

from localjudge.grammar.compiled import disk_cache_bytes
from localjudge.judge import Judge
from localjudge.serve.errors import ServeError


class Counters:
    """Request counts for /metrics."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, int], int] = {}
        self.in_flight = 0
        self.started = time.time()

    def count(self, route: str, status: int) -> None:
        self.requests[(route, status)] = self.requests.get((route, status), 0) + 1

    def enter(self, limit: int) -> None:
        """Count a request in flight, or refuse it (503) when `limit` are already."""
        if self.in_flight >= limit:
            raise ServeError(503, "overloaded", f"{limit} requests already in flight")
        self.in_flight += 1


def metrics_text(judge: Judge, counters: Counters) -> str:
    """Prometheus exposition text of the scheduler and the server."""
    scheduler = judge.scheduler
    stats = scheduler.stats
    cache = scheduler.prompt_cache
    lines = [
        "# TYPE localjudge_queue_depth gauge",
        f"localjudge_queue_depth {len(scheduler.waiting)}",
        "# TYPE localjudge_running_sequences gauge",
        f"localjudge_running_sequences {len(scheduler.running)}",
        "# TYPE localjudge_kv_cells_reserved gauge",
        f"localjudge_kv_cells_reserved {scheduler.num_reserved_cells}",
        "# TYPE localjudge_prefixes_cached gauge",
        f"localjudge_prefixes_cached {scheduler.num_cached_prefixes}",
        "# TYPE localjudge_kv_cells gauge",
        f"localjudge_kv_cells {scheduler.n_ctx}",
        "# TYPE localjudge_steps_total counter",
        f"localjudge_steps_total {stats.num_steps}",
        "# TYPE localjudge_prompt_tokens_total counter",
        f"localjudge_prompt_tokens_total {stats.num_prompt_tokens}",
        "# TYPE localjudge_generated_tokens_total counter",
        f"localjudge_generated_tokens_total {stats.num_generated_tokens}",
        "# TYPE localjudge_decode_seconds_total counter",
        f"localjudge_decode_seconds_total {stats.decode_seconds:.6f}",
        "# TYPE localjudge_generation_tokens_per_second gauge",
        f"localjudge_generation_tokens_per_second {stats.generation_tokens_per_s:.3f}",
        "# TYPE localjudge_prompt_cache_bytes gauge",
        f"localjudge_prompt_cache_bytes {cache.num_bytes if cache is not None else 0}",
        "# TYPE localjudge_prompt_cache_restored_total counter",
        f"localjudge_prompt_cache_restored_total {stats.num_states_restored}",
        "# TYPE localjudge_prompt_cache_restored_tokens_total counter",
        f"localjudge_prompt_cache_restored_tokens_total {stats.num_tokens_restored}",
        "# TYPE localjudge_kept_prompts_used_total counter",
        f"localjudge_kept_prompts_used_total {stats.num_kept_prompts_used}",
        "# TYPE localjudge_kept_prompts_restored_total counter",
        f"localjudge_kept_prompts_restored_total {stats.num_kept_prompts_restored}",
        "# TYPE localjudge_prompt_tokens_apart_total counter",
        f"localjudge_prompt_tokens_apart_total {stats.num_tokens_apart}",
        "# TYPE localjudge_grammars_in_memory gauge",
        f"localjudge_grammars_in_memory {judge.grammars_in_memory}",
        "# TYPE localjudge_grammar_cache_disk_bytes gauge",
        f"localjudge_grammar_cache_disk_bytes {disk_cache_bytes()}",
        "# TYPE localjudge_requests_in_flight gauge",
        f"localjudge_requests_in_flight {counters.in_flight}",
        "# TYPE localjudge_requests_total counter",
    ]
    for (route, status), count in sorted(counters.requests.items()):
        lines.append(f'localjudge_requests_total{{route="{route}",status="{status}"}} {count}')
    return "\n".join(lines) + "\n"
