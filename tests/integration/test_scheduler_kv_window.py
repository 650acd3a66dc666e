"""``[models.<id>.kv_cache] window``: every layer's cache bounded to a rotating window, on a real tiny qwen3.

The reference is mlx-lm itself: ``generate_step`` with a ``RotatingKVCache(window)`` per layer.
That is what mlx-lm's ``BatchGenerator(max_kv_size=window)`` computes: its batched window keeps
no first tokens, unlike ``make_prompt_cache(model, window)`` (``keep=4``), which single-stream
``mlx_lm.generate --max-kv-size`` uses. Served alone, in the continuous batch and from the
prefix cache, a windowed sequence gives these greedy tokens (fp32), before and after its window
wraps.
"""

from __future__ import annotations

import mlx.core as mx
import pytest
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import KVCache, RotatingKVCache, make_prompt_cache
from mlx_lm.utils import load_model

from caches.prefix_cache import PrefixCache
from engines.kv_quantization import checked_kv_settings
from engines.protocol import AddRequest, FinishReason, SamplingParams, WorkerSpec
from engines.scheduler import Scheduler
from tests.support.scheduling import run_requests

GREEDY = SamplingParams(temperature=0.0, logit_bias={2: -100.0})
WINDOW = 64


def tokens(seed: int, n: int) -> list[int]:
    return [3 + (seed * 131 + j * 17) % 400 for j in range(n)]


@pytest.fixture(scope="module")
def qwen3(tiny_models):
    return load_model(tiny_models.path("qwen3"))[0]


def engine(model, window: int = WINDOW, cache: PrefixCache | None = None) -> Scheduler:
    return Scheduler(model, max_concurrency=8, prefill_step=32, max_context=4096, prefix_cache=cache, kv_window=window)


def served(scheduler: Scheduler, prompts: dict[str, list[int]], max_tokens: int = 24,
           snapshot_at: dict[str, tuple[int, ...]] | None = None) -> dict[str, tuple[list[int], int | None]]:
    requests = [AddRequest(rid, p, max_tokens, GREEDY, [2], (snapshot_at or {}).get(rid, ())) for rid, p in prompts.items()]
    result = run_requests(scheduler, requests)
    assert all(r.last.finish_reason is FinishReason.LENGTH for r in result.values())
    return {rid: (r.tokens, r.cached_tokens) for rid, r in result.items()}


def mlx_lm_tokens(model, prompt: list[int], window: int | None, max_tokens: int = 24) -> list[int]:
    """mlx-lm's own greedy generation with a ``window``-token sliding cache (None: the whole context), the same logit bias."""
    def no_eos(_, logits):
        return logits + mx.where(mx.arange(logits.shape[-1]) == 2, -100.0, 0.0)
    steps = generate_step(mx.array(prompt), model, prompt_cache=[RotatingKVCache(window) if window else KVCache() for _ in model.layers], max_tokens=max_tokens,
                          logits_processors=[no_eos], prefill_step_size=32)
    return [int(token) for token, _ in steps]


@pytest.mark.parametrize("length", [30, 100, 300])  # inside the window, past it, past it several times
def test_a_windowed_sequence_gives_mlx_lm_max_kv_size_tokens(qwen3, length):
    prompt = tokens(length, length)
    output = served(engine(qwen3), {"r": prompt})["r"][0]
    assert output == mlx_lm_tokens(qwen3, prompt, WINDOW)
    inside = length + 24 <= WINDOW
    # Inside the window the whole context is attended, as without one; past it, the window shows.
    assert (output == mlx_lm_tokens(qwen3, prompt, None)) is inside


def test_windowed_sequences_in_one_batch_each_equal_their_solo_run(qwen3):
    prompts = {f"r{i}": tokens(i, 20 + 45 * i) for i in range(6)}  # 20 to 245 tokens, wrapping at different steps
    together = served(engine(qwen3), prompts)
    for rid, prompt in prompts.items():
        assert together[rid][0] == served(engine(qwen3), {rid: prompt})[rid][0], rid


def test_the_next_turn_is_served_from_the_exact_snapshot_of_a_windowed_cache(qwen3):
    scheduler = engine(qwen3, cache=PrefixCache(memory_bytes=1 << 30))
    assert scheduler.exact_snapshots  # a wrapped window cannot be rewound: the router names turn boundaries
    first = tokens(1, 150)
    output, cached = served(scheduler, {"a": first}, snapshot_at={"a": (100,)})["a"]  # as the router names a turn boundary
    assert cached == 0
    turn = first + output + tokens(2, 20)
    following, cached = served(scheduler, {"b": turn})["b"]
    assert cached == len(first) + len(output)
    assert following == served(engine(qwen3), {"b": turn})["b"][0]


def test_a_model_that_makes_its_own_caches_refuses_a_window(tiny_models):
    sliding, _ = load_model(tiny_models.path("llama", sliding_window=32))
    assert any(isinstance(layer, RotatingKVCache) for layer in make_prompt_cache(sliding))
    spec = WorkerSpec(model_id="m", model_path="", socket_path="", token="", max_concurrency=1, prefill_step=16,
                      max_context=0, kv_window=WINDOW)
    with pytest.raises(ValueError, match=r"models\.m\.kv_cache\.window: this model makes its own caches"):
        checked_kv_settings(sliding, spec)


def test_a_branch_at_a_named_boundary_is_served_from_its_snapshot(qwen3):
    scheduler = engine(qwen3, cache=PrefixCache(memory_bytes=1 << 30))
    shared = tokens(3, 100)
    served(scheduler, {"a": shared + tokens(4, 50)}, snapshot_at={"a": (len(shared),)})
    branch = shared + tokens(5, 30)
    output, cached = served(scheduler, {"b": branch})["b"]
    assert cached == len(shared)
    assert output == mlx_lm_tokens(qwen3, branch, WINDOW)


def test_the_disk_tier_keeps_windowed_entries_apart_from_whole_context_ones(tiny_models, tmp_path):
    from engines.worker import _disk_tier

    def fingerprint_with(window: int) -> str:
        spec = WorkerSpec(model_id="m", model_path=str(tiny_models.path("qwen3")), socket_path="", token="", max_concurrency=1,
                          prefill_step=16, max_context=0, prefix_cache_dir=str(tmp_path), prefix_cache_disk_bytes=1 << 20,
                          kv_window=window)
        return _disk_tier(spec, None).fingerprint

    # A restart with another window must not serve the other window's entries (nor the whole context's).
    assert len({fingerprint_with(0), fingerprint_with(WINDOW), fingerprint_with(2 * WINDOW)}) == 3
