"""Start the demo model with a working copy (induction) circuit instead of learning one.

The demo model must copy what it has never seen: a held-out city from the request into
``{"city": "..."}``, the temperature from a tool result into its answer. Transformers do
that with *induction heads* (attend to the token after an earlier occurrence of the
current context and copy it), but those emerge only after millions of tokens, far more
than a few CPU minutes allow. ``install_copy_circuit`` writes one into the freshly
initialised weights; training then learns when to use it. The first token of a value
has no such cue (``"city": "`` never occurs in the request), so the last layer's second
head is a *pointer*: it copies whatever it attends to, and its keys are written to mark
the places values start (``_pointer_keys``).

Residual stream (hidden size H = 128), in three parts:

* ``[0, 64)``: the token embedding; dimension 63 is a constant that positional heads read.
* ``[64, 96)``: the previous token's embedding (its first 32 dimensions), written by
  layer 0, head 0: constant query and key in the fastest RoPE planes, phased so that the
  score peaks at relative position 1.
* ``[96, 128)``: the token two back, written the same way by layer 0, head 1.

The last layer's head 0 is the induction head: its query is (current token, previous
token) and its key (previous token, token two back), both projected onto the slowest
RoPE planes, which barely rotate over a few hundred tokens; so it attends where the last
two tokens occurred before, falling back to a one-token match, with a mild preference for
recent matches. It adds the matched position's embedding to the lower part, where the tied
output head reads it as that token's logit. Other output projections start at zero, so
the untrained model computes exactly this. ``update_scales`` then slows down (or freezes)
the circuit's weights during training so that early, noisy updates do not erase it.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import mlx.core as mx
import mlx.nn as nn
import numpy as np

logger = logging.getLogger(__name__)

CONTENT = 64  # dims [0, CONTENT) hold token embeddings; the last of them is constant
CONST = CONTENT - 1
PREV = slice(64, 96)  # previous token, first 32 embedding dims
PREV2 = slice(96, 128)  # token two back, first 32 embedding dims
KEY_DIMS = 32


def _rope_freqs(head_dim: int, base: float) -> np.ndarray:
    return base ** (-np.arange(head_dim // 2) * 2.0 / head_dim)


def _set(module: nn.Module, name: str, value: np.ndarray) -> None:
    module.update({name: mx.array(value.astype(np.float32))})


def _set_attention(attn: nn.Module, q: np.ndarray, k: np.ndarray, v: np.ndarray, o: np.ndarray, *, gain: float) -> None:
    """Write an attention layer's projections, and q/k norm gains (attention sharpness)."""
    for name, value in (("q_proj", q), ("k_proj", k), ("v_proj", v), ("o_proj", o)):
        _set(getattr(attn, name), "weight", value)
    head_dim = attn.q_norm.weight.shape[0]
    _set(attn.q_norm, "weight", np.full(head_dim, gain))
    _set(attn.k_norm, "weight", np.full(head_dim, gain))


def check_config(cfg: dict) -> None:
    """Raise unless ``cfg`` has the layout the circuit is written for."""
    expected = {"hidden_size": 128, "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 64}
    wrong = {k: cfg.get(k) for k, v in expected.items() if cfg.get(k) != v}
    if wrong or cfg["num_hidden_layers"] < 2:
        raise ValueError(f"copy circuit needs {expected} and >= 2 layers, got {wrong or cfg['num_hidden_layers']}")


def _positional_layer(attn: nn.Module, theta: np.ndarray, *, pairs: int, gain: float, scale: float) -> None:
    """Head 0 copies token t-1 into PREV, head 1 token t-2 into PREV2 (at embedding scale)."""
    D = theta.size * 2
    q = np.zeros(attn.q_proj.weight.shape)
    k = np.zeros(attn.k_proj.weight.shape)
    v = np.zeros(attn.v_proj.weight.shape)
    o = np.zeros(attn.o_proj.weight.shape)
    for head, (offset, target) in enumerate(((1, PREV), (2, PREV2))):
        for i in range(pairs):
            # q = e^{-i offset theta}, k = 1 in plane i: the score is cos((delta - offset) theta_i).
            q[head * D + i, CONST] = math.cos(offset * theta[i])
            q[head * D + i + D // 2, CONST] = -math.sin(offset * theta[i])
            k[head * D + i, CONST] = 1.0
        v[head * D:head * D + KEY_DIMS, :KEY_DIMS] = np.eye(KEY_DIMS)
        o[target, head * D:head * D + KEY_DIMS] = scale * np.eye(KEY_DIMS)
    _set_attention(attn, q, k, v, o, gain=gain)


def _recency_plane(theta: np.ndarray) -> int:
    """The slowest RoPE plane that still turns by over a radian across 300 tokens: a
    constant query and key there score ``cos(theta * distance)``, higher for recent keys."""
    return max(i for i in range(theta.size) if theta[i] * 300 > 1.0)


def _induction_head(attn: nn.Module, theta: np.ndarray, rng: np.random.Generator, *, gain: float, strength: float,
                    prev_weight: float, recency: float, scale: float) -> None:
    """Head 0 of the last layer: match (current, previous) against (previous, two back); copy."""
    D = theta.size * 2
    slow = [i for i in range(theta.size) if theta[i] * 300 < 0.35]  # < 20 degrees over 300 tokens
    planes = slow + [i + D // 2 for i in slow]
    cut = (len(planes) * 5) // 8  # current-token match gets more dimensions than the previous one
    match_cur = rng.normal(0.0, 1.0, (cut, KEY_DIMS)) / math.sqrt(KEY_DIMS)
    match_prev = rng.normal(0.0, 1.0, (len(planes) - cut, KEY_DIMS)) * prev_weight / math.sqrt(KEY_DIMS)
    q, k = np.array(attn.q_proj.weight), np.array(attn.k_proj.weight)
    v, o = np.array(attn.v_proj.weight), np.array(attn.o_proj.weight)
    q[:D], k[:D], v[:D], o[:, :D] = 0.0, 0.0, 0.0, 0.0
    q[planes[:cut], :KEY_DIMS] = match_cur
    k[planes[:cut], PREV] = match_cur
    q[planes[cut:], PREV] = match_prev
    k[planes[cut:], PREV2] = match_prev
    # A constant q and k in a mid-speed plane add recency * cos(theta * delta): among equal
    # matches the latest wins, so a long system prompt reusing the same tokens does not.
    mid = _recency_plane(theta)
    q[mid, CONST], k[mid, CONST] = recency, 1.0
    v[:CONTENT, :CONTENT] = np.eye(CONTENT)
    o[:CONTENT, :CONTENT] = strength * scale * np.eye(CONTENT)
    _set_attention(attn, q, k, v, o, gain=gain)


@dataclass(frozen=True)
class PointerCues:
    """Token ids that mark where a value to copy starts, for the pointer head's keys.

    A JSON value's first token follows ``key_end`` (``":``) by one token: an opening
    quote (a string) or a space (a number). A request's argument follows one of
    ``argument_after`` ("weather *in* Lisbon", "search *for* jazz") and a space.
    """

    key_end: int  # '":'
    quoted: int  # ' "', before a string value
    bare: tuple[int, ...]  # ' ' and ' -', before a number
    space: int  # ' ', between a word and the next
    argument_after: tuple[int, ...] = ()

    def features(self) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        """(tokens two back, tokens one back) of each key feature, in ``POINTER_PLANES`` order."""
        features = [((self.key_end,), self.bare), ((self.key_end,), (self.quoted,))]
        if self.argument_after:
            features.append((self.argument_after, (self.space,)))
        return features


@dataclass(frozen=True)
class PointerKeys:
    """How ``_pointer_keys`` writes the pointer head's keys (and the argument query)."""

    cues: PointerCues
    weight: float = 2.0  # key of a match, before the key norm
    recency: float = 0.3  # preference for recent keys
    random_scale: float = 1.0  # scale of the head's random query/key start
    argument_query: float = 0.0  # written query for a request's argument; 0 leaves it to training


def _pointer_head(attn: nn.Module, *, strength: float, scale: float) -> None:
    """Head 1 of the last layer: whatever it attends to, it copies (identity value/output).

    Its query and key keep their random initialisation (unless ``_pointer_keys`` writes
    some): training only has to learn *where* to look (the city in the request, the
    temperature in the tool result), and every step of attention toward the right token
    raises that token's logit at once. Learning where and what together, from a zero output
    projection, is a plateau a few CPU minutes rarely leave (the first token of an
    argument has no induction cue to copy from).
    """
    D = attn.v_proj.weight.shape[0] // 2
    v, o = np.array(attn.v_proj.weight), np.array(attn.o_proj.weight)
    v[D:], o[:, D:] = 0.0, 0.0
    v[D:D + CONST, :CONST] = np.eye(CONST)
    o[:CONST, D:D + CONST] = strength * scale * np.eye(CONST)
    _set(attn.v_proj, "weight", v)
    _set(attn.o_proj, "weight", o)


def _redraw_pointer_start(attn: nn.Module, seed: int) -> None:
    """Draw the pointer head's query and key rows again, as ``nn.Linear`` does (uniform within
    1/sqrt(fan-in)), from ``seed``.

    Where a random pointer starts decides how soon training finds where to look: with every
    other weight and every batch the same, the demo's stage one reached a loss of 0.83 at step
    400 from seed 0's own draw, 0.60 from seed 7's and 0.82-1.01 from nine others' (demo README,
    "a bigger model and where the pointer starts").
    """
    D = attn.q_proj.weight.shape[0] // 2
    # MLX's global generator, as the model's own initialisation draws from it (the recorded
    # runs drew exactly this way); later draws then follow from ``seed``.
    mx.random.seed(seed)
    for name in ("q_proj", "k_proj"):
        weight = np.array(getattr(attn, name).weight)
        bound = 1 / np.sqrt(weight.shape[1])
        weight[D:] = np.array(mx.random.uniform(-bound, bound, (weight.shape[0] - D, weight.shape[1])))
        _set(getattr(attn, name), "weight", weight)


# Pointer head dims holding the number, string and argument keys. The first two sit in the
# slowest RoPE planes (position-blind); the argument's in a plane that turns by about a
# radian over 200 tokens, so the request just made outranks "in a city" in a tool's text.
POINTER_PLANES = (31, 30, 12)
ANCHOR_PLANE = 29  # a constant key dimension, so the key norm keeps the features' size


def _pointer_keys(attn: nn.Module, emb: np.ndarray, theta: np.ndarray, settings: PointerKeys, *, scale: float,
                  anchor: float = 4.0) -> None:
    """Write the pointer head's keys: "first token of a JSON number", "... of a JSON string",
    "a request's argument" (and, if asked, the query that looks for the last).

    Even with a copying output, a pointer whose query and key both start random must learn
    two things at once before attention moves at all; it did in some training runs only.
    Here the keys are written. In the slowest RoPE plane's first dimension (position
    barely matters) the key is +``weight`` where ``":`` is two tokens back and a space one
    back (a number), about 0 where only one of them is, -``weight`` where neither is; the
    next plane does the same with a quote (a string); a mid-speed plane does it for a word
    after one of ``cues.argument_after`` and a space. Qwen3 RMS-normalises each key, which
    would blow a lone cue up to the size of a match: a constant dimension (``anchor``)
    keeps the norm steady, and the head's random dimensions start at ``random_scale`` so
    that they do not drown the written ones. The queries on the value planes start at
    zero (training learns *when* to look for a value, a steady gradient once the keys
    exist); the argument query is written when ``argument_query`` is set: it fires at an
    opening quote after ``":``, where the model writes a string value.

    The cues are read from the previous-token dimensions, on the scale layer 0 writes them
    there (``scale`` times the first 32 dims of the RMS-normalised embedding). The last
    layer sees the residual RMS-normalised: with the two copied regions it has about
    ``sqrt(2) * scale`` RMS, which sets the factor for a key of ``weight`` per cue.
    """
    D = attn.k_proj.weight.shape[0] // 2
    cues = settings.cues
    normed = emb / np.sqrt(np.mean(emb ** 2, axis=1, keepdims=True))
    residual_rms = math.sqrt(2.0) * scale

    def cue(token: int) -> np.ndarray:
        # 1 where ``token`` sits in the slot, in units of the residual before normalisation.
        head = normed[token, :KEY_DIMS]
        return head / (scale * float(head @ head))

    const = float(emb[0, CONST])
    q, k = np.array(attn.q_proj.weight), np.array(attn.k_proj.weight)
    # The head's other (random) dimensions stay learnable but start small, so that the
    # written keys decide where it looks until training has found a use for the rest.
    q[D:], k[D:] = q[D:] * settings.random_scale, k[D:] * settings.random_scale
    for plane in (*POINTER_PLANES, ANCHOR_PLANE):
        for dim in (D + plane, D + plane + D // 2):
            q[dim], k[dim] = 0.0, 0.0
    for plane, (two_back, one_back) in zip(POINTER_PLANES, cues.features()):
        row = np.zeros(k.shape[1])
        for token in two_back:  # alternatives: at most one is there
            row[PREV2] += cue(token)
        for token in one_back:
            row[PREV] += cue(token)
        row[CONST] = -1.0 / const  # one cue alone reads 0, both +1, none -1
        k[D + plane] = settings.weight * residual_rms * row
    k[D + ANCHOR_PLANE, CONST] = anchor * residual_rms / const
    if cues.argument_after and settings.argument_query:
        # The query side of the argument key, written too: at an opening quote right after
        # '":' (a JSON string value being written), look for a request's argument.
        current = emb[cues.quoted, :KEY_DIMS]
        row = np.zeros(q.shape[1])
        row[:KEY_DIMS] = current / float(current @ current)
        row[PREV] = cue(cues.key_end)
        row[CONST] = -1.0 / const
        q[D + POINTER_PLANES[2]] = settings.argument_query * residual_rms * row
    # Among equal keys the latest wins (the request being answered, not an older one).
    mid = _recency_plane(theta)
    q[D + mid], k[D + mid] = 0.0, 0.0
    q[D + mid, CONST], k[D + mid, CONST] = settings.recency, 1.0
    _set(attn.q_proj, "weight", q)
    _set(attn.k_proj, "weight", k)


def install_copy_circuit(
    model: nn.Module,
    cfg: dict,
    *,
    seed: int,
    prev_pairs: int = 4,
    prev_gain: float = 2.5,
    match_gain: float = 3.0,
    strength: float = 3.0,
    prev_weight: float = 0.8,
    recency: float = 0.3,
    pointer_strength: float = 1.0,
    pointer_keys: PointerKeys | None = None,
    pointer_seed: int | None = None,
) -> None:
    """Rewrite a freshly initialised Qwen3 ``model`` so that it already copies by induction.

    Args:
        model: mlx-lm ``qwen3.Model`` straight from initialisation (layout: ``check_config``).
        cfg: Its config.json dict.
        seed: Seeds the random projections of the matching head.
        prev_pairs: Fast RoPE planes used by the positional heads (sharper with more).
        prev_gain: q/k norm gain of the positional heads (attention sharpness).
        match_gain: q/k norm gain of the induction head.
        strength: Output scale of the induction head relative to the token embedding.
        prev_weight: Weight of the previous-token match relative to the current-token one.
        recency: Weight of the preference for recent matches.
        pointer_strength: Output scale of the pointer head (``_pointer_head``); 0 leaves
            the head as initialised, silent until training gives it an output.
        pointer_keys: When given, the pointer head starts with written keys
            (``_pointer_keys``) instead of random ones.
        pointer_seed: When given, the pointer head's random query and key are drawn again
            from this seed (``_redraw_pointer_start``) instead of kept from the model's.
    """
    check_config(cfg)
    rng = np.random.default_rng(seed)
    theta = _rope_freqs(cfg["head_dim"], cfg["rope_theta"])
    inner = model.model
    emb = np.array(inner.embed_tokens.weight)
    emb[:, CONTENT:] = 0.0
    emb[:, CONST] = float(np.sqrt(np.mean(emb[:, :CONST] ** 2)))
    _set(inner.embed_tokens, "weight", emb)
    # Attention reads RMS-normalised inputs; writing back at the embedding's own RMS keeps
    # the copied tokens on the same scale as the tokens themselves.
    scale = float(np.sqrt(np.mean(emb ** 2)))
    # Every other layer starts as the identity (zero output projections).
    for layer in inner.layers:
        _set(layer.self_attn.o_proj, "weight", np.zeros(layer.self_attn.o_proj.weight.shape))
        _set(layer.mlp.down_proj, "weight", np.zeros(layer.mlp.down_proj.weight.shape))
    _positional_layer(inner.layers[0].self_attn, theta, pairs=prev_pairs, gain=prev_gain, scale=scale)
    _induction_head(inner.layers[-1].self_attn, theta, rng, gain=match_gain, strength=strength,
                    prev_weight=prev_weight, recency=recency, scale=scale)
    if pointer_strength:
        _pointer_head(inner.layers[-1].self_attn, strength=pointer_strength, scale=scale)
    if pointer_seed is not None:
        _redraw_pointer_start(inner.layers[-1].self_attn, pointer_seed)
    if pointer_keys is not None:
        _pointer_keys(inner.layers[-1].self_attn, emb, theta, pointer_keys, scale=scale)
    mx.eval(model.parameters())


def update_scales(model: nn.Module, cfg: dict, *, positional: float = 0.0, matching: float = 0.2,
                  pointer_keys: bool = False) -> dict:
    """Per-element multipliers for parameter updates: the circuit's, and 1 elsewhere.

    Adam moves every weight by about the learning rate per step whatever its gradient, so
    the circuit would be overwritten by early, noisy updates before the rest of the model
    has learned when copying helps. Scaling the *update* (scaling the gradient would be
    undone by Adam's normalisation) protects it:

    * ``positional`` applies to layer 0's attention and input norm, and to the embedding's
      constant and upper dimensions;
    * ``matching`` to the induction head and the last layer's input norm; it stays
      trainable so the model can learn when not to copy;
    * the rows of every other output projection that write into the constant dimension and
      the previous-token dimensions stay zero: the rest of the model reads those dims but
      never overwrites them, so the keys the induction head matches on stay clean.
    """
    from mlx.utils import tree_map

    D = cfg["head_dim"]
    scales = tree_map(lambda p: np.ones(p.shape, np.float32), model.parameters())
    scales["model"]["embed_tokens"]["weight"][:, CONST:] = positional
    layers = scales["model"]["layers"]
    for layer in layers:
        layer["self_attn"]["o_proj"]["weight"][CONST:] = 0.0
        layer["mlp"]["down_proj"]["weight"][CONST:] = 0.0
    for name in ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm"):
        layers[0]["self_attn"][name]["weight"][...] = positional
    layers[0]["input_layernorm"]["weight"][...] = positional
    last = layers[-1]["self_attn"]
    for name in ("q_proj", "k_proj", "v_proj"):
        last[name]["weight"][:D] = matching
    last["o_proj"]["weight"][:CONTENT, :D] = matching
    for name in ("q_norm", "k_norm"):
        last[name]["weight"][...] = matching
    if pointer_keys:
        # The pointer head's written keys (``_pointer_keys``) move as slowly as the
        # induction head, enough to follow the embeddings they read; its queries learn freely.
        for plane in (*POINTER_PLANES, ANCHOR_PLANE):
            last["k_proj"]["weight"][[D + plane, D + plane + D // 2]] = matching
    layers[-1]["input_layernorm"]["weight"][...] = matching
    return tree_map(mx.array, scales)
