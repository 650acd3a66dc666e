"""Aggregate decode throughput and time to first token: rapid-mlx vs mlx_lm.server.

Both servers serve the same random-weight checkpoint in the same run, one after the other,
with the same requests (greedy, EOS suppressed so every request decodes exactly
``--max-tokens``). Also measures the router's share of TTFT: the same prompt's first token
through HTTP minus through the engine client directly.

    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 \
        python bench/throughput.py --hidden 512 --layers 8
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engines.demo.tiny import build_tiny_model  # noqa: E402
from tests.support.server import free_port  # noqa: E402

EOS_BLOCK = {"2": -100}


def prompt_text(i: int, run: int, words: int) -> str:
    # Distinct per request and per run, so no server can serve a repeat from its prompt cache.
    return f"run {run} request {i}: " + " ".join(f"word{(i * 31 + j * 7 + run) % 97}" for j in range(words))


async def stream_chat(client: httpx.AsyncClient, model: str, content: str, max_tokens: int) -> tuple[float, float, int]:
    """Returns (ttft_s, total_s, completion_tokens) for one streamed chat request."""
    body = {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
            "temperature": 0.0, "logit_bias": EOS_BLOCK, "stream": True, "stream_options": {"include_usage": True}}
    start, first, tokens = time.perf_counter(), None, 0
    async with client.stream("POST", "/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            for choice in chunk.get("choices", []):
                delta = choice["delta"]
                # Any generated output counts: a random model may open a think block, so its
                # first token can arrive as reasoning (reasoning_content here, reasoning in mlx_lm).
                if first is None and any(delta.get(k) for k in ("content", "reasoning_content", "reasoning", "tool_calls")):
                    first = time.perf_counter() - start
    return first or 0.0, time.perf_counter() - start, tokens


async def measure(base_url: str, model: str, concurrency: int, max_tokens: int, words: int, run: int) -> dict:
    async with httpx.AsyncClient(base_url=base_url, timeout=600) as client:
        start = time.perf_counter()
        results = await asyncio.gather(*(stream_chat(client, model, prompt_text(i, run, words), max_tokens) for i in range(concurrency)))
        wall = time.perf_counter() - start
    return {"tok_s": sum(r[2] for r in results) / wall, "ttft_ms": 1000 * statistics.median(r[0] for r in results)}


def wait_http(url: str, process: subprocess.Popen, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited ({process.returncode})")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.3)  # not up yet
    raise TimeoutError(url)


def start_rapid(model_dir: Path, work: Path, port: int, concurrency: int) -> subprocess.Popen:
    config = work / "bench.toml"
    config.write_text(
        f'[server]\nport = {port}\nruntime_dir = "{work}/run"\nlog_level = "warning"\n'
        f'[models.bench]\npath = "{model_dir}"\nmax_concurrency = {concurrency}\nprefill_step = 2048\n'
    )
    process = subprocess.Popen([sys.executable, "-m", "router.cli", "serve", "--config", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_http(f"http://127.0.0.1:{port}/ready", process)
    return process


def start_mlx_lm(model_dir: Path, port: int, concurrency: int) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-m", "mlx_lm", "server", "--model", str(model_dir), "--port", str(port),
         "--decode-concurrency", str(concurrency), "--prefill-step-size", "2048", "--log-level", "WARNING"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "HF_HUB_CACHE": str(model_dir.parent / "hf")},
    )
    wait_http(f"http://127.0.0.1:{port}/health", process)
    return process


def bench_server(name: str, start, model: str, args) -> dict:
    port = free_port()
    process = start(port)
    try:
        asyncio.run(measure(f"http://127.0.0.1:{port}", model, 2, 8, args.prompt_words, run=-1))  # warm-up
        results = {}
        for concurrency in args.concurrency:
            runs = [asyncio.run(measure(f"http://127.0.0.1:{port}", model, concurrency, args.max_tokens, args.prompt_words, run)) for run in range(args.repeats)]
            results[concurrency] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            print(f"{name:>14} c={concurrency}: {results[concurrency]['tok_s']:8.1f} tok/s  ttft {results[concurrency]['ttft_ms']:7.1f} ms", flush=True)
        return results
    finally:
        process.terminate()
        process.wait(timeout=60)


async def router_overhead(model_dir: Path, work: Path, args) -> dict:
    """Median TTFT through HTTP minus through the engine client, same tokens, same worker settings.

    Both paths run side by side and their samples alternate, so drift in machine load hits both.
    """
    from engines.client import WorkerHandle
    from engines.protocol import AddRequest, SamplingParams, WorkerSpec
    from mlx_lm.utils import load_tokenizer

    tokenizer = load_tokenizer(model_dir)
    spec = WorkerSpec(model_id="direct", model_path=str(model_dir), socket_path=str(work / "direct.sock"),
                      token=secrets.token_hex(16), max_concurrency=8, prefill_step=2048, max_context=4096)
    handle = WorkerHandle(spec)
    await handle.wait_ready(300)
    port = free_port()
    process = start_rapid(model_dir, work, port, 8)
    engine_ms, http_ms, floor_ms = [], [], []
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=600) as client:
            for run in range(args.overhead_samples):
                text = prompt_text(0, run + 1000, args.prompt_words)
                tokens = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
                start = time.perf_counter()
                async for _ in handle.generate(AddRequest(f"d{run}", tokens, 1, SamplingParams(temperature=0.0), [])):
                    engine_ms.append(1000 * (time.perf_counter() - start))
                    break
                http_ms.append(1000 * (await stream_chat(client, "bench", text, 1))[0])
                # The floor any HTTP server pays on this machine: one trivial request's round trip.
                start = time.perf_counter()
                (await client.get("/health")).raise_for_status()
                floor_ms.append(1000 * (time.perf_counter() - start))
    finally:
        process.terminate()
        process.wait(timeout=60)
        await handle.stop()
    return {"engine_ttft_ms": statistics.median(engine_ms), "http_ttft_ms": statistics.median(http_ms), "http_floor_ms": statistics.median(floor_ms)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hidden", type=int, default=512, help="model width (the model size parameter)")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--prompt-words", type=int, default=60)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--overhead-samples", type=int, default=15)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="rapidmlx-bench-") as tmp:
        work = Path(tmp)
        model_dir = build_tiny_model(work / "model", hidden_size=args.hidden, num_layers=args.layers, vocab_size=args.vocab, markup_tokens=False)
        (work / "hf").mkdir()
        params = sum(f.stat().st_size for f in model_dir.glob("*.safetensors")) // 4
        print(f"model: qwen3 hidden={args.hidden} layers={args.layers} ~{params / 1e6:.1f}M params fp32; "
              f"prompt ~{args.prompt_words} words, {args.max_tokens} tokens out; LD_PRELOAD={os.environ.get('LD_PRELOAD', '-')}")
        ours = bench_server("rapid-mlx", lambda port: start_rapid(model_dir, work, port, max(args.concurrency)), "bench", args)
        theirs = bench_server("mlx_lm.server", lambda port: start_mlx_lm(model_dir, port, max(args.concurrency)), "default_model", args)
        overhead = asyncio.run(router_overhead(model_dir, work, args))
    print("\n| concurrency | rapid-mlx tok/s | mlx_lm.server tok/s | ratio | rapid-mlx TTFT ms | mlx_lm.server TTFT ms |")
    print("|---|---|---|---|---|---|")
    for c in args.concurrency:
        print(f"| {c} | {ours[c]['tok_s']:.1f} | {theirs[c]['tok_s']:.1f} | {ours[c]['tok_s'] / theirs[c]['tok_s']:.2f} | "
              f"{ours[c]['ttft_ms']:.1f} | {theirs[c]['ttft_ms']:.1f} |")
    added = overhead["http_ttft_ms"] - overhead["engine_ttft_ms"]
    print(f"\nTTFT (1 output token, median of {args.overhead_samples}): engine client {overhead['engine_ttft_ms']:.2f} ms, "
          f"through the router {overhead['http_ttft_ms']:.2f} ms: HTTP adds {added:.2f} ms, of which "
          f"{overhead['http_floor_ms']:.2f} ms is a bare GET /health round trip; the router's own work: "
          f"{added - overhead['http_floor_ms']:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
