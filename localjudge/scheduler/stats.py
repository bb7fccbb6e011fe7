"""The scheduler's counters, kept in one place: the scheduler updates them, the runtime
and the benchmark read snapshots."""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass
class SchedulerStats:
    """Totals since the scheduler started."""

    num_steps: int = 0  # engine steps run
    num_prompt_tokens: int = 0  # prompt and prefix tokens evaluated, all requests
    num_generated_tokens: int = 0  # output tokens (sampled + forced)
    num_forced_tokens: int = 0  # output tokens appended without logits (jump-forward)
    num_head_tokens: int = 0  # of those, heads (`{"verdict":"`) fed as their prompts' end
    decode_seconds: float = 0.0  # engine time of all steps
    generation_steps: int = 0  # steps that carried output tokens only (no prompt tokens)
    generation_tokens: int = 0  # output tokens fed in those steps
    generation_seconds: float = 0.0  # engine time of those steps
    prefill_steps: int = 0  # steps that carried prompt tokens (maybe output tokens too)
    prefill_seconds: float = 0.0  # engine time of those steps
    prompt_phase_steps: int = 0  # steps that carried prompt tokens only (no output tokens)
    prompt_phase_tokens: int = 0  # prompt tokens evaluated in those steps
    prompt_phase_seconds: float = 0.0  # engine time of those steps
    # generation steps in llama-batched-bench's shape, by their number of sequences n:
    # n -> (steps, engine seconds), each of n sequences feeding one token with logits
    generation_by_batch: dict[int, tuple[int, float]] = field(default_factory=dict)
    num_states_saved: int = 0  # states stored in the prompt cache (prefixes, kept prompts)
    num_states_restored: int = 0  # prefix states put back from it instead of a prefill
    num_tokens_restored: int = 0  # prompt tokens those restores spared
    num_prompts_kept: int = 0  # finished requests' prompts kept in the KV cache
    num_kept_prompts_used: int = 0  # requests that started from a kept prompt (evaluating nothing)
    num_kept_prompts_restored: int = 0  # requests whose own cells came back from host memory
    num_tokens_apart: int = 0  # of the prompt tokens, those evaluated in the prefill context

    @property
    def prefill_tokens_per_s(self) -> float:
        """Prompt tokens per second of the steps that evaluated prompt tokens (a lower
        bound: such steps may also carry output tokens)."""
        return self.num_prompt_tokens / self.prefill_seconds if self.prefill_seconds else 0.0

    @property
    def prompt_phase_tokens_per_s(self) -> float:
        """Prompt tokens per second of the steps that carried prompt tokens only
        (llama-batched-bench's S_PP)."""
        if not self.prompt_phase_seconds:
            return 0.0
        return self.prompt_phase_tokens / self.prompt_phase_seconds

    def generation_tokens_per_s_at(self, num_seqs: int) -> float | None:
        """Output tokens/s of the generation steps in which `num_seqs` sequences fed one
        token each (llama-batched-bench's S_TG at that batch size); None if there were none."""
        steps, seconds = self.generation_by_batch.get(num_seqs, (0, 0.0))
        return num_seqs * steps / seconds if seconds else None

    def copy(self) -> SchedulerStats:
        """A snapshot that later steps do not change."""
        return replace(self, generation_by_batch=dict(self.generation_by_batch))

    def since(self, before: SchedulerStats) -> SchedulerStats:
        """The counters of what happened between the snapshot `before` and this one."""
        values = {
            name: getattr(self, name) - getattr(before, name)
            for name in self.__dataclass_fields__
            if name != "generation_by_batch"
        }
        by_batch = {}
        for n, (steps, seconds) in self.generation_by_batch.items():
            steps_before, seconds_before = before.generation_by_batch.get(n, (0, 0.0))
            if steps > steps_before:
                by_batch[n] = (steps - steps_before, seconds - seconds_before)
        return SchedulerStats(**values, generation_by_batch=by_batch)

    @property
    def generation_tokens_per_s(self) -> float:
        """Output-token throughput of pure generation steps (llama-batched-bench's S_TG)."""
        return self.generation_tokens / self.generation_seconds if self.generation_seconds else 0.0
