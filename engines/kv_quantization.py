"""Checking a model against its ``[models.<id>.kv_cache]`` settings when the worker loads it.

``window`` bounds every layer's cache to the latest that many tokens (mlx-lm's ``max_kv_size``;
its batched ``BatchRotatingKVCache`` is a plain sliding window, keeping no first tokens).
mlx-lm ignores it for a model that makes its own caches (sliding-window or linear-attention
layers), so such a model fails to load with it rather than silently keep its whole context.

Quantization applies to the plain attention layers (``KVCache``); the others stay as they
are and are reported: a sliding window is bounded by its window already and mlx-lm cannot
quantize it, and linear-attention or SSM state is not a KV cache. A model the settings cannot
apply to at all (no plain attention layer, or a head dimension the group size does not
divide) fails to load with a message naming the setting.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass

import mlx.core as mx
from mlx_lm.models.cache import KVCache, make_prompt_cache

from caches.quantized import KVQuantization
from engines.protocol import WorkerSpec

logger = logging.getLogger(__name__)


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


def checked_kv_settings(model, spec: WorkerSpec) -> KVQuantization | None:
    """The worker's KV quantization (None: unquantized), after checking ``spec``'s ``kv_cache``
    settings against ``model``; raises ValueError naming the setting as the config file does."""
    if spec.kv_window and hasattr(model, "make_cache"):
        raise ValueError(f"models.{spec.model_id}.kv_cache.window: this model makes its own caches (sliding-window or "
                         "linear-attention layers), which mlx-lm does not bound; leave window at 0")
    if not spec.kv_bits:
        return None
    quantization = KVQuantization(spec.kv_bits, spec.kv_group_size, spec.kv_quantize_after)
    try:
        plan = plan_quantization(model, quantization)
    except ValueError as exc:
        raise ValueError(f"models.{spec.model_id}.{exc}") from None
    logger.info("%s", plan.describe())
    return quantization
