"""The memory budget: what a model is expected to hold resident, and which idle models make room.

An estimate is an upper bound an operator can reason about, as Ollama's scheduler makes one:
the weights as they are on disk, the KV cache of ``max_concurrency`` sequences at the full
context, and the prefix cache's configured memory. MLX allocates lazily, so a model usually
holds less; ``[models.<id>] memory_gb`` replaces the estimate when the operator knows better.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from router.ops.config import ModelConfig

GB = 2**30


@dataclass(frozen=True)
class MemoryEstimate:
    weights_bytes: int = 0
    kv_bytes: int = 0
    prefix_cache_bytes: int = 0
    configured_bytes: int = 0  # [models.<id>] memory_gb, when set it is the estimate

    @property
    def total_bytes(self) -> int:
        return self.configured_bytes or self.weights_bytes + self.kv_bytes + self.prefix_cache_bytes

    def describe(self) -> str:
        if self.configured_bytes:
            return f"{gb(self.total_bytes)} (memory_gb)"
        return (f"{gb(self.total_bytes)} (weights {gb(self.weights_bytes)}, KV {gb(self.kv_bytes)}, "
                f"prefix cache {gb(self.prefix_cache_bytes)})")

    def as_dict(self) -> dict[str, int]:
        return {"total_bytes": self.total_bytes, "weights_bytes": self.weights_bytes, "kv_bytes": self.kv_bytes,
                "prefix_cache_bytes": self.prefix_cache_bytes, "configured_bytes": self.configured_bytes}


def gb(size: int) -> str:
    return f"{size / GB:.2f} GB"


def estimate_memory(model_dir: Path, config: ModelConfig, max_context: int) -> MemoryEstimate:
    """The resident memory ``config`` asks for, from the checkpoint in ``model_dir``."""
    if config.memory_gb > 0:
        return MemoryEstimate(configured_bytes=int(config.memory_gb * GB))
    weights = sum(f.stat().st_size for f in model_dir.glob("*.safetensors"))
    model_json = json.loads((model_dir / "config.json").read_text())
    per_token = kv_bytes_per_token(model_json, config.kv_cache.bits, config.kv_cache.group_size,
                                   dtype_bytes=_dtype_bytes(model_json) or _stored_float_bytes(model_dir))
    held = min(max_context, config.kv_cache.window) if config.kv_cache.window else max_context  # tokens a sequence's cache holds
    kv = config.max_concurrency * held * per_token
    prefix = int(config.prefix_cache.memory_gb * GB) if config.prefix_cache.enabled else 0
    if config.shard.enabled:
        # Each rank holds its share of the weights and KV; only the ranks on this machine count
        # here (rank 0's host and loopback), and a sharded model runs without a prefix cache.
        hosts = config.shard.host_list  # empty with a hostfile alone: counted as if all ranks were here
        local = sum(1 for host in hosts if host in (hosts[0], "127.0.0.1", "::1"))
        if hosts:
            weights, kv = weights * local // len(hosts), kv * local // len(hosts)
        prefix = 0
    return MemoryEstimate(weights, kv, prefix)


def kv_bytes_per_token(model_json: dict[str, Any], bits: int = 0, group_size: int = 64, *, dtype_bytes: int = 0) -> int:
    """Keys and values of one token across the attention layers of a Hugging Face ``config.json``.

    Linear-attention layers of hybrid models (``layer_types``) keep a fixed-size state, not
    per-token KV. ``dtype_bytes`` is the activations' element size; 0 takes the config's dtype
    (bfloat16 when it names none).
    """
    text = model_json.get("text_config") or model_json
    layers = text.get("num_hidden_layers", 0)
    layer_types = text.get("layer_types")
    if isinstance(layer_types, list):
        layers = sum(1 for kind in layer_types if "attention" in str(kind) and "linear" not in str(kind))
    heads = text.get("num_attention_heads", 1)
    kv_heads = text.get("num_key_value_heads") or heads
    head_dim = text.get("head_dim") or text.get("hidden_size", 0) // max(heads, 1)
    elements = layers * 2 * kv_heads * head_dim
    if bits:
        # Packed values plus a half-precision scale and bias per group.
        return elements * bits // 8 + elements // group_size * 4
    return elements * (dtype_bytes or _dtype_bytes(model_json) or 2)


def _dtype_bytes(model_json: dict[str, Any]) -> int:
    """Element size of the dtype the config names (``torch_dtype``, or transformers' newer ``dtype``), 0 if none."""
    text = model_json.get("text_config") or {}
    for table in (text, model_json):
        for key in ("torch_dtype", "dtype"):
            if table.get(key):
                return 4 if str(table[key]) == "float32" else 2
    return 0


def _stored_float_bytes(model_dir: Path) -> int:
    """Element size of the floating-point tensors in the first safetensors file (its header only), 0 if unknown."""
    sizes = {"F32": 4, "F16": 2, "BF16": 2}
    for weights in sorted(model_dir.glob("*.safetensors")):
        try:
            with open(weights, "rb") as file:
                (length,) = struct.unpack("<Q", file.read(8))
                header = json.loads(file.read(min(length, 100 * 2**20)))
        except (OSError, ValueError, struct.error):
            return 0
        found = [sizes[t["dtype"]] for t in header.values() if isinstance(t, dict) and t.get("dtype") in sizes]
        return max(found, default=0)
    return 0


@dataclass(frozen=True)
class Resident:
    """A model holding memory, as the budget sees it."""

    model_id: str
    bytes: int
    last_used: float  # monotonic seconds
    evictable: bool  # idle and not pinned
    why_kept: str = ""  # "pinned", "busy", "loading", ... when not evictable


def plan_eviction(resident: Iterable[Resident], need: int, budget: int) -> list[Resident] | None:
    """The idle models to unload, least recently used first, so ``need`` more bytes fit.

    Returns [] when it fits already, None when unloading every evictable model is not enough.
    """
    resident = list(resident)
    free = budget - sum(r.bytes for r in resident)
    chosen: list[Resident] = []
    for candidate in sorted((r for r in resident if r.evictable), key=lambda r: r.last_used):
        if free >= need:
            break
        chosen.append(candidate)
        free += candidate.bytes
    return chosen if free >= need else None


def no_room_message(model_id: str, estimate: MemoryEstimate, budget: int, resident: Iterable[Resident]) -> str:
    """Why ``model_id`` cannot load: what it needs, the budget, and what holds the rest and why."""
    held = ", ".join(f"{r.model_id} ({gb(r.bytes)}, {r.why_kept or 'idle'})" for r in resident) or "nothing"
    return (f"Model {model_id!r} needs {estimate.describe()} but memory_budget_gb is {gb(budget)}; "
            f"resident: {held}. Unpinned idle models are unloaded to make room; these are not.")
