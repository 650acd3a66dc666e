"""Snapshots of a sequence's per-layer cache (mlx-lm cache objects), and fresh views of them.

A stored snapshot is never handed out itself: mlx-lm's caches update their buffers in place
(reference/mlx-lm.md §3), so a sequence that wrote into a stored object, or into the same
array objects, would change the snapshot under every later hit. A hit gets new cache
objects over new array objects that view the same data, trimmed to the match: a write
into a view copies (MLX copies a shared buffer on write), so the stored data never changes.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import ArraysCache, CacheList, trim_prompt_cache

Layers = list[Any]  # one mlx-lm cache object per layer, as make_prompt_cache returns


def is_trimmable(layers: Sequence[Any]) -> bool:
    """Whether this snapshot can serve any shorter prefix (every layer can rewind).

    False for linear-attention / SSM state (``ArraysCache``) and for a sliding window that
    has wrapped; those snapshots serve only prompts that continue from their exact end.
    """
    return all(layer.is_trimmable() for layer in layers)


def rewind_floor(layers: Sequence[Any]) -> int:
    """The shortest prefix a trimmable snapshot can be cut back to (a quantized KV cache only to
    lengths that were quantized when it was made: ``caches.quantized``)."""
    return max((getattr(layer, "rewind_floor", 0) for layer in layers), default=0)


def nbytes(layers: Sequence[Any]) -> int:
    """Bytes of the arrays the snapshot holds (snapshots from ``extract`` are exact-size)."""
    return sum(layer.nbytes for layer in layers)


def materialize(layers: Sequence[Any]) -> None:
    """Evaluate the snapshot's arrays (extracted caches are lazy slices of the batch's buffers)."""
    mx.eval([layer.state for layer in layers])


def _view(value: Any) -> Any:
    """A new array object over the same data: MLX copies on write when the buffer is shared."""
    if isinstance(value, mx.array):
        return value[...]
    if isinstance(value, (tuple, list)):  # quantized keys/values: (packed, scales, biases)
        return type(value)(_view(v) for v in value)
    return value


def _fresh(layer: Any) -> Any:
    """A new cache object over ``layer``'s data, safe to trim, write into and hand to a generator."""
    twin = copy.copy(layer)
    if isinstance(layer, CacheList):
        twin.caches = tuple(_fresh(child) for child in layer.caches)
    elif isinstance(layer, ArraysCache):
        twin.cache = [_view(item) for item in layer.cache]
    else:
        for name in ("keys", "values"):
            if getattr(layer, name, None) is not None:
                setattr(twin, name, _view(getattr(layer, name)))
    return twin


def view(layers: Sequence[Any], *, stored: int, length: int) -> Layers:
    """Fresh cache objects holding the first ``length`` of the snapshot's ``stored`` tokens."""
    fresh = [_fresh(layer) for layer in layers]
    if length < stored:
        trimmed = trim_prompt_cache(fresh, stored - length)
        if trimmed != stored - length:
            raise ValueError(f"snapshot of {stored} tokens could not be trimmed to {length}")
    return fresh
