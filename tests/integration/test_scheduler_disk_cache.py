"""The prefix cache's disk tier under the scheduler, on real tiny models and real files.

Every output is compared token for token with a scheduler without any cache (fp32, greedy):
an entry written through, evicted from memory, or left by an earlier process and loaded
back serves exactly what the prefill it replaces would have computed.
"""

from __future__ import annotations

import logging
import os
import stat

import pytest
from mlx_lm.utils import load_model

from caches.disk import DiskTier, fingerprint
from caches.prefix_cache import PrefixCache
from caches.quantized import KVQuantization
from engines.protocol import AddRequest, FinishReason, SamplingParams
from engines.scheduler import SHARE_MIN_TOKENS, Scheduler
from tests.support.scheduling import run_requests

GREEDY = SamplingParams(temperature=0.0, logit_bias={2: -100.0})
# name -> (architecture, build options, KV quantization)
SETTINGS = {"qwen3": ("qwen3", {}, None), "qwen3-kv8": ("qwen3", {}, KVQuantization(8, 32)), "qwen3_next": ("qwen3_next", {}, None),
            "llama-sliding": ("llama", {"sliding_window": 48}, None)}


def tokens(seed: int, n: int) -> list[int]:
    return [3 + (seed * 131 + j * 17) % 400 for j in range(n)]


@pytest.fixture(scope="module", params=list(SETTINGS))
def setup(request, tiny_models):
    arch, options, quantization = SETTINGS[request.param]
    path = tiny_models.path(arch, **options)
    return request.param, path, load_model(path)[0], quantization


def make_cache(root, setup, *, memory_bytes: int = 1 << 30, budget: int = 1 << 30) -> PrefixCache:
    _, path, _, quantization = setup
    tier = DiskTier(root, fingerprint(path, {"kv": repr(quantization)}), budget_bytes=budget, quantization=quantization)
    cache = PrefixCache(memory_bytes=memory_bytes, disk=tier)
    cache.restore()
    return cache


def engine(setup, cache: PrefixCache | None) -> Scheduler:
    _, _, model, quantization = setup
    return Scheduler(model, max_concurrency=8, prefill_step=64, max_context=4096, prefix_cache=cache, kv_quantization=quantization)


def run(scheduler: Scheduler, prompt: list[int], request_id: str = "r", max_tokens: int = 8):
    outcome = run_requests(scheduler, [AddRequest(request_id, prompt, max_tokens, GREEDY, [2])])[request_id]
    assert outcome.last.finish_reason is FinishReason.LENGTH, outcome.last
    return outcome


def room_for_one_entry(setup, prompt: list[int]) -> int:
    """A memory budget that holds the largest entry a run of ``prompt`` stores, but not two."""
    sizing = PrefixCache(memory_bytes=1 << 30)
    run(engine(setup, sizing), prompt)
    return int(1.5 * max(node.value.nbytes for node in sizing._nodes))


def settle(cache: PrefixCache) -> None:
    """Wait until the writer has written what was queued (as a graceful stop does)."""
    cache.disk.flush(timeout_s=30)
    cache.apply_disk_events()


def test_entries_survive_a_restart_and_serve_the_next_turn_exactly(setup, tmp_path):
    first = make_cache(tmp_path, setup)
    history = tokens(1, SHARE_MIN_TOKENS + 60)
    output = run(engine(setup, first), history).tokens
    settle(first)
    assert first.disk.stats.entries >= 1 and first.disk.stats.bytes_written > 0
    # A new process: the index is rebuilt from the files, nothing is in memory yet.
    second = make_cache(tmp_path, setup)
    assert second.stats.entries == 0 and second.disk.stats.entries == first.disk.stats.entries
    turn = history + output + tokens(2, 11)
    served = run(engine(setup, second), turn)
    assert served.cached_tokens == len(history) + len(output)
    assert served.tokens == run(engine(setup, None), turn).tokens
    assert second.disk.stats.hits == 1 and second.disk.stats.bytes_read > 0
    second.disk.flush(1)


def test_an_entry_evicted_from_memory_is_served_from_disk(setup, tmp_path):
    history, other = tokens(3, SHARE_MIN_TOKENS + 40), tokens(5, SHARE_MIN_TOKENS + 40)
    cache = make_cache(tmp_path, setup, memory_bytes=room_for_one_entry(setup, history))
    scheduler = engine(setup, cache)
    output = run(scheduler, history, "a").tokens
    settle_writes(cache)
    run(scheduler, other, "b")  # its entries push the history's out of memory
    settle_writes(cache)
    assert cache.stats.evictions >= 1 and cache.disk.stats.entries >= 2
    turn = history + output + tokens(4, 7)
    served = run(scheduler, turn, "c")
    assert served.cached_tokens == len(history) + len(output) and served.tokens == run(engine(setup, None), turn).tokens
    assert cache.disk.stats.hits == 1
    cache.disk.flush(1)


def test_an_entry_loaded_back_while_memory_is_pinned_full_still_serves(setup, tmp_path):
    # Two sessions, memory for one entry: B's next turn runs on (and pins) B's entry while A's
    # comes back from disk; A's must serve A before the budget is enforced again.
    first_a, first_b = tokens(6, SHARE_MIN_TOKENS + 40), tokens(7, SHARE_MIN_TOKENS + 40)
    cache = make_cache(tmp_path, setup, memory_bytes=room_for_one_entry(setup, first_a))
    scheduler = engine(setup, cache)
    out_a = run(scheduler, first_a, "a1").tokens
    out_b = run(scheduler, first_b, "b1").tokens
    settle_writes(cache)
    next_a, next_b = first_a + out_a + tokens(8, 9), first_b + out_b + tokens(9, 9)
    result = run_requests(scheduler, [AddRequest("b2", next_b, 8, GREEDY, [2]), AddRequest("a2", next_a, 8, GREEDY, [2])])
    assert result["b2"].cached_tokens == len(first_b) + len(out_b)
    assert result["a2"].cached_tokens == len(first_a) + len(out_a) and cache.disk.stats.hits == 1
    assert result["a2"].tokens == run(engine(setup, None), next_a).tokens
    assert cache.stats.bytes <= cache.memory_bytes  # the budget holds again once nothing is pinned past it
    cache.disk.flush(1)


def test_unreadable_files_are_removed_with_one_warning_and_never_served(setup, tmp_path, caplog):
    first = make_cache(tmp_path, setup)
    prompts = [tokens(10 + i, SHARE_MIN_TOKENS + 20 + i) for i in range(3)]
    scheduler = engine(setup, first)
    for i, prompt in enumerate(prompts):
        run(scheduler, prompt, f"p{i}", max_tokens=2)
    settle(first)
    by_prompt: dict[int, list] = {0: [], 1: [], 2: []}
    for entry in DiskTier(tmp_path, first.disk.fingerprint, budget_bytes=1 << 30).scan():
        owner = next(i for i, p in enumerate(prompts) if list(entry.tokens[:20]) == p[:20])
        by_prompt[owner].append(first.disk.directory / (entry.name + ".safetensors"))
    for path in by_prompt[0]:
        path.write_bytes(b"\0" * 16)  # garbage
    for path in by_prompt[1]:
        path.write_bytes(path.read_bytes()[:-200])  # truncated: the header reads, the data does not
    misnamed = first.disk.directory / ("f" * 32 + "-" + "0" * 32 + ".safetensors")
    misnamed.write_bytes(by_prompt[2][0].read_bytes())
    with caplog.at_level(logging.WARNING, logger="caches.disk"):
        second = make_cache(tmp_path, setup)
    warnings = [r.getMessage() for r in caplog.records if "unreadable" in r.getMessage()]
    assert warnings == [f"prefix cache on disk: removed {len(by_prompt[0]) + 1} unreadable entries of "
                        f"{sum(map(len, by_prompt.values())) + 1}"]
    # A truncated file is found out when it is loaded: a miss, removed, and the output exact.
    scheduler = engine(setup, second)
    for i, prompt in enumerate(prompts):
        longer = prompt + tokens(20 + i, 5)
        outcome = run(scheduler, longer, f"q{i}")
        assert outcome.tokens == run(engine(setup, None), longer).tokens
        assert (outcome.cached_tokens > 0) == (i == 2)  # only the intact entries serve
    assert not any(path.exists() for path in by_prompt[0]) and not misnamed.exists()
    assert any(not path.exists() for path in by_prompt[1])
    assert second.disk.stats.removed_unreadable > len(by_prompt[0]) + 1
    second.disk.flush(1)


def test_another_fingerprint_or_format_never_meets_these_entries(setup, tmp_path):
    _, path, _, quantization = setup
    cache = make_cache(tmp_path, setup)
    run(engine(setup, cache), tokens(30, SHARE_MIN_TOKENS + 10), max_tokens=2)
    settle(cache)
    other = DiskTier(tmp_path, fingerprint(path, {"kv": "something else"}), budget_bytes=1 << 30)
    assert other.scan() == [] and other.directory != cache.disk.directory
    other.flush(1)
    # A file copied into the wrong directory is refused by its header.
    copied = other.directory / next(cache.disk.directory.glob("*.safetensors")).name
    copied.write_bytes(next(cache.disk.directory.glob("*.safetensors")).read_bytes())
    again = DiskTier(tmp_path, other.fingerprint, budget_bytes=1 << 30)
    assert again.scan() == [] and not copied.exists()
    again.flush(1)


def test_directory_and_files_are_private_and_the_budget_evicts_the_least_recently_used(setup, tmp_path):
    cache = make_cache(tmp_path, setup)
    scheduler = engine(setup, cache)
    run(scheduler, tokens(40, SHARE_MIN_TOKENS), "a", max_tokens=2)
    settle(cache)
    directory = cache.disk.directory
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700 and stat.S_IMODE(os.stat(directory.parent).st_mode) == 0o700
    assert all(stat.S_IMODE(os.stat(f).st_mode) == 0o600 for f in directory.glob("*.safetensors"))
    per_entry = max(f.stat().st_size for f in directory.glob("*.safetensors"))
    cache.disk.flush(1)
    # Room for about three entries: the oldest go first.
    small = make_cache(tmp_path / "small", setup, budget=int(per_entry * 3.5))
    scheduler = engine(setup, small)
    prompts = [tokens(50 + i, SHARE_MIN_TOKENS) for i in range(5)]
    for i, prompt in enumerate(prompts):
        run(scheduler, prompt, f"b{i}", max_tokens=1)  # one token: prompt[:-1] is the only entry it adds
        settle_writes(small)
    kept = DiskTier(tmp_path / "small", small.disk.fingerprint, budget_bytes=1 << 30).scan()
    owners = {next(i for i, p in enumerate(prompts) if list(entry.tokens[:20]) == p[:20]) for entry in kept}
    # Each prompt leaves two entries (its prompt and its output); three fit: the last prompt's
    # and one of the one before it.
    assert small.disk.stats.bytes <= per_entry * 3.5 and len(kept) == 3
    assert owners == {3, 4}
    small.disk.flush(1)


def settle_writes(cache: PrefixCache) -> None:
    """Wait for the writer without stopping it."""
    import time

    deadline = time.monotonic() + 30
    while cache.disk.queue_depth and time.monotonic() < deadline:
        time.sleep(0.01)
    cache.apply_disk_events()


def test_a_directory_that_cannot_be_written_serves_from_memory_and_counts_failed_writes(setup, tmp_path, caplog):
    # Its path turned into a file: every write fails as on a full or read-only disk (this
    # works as root too, which permissions do not).
    cache = make_cache(tmp_path, setup)
    cache.disk.directory.rmdir()
    cache.disk.directory.write_text("not a directory")
    prompt = tokens(60, SHARE_MIN_TOKENS + 10)
    scheduler = engine(setup, cache)
    with caplog.at_level(logging.WARNING, logger="caches.disk"):
        assert run(scheduler, prompt).tokens == run(engine(setup, None), prompt).tokens
        settle(cache)
    assert cache.disk.stats.failed_writes >= 1 and cache.disk.stats.entries == 0
    assert any("could not write" in r.getMessage() for r in caplog.records)
    # Served from memory meanwhile, and the same prompt again hits there.
    assert run(scheduler, prompt, "again").cached_tokens == len(prompt) - 1
