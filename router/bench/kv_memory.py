"""``rapid-mlx bench kv-memory``: KV bytes per token at 16, 8 and 4 bits, and what fits a budget.

In process, on a real checkpoint: the model (cast to float16 as served on a Mac, unless
``--dtype`` says otherwise: MLX's CPU backend runs some layers only in float32) prefills
``tokens`` tokens into the same cache objects the worker uses (a plain ``KVCache``, or the
batched quantized cache for 8 and 4 bits), and the sequence's cache is extracted at its exact
size. Bytes per token are measured, not computed from the config; what fits a memory budget
(the longest context, and how many sessions of a given context) follows from them. The
recurrent state of a hybrid model's linear layers is a constant per sequence and counted
apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SETTINGS = ((None, None), ("8-bit", 8), ("4-bit", 4))  # None: the model's own dtype


@dataclass(frozen=True)
class KVMemoryRow:
    setting: str
    bytes_per_token: float
    fixed_bytes: int  # per sequence, whatever its length (linear-attention state)


def measure(model_dir: Path, *, tokens: int, group_size: int, dtype: str = "float16") -> list[KVMemoryRow]:
    import mlx.core as mx
    from mlx_lm.models.cache import KVCache, make_prompt_cache
    from mlx_lm.utils import load_model

    from caches.quantized import BatchQuantizedKVCache, FullPrecisionRow, KVQuantization, QuantizedRow, row_caches

    from engines.kv_quantization import plan_quantization
    from router.bench.models import prefill

    model, _ = load_model(Path(model_dir))
    model.set_dtype(getattr(mx, dtype))
    plan_quantization(model, KVQuantization(8, group_size))  # a clear error for a group size the model cannot take
    rows = []
    for name, bits in SETTINGS:
        layers = make_prompt_cache(model)
        if bits is not None:
            layers = [BatchQuantizedKVCache.merge([layer]) if isinstance(layer, FullPrecisionRow) else layer
                      for layer in row_caches(layers, KVQuantization(bits, group_size))]
        prefill(model, layers, tokens)
        # Extracted at their exact size (a live cache's buffers grow in steps of 256 tokens).
        per_sequence = [layer.extract(0) if isinstance(layer, BatchQuantizedKVCache) else layer for layer in layers]
        growing = sum(_exact_nbytes(layer) for layer in per_sequence if isinstance(layer, (KVCache, QuantizedRow)))
        fixed = sum(_exact_nbytes(layer) for layer in per_sequence if not isinstance(layer, (KVCache, QuantizedRow)))
        rows.append(KVMemoryRow(name or f"unquantized ({dtype})", growing / tokens, fixed))
    return rows


def _exact_nbytes(layer) -> int:
    from mlx.utils import tree_flatten
    from mlx_lm.models.cache import KVCache

    if type(layer) is KVCache:  # its state is its whole buffer, grown in steps of 256 tokens
        return sum(part[..., : layer.offset, :].nbytes for part in (layer.keys, layer.values))
    return sum(value.nbytes for _, value in tree_flatten(layer.state) if hasattr(value, "nbytes"))


def report(rows: list[KVMemoryRow], *, budget_gb: float, context: int, model_dir: Path, tokens: int, group_size: int,
           dtype: str) -> str:
    budget = budget_gb * 2**30
    lines = [
        f"model `{model_dir}` in {dtype}, {tokens} tokens prefilled, group size {group_size}; "
        f"budget {budget_gb:g} GiB of KV, sessions of {context} tokens",
        "",
        "| setting | KV bytes / token | vs unquantized | fixed state / sequence | longest context in budget | sessions in budget |",
        "|---|---|---|---|---|---|",
    ]
    full = rows[0].bytes_per_token
    for row in rows:
        longest = int((budget - row.fixed_bytes) / row.bytes_per_token)
        sessions = int(budget // (row.bytes_per_token * context + row.fixed_bytes))
        lines.append(f"| {row.setting} | {row.bytes_per_token:,.0f} | {row.bytes_per_token / full:.3f} | "
                     f"{row.fixed_bytes:,} B | {longest:,} tokens | {sessions} |")
    return "\n".join(lines) + "\n"
