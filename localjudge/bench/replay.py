"""The bare engine (`LlamaEngine` without the scheduler) replaying one round of a way: its
prompt phase in its shape, the first prompt alone, then its generation steps; run in a
child process so that its memory and threads leave with it."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path


@dataclass
class EngineReplay:
    """What the bare engine measured replaying one round of a way."""

    prefill_tok_s: float  # the round's prompt phase, in its shape (see `bare_engine_replay`)
    by_batch: dict[int, tuple[int, float]]  # n -> (steps, seconds) of its generation steps
    # the workload's first prefix alone from position 0, then claims after it
    prefill_alone_tok_s: float | None = None

    def tok_s_by_batch(self) -> dict[int, float]:
        """n -> output tokens/s of its generation steps at n."""
        return {n: n * steps / seconds for n, (steps, seconds) in sorted(self.by_batch.items())}


@dataclass(frozen=True)
class PromptPart:
    """One sequence's prompt tokens in a replayed prompt phase: `tokens` at positions
    `start`, `start + 1`, ... of sequence `seq`, which first gets a copy of the cells of
    `parent`'s positions [0, start) (None: from position 0, no parent)."""

    seq: int
    parent: int | None
    start: int
    tokens: tuple[int, ...]
    prefix: bool  # a shared prefix (instructions, a context), not a claim's own prompt


def prompt_phase_parts(
    pairs: list[tuple[list[int], list[int]]], num_tokens: int
) -> list[PromptPart]:
    """The prompt phase of a round, in its shape, for the bare engine to replay: `pairs`
    are the round's prompts as (prefix, own) tokens, in the order requested. As the
    scheduler does, the prefixes' common part (the instructions) is evaluated once, each
    distinct prefix after it in a sequence of its own, then the claims' own prompts each
    after its prefix, prefixes before claims; so that the tokens of each attend over what
    ours did, with the other contexts' cells in the cache. The pairs are taken in order
    until their tokens reach `num_tokens` (the round's prompt-phase tokens), and the last
    part is cut so that exactly `num_tokens` are evaluated."""
    distinct = list(dict.fromkeys(tuple(prefix) for prefix, _ in pairs))
    shared = len(os.path.commonprefix(distinct))  # element by element, any sequences
    prefixes: list[PromptPart] = []
    owns: list[PromptPart] = []
    seq_of: dict[tuple[int, ...], int] = {}
    total = 0
    for prefix, own in pairs:
        if total >= num_tokens:
            break
        key = tuple(prefix)
        if not prefixes:  # the common part, from position 0
            prefixes.append(PromptPart(0, None, 0, key[:shared], True))
            total += shared
        if key not in seq_of:
            seq_of[key] = 0
            if len(key) > shared:  # a context after the instructions
                seq_of[key] = len(prefixes)
                prefixes.append(PromptPart(len(prefixes), 0, shared, key[shared:], True))
                total += len(key) - shared
        owns.append(PromptPart(-1, seq_of[key], len(key), tuple(own), False))
        total += len(own)
    parts, left = [], num_tokens
    for seq, part in enumerate(prefixes + owns):  # the claims' sequences follow the prefixes'
        if left <= 0:
            break
        parts.append(replace(part, seq=seq, tokens=part.tokens[:left]))
        left -= len(parts[-1].tokens)
    return [p for p in parts if p.tokens]


def replayed_contexts(parts: list[PromptPart]) -> int:
    """How many distinct prefixes (contexts) a replayed prompt phase evaluates."""
    prefixes = sum(part.prefix for part in parts)
    return prefixes - 1 if prefixes > 1 else prefixes


def _replay_prompt(engine, parts: list[PromptPart], n_batch: int) -> float:
    """Evaluate `parts` in `n_batch`-token steps, packed in order as the scheduler packs its
    steps: a part whose parent is not complete yet starts a new step. Engine seconds."""
    from localjudge.engine import BatchToken, SeqCopy, StepPlan

    done: set[int] = set()  # sequences whose every token has been evaluated
    ending: list[int] = []  # sequences whose last token is in `plan`
    seconds, plan = 0.0, StepPlan()

    def flush() -> None:
        nonlocal seconds, plan
        if plan.tokens or plan.copies:
            seconds += engine.execute(plan).seconds
        done.update(ending)
        ending.clear()
        plan = StepPlan()

    for part in parts:
        if part.parent is not None:
            if part.parent not in done:
                flush()
            plan.copies.append(SeqCopy(part.parent, part.seq, 0, part.start))
        for i, token in enumerate(part.tokens, start=part.start):
            plan.tokens.append(BatchToken(token, i, part.seq, False))
            if len(plan.tokens) == n_batch:
                if i == part.start + len(part.tokens) - 1:
                    ending.append(part.seq)
                flush()
        if plan.tokens:  # its last token is in the step being packed
            ending.append(part.seq)
    flush()
    return seconds


def bare_engine_replay(
    model_path: Path,
    tokens: list[int],
    own_tokens: list[int],
    steps_by_batch: dict[int, int],
    *,
    widest: int,
    max_tokens: int,
    threads: int | None,
    gpu_layers: int | None = None,
    adapters: tuple[tuple[Path, float], ...] = (),
    parts: list[PromptPart] = (),
) -> EngineReplay:
    """The bare engine (`LlamaEngine`, no scheduler) doing what one round of ours did, as
    llama-batched-bench counts it. The prompt phase: `parts` (`prompt_phase_parts`: the
    round's own, in its shape) in `n_batch` chunks, without logits; its rate is
    `prefill_tok_s`. Then, from an empty cache, the workload's first prompt alone: `tokens`
    (a prefix: instructions and context) decoded once from position 0 in `n_batch` chunks
    and copied to the widest batch's sequences, each of which evaluates `own_tokens` (a
    claim's own prompt) after it in `n_batch` chunks without logits (the head follows, as
    in ours); its rate is `prefill_alone_tok_s` (and `prefill_tok_s` too, when no `parts`
    are given). Then the round's generation steps on those sequences: for each batch size
    n, `steps_by_batch[n]` steps in which n sequences feed one token each with logits, a
    sequence going back to the end of its prompt after `max_tokens` outputs, as a request
    of ours ends within its budget. `widest`: the most sequences the prompt is copied to (at
    least the widest batch)."""
    from localjudge.engine import BatchToken, EngineConfig, LlamaEngine, SeqTrim, StepPlan

    widest = max([widest, *steps_by_batch])  # a round may have had no generation steps
    prompt_len = len(tokens) + len(own_tokens)
    config = EngineConfig(
        n_ctx=max(
            len(tokens) + widest * (len(own_tokens) + max_tokens + 1),
            sum(len(part.tokens) for part in parts),
        )
        + 256,
        n_seq_max=max(widest + 1, len(parts)),
        n_threads=threads,
        n_gpu_layers=gpu_layers,
        adapters=adapters,
    )
    with LlamaEngine(model_path, config) as engine:
        phase_tok_s = None
        if parts:
            seconds = _replay_prompt(engine, parts, config.n_batch)
            phase_tok_s = sum(len(part.tokens) for part in parts) / seconds
            engine.clear()
        shared = widest
        alone = [PromptPart(shared, None, 0, tuple(tokens), True)] + [
            PromptPart(seq, shared, len(tokens), tuple(own_tokens), False) for seq in range(widest)
        ]
        alone_tok_s = sum(map(len, (tokens, *[own_tokens] * widest))) / _replay_prompt(
            engine, alone, config.n_batch
        )
        token = engine.tokenize(" the", add_special=False)[0]
        positions = [prompt_len] * widest

        def step(n_seqs: int) -> float:
            plan = StepPlan()
            for seq in range(n_seqs):
                if positions[seq] == prompt_len + max_tokens:  # the budget is spent
                    plan.trims.append(SeqTrim(seq, prompt_len))
                    positions[seq] = prompt_len
                plan.tokens.append(BatchToken(token, positions[seq], seq, True))
                positions[seq] += 1
            return engine.execute(plan).seconds

        step(widest)  # a warm-up, not counted
        by_batch = {}
        for n_seqs, steps in sorted(steps_by_batch.items(), reverse=True):
            by_batch[n_seqs] = (steps, sum(step(n_seqs) for _ in range(steps)))
    return EngineReplay(phase_tok_s or alone_tok_s, by_batch, alone_tok_s)


def bare_engine_replay_apart(
    model_path: Path,
    tokens: list[int],
    own_tokens: list[int],
    steps_by_batch: dict[int, int],
    *,
    adapters: tuple[tuple[Path, float], ...] = (),
    parts: list[PromptPart] = (),
    **options,
) -> EngineReplay:
    """`bare_engine_replay` in a Python process of its own, so that its memory (which the
    allocator may keep after the engine closes) is not counted in a way's peak RSS.
    `options`: its other keyword arguments."""
    import subprocess
    import sys

    call = {
        "model_path": str(model_path),
        "tokens": tokens,
        "own_tokens": own_tokens,
        "steps_by_batch": sorted(steps_by_batch.items()),
        "adapters": [(str(path), scale) for path, scale in adapters],
        "parts": [asdict(part) for part in parts],
        "options": options,
    }
    run = subprocess.run(
        [sys.executable, "-c", "from localjudge.bench.replay import replay_main; replay_main()"],
        input=json.dumps(call),
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if run.returncode != 0:
        raise RuntimeError(f"the bare engine's replay failed: {run.stderr[-1000:]}")
    result = json.loads(run.stdout.splitlines()[-1])
    by_batch = {int(n): (steps, seconds) for n, (steps, seconds) in result["by_batch"].items()}
    return EngineReplay(result["prefill_tok_s"], by_batch, result["prefill_alone_tok_s"])


def replay_main() -> None:
    """The child process of `bare_engine_replay_apart`: the call as JSON on stdin, the
    replay as JSON on the last line of stdout."""
    import sys

    call = json.loads(sys.stdin.read())
    replay = bare_engine_replay(
        Path(call["model_path"]),
        call["tokens"],
        call["own_tokens"],
        {n: steps for n, steps in call["steps_by_batch"]},
        adapters=tuple((Path(path), scale) for path, scale in call["adapters"]),
        parts=[PromptPart(**(part | {"tokens": tuple(part["tokens"])})) for part in call["parts"]],
        **call["options"],
    )
    print(json.dumps(asdict(replay)))
