"""Rank 0's decisions, delivered to every rank of a sharded model before each step.

Every rank runs its own scheduler over its share of the model, and each forward pass is a
collective: the ranks must insert, abort and step the same sequences in the same order, or
they wait on each other forever (or sum arrays of different shapes). So only rank 0 hears the
router, and before each step it hands the inputs it took (requests, aborts, shutdown) to the
others; every rank then applies the same list, in the same order, and steps.

The list travels as msgpack bytes in a uint8 array summed over the group: rank 0 contributes
the bytes, the others zeros, so the sum is rank 0's bytes on every rank (one collective per
step, a second for a payload longer than ``INLINE_BYTES``). ``all_sum`` is what every
MLX backend implements (ring, jaccl, mpi), unlike a broadcast. It is queued on mlx-lm's
generation stream, so it waits for the step the generator queued ahead (its own collectives
share the group's connections).
"""

from __future__ import annotations

import msgspec
import numpy as np

from engines.protocol import AbortRequest, AddRequest, Shutdown

StepInput = AddRequest | AbortRequest | Shutdown

# The first collective of every step: an 8-byte length, then as much of the payload as fits.
INLINE_BYTES = 1024
LENGTH_BYTES = 8

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(list[StepInput])


def encode_inputs(inputs: list[StepInput]) -> bytes:
    """The bytes rank 0 shares for ``inputs`` (empty for none)."""
    return _encoder.encode(inputs) if inputs else b""


def decode_inputs(payload: bytes) -> list[StepInput]:
    return _decoder.decode(payload) if payload else []


class Lockstep:
    """Shares bytes from rank 0 with every rank of ``group`` (an ``mx.distributed.Group``)."""

    def __init__(self, group) -> None:
        import mlx.core as mx

        self._mx = mx
        self._group = group
        self.rank = group.rank()
        self.size = group.size()

    @property
    def leader(self) -> bool:
        return self.rank == 0

    def share_bytes(self, payload: bytes | None) -> bytes:
        """Rank 0's ``payload`` on every rank; the other ranks pass None.

        Every rank must call it at the same point of its loop: it blocks until all have. One
        collective of ``INLINE_BYTES`` carries the length and a payload that fits (aborts, a
        short prompt, an idle tick); a longer payload takes one more for the rest.
        """
        if self.leader == (payload is None):
            raise ValueError("rank 0 shares a payload, the other ranks pass None")
        data = payload or b""
        first = np.zeros(INLINE_BYTES, dtype=np.uint8)
        if self.leader:
            head = len(data).to_bytes(LENGTH_BYTES, "little") + data[:INLINE_BYTES - LENGTH_BYTES]
            first[:len(head)] = np.frombuffer(head, dtype=np.uint8)
        shared = bytes(memoryview(self._sum(first)))
        size = int.from_bytes(shared[:LENGTH_BYTES], "little")
        inline = shared[LENGTH_BYTES:LENGTH_BYTES + size]
        if len(inline) == size:
            return inline
        rest = size - len(inline)
        contribution = np.frombuffer(data[len(inline):], dtype=np.uint8) if self.leader else np.zeros(rest, dtype=np.uint8)
        return inline + bytes(memoryview(self._sum(contribution)))

    def share_inputs(self, inputs: list[StepInput] | None) -> list[StepInput]:
        """Rank 0's ``inputs`` on every rank (the other ranks pass None)."""
        return decode_inputs(self.share_bytes(None if inputs is None else encode_inputs(inputs)))

    def _sum(self, values: np.ndarray):
        from mlx_lm.generate import generation_stream

        mx = self._mx
        # On the generator's stream, behind the step it has already queued: that step's own
        # collectives use the same connections, and two collectives in flight at once on
        # two streams would interleave their bytes.
        total = mx.distributed.all_sum(mx.array(values), group=self._group, stream=generation_stream)
        mx.eval(total)
        return total
