"""A quantized attention KV cache that batches: sequences keep decoding together.

mlx-lm's ``QuantizedKVCache`` has no batched form, so mlx_lm.server serves ``--kv-bits``
requests one at a time. Here a sequence's attention layers get ``FullPrecisionRow`` caches
(plain KV) or ``QuantizedRow`` caches (mlx-lm's quantized layout); the BatchGenerator merges
either kind into one ``BatchQuantizedKVCache``, which does what ``BatchKVCache`` does
(left-padded rows; prepare, finalize, filter, extend, extract, trim) over quantized storage.

Precision per sequence, as mlx-lm's ``quantized_kv_start`` has it: a sequence attends in full
precision until it holds ``quantize_after`` tokens, then over its quantized cache. A token's
precision depends only on its position (the scheduler cuts prefill chunks at
``quantize_after``), so a sequence's output never depends on what else is in the batch, and a
snapshot resumed at any length continues exactly as the run that made it.

Layout: every row's keys and values are quantized as they are written (quantizing is per
token, so this equals converting the whole cache later); rows still below ``quantize_after``
also keep a full-precision copy, in a window over the newest batch columns that is as wide
as the longest such row and dropped once none is left. Attention reads dequantized keys and
values (the fp window for rows below the threshold) through the model's usual fused kernel:
storage is quantized, the arithmetic of one layer at a time is not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx_lm.models.base import create_causal_mask
from mlx_lm.models.cache import KVCache, QuantizedKVCache, dynamic_roll

_STEP = 256  # buffer growth, as mlx-lm's caches grow
Quantized = tuple[mx.array, mx.array, mx.array]  # (packed, scales, biases)


@dataclass(frozen=True)
class KVQuantization:
    bits: int  # 4 or 8
    group_size: int  # 32, 64 or 128: must divide the head dimension
    quantize_after: int = 0  # tokens a sequence attends to in full precision before its cache is quantized

    def quantize(self, x: mx.array) -> Quantized:
        return tuple(mx.quantize(x, group_size=self.group_size, bits=self.bits))

    def dequantize(self, q: Quantized) -> mx.array:
        return mx.dequantize(*q, group_size=self.group_size, bits=self.bits)


class FullPrecisionRow(KVCache):
    """One sequence's attention cache while it is below ``quantize_after``: plain keys and values."""

    def __init__(self, quantization: KVQuantization) -> None:
        super().__init__()
        self.quantization = quantization

    @classmethod
    def merge(cls, caches: list[Any]) -> BatchQuantizedKVCache:
        return BatchQuantizedKVCache.merge(caches)


class QuantizedRow(QuantizedKVCache):
    """One sequence's quantized attention cache (mlx-lm's layout), batchable with the others."""

    def __init__(self, quantization: KVQuantization) -> None:
        super().__init__(group_size=quantization.group_size, bits=quantization.bits)
        self.quantization = quantization

    @property
    def rewind_floor(self) -> int:
        """It can be cut back only to lengths that were quantized in the run that made it."""
        return self.quantization.quantize_after

    @classmethod
    def merge(cls, caches: list[Any]) -> BatchQuantizedKVCache:
        return BatchQuantizedKVCache.merge(caches)


def row_caches(layers: list[Any], quantization: KVQuantization) -> list[Any]:
    """A fresh sequence's caches with every plain attention layer made quantizable.

    Other layers (sliding windows, linear-attention state) stay as they are: mlx-lm cannot
    quantize a rotating window, and recurrent state is not a KV cache.
    """
    return [FullPrecisionRow(quantization) if type(layer) is KVCache else layer for layer in layers]


def quantized_nbytes(layer: Any) -> int:
    """Bytes of ``layer`` held in quantized form (0 for any other cache)."""
    if isinstance(layer, BatchQuantizedKVCache):
        return layer.quantized_nbytes
    return layer.nbytes if isinstance(layer, QuantizedRow) else 0


def _pad_axis2(x: mx.array, left: int, right: int) -> mx.array:
    if left == 0 and right == 0:
        return x
    return mx.pad(x, [(0, 0), (0, 0), (left, right), (0, 0)])


def _grow(x: mx.array, columns: int) -> mx.array:
    return mx.concatenate([x, mx.zeros((*x.shape[:2], columns, x.shape[3]), dtype=x.dtype)], axis=2)


class BatchQuantizedKVCache:
    """Left-padded rows of quantized keys and values (see the module docstring)."""

    def __init__(self, quantization: KVQuantization, left_padding: list[int]) -> None:
        self.quantization = quantization
        self.keys: Quantized | None = None  # every row, quantized; capacity >= _idx columns
        self.values: Quantized | None = None
        # Full-precision copies for rows below quantize_after: columns [_fp_base, _fp_base + width).
        self._fp_keys: mx.array | None = None
        self._fp_values: mx.array | None = None
        self._fp_base = 0
        self._left = list(left_padding)  # host copy of left_padding: no device sync per step
        self.left_padding = mx.array(left_padding)
        self.offset = mx.array([-p for p in left_padding])
        self._idx = 0
        self._right_padding: list[int] | None = None

    # ------------------------------------------------------------------ what the model calls

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        prev, steps = self._idx, keys.shape[2]
        # This step's precision per row, from the tokens it held before (the scheduler never
        # lets a prefill chunk straddle quantize_after).
        below = [prev - left < self.quantization.quantize_after for left in self._left]
        self._write_quantized(prev, keys, values)
        if any(below):
            self._write_full(prev, keys, values, below)
        self._idx += steps
        self.offset = self.offset + steps
        fetched = self._fetch(below)
        self._drop_full_precision_not_needed()
        return fetched

    def make_mask(self, N: int, return_array: bool = False, **kwargs):
        return create_causal_mask(N, offset=self._idx, left_padding=self.left_padding, **kwargs)

    # ------------------------------------------------------------------ what the BatchGenerator calls

    def prepare(self, *, left_padding: list[int] | None = None, lengths=None, right_padding: list[int] | None = None) -> None:
        if left_padding is not None:
            if self.keys is not None:
                raise ValueError("Left padding can only be added to an empty BatchQuantizedKVCache")
            self._left = [a + b for a, b in zip(self._left, left_padding)]
            self.left_padding = self.left_padding + mx.array(left_padding)
            self.offset = self.offset - mx.array(left_padding)
        if right_padding is not None and max(right_padding) > 0:
            self._right_padding = list(right_padding)

    def finalize(self) -> None:
        """After a right-padded prefill: roll each row's padding to its left."""
        if self._right_padding is None:
            return
        shifts = mx.array(self._right_padding)[:, None]
        self.keys = tuple(dynamic_roll(part, shifts, axis=2) for part in self.keys)
        self.values = tuple(dynamic_roll(part, shifts, axis=2) for part in self.values)
        if self._fp_keys is not None:
            self._fp_keys = dynamic_roll(self._fp_keys, shifts, axis=2)
            self._fp_values = dynamic_roll(self._fp_values, shifts, axis=2)
        padding = mx.array(self._right_padding)
        self.offset = self.offset - padding
        self.left_padding = self.left_padding + padding
        self._left = [a + b for a, b in zip(self._left, self._right_padding)]
        self._right_padding = None

    def filter(self, batch_indices) -> None:
        """Keep these rows (in this order), then drop the left padding they all have."""
        rows = [int(i) for i in (batch_indices.tolist() if isinstance(batch_indices, mx.array) else batch_indices)]
        index = mx.array(rows)
        if self.keys is not None:
            self.keys = tuple(part[index] for part in self.keys)
            self.values = tuple(part[index] for part in self.values)
        if self._fp_keys is not None:
            self._fp_keys, self._fp_values = self._fp_keys[index], self._fp_values[index]
        self.offset = self.offset[index]
        self.left_padding = self.left_padding[index]
        self._left = [self._left[i] for i in rows]
        shift = min(self._left) if self._left else 0
        if shift > 0:
            if self.keys is not None:
                self.keys = tuple(part[..., shift:, :] for part in self.keys)
                self.values = tuple(part[..., shift:, :] for part in self.values)
            self._idx -= shift
            self.left_padding = self.left_padding - shift
            self._left = [left - shift for left in self._left]
            self._fp_base -= shift
            if self._fp_keys is not None and self._fp_base < 0:
                self._fp_keys, self._fp_values = self._fp_keys[..., -self._fp_base:, :], self._fp_values[..., -self._fp_base:, :]
                self._fp_base = 0
        self._drop_full_precision_not_needed()

    def extend(self, other: BatchQuantizedKVCache) -> None:
        """Append ``other``'s rows, both right-aligned at the longer one's length."""
        end = max(self._idx, other._idx)
        shifts = [end - self._idx, end - other._idx]
        sides = [self, other]
        if self.keys is not None or other.keys is not None:
            template = self if self.keys is not None else other
            capacity = max(side.keys[0].shape[2] for side in sides if side.keys is not None)
            capacity = max(capacity, end)
            self.keys = _concat_rows([_aligned_quantized(side, side.keys, template.keys, shift, capacity) for side, shift in zip(sides, shifts)])
            self.values = _concat_rows([_aligned_quantized(side, side.values, template.values, shift, capacity) for side, shift in zip(sides, shifts)])
        with_full = [(side, shift) for side, shift in zip(sides, shifts) if side._fp_keys is not None]
        if with_full:
            base = min(side._fp_base + shift for side, shift in with_full)
            template = with_full[0][0]
            self._fp_keys = mx.concatenate([_aligned_full(side, side._fp_keys, template._fp_keys, shift, base, end) for side, shift in zip(sides, shifts)])
            self._fp_values = mx.concatenate([_aligned_full(side, side._fp_values, template._fp_values, shift, base, end) for side, shift in zip(sides, shifts)])
            self._fp_base = base
        self._left = [left + shifts[0] for left in self._left] + [left + shifts[1] for left in other._left]
        self.left_padding = mx.array(self._left)
        self.offset = mx.concatenate([self.offset, other.offset])
        self._idx = end

    def extract(self, idx: int) -> FullPrecisionRow | QuantizedRow:
        """Row ``idx`` as its own cache: plain while below quantize_after, else quantized."""
        left = self._left[idx]
        length = self._idx - left
        if length < self.quantization.quantize_after:
            row = FullPrecisionRow(self.quantization)
            if length > 0:
                start, stop = left - self._fp_base, self._idx - self._fp_base
                row.keys = mx.contiguous(self._fp_keys[idx : idx + 1, :, start:stop])
                row.values = mx.contiguous(self._fp_values[idx : idx + 1, :, start:stop])
                row.offset = length
            return row
        row = QuantizedRow(self.quantization)
        row.keys = tuple(mx.contiguous(part[idx : idx + 1, :, left : self._idx]) for part in self.keys)
        row.values = tuple(mx.contiguous(part[idx : idx + 1, :, left : self._idx]) for part in self.values)
        row.offset = length
        return row

    @classmethod
    def merge(cls, caches: list[Any]) -> BatchQuantizedKVCache:
        quantization = caches[0].quantization
        lengths = [cache.offset if not cache.empty() else 0 for cache in caches]
        longest = max(lengths)
        padding = [longest - length for length in lengths]
        batch = cls(quantization, padding)
        if longest == 0:
            return batch
        shaped = next(cache for cache in caches if not cache.empty())
        quantized = [_row_quantized(cache, quantization, "keys") for cache in caches]
        q_values = [_row_quantized(cache, quantization, "values") for cache in caches]
        key_like = next(q for q in quantized if q is not None)
        value_like = next(q for q in q_values if q is not None)
        batch.keys = _concat_rows([_left_pad_quantized(q, key_like, pad, longest) for q, pad in zip(quantized, padding)])
        batch.values = _concat_rows([_left_pad_quantized(q, value_like, pad, longest) for q, pad in zip(q_values, padding)])
        full = [i for i, cache in enumerate(caches) if 0 < lengths[i] < quantization.quantize_after]
        if full:
            width = max(lengths[i] for i in full)
            dtype = shaped.keys[1].dtype if isinstance(shaped.keys, tuple) else shaped.keys.dtype
            batch._fp_keys = mx.concatenate([_full_window(caches[i], "keys", width, i in full, key_like, quantization, dtype) for i in range(len(caches))])
            batch._fp_values = mx.concatenate([_full_window(caches[i], "values", width, i in full, value_like, quantization, dtype) for i in range(len(caches))])
            batch._fp_base = longest - width
        batch._idx = longest
        batch.offset = batch.offset + longest
        return batch

    def size(self) -> int:
        return self._idx

    def empty(self) -> bool:
        return self.keys is None

    @property
    def state(self) -> list[mx.array]:
        arrays = [self.offset, self.left_padding]
        for part in (self.keys, self.values):
            if part is not None:
                arrays.extend(part)
        if self._fp_keys is not None:
            arrays.extend([self._fp_keys, self._fp_values])
        return arrays

    @property
    def nbytes(self) -> int:
        return self.quantized_nbytes + self.full_precision_nbytes

    @property
    def quantized_nbytes(self) -> int:
        return sum(part.nbytes for side in (self.keys, self.values) if side is not None for part in side)

    @property
    def full_precision_nbytes(self) -> int:
        return 0 if self._fp_keys is None else self._fp_keys.nbytes + self._fp_values.nbytes

    # ------------------------------------------------------------------ internal

    def _write_quantized(self, prev: int, keys: mx.array, values: mx.array) -> None:
        q_keys, q_values = self.quantization.quantize(keys), self.quantization.quantize(values)
        end = prev + keys.shape[2]
        if self.keys is None:
            capacity = -(-end // _STEP) * _STEP
            self.keys = tuple(mx.zeros((*part.shape[:2], capacity, part.shape[3]), dtype=part.dtype) for part in q_keys)
            self.values = tuple(mx.zeros((*part.shape[:2], capacity, part.shape[3]), dtype=part.dtype) for part in q_values)
        elif end > self.keys[0].shape[2]:
            extra = -(-(end - self.keys[0].shape[2]) // _STEP) * _STEP
            self.keys = tuple(_grow(part, extra) for part in self.keys)
            self.values = tuple(_grow(part, extra) for part in self.values)
        for stored, new in zip(self.keys, q_keys):
            stored[..., prev:end, :] = new
        for stored, new in zip(self.values, q_values):
            stored[..., prev:end, :] = new

    def _write_full(self, prev: int, keys: mx.array, values: mx.array, below: list[bool]) -> None:
        end = prev + keys.shape[2]
        if self._fp_keys is None:  # the rows below the threshold hold no tokens yet
            self._fp_base = min(left for left, low in zip(self._left, below) if low)
            width = -(-(end - self._fp_base) // _STEP) * _STEP
            self._fp_keys = mx.zeros((*keys.shape[:2], width, keys.shape[3]), dtype=keys.dtype)
            self._fp_values = mx.zeros((*values.shape[:2], width, values.shape[3]), dtype=values.dtype)
        elif end - self._fp_base > self._fp_keys.shape[2]:
            extra = -(-(end - self._fp_base - self._fp_keys.shape[2]) // _STEP) * _STEP
            self._fp_keys, self._fp_values = _grow(self._fp_keys, extra), _grow(self._fp_values, extra)
        self._fp_keys[..., prev - self._fp_base : end - self._fp_base, :] = keys
        self._fp_values[..., prev - self._fp_base : end - self._fp_base, :] = values

    def _fetch(self, below: list[bool]) -> tuple[mx.array, mx.array]:
        start, width = self._fp_base, self._idx - self._fp_base
        if all(below):  # nothing quantized is read: the window and the padding left of it
            return (_pad_axis2(self._fp_keys[..., :width, :], start, 0), _pad_axis2(self._fp_values[..., :width, :], start, 0))
        keys = self.quantization.dequantize(tuple(part[..., : self._idx, :] for part in self.keys))
        values = self.quantization.dequantize(tuple(part[..., : self._idx, :] for part in self.values))
        if not any(below):
            return keys, values
        rows = mx.array(below)[:, None, None, None]

        def blend(dequantized: mx.array, full: mx.array) -> mx.array:
            tail = mx.where(rows, full[..., :width, :].astype(dequantized.dtype), dequantized[..., start:, :])
            return mx.concatenate([dequantized[..., :start, :], tail], axis=2) if start else tail

        return blend(keys, self._fp_keys), blend(values, self._fp_values)

    def _drop_full_precision_not_needed(self) -> None:
        """Free the full-precision window once every row is past quantize_after."""
        if self._fp_keys is None:
            return
        pending = self._right_padding or [0] * len(self._left)  # padding finalize() will move left
        if all(self._idx - left - pad >= self.quantization.quantize_after for left, pad in zip(self._left, pending)):
            self._fp_keys = self._fp_values = None
            self._fp_base = 0


def _row_quantized(cache: Any, quantization: KVQuantization, name: str) -> Quantized | None:
    """A row's keys or values in quantized form (a plain row's are quantized now: the same per token)."""
    if cache.empty():
        return None
    data = getattr(cache, name)
    if isinstance(data, tuple):
        return tuple(part[..., : cache.offset, :] for part in data)
    return quantization.quantize(data[..., : cache.offset, :])


def _left_pad_quantized(q: Quantized | None, like: Quantized, pad: int, length: int) -> Quantized:
    if q is None:
        return tuple(mx.zeros((1, part.shape[1], length, part.shape[3]), dtype=part.dtype) for part in like)
    return tuple(_pad_axis2(part, pad, 0) for part in q)


def _full_window(cache: Any, name: str, width: int, keep: bool, like: Quantized, quantization: KVQuantization, dtype) -> mx.array:
    """A row's full-precision data right-aligned in a window of ``width`` columns (zeros if it has none)."""
    heads, dim = like[0].shape[1], like[0].shape[3] * 32 // quantization.bits
    if not keep:
        return mx.zeros((1, heads, width, dim), dtype=dtype)
    data = getattr(cache, name)[..., : cache.offset, :]
    return _pad_axis2(data, width - cache.offset, 0)


def _concat_rows(parts: list[Quantized]) -> Quantized:
    return tuple(mx.concatenate(column, axis=0) for column in zip(*parts))


def _aligned_quantized(side: BatchQuantizedKVCache, q: Quantized | None, like: Quantized, shift: int, capacity: int) -> Quantized:
    """``side``'s quantized rows moved right by ``shift`` columns, in a buffer of ``capacity``."""
    rows = len(side._left)
    if q is None:
        return tuple(mx.zeros((rows, part.shape[1], capacity, part.shape[3]), dtype=part.dtype) for part in like)
    out = []
    for part in q:
        part = part[..., : side._idx, :]
        out.append(_pad_axis2(part, shift, capacity - side._idx - shift))
    return tuple(out)


def _aligned_full(side: BatchQuantizedKVCache, full: mx.array | None, like: mx.array, shift: int, base: int, end: int) -> mx.array:
    """``side``'s full-precision window, moved right by ``shift``, covering columns [base, end)."""
    rows = len(side._left)
    if full is None:
        return mx.zeros((rows, like.shape[1], end - base, like.shape[3]), dtype=like.dtype)
    data = full[..., : side._idx - side._fp_base, :]
    return _pad_axis2(data, side._fp_base + shift - base, 0)
