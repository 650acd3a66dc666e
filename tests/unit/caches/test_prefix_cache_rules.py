"""The radix tree and the prefix cache's lookup, storage and eviction rules, on real mlx-lm cache objects."""

from __future__ import annotations

import mlx.core as mx
import pytest
from mlx_lm.models.cache import ArraysCache, KVCache, RotatingKVCache

from caches.prefix_cache import PrefixCache
from caches.radix import RadixTree

HEADS, DIM = 2, 4
TOKEN_BYTES = 2 * HEADS * DIM * 4  # keys and values, fp32, per layer


def kv(tokens: list[int]) -> KVCache:
    """A KVCache whose key at position i is the token id at i (so a view shows what it holds)."""
    cache = KVCache()
    data = mx.broadcast_to(mx.array(tokens, dtype=mx.float32)[None, None, :, None], (1, HEADS, len(tokens), DIM))
    cache.update_and_fetch(data, data)
    # As BatchGenerator.extract gives them: exact-size arrays.
    cache.keys, cache.values = mx.array(cache.keys[..., : len(tokens), :]), mx.array(cache.values[..., : len(tokens), :])
    return cache


def state(length: int) -> ArraysCache:
    cache = ArraysCache(1)
    cache[0] = mx.full((1, 3), float(length))
    return cache


def held(hit) -> list[int]:
    layer = hit.layers[0]
    return layer.keys[0, 0, : layer.offset, 0].astype(mx.int32).tolist()


def test_edges_are_compressed_and_split_at_divergence():
    tree: RadixTree[str] = RadixTree()
    tree.node_at([1, 2, 3, 4, 5]).value = "a"
    assert len(tree.root.children) == 1 and tree.root.children[1].edge == [1, 2, 3, 4, 5]
    tree.node_at([1, 2, 3, 9]).value = "b"
    middle = tree.root.children[1]
    assert middle.edge == [1, 2, 3] and sorted(c.edge[0] for c in middle.children.values()) == [4, 9]
    found = tree.match([1, 2, 3, 4, 7])
    assert found.length == 4 and found.partial.edge == [4, 5] and [n.depth for n in found.path] == [0, 3]
    assert tree.tokens_of(found.partial) == [1, 2, 3, 4, 5]


def test_pruning_rejoins_a_run_when_a_branch_goes():
    tree: RadixTree[str] = RadixTree()
    tree.node_at([1, 2, 3, 4]).value = "a"
    b = tree.node_at([1, 2, 9])
    b.value = "b"
    b.value = None
    tree.prune(b)
    assert tree.root.children[1].edge == [1, 2, 3, 4] and tree.root.children[1].value == "a"


def test_a_trimmable_snapshot_serves_any_shorter_shared_prefix():
    cache = PrefixCache(memory_bytes=1 << 20)
    stored = list(range(10, 30))
    assert cache.store(stored, [kv(stored)])
    hit = cache.lookup(stored[:12] + [99, 98])  # diverges inside the stored run
    assert hit.length == 12 and held(hit) == stored[:12]
    cache.release(hit)
    # An identical prompt keeps its last token to feed.
    hit = cache.lookup(stored)
    assert hit.length == len(stored) - 1 and held(hit) == stored[:-1]


def test_a_hit_never_changes_the_snapshot():
    cache = PrefixCache(memory_bytes=1 << 20)
    stored = list(range(10, 30))
    cache.store(stored, [kv(stored)])
    hit = cache.lookup(stored[:8] + [7, 7, 7])
    more = mx.full((1, HEADS, 3, DIM), -1.0)
    hit.layers[0].update_and_fetch(more, more)  # a running sequence writes after the match
    again = cache.lookup(stored + [5])
    assert again.length == len(stored) and held(again) == stored


def test_non_trimmable_state_is_served_only_at_exact_snapshot_points():
    cache = PrefixCache(memory_bytes=1 << 20)
    prompt = list(range(50))
    assert cache.store(prompt[:30], [state(30), kv(prompt[:30])])
    assert cache.lookup(prompt[:20] + [1, 2, 3]) is None  # shares 20 tokens, but the state is at 30
    hit = cache.lookup(prompt)
    assert hit.length == 30 and float(hit.layers[0][0][0, 0]) == 30.0
    assert cache.store(prompt[:45], [state(45), kv(prompt[:45])])
    assert cache.lookup(prompt).length == 45 and cache.lookup(prompt[:40]).length == 30


def test_a_rotating_window_is_trimmable_until_it_wraps():
    window = RotatingKVCache(max_size=8)
    data = mx.zeros((1, HEADS, 6, DIM))
    window.update_and_fetch(data, data)
    cache = PrefixCache(memory_bytes=1 << 20)
    cache.store([1, 2, 3, 4, 5, 6], [window])
    assert cache.lookup([1, 2, 3, 9]).length == 3
    wrapped = RotatingKVCache(max_size=4)
    for _ in range(3):
        step = mx.zeros((1, HEADS, 2, DIM))
        wrapped.update_and_fetch(step, step)
    tokens = [20, 21, 22, 23, 24, 25]
    cache.store(tokens, [wrapped])
    assert cache.lookup(tokens[:4] + [0]) is None and cache.lookup(tokens + [0]).length == 6


def test_a_longer_trimmable_snapshot_replaces_the_ones_it_covers():
    cache = PrefixCache(memory_bytes=1 << 20)
    tokens = list(range(40))
    cache.store(tokens[:10], [kv(tokens[:10])])
    cache.store(tokens[:25], [kv(tokens[:25])])
    assert cache.stats.entries == 1 and cache.stats.bytes == 25 * TOKEN_BYTES
    assert cache.lookup(tokens[:10] + [99]).length == 10


def test_eviction_is_least_recently_used_and_spares_pinned_entries():
    cache = PrefixCache(memory_bytes=30 * TOKEN_BYTES)
    a, b, c = [[base + i for i in range(10)] for base in (100, 200, 300)]
    for tokens in (a, b, c):
        cache.store(tokens, [kv(tokens)])
    pinned = cache.lookup(a + [0])  # a is now the most recent, and pinned
    cache.release(cache.lookup(b + [0]))  # b used after a
    d = [400 + i for i in range(10)]
    cache.store(d, [kv(d)])  # over budget by one entry: c is the oldest use
    assert cache.lookup(c + [0]) is None and cache.stats.evictions == 1
    assert cache.evict_to(0) == 20 * TOKEN_BYTES  # b and d go; a is pinned
    assert cache.stats.entries == 1 and cache.lookup(a + [0]).length == 10
    cache.release(pinned)


def test_small_or_oversized_snapshots_are_not_stored():
    cache = PrefixCache(memory_bytes=10 * TOKEN_BYTES, min_tokens=5)
    assert not cache.store([1, 2, 3], [kv([1, 2, 3])])
    assert not cache.store(list(range(11)), [kv(list(range(11)))])
    assert cache.store(list(range(6)), [kv(list(range(6)))])


def test_stats_count_lookups_and_hit_tokens():
    cache = PrefixCache(memory_bytes=1 << 20)
    cache.store(list(range(20)), [kv(list(range(20)))])
    cache.lookup(list(range(10)) + [99])
    cache.lookup([7, 7, 7])
    stats = cache.stats
    assert (stats.lookups, stats.hits, stats.lookup_tokens, stats.hit_tokens) == (2, 1, 14, 10)


@pytest.mark.parametrize("length", [1, 2])
def test_prompts_of_one_token_never_hit_and_two_hit_one(length):
    cache = PrefixCache(memory_bytes=1 << 20)
    cache.store([5, 6], [kv([5, 6])])
    hit = cache.lookup([5, 6][:length])
    assert (hit.length if hit else 0) == length - 1


@pytest.mark.parametrize(("a", "b", "expected"), [
    ([], [1], 0), ([1, 2, 3], [1, 2, 3], 3), ([1, 2, 3], [1, 2], 2), ([1, 2, 3, 4, 5], [1, 2, 9, 4, 5], 2),
    (list(range(1000)), list(range(999)) + [0], 999), ([5], [6], 0),
])
def test_common_prefix(a, b, expected):
    from caches.radix import common_prefix

    assert common_prefix(a, b) == expected == common_prefix(b, a)


def test_longest_tells_without_counting_or_pinning():
    cache = PrefixCache(memory_bytes=1 << 20)
    cache.store(list(range(20)), [kv(list(range(20)))])
    assert cache.longest(list(range(10)) + [99]) == 10 and cache.longest([7]) == 0
    assert cache.stats.lookups == 0 and cache.evict_to(0) > 0  # nothing was pinned
