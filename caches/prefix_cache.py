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

With a disk tier (``caches.disk``) every stored entry is also offered to it; an entry evicted
from memory that is on disk (or still queued for it) stays in the tree without its arrays,
and a prompt whose best prefix is such an entry is told so (``disk_candidate``): the caller
has it loaded off its thread and looks up again once ``apply_disk_events`` says it is back.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import mlx.core as mx

from caches import snapshot
from caches.disk import DiskEntry, DiskTier, Loaded, Removed, Written
from caches.radix import Node, RadixTree


@dataclass(eq=False)
class Entry:
    layers: snapshot.Layers | None  # None: on disk only
    nbytes: int
    trimmable: bool
    floor: int  # a trimmable entry serves prefixes of at least this many tokens
    last_used: int
    pins: int = 0
    disk: DiskEntry | None = None  # its file, once written
    queued: bool = False  # offered to the disk tier, not written yet
    loading: bool = False  # a disk load was asked for

    @property
    def on_disk(self) -> bool:
        return self.disk is not None or self.queued


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
    disk: DiskTier | None = None
    stats: PrefixCacheStats = field(default_factory=PrefixCacheStats)

    def __post_init__(self) -> None:
        self._tree: RadixTree[Entry] = RadixTree()
        self._clock = itertools.count(1)
        self._nodes: set[Node[Entry]] = set()  # the nodes holding an entry (in memory or on disk)

    def restore(self) -> int:
        """Index what the disk tier holds (no arrays are read); returns the entries found."""
        if self.disk is None:
            return 0
        found = self.disk.scan()
        for disk_entry in found:
            node = self._tree.node_at(disk_entry.tokens)
            if node.value is None:
                node.value = Entry(None, 0, disk_entry.trimmable, disk_entry.floor, 0, disk=disk_entry)
                self._nodes.add(node)
        return len(found)

    # ------------------------------------------------------------------ public API

    def lookup(self, tokens: Sequence[int]) -> PrefixHit | None:
        """The longest cached prefix of ``tokens`` (all but the last token at most), pinned."""
        self.stats.lookups += 1
        self.stats.lookup_tokens += len(tokens)
        found = self._best(tokens[: len(tokens) - 1], _in_memory)
        if found is None:
            return None
        node, length = found
        entry = node.value
        entry.pins += 1
        entry.last_used = next(self._clock)
        if entry.disk is not None:
            self.disk.touch(entry.disk)
        self.stats.hits += 1
        self.stats.hit_tokens += length
        return PrefixHit(length, snapshot.view(entry.layers, stored=node.depth, length=length), entry)

    def longest(self, tokens: Sequence[int]) -> int:
        """How many tokens of ``tokens`` a lookup would serve now (counts and pins nothing)."""
        found = self._best(tokens[: len(tokens) - 1], _in_memory)
        return found[1] if found else 0

    def disk_candidate(self, tokens: Sequence[int], *, gain: int = 1) -> DiskEntry | None:
        """A disk-only entry that would serve at least ``gain`` more tokens of ``tokens`` than
        memory does now (load it, then look up again), or None."""
        if self.disk is None:
            return None
        found = self._best(tokens[: len(tokens) - 1], _usable)
        if found is None or found[0].value.layers is not None or found[0].value.disk is None:
            return None
        if found[1] < self.longest(tokens) + gain:
            return None
        return found[0].value.disk

    def request_load(self, disk_entry: DiskEntry) -> bool:
        """Ask the disk tier for this entry (once); False if it is already on its way."""
        node = self._tree.find(disk_entry.tokens)
        if node is None or node.value is None or node.value.loading:
            return False
        node.value.loading = True
        self.disk.request_load(disk_entry)
        return True

    def apply_disk_events(self) -> list[tuple[int, ...]]:
        """Take in what the disk tier did; returns the token sequences loaded back into memory
        (or that failed to load: either way, whoever waited for them may look up again).

        A loaded entry is not evicted here, even over the budget: call ``evict_to`` once the
        requests that waited for it have looked it up (and pinned it)."""
        if self.disk is None:
            return []
        settled = []
        for event in self.disk.events():
            node = self._tree.find(event.tokens)
            entry = node.value if node is not None else None
            if isinstance(event, Written):
                if entry is not None:
                    entry.disk, entry.queued = event.entry, False
            elif isinstance(event, Removed):
                if entry is not None:
                    entry.disk, entry.queued = None, False
                    if entry.layers is None and entry.pins == 0:
                        self._remove(node)
            elif isinstance(event, Loaded):
                settled.append(event.tokens)
                if entry is not None:
                    entry.loading = False
                    if event.layers is not None and entry.layers is None:
                        self._bring_back(node, event.layers, evict=False)
        return settled

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
        existing = node.value
        if existing is not None and existing.layers is not None:  # the same tokens give the same cache: keep it
            existing.last_used = next(self._clock)
            return False
        # Computed now: a lazy slice would keep the whole batch buffer it came from alive.
        snapshot.materialize(layers)
        if existing is not None:  # on disk only: it is back in memory, and need not be written again
            self._bring_back(node, layers)
            return True
        entry = Entry(layers, size, snapshot.is_trimmable(layers), snapshot.rewind_floor(layers), next(self._clock))
        node.value = entry
        self._nodes.add(node)
        self.stats.stored += 1
        self.stats.entries += 1
        self.stats.bytes += size
        if self.disk is not None:
            entry.queued = self.disk.offer(tokens, layers, entry.last_used, size, entry.trimmable, entry.floor)
        if entry.trimmable:
            self._drop_covered(node)
        self._evict(self.memory_bytes)
        return True

    def evict_to(self, budget_bytes: int) -> int:
        """Evict unpinned entries, oldest use first, until at most ``budget_bytes`` are held; returns bytes freed."""
        return self._evict(budget_bytes)

    # ------------------------------------------------------------------ internal

    def _best(self, tokens: Sequence[int], usable) -> tuple[Node[Entry], int] | None:
        """(node whose snapshot serves, tokens it serves) for the longest prefix an entry
        ``usable`` accepts can serve."""
        found = self._tree.match(tokens)
        exact = next((n for n in reversed(found.path) if n.value is not None and usable(n.value)), None)
        best = (exact, exact.depth) if exact is not None and exact.depth > 0 else None
        if found.length > (best[1] if best else 0):
            below = found.partial if found.partial is not None else found.path[-1]
            trimmable = next((n for n in self._tree.values_below(below)
                              if usable(n.value) and n.value.trimmable and n.value.floor <= found.length), None)
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
            if entry is not None and entry.layers is not None and entry.trimmable and entry.pins == 0 and ancestor.depth >= floor:
                self._forget(ancestor)
            ancestor = above

    def _evict(self, budget_bytes: int) -> int:
        freed = 0
        while self.stats.bytes > budget_bytes:
            candidates = [n for n in self._nodes if n.value.pins == 0 and n.value.layers is not None]
            if not candidates:
                break
            oldest = min(candidates, key=lambda n: n.value.last_used)
            freed += oldest.value.nbytes
            self._forget(oldest)
            self.stats.evictions += 1
        if freed:
            mx.clear_cache()  # hand the freed buffers back, not just to MLX's pool
        return freed

    def _forget(self, node: Node[Entry]) -> None:
        """Out of memory: kept as a disk-only entry if it is (or will be) on disk, else gone."""
        entry = node.value
        if not entry.on_disk:
            self._remove(node)
            return
        entry.layers = None
        self.stats.entries -= 1
        self.stats.bytes -= entry.nbytes

    def _bring_back(self, node: Node[Entry], layers: snapshot.Layers, *, evict: bool = True) -> None:
        entry = node.value
        entry.layers, entry.nbytes, entry.last_used = layers, snapshot.nbytes(layers), next(self._clock)
        self.stats.entries += 1
        self.stats.bytes += entry.nbytes
        if evict:
            self._evict(self.memory_bytes)

    def _remove(self, node: Node[Entry]) -> None:
        entry = node.value
        self._nodes.remove(node)
        node.value = None
        if entry.layers is not None:
            self.stats.entries -= 1
            self.stats.bytes -= entry.nbytes
        self._tree.prune(node)


def _in_memory(entry: Entry) -> bool:
    return entry.layers is not None


def _usable(entry: Entry) -> bool:
    return entry.layers is not None or entry.disk is not None
