"""Checking a model against its ``[models.<id>.kv_cache]`` settings when the worker loads it.

Quantization applies to the plain attention layers (``KVCache``); the others stay as they
are and are reported: a sliding window is bounded by its window already and mlx-lm cannot
quantize it, and linear-attention or SSM state is not a KV cache. A model the settings cannot
apply to at all (no plain attention layer, or a head dimension the group size does not
divide) fails to load with a message naming the setting.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import mlx.core as mx
from mlx_lm.models.cache import KVCache, make_prompt_cache

from caches.quantized import KVQuantization


@dataclass(frozen=True)
class QuantizationPlan:
    quantization: KVQuantization
    quantized_layers: int
    kept_layers: dict[str, int]  # layer cache types left unquantized, and how many of each

    def describe(self) -> str:
        kept = ", ".join(f"{count} {name}" for name, count in sorted(self.kept_layers.items()))
        q = self.quantization
        return (f"{q.bits}-bit KV cache (group size {q.group_size}, after {q.quantize_after} tokens) on "
                f"{self.quantized_layers} attention layers" + (f"; unquantized: {kept}" if kept else ""))


def plan_quantization(model, quantization: KVQuantization) -> QuantizationPlan:
    """Which layers the settings apply to; raises ValueError (naming the setting) if they cannot.

    Runs the model on two tokens to read each attention layer's real key and value widths.
    """
    layers = make_prompt_cache(model)
    attention = [i for i, layer in enumerate(layers) if type(layer) is KVCache]
    kept = Counter(type(layer).__name__ for layer in layers if type(layer) is not KVCache)
    if not attention:
        raise ValueError("kv_cache.bits: this model has no full attention layer whose cache can be quantized "
                         f"(its layers use {', '.join(sorted(kept))})")
    model(mx.array([[0, 1]]), cache=layers)
    widths = sorted({dim for i in attention for dim in (layers[i].keys.shape[-1], layers[i].values.shape[-1])})
    bad = [width for width in widths if width % quantization.group_size]
    if bad:
        fits = [size for size in (32, 64, 128) if all(width % size == 0 for width in widths)]
        hint = f"; use {' or '.join(map(str, fits))}" if fits else ""
        raise ValueError(f"kv_cache.group_size = {quantization.group_size} does not divide the model's attention head "
                         f"dimension {bad[0]}{hint}")
    return QuantizationPlan(quantization, len(attention), dict(kept))
