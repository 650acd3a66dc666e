"""Load this rank's share of a checkpoint with mlx-lm's sharding.

- tensor: the architecture's ``shard(group)`` (llama, qwen2, qwen3, ... in mlx-lm) splits every
  attention and MLP projection across the ranks; each forward pass sums the partial results.
- pipeline: ``model.model.pipeline(group)`` (mlx-lm's PipelineMixin: qwen2, qwen3_moe,
  deepseek, glm4_moe, ...) gives each rank a run of layers; activations pass rank to rank.

Like mlx-lm's ``sharded_load``, but from a local directory (the router resolved it): the weights
are mapped lazily, the model is cut, and only this rank's part is materialised.
"""

from __future__ import annotations

from pathlib import Path

TENSOR, PIPELINE = "tensor", "pipeline"


def supports(model, mode: str) -> bool:
    """Whether mlx-lm can shard ``model`` (a lazily loaded mlx-lm model) in ``mode``."""
    if mode == TENSOR:
        return hasattr(model, "shard")
    if mode == PIPELINE:
        return hasattr(model, "model") and hasattr(model.model, "pipeline")
    raise ValueError(f"unknown shard mode {mode!r}")


def load_shard(path: Path, mode: str, group):
    """This rank's part of the model at ``path``, sharded over ``group`` in ``mode``.

    Raises:
        ValueError: mlx-lm cannot shard this architecture in ``mode``.
    """
    import mlx.core as mx
    from mlx_lm.utils import load_model

    model, config = load_model(path, lazy=True)
    if not supports(model, mode):
        other = PIPELINE if mode == TENSOR else TENSOR
        hint = f"; it supports {other} mode" if supports(model, other) else ""
        raise ValueError(f"mlx-lm has no {mode} sharding for architecture {config.get('model_type')!r}{hint}")
    if mode == TENSOR:
        model.shard(group)
    else:
        model.model.pipeline(group)
    mx.eval(model.parameters())
    # Every rank has its weights before any serves (a slow rank would time out the first step).
    mx.eval(mx.distributed.all_sum(mx.array(1.0), group=group))
    return model
