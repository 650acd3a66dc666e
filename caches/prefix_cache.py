"""Per-model prefix cache: cache snapshots in a radix tree over token ids.

A snapshot is the per-layer cache after a known token sequence (the end of a prompt, or a
prompt plus its output). A lookup finds what serves the longest prefix of a new prompt:
- a trimmable snapshot (attention ``KVCache``, a sliding window before it wraps) anywhere
  below the point where the prompt leaves the tree: trimmed to the shared tokens (a
  quantized KV cache not below its ``quantize_after``: ``snapshot.rewind_floor``);
- any snapshot that ends exactly on the prompt's path (the only kind that can serve
  linear-attention or SSM state, which cannot rewind).
At least one prompt token is always left to feed, so an identical prompt hits all but its
last token.

Snapshots are independent copies (not shared pages), so any unused one can be evicted on
its own: least recently used first, never one a running sequence was served from (pinned).
The budget counts the arrays' real sizes.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import mlx.core as mx

from caches import snapshot
from caches.radix import Node, RadixTree


@dataclass(eq=False)
class Entry:
    layers: snapshot.Layers
    nbytes: int
    trimmable: bool
    floor: int  # a trimmable entry serves prefixes of at least this many tokens
    last_used: int
    pins: int = 0


@dataclass(eq=False)
class PrefixHit:
    """The cache a new sequence starts from: ``layers`` hold its first ``length`` tokens."""

    length: int
    layers: snapshot.Layers
    entry: Entry  # pinned until ``PrefixCache.release``


@dataclass
class PrefixCacheStats:
    lookups: int = 0
    hits: int = 0
    lookup_tokens: int = 0  # prompt tokens looked up
    hit_tokens: int = 0  # of those, served from the cache
    stored: int = 0
    evictions: int = 0
    entries: int = 0
    bytes: int = 0


@dataclass
class PrefixCache:
    memory_bytes: int
    min_tokens: int = 0
    stats: PrefixCacheStats = field(default_factory=PrefixCacheStats)

    def __post_init__(self) -> None:
        self._tree: RadixTree[Entry] = RadixTree()
        self._clock = itertools.count(1)
        self._nodes: set[Node[Entry]] = set()  # the nodes holding an entry, for eviction

    # ------------------------------------------------------------------ public API

    def lookup(self, tokens: Sequence[int]) -> PrefixHit | None:
        """The longest cached prefix of ``tokens`` (all but the last token at most), pinned."""
        self.stats.lookups += 1
        self.stats.lookup_tokens += len(tokens)
        found = self._best(tokens[: len(tokens) - 1])
        if found is None:
            return None
        node, length = found
        entry = node.value
        entry.pins += 1
        entry.last_used = next(self._clock)
        self.stats.hits += 1
        self.stats.hit_tokens += length
        return PrefixHit(length, snapshot.view(entry.layers, stored=node.depth, length=length), entry)

    def longest(self, tokens: Sequence[int]) -> int:
        """How many tokens of ``tokens`` a lookup would serve now (counts and pins nothing)."""
        found = self._best(tokens[: len(tokens) - 1])
        return found[1] if found else 0

    def release(self, hit: PrefixHit) -> None:
        """The sequence served by ``hit`` no longer needs its entry kept."""
        hit.entry.pins -= 1

    def store(self, tokens: Sequence[int], layers: snapshot.Layers) -> bool:
        """Keep ``layers`` (the cache after exactly ``tokens``); False if it is not worth keeping."""
        if len(tokens) < max(1, self.min_tokens):
            return False
        size = snapshot.nbytes(layers)
        if size > self.memory_bytes:
            return False
        node = self._tree.node_at(tokens)
        if node.value is not None:  # the same tokens give the same cache: keep the one we have
            node.value.last_used = next(self._clock)
            return False
        # Computed now: a lazy slice would keep the whole batch buffer it came from alive.
        snapshot.materialize(layers)
        entry = Entry(layers, size, snapshot.is_trimmable(layers), snapshot.rewind_floor(layers), next(self._clock))
        node.value = entry
        self._nodes.add(node)
        self.stats.stored += 1
        self.stats.entries += 1
        self.stats.bytes += size
        if entry.trimmable:
            self._drop_covered(node)
        self._evict(self.memory_bytes)
        return True

    def evict_to(self, budget_bytes: int) -> int:
        """Evict unpinned entries, oldest use first, until at most ``budget_bytes`` are held; returns bytes freed."""
        return self._evict(budget_bytes)

    # ------------------------------------------------------------------ internal

    def _best(self, tokens: Sequence[int]) -> tuple[Node[Entry], int] | None:
        """(node whose snapshot serves, tokens it serves) for the longest usable prefix."""
        found = self._tree.match(tokens)
        exact = next((n for n in reversed(found.path) if n.value is not None), None)
        best = (exact, exact.depth) if exact is not None and exact.depth > 0 else None
        if found.length > (best[1] if best else 0):
            below = found.partial if found.partial is not None else found.path[-1]
            trimmable = next((n for n in self._tree.values_below(below) if n.value.trimmable and n.value.floor <= found.length), None)
            if trimmable is not None:
                best = (trimmable, found.length)
        return best

    def _drop_covered(self, node: Node[Entry]) -> None:
        """A trimmable snapshot serves every prefix of its tokens down to its floor: shorter trimmable
        ones on its path within that reach go."""
        floor = node.value.floor
        ancestor = node.parent
        while ancestor is not None:
            above = ancestor.parent
            entry = ancestor.value
            if entry is not None and entry.trimmable and entry.pins == 0 and ancestor.depth >= floor:
                self._remove(ancestor)
            ancestor = above

    def _evict(self, budget_bytes: int) -> int:
        freed = 0
        while self.stats.bytes > budget_bytes:
            candidates = [n for n in self._nodes if n.value.pins == 0]
            if not candidates:
                break
            oldest = min(candidates, key=lambda n: n.value.last_used)
            freed += oldest.value.nbytes
            self._remove(oldest)
            self.stats.evictions += 1
        if freed:
            mx.clear_cache()  # hand the freed buffers back, not just to MLX's pool
        return freed

    def _remove(self, node: Node[Entry]) -> None:
        entry = node.value
        self._nodes.remove(node)
        node.value = None
        self.stats.entries -= 1
        self.stats.bytes -= entry.nbytes
        self._tree.prune(node)
