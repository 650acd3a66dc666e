"""Training loop for the demo model: a Qwen3 mlx-lm model trained on packed conversations.

Why a hand-written forward pass: on the CPU backend, transcendental functions (``exp``
inside softmax, SiLU and cross-entropy) cost ~25 ns per element and dominate a step of a
model this small. The training forward below computes exactly the same function as
``mlx_lm.models.qwen3`` (same parameters, same math) but evaluates ``exp`` with a fused
polynomial (relative error ~1e-4 in float32: rounding, amplified by the squarings).
Inference and the saved checkpoint use the stock mlx-lm model; ``check_forward`` asserts
that both forwards agree.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim
import numpy as np
from mlx.utils import tree_flatten, tree_map

from engines.demo.data import Batch, attention_mask

logger = logging.getLogger(__name__)


@mx.custom_function
def fast_exp(x: mx.array) -> mx.array:
    """exp(x) for |x| <= 80 as (Taylor(x/1024))**1024: ten squarings that mlx fuses into one kernel."""
    z = mx.clip(x, -80.0, 80.0) * (1.0 / 1024)
    p = 1 + z * (1 + z * (0.5 + z * (1.0 / 6)))
    for _ in range(10):
        p = p * p
    return p


@fast_exp.vjp
def _fast_exp_vjp(primals, cotangent, output):
    # d/dx exp(x) = exp(x): reuse the forward output instead of differentiating the squarings.
    return cotangent * output


def fast_silu(x: mx.array) -> mx.array:
    """x * sigmoid(x) using ``fast_exp`` of a non-positive argument (no overflow)."""
    e = fast_exp(-mx.abs(x))
    return x * mx.where(x >= 0, 1.0, e) / (1.0 + e)


def _attention(attn: nn.Module, x: mx.array, mask: mx.array) -> mx.array:
    """mlx-lm's Qwen3 attention with a 0/1 block-diagonal mask and ``fast_exp`` softmax."""
    B, L, _ = x.shape
    q = attn.q_norm(attn.q_proj(x).reshape(B, L, attn.n_heads, -1)).transpose(0, 2, 1, 3)
    k = attn.k_norm(attn.k_proj(x).reshape(B, L, attn.n_kv_heads, -1)).transpose(0, 2, 1, 3)
    v = attn.v_proj(x).reshape(B, L, attn.n_kv_heads, -1).transpose(0, 2, 1, 3)
    q, k = attn.rope(q), attn.rope(k)
    repeats = attn.n_heads // attn.n_kv_heads
    q = q.reshape(B, attn.n_kv_heads, repeats, L, -1)
    scores = (q * attn.scale) @ k[:, :, None].swapaxes(-1, -2)
    # Subtract the row maximum (as softmax does): normalised q and k with large norm gains
    # (the copy circuit's) give scores near 100, whose exp overflows float32 sums.
    mask = mask[:, None, None]
    row_max = mx.stop_gradient(mx.where(mask > 0, scores, -1e9).max(-1, keepdims=True))
    e = fast_exp(scores - row_max) * mask
    out = (e / e.sum(-1, keepdims=True)) @ v[:, :, None]
    return attn.o_proj(out.reshape(B, attn.n_heads, L, -1).transpose(0, 2, 1, 3).reshape(B, L, -1))


def residual(model: nn.Module, inputs: mx.array, mask: mx.array, *, layers: int | None = None) -> mx.array:
    """The residual stream of a ``mlx_lm.models.qwen3.Model`` (no KV cache) after its first
    ``layers`` decoder layers (all of them when None), before the final norm."""
    h = model.model.embed_tokens(inputs)
    for layer in model.model.layers[:layers]:
        h = h + _attention(layer.self_attn, layer.input_layernorm(h), mask)
        mlp, x = layer.mlp, layer.post_attention_layernorm(h)
        h = h + mlp.down_proj(fast_silu(mlp.gate_proj(x)) * mlp.up_proj(x))
    return h


def hidden_states(model: nn.Module, inputs: mx.array, mask: mx.array) -> mx.array:
    """Final normalised hidden states of a ``mlx_lm.models.qwen3.Model`` (no KV cache)."""
    return model.model.norm(residual(model, inputs, mask))


def output_logits(model: nn.Module, h: mx.array) -> mx.array:
    """Apply the tied or untied output head."""
    if model.args.tie_word_embeddings:
        return model.model.embed_tokens.as_linear(h)
    return model.lm_head(h)


def loss_fn(model: nn.Module, inputs, mask, labels, weights, total_weight=None, assistant_total=None, *,
            unlikelihood: float = 0.0) -> mx.array:
    """Weighted mean next-token cross-entropy over a packed (B, T) batch, plus
    ``unlikelihood`` times ``repeat_penalty`` when it is not 0.

    ``total_weight`` and ``assistant_total`` (the whole batch's loss weight and count of
    assistant tokens) divide instead of this batch's own when the rows are one rank's share
    of a batch: the ranks' losses (and gradients) then add up to the whole batch's.
    """
    logits = output_logits(model, hidden_states(model, inputs, mask))
    shifted = logits - mx.stop_gradient(logits.max(-1, keepdims=True))
    total = fast_exp(shifted).sum(-1)
    picked = mx.take_along_axis(shifted, labels[..., None], -1)[..., 0]
    loss = ((mx.log(total) - picked) * weights).sum() / (weights.sum() if total_weight is None else total_weight)
    if unlikelihood:
        loss = loss + repeat_penalty(shifted, total, labels, weights, unlikelihood, assistant_total)
    return loss


def assistant_tokens(weights: np.ndarray | mx.array) -> np.ndarray | mx.array:
    """Which tokens of a (numpy or MLX) weight array are the assistant's: they weigh 1 or more,
    prompt tokens ``context_weight`` (below 1, ``build.Recipe``; ``data._weights``)."""
    return weights >= 1.0


# How far back a turn's earlier tokens count for ``repeat_penalty``: 64 positions hold 99.5% of
# the tokens a whole turn would give on stage four's batches, for one gather of 64 logits per
# position instead of a pass over the whole vocabulary.
REPEAT_WINDOW = 64


def repeat_candidates(labels: mx.array, weights: mx.array, window: int = REPEAT_WINDOW) -> tuple[mx.array, mx.array]:
    """For each position of a packed (B, T) batch, the tokens its assistant turn has already
    produced: the labels 1..``window`` positions back in the same run of assistant tokens
    (weight 1 or more; prompt tokens weigh less), each token once (its latest occurrence),
    never the position's own label.

    Returns:
        (B, T, window) token ids and a 0/1 float mask of which of them count.
    """
    B, T = labels.shape
    assistant = assistant_tokens(weights)
    pos = mx.broadcast_to(mx.arange(T)[None, :], (B, T))
    follows = mx.concatenate([mx.zeros((B, 1), dtype=mx.bool_), assistant[:, :-1]], axis=1)
    turn_start = mx.cummax(mx.where(assistant & ~follows, pos, 0), axis=1)
    padded = mx.concatenate([mx.zeros((B, window), dtype=labels.dtype), labels], axis=1)
    back = mx.stack([padded[:, window - k:window - k + T] for k in range(1, window + 1)], axis=-1)
    distance = mx.arange(1, window + 1)
    in_turn = (pos[..., None] - distance >= turn_start[..., None]) & assistant[..., None]
    # The same token nearer the position (a smaller distance) makes this occurrence a repeat;
    # a turn is contiguous, so the nearer one is in it whenever this one is.
    nearer = distance[None, :] < distance[:, None]
    repeated = ((back[..., :, None] == back[..., None, :]) & nearer).any(-1)
    counted = in_turn & ~repeated & (back != labels[..., None])
    return back, counted.astype(mx.float32)


def repeat_penalty(shifted: mx.array, total: mx.array, labels: mx.array, weights: mx.array,
                   scale: float, assistant_total: mx.array | None = None) -> mx.array:
    """Token-level unlikelihood (Welleck et al., 2019, "Neural Text Generation with Unlikelihood
    Training"): ``scale`` times the mean over assistant tokens of ``-sum log(1 - p(c))`` over
    the tokens ``c`` the turn has already produced (``repeat_candidates``). Cross-entropy only
    says which token comes next; this also says that going back to an earlier one, where the
    reply moves on, is wrong: the loops the demo fell into ("Brazil is Brazil is").

    Args:
        shifted: (B, T, V) logits minus their row maximum.
        total: (B, T) sum of ``fast_exp(shifted)`` over the vocabulary.
        assistant_total: The count of assistant tokens to average over, when these rows are
            one rank's share of a batch (``loss_fn``); else theirs.
    """
    ids, counted = (mx.stop_gradient(a) for a in repeat_candidates(labels, weights))
    p = fast_exp(mx.take_along_axis(shifted, ids, -1)) / total[..., None]
    per_token = -(mx.log(mx.maximum(1.0 - p, 1e-5)) * counted).sum(-1)
    assistant = assistant_tokens(weights).astype(mx.float32)
    count = assistant.sum() if assistant_total is None else assistant_total
    return scale * (per_token * assistant).sum() / count


def check_forward(model: nn.Module, inputs: mx.array, atol: float = 1e-3) -> float:
    """Compare the training forward with mlx-lm's on one causal sequence; raise if they differ."""
    length = inputs.shape[1]
    mask = mx.array(np.tril(np.ones((1, length, length), np.float32)))
    ours = output_logits(model, hidden_states(model, inputs, mask))
    diff = mx.abs(ours - model(inputs)).max().item()
    if diff > atol:
        raise RuntimeError(f"training forward diverges from mlx-lm's by {diff:.2e}")
    return diff


@dataclass
class TrainConfig:
    """Optimiser settings. ``steps`` counts batches; the schedule is warmup + cosine decay."""

    steps: int = 600
    learning_rate: float = 3e-3
    warmup: int = 30
    min_lr_ratio: float = 0.05
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    unlikelihood: float = 0.0  # weight of ``repeat_penalty`` (0: cross-entropy alone)


def _schedule(cfg: TrainConfig) -> Callable[[mx.array], mx.array]:
    warmup = optim.linear_schedule(cfg.learning_rate * 0.05, cfg.learning_rate, cfg.warmup)
    decay = optim.cosine_decay(cfg.learning_rate, max(1, cfg.steps - cfg.warmup), cfg.learning_rate * cfg.min_lr_ratio)
    return optim.join_schedules([warmup, decay], [cfg.warmup])


def _device_batch(batch: Batch, group: mx.distributed.Group | None = None) -> tuple[mx.array, ...]:
    """Move one packed batch to mlx (fixed shapes, so the compiled step is traced once); with a
    group of ranks, this rank's rows, the whole batch's loss weight and its count of assistant
    tokens (``loss_fn``)."""
    if group is None:
        return (mx.array(batch.inputs), mx.array(attention_mask(batch.segments)), mx.array(batch.labels),
                mx.array(batch.weights))
    rows = len(batch.inputs) // group.size()
    mine = slice(group.rank() * rows, (group.rank() + 1) * rows)
    return (mx.array(batch.inputs[mine]), mx.array(attention_mask(batch.segments[mine])),
            mx.array(batch.labels[mine]), mx.array(batch.weights[mine]),
            mx.array(batch.weights.sum(dtype=np.float32)),
            mx.array(assistant_tokens(batch.weights).sum(dtype=np.float32)))


def train(
    model: nn.Module,
    batches: Iterator[Batch],
    cfg: TrainConfig,
    *,
    log_every: int = 25,
    on_step: Callable[[int], None] | None = None,
    update_scales: dict | None = None,
    group: mx.distributed.Group | None = None,
) -> list[float]:
    """Run ``cfg.steps`` optimiser steps over ``batches``; return the per-step losses.

    Args:
        model: A freshly initialised (or partially trained) mlx-lm Qwen3 model, fp32.
        batches: At least ``cfg.steps`` packed batches, in a fixed (seeded) order.
        cfg: Optimiser settings.
        log_every: Log the running loss every this many steps.
        on_step: Called with the 1-based step number after each step (checkpoints, progress).
        update_scales: Optional tree like ``model.parameters()`` of per-element multipliers
            applied to each update (0 freezes an entry); see ``circuit.update_scales``.
        group: Data-parallel ranks (``mx.distributed``), each running this with the same
            ``batches``: every rank computes the gradient of its share of each batch's rows,
            the shares are summed, and every rank applies the same update. None (or a group of
            one) trains on whole batches in this process.
    """
    if group is not None and group.size() == 1:
        group = None
    optimizer = optim.AdamW(learning_rate=_schedule(cfg), weight_decay=cfg.weight_decay)
    loss = functools.partial(loss_fn, unlikelihood=cfg.unlikelihood) if cfg.unlikelihood else loss_fn
    value_and_grad = nn.value_and_grad(model, loss)
    state = [model.state, optimizer.state]

    def step(*arrays):
        loss, grads = value_and_grad(model, *arrays)
        if group is not None:
            # The whole batch's loss and gradient from every rank's share. Each element is one
            # sum with one term per rank (two: a + b = b + a), so every rank holds the same
            # gradient, bit for bit, and applies the same update.
            loss = mx.distributed.all_sum(loss, group=group)
            grads = tree_map(lambda g: mx.distributed.all_sum(g, group=group), grads)
        grads, _ = optim.clip_grad_norm(grads, cfg.grad_clip)
        before = model.parameters()
        optimizer.update(model, grads)
        if update_scales is not None:
            model.update(tree_map(lambda old, new, s: old + s * (new - old), before, model.parameters(), update_scales))
        return loss

    step = mx.compile(step, inputs=state, outputs=state)
    losses: list[float] = []
    start = time.perf_counter()
    for i in range(cfg.steps):
        loss = step(*_device_batch(next(batches), group))
        mx.eval(state, loss)
        losses.append(loss.item())
        if (i + 1) % log_every == 0 or i + 1 == cfg.steps:
            recent = losses[-log_every:]
            logger.info("step %d/%d loss %.3f (%.1fs)", i + 1, cfg.steps, sum(recent) / len(recent),
                        time.perf_counter() - start)
        if on_step is not None:
            on_step(i + 1)
    if not all(math.isfinite(x) for x in losses):
        raise RuntimeError("training diverged (non-finite loss)")
    if group is not None:
        _check_ranks_agree(model, group)
    return losses


def _check_ranks_agree(model: nn.Module, group: mx.distributed.Group) -> None:
    """Raise unless every rank ended with the same weights (compared by a sum of all of them:
    the same bits give the same sum), so a rank that drifted cannot pass for rank 0's model."""
    total = mx.concatenate([p.reshape(-1) for _, p in tree_flatten(model.parameters())]).sum()
    totals = mx.distributed.all_gather(total.reshape(1), group=group).tolist()
    if len(set(totals)) != 1:
        raise RuntimeError(f"data-parallel ranks ended with different weights (sums {totals})")
