"""The ways and checks outside localjudge: llama.cpp's llama-server, outlines' own
llama.cpp integration, and llama-batched-bench run alternately with the bare engine."""

from __future__ import annotations

import json
import time
from pathlib import Path

import psutil

from localjudge.bench.replay import PromptPart, bare_engine_replay_apart
from localjudge.bench.results import BatchedBenchCheck, WayResult, median
from localjudge.bench.ways import PeakRss, is_valid
from localjudge.grammar import load_schema

SCHEMA = "hallucination_verdict"


def server_ctx(slots: int, prompts: list[str], max_tokens: int, n_ctx: int) -> int:
    """KV cells for llama-server: every slot keeps its own prompt cached, so room for all
    of them (ours admits by the cells it has instead); ~3 characters a token, generously."""
    return max(n_ctx, slots * (max(len(p) for p in prompts) // 3 + max_tokens + 64))


def _llama_tool_options(
    threads: int | None, gpu_layers: int | None, adapters: tuple[tuple[Path, float], ...]
) -> list[str]:
    """The options that give a llama.cpp tool (llama-server, llama-batched-bench) our
    engine's settings: the unified KV cache with the full SWA cache, micro-batches of 256,
    the judge's threads, GPU layers and LoRA adapters (as our engine applies them)."""
    from localjudge.engine.llama import default_threads

    options = ["-ub", "256", "-kvu", "--swa-full", "-t", str(threads or default_threads())]
    if gpu_layers is not None:
        options += ["-ngl", str(gpu_layers)]
    if adapters:
        options += ["--lora-scaled", ",".join(f"{path}:{scale:g}" for path, scale in adapters)]
    return options


def run_llama_server_way(
    binary: Path,
    model_path: Path,
    prompts: list[str],
    *,
    slots: int,
    threads: int | None,
    max_tokens: int,
    n_ctx: int,
    rounds: int = 1,
    gpu_layers: int | None = None,
    adapters: tuple[tuple[Path, float], ...] = (),
) -> WayResult:
    """llama.cpp's own server, tuned as its users would: `slots` parallel slots over one
    unified KV cache with the full SWA cache (so prompt caching works on Gemma 3), prompt
    caching on, its JSON-schema grammar, `slots` requests in flight. One warm-up round
    (not counted), then the median of `rounds` rounds."""
    import socket
    import subprocess
    import tempfile
    import urllib.error
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    schema = load_schema(SCHEMA)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [
        str(binary),
        "-m", str(model_path),
        "--host", "127.0.0.1",
        "--port", str(port),
        "-np", str(slots),
        "-c", str(server_ctx(slots, prompts, max_tokens, n_ctx)),
        "--no-webui",
    ]  # fmt: skip
    command += _llama_tool_options(threads, gpu_layers, adapters)
    log = tempfile.TemporaryFile()  # noqa: SIM115 (closed below); a file never blocks the server
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)
    base = f"http://127.0.0.1:{port}"

    def post(prompt: str) -> dict:
        body = {
            "prompt": prompt,
            "n_predict": max_tokens,
            "temperature": 0.0,
            "json_schema": schema,
            "cache_prompt": True,
        }
        request = urllib.request.Request(
            f"{base}/completion",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=1800) as reply:
                return json.loads(reply.read())
        except urllib.error.HTTPError as error:  # counted as an invalid reply, kept on record
            return {"error": f"HTTP {error.code}: {error.read().decode(errors='replace')[:300]}"}

    try:
        deadline = time.monotonic() + 300
        while True:  # wait for the model to load
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=5) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                error = log.read().decode(errors="replace")[-2000:]
                raise RuntimeError(f"llama-server did not start: {error}")
            time.sleep(0.5)
        with ThreadPoolExecutor(slots) as pool, PeakRss() as rss:
            list(pool.map(post, prompts))  # warm-up: not counted
            walls, valid, evaluated, generated, errors = [], [], 0, 0, []
            for _ in range(rounds):
                start = time.perf_counter()
                replies = list(pool.map(post, prompts))
                walls.append(time.perf_counter() - start)
                valid.append(sum(is_valid(r.get("content", ""), schema) for r in replies))
                errors += [r["error"] for r in replies if "error" in r]
                evaluated += sum(r.get("timings", {}).get("prompt_n", 0) for r in replies)
                generated += sum(r.get("timings", {}).get("predicted_n", 0) for r in replies)
        server_rss = psutil.Process(server.pid).memory_info().rss / (1 << 20)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
    del rss
    return WayResult(
        way=f"s: llama-server -np {slots}",
        claims=len(prompts),
        wall_s=median(walls),
        prompt_tokens_evaluated=evaluated // rounds,
        tokens_generated=generated // rounds,
        peak_rss_mib=server_rss,
        valid=min(valid),
        rounds=walls,
        errors=errors[:3],
    )


def run_outlines_way(
    model_path: Path,
    prompts: list[str],
    *,
    threads: int | None,
    max_tokens: int,
    n_ctx: int,
    gpu_layers: int | None = None,
    adapters: tuple[tuple[Path, float], ...] = (),
) -> WayResult:
    """The baseline: outlines' llama.cpp integration, one claim at a time, greedy (with the
    judge's LoRA adapter: llama-cpp-python's `Llama` takes one)."""
    import outlines
    from outlines.types import JsonSchema

    from localjudge.engine.llama import open_llama

    schema = load_schema(SCHEMA)
    with PeakRss() as rss:
        llm = open_llama(
            model_path,
            n_ctx=n_ctx,
            n_threads=threads,
            n_gpu_layers=gpu_layers,
            adapter=adapters[0] if adapters else None,
        )
        try:
            generator = outlines.Generator(
                outlines.from_llamacpp(llm, chat_mode=False), JsonSchema(json.dumps(schema))
            )
            evaluated = generated = valid = 0
            start = time.perf_counter()
            for prompt in prompts:
                text = generator(prompt, max_tokens=max_tokens, temperature=0.0)
                evaluated += len(
                    llm.tokenize(prompt.encode("utf-8"), add_bos=True)
                )  # outlines resets the cache each call
                generated += len(llm.tokenize(text.encode("utf-8"), add_bos=False))
                valid += is_valid(text, schema)
            wall = time.perf_counter() - start
        finally:
            llm.close()
    return WayResult(
        way="a: outlines 1-by-1",
        claims=len(prompts),
        wall_s=wall,
        prompt_tokens_evaluated=evaluated,
        tokens_generated=generated,
        peak_rss_mib=rss.peak_mib,
        valid=valid,
    )


def parse_batched_bench(output: str) -> dict:
    """llama-batched-bench's `--output-format jsonl` rows (one per batch size, among log
    lines) as {"prefill": median S_PP, "generation": {n: S_TG}}."""
    rows = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    if not rows:
        raise RuntimeError(f"llama-batched-bench printed no results: {output[-500:]}")
    return {
        "prefill": median([row["speed_pp"] for row in rows]),
        "generation": {int(row["pl"]): row["speed_tg"] for row in rows},
    }


def check_against_batched_bench(
    binary: Path,
    model_path: Path,
    tokens: list[int],
    batch_sizes: list[int],
    *,
    threads: int | None,
    gpu_layers: int | None = None,
    adapters: tuple[tuple[Path, float], ...] = (),
    steps: int = 32,
    repeats: int = 2,
    contexts: int = 1,
) -> BatchedBenchCheck:
    """`repeats` runs of llama-batched-bench, each followed by the bare engine in the same
    shape (`bare_engine_replay` with no claims), with the engine's settings: unified KV cache,
    full SWA cache, n_batch 512, n_ubatch 256, the judge's threads and LoRA adapters. With
    `contexts` > 1, each run also evaluates the prompt in that many sequences, one after
    the other (`-npl contexts` without `-pps`), and the bare engine likewise."""
    import subprocess

    widest = max(batch_sizes)
    base = [
        str(binary),
        "-m", str(model_path),
        "-b", "512",
        "-npp", str(len(tokens)),
        "--output-format", "jsonl",
    ]  # fmt: skip
    base += _llama_tool_options(threads, gpu_layers, adapters)
    command = base + [
        "-c", str(len(tokens) + widest * steps + 512),
        "-ntg", str(steps),
        "-npl", ",".join(map(str, sorted(batch_sizes))),
        "-pps",
    ]  # fmt: skip
    # one output token each: the tool measures its prompt phase apart from it
    contexts_command = base + ["-c", str(contexts * (len(tokens) + 1) + 512), "-ntg", "1"]
    contexts_command += ["-npl", str(contexts)]

    def tool(command: list[str]) -> dict:
        run = subprocess.run(command, capture_output=True, text=True, timeout=1800)
        if run.returncode != 0:
            raise RuntimeError(f"llama-batched-bench failed: {run.stderr[-1000:]}")
        return parse_batched_bench(run.stdout)

    check = BatchedBenchCheck(len(tokens), steps, sorted(batch_sizes), contexts=contexts)
    for _ in range(repeats):
        if contexts > 1:
            check.tool_contexts.append(tool(contexts_command)["prefill"])
            apart = bare_engine_replay_apart(
                model_path,
                tokens,
                [],
                {},
                parts=[PromptPart(seq, None, 0, tuple(tokens), True) for seq in range(contexts)],
                widest=1,
                max_tokens=1,
                threads=threads,
                gpu_layers=gpu_layers,
                adapters=adapters,
            )
            check.engine_contexts.append(apart.prefill_tok_s)
        check.tool.append(tool(command))
        replay = bare_engine_replay_apart(
            model_path,
            tokens,
            [],
            {n: steps for n in batch_sizes},
            widest=widest,
            max_tokens=steps,
            threads=threads,
            gpu_layers=gpu_layers,
            adapters=adapters,
        )
        check.engine.append(
            {
                "prefill": replay.prefill_tok_s,
                "generation": replay.tok_s_by_batch(),
            }
        )
    return check
