"""The disk tier's rules on real files and real mlx-lm cache objects (no model needed)."""

from __future__ import annotations

import shutil

import mlx.core as mx
from mlx_lm.models.cache import KVCache

from caches.disk import DiskTier, Loaded, Written, fingerprint


def layers(length: int, seed: int) -> list[KVCache]:
    mx.random.seed(seed)
    cache = KVCache()
    cache.update_and_fetch(mx.random.normal((1, 2, length, 8)), mx.random.normal((1, 2, length, 8)))
    cache.keys, cache.values = cache.keys[..., :length, :], cache.values[..., :length, :]  # exact size, as extracted
    mx.eval(cache.keys, cache.values)
    return [cache]


def test_a_full_queue_drops_the_write_instead_of_waiting_and_the_flush_writes_most_recent_first(tmp_path):
    tier = DiskTier(tmp_path, "f" * 32, budget_bytes=1 << 30, max_pending=2)
    # The writer starts with scan(): until then the queue only fills.
    assert tier.offer([1, 2, 3], layers(3, 0), 1, 100, True, 0)
    assert tier.offer([4, 5, 6], layers(3, 1), 2, 100, True, 0)
    assert not tier.offer([7, 8, 9], layers(3, 2), 3, 100, True, 0)
    assert tier.stats.dropped_writes == 1 and tier.queue_depth == 2
    tier.scan()
    assert tier.flush(timeout_s=30) == 0
    written = [event.tokens for event in tier.events() if isinstance(event, Written)]
    assert written == [(4, 5, 6), (1, 2, 3)]  # the most recently used first
    assert tier.stats.entries == 2 and tier.stats.bytes_written > 0 and tier.stats.flush_seconds >= 0


def test_a_flush_out_of_time_reports_what_it_left(tmp_path):
    tier = DiskTier(tmp_path, "e" * 32, budget_bytes=1 << 30)
    for i in range(3):
        tier.offer([i, i + 1], layers(2, i), i, 10, True, 0)
    assert tier.flush(timeout_s=0) == 3  # the writer never started: nothing was written
    assert not any(tmp_path.rglob("*.safetensors"))


def test_entries_load_back_exactly_and_a_bad_checksum_is_a_miss(tmp_path):
    tier = DiskTier(tmp_path, "d" * 32, budget_bytes=1 << 30)
    tier.scan()
    original = layers(5, 3)
    tier.offer([9, 8, 7, 6, 5], original, 1, 100, True, 0)
    tier.flush(30)
    (entry,) = DiskTier(tmp_path, "d" * 32, budget_bytes=1 << 30).scan()
    reader = DiskTier(tmp_path, "d" * 32, budget_bytes=1 << 30)
    reader.scan()
    reader.request_load(entry)
    loaded = _wait_loaded(reader)
    assert loaded.tokens == (9, 8, 7, 6, 5) and loaded.layers[0].offset == 5
    assert mx.array_equal(loaded.layers[0].keys, original[0].keys).item()
    path = tmp_path / ("d" * 32) / (entry.name + ".safetensors")
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # one flipped bit in the arrays
    path.write_bytes(bytes(data))
    reader.request_load(entry)
    assert _wait_loaded(reader).layers is None and not path.exists() and reader.stats.removed_unreadable == 1
    reader.flush(1)


def _wait_loaded(tier: DiskTier) -> Loaded:
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for event in tier.events():
            if isinstance(event, Loaded):
                return event
        time.sleep(0.01)
    raise TimeoutError("no load")


def test_the_fingerprint_follows_weights_tokenizer_and_kv_settings(tiny_models, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(tiny_models.path("qwen3"), model)
    base = fingerprint(model, {"kv_bits": 0})
    assert fingerprint(model, {"kv_bits": 0}) == base
    assert fingerprint(model, {"kv_bits": 8}) != base
    weights = next(model.glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-3] ^= 0x01  # one weight changed
    weights.write_bytes(bytes(data))
    changed = fingerprint(model, {"kv_bits": 0})
    assert changed != base
    tokenizer = model / "tokenizer.json"
    tokenizer.write_text(tokenizer.read_text().replace('"<|im_end|>"', '"<|im_stop|>"', 1))
    assert fingerprint(model, {"kv_bits": 0}) != changed
