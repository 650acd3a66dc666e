"""The wire contract between the router and a model worker: the only module both import.

Frames are msgpack-encoded msgspec Structs, each prefixed by a 4-byte big-endian length,
over a Unix-domain socket. The router sends ``WorkerInput``; the worker answers with a
``WorkerReady`` handshake, then one ``StepOutputs`` per engine step (every sequence that
produced a token in that step, batched), and ``WorkerFatal`` just before dying of an error.
"""

from __future__ import annotations

import enum
import struct

import msgspec

PROTOCOL_VERSION = 1
FRAME_HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 256 * 1024 * 1024


class FinishReason(enum.IntEnum):
    """Why a sequence ended; an IntEnum for compact frames, ``str()`` gives the API string."""

    STOP = 0  # a stop token (EOS or a requested stop token id)
    LENGTH = 1  # max_tokens reached
    ABORT = 2  # aborted by the router (client gone, stop string matched)
    ERROR = 3  # the request failed inside the engine; see TokenDelta.error

    def __str__(self) -> str:
        return self.name.lower()


class SamplingParams(msgspec.Struct, frozen=True, array_like=True, omit_defaults=True, gc=False):
    """Per-request sampling; the router has already merged the model's defaults in."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None
    logit_bias: dict[int, float] | None = None
    # Number of alternatives per position; None = no logprobs at all, 0 = chosen token only.
    top_logprobs: int | None = None


class AddRequest(msgspec.Struct, frozen=True, array_like=True, tag="add", gc=False):
    """Start generating for one prompt."""

    request_id: str
    prompt_tokens: list[int]
    max_tokens: int
    sampling: SamplingParams
    # Token ids that end the sequence (EOS ids plus any the request adds); the stop token is not emitted.
    stop_token_ids: list[int]


class AbortRequest(msgspec.Struct, frozen=True, array_like=True, tag="abort", gc=False):
    """Stop these requests and free their slots; unknown ids are ignored (aborts are idempotent)."""

    request_ids: list[str]


class Shutdown(msgspec.Struct, frozen=True, array_like=True, tag="shutdown", gc=False):
    """Finish the current step, then exit."""


WorkerInput = AddRequest | AbortRequest | Shutdown


class TopLogprob(msgspec.Struct, frozen=True, array_like=True, gc=False):
    token_id: int
    logprob: float


class TokenLogprob(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """Log-probability of the sampled token, with the most likely alternatives if requested."""

    token_id: int
    logprob: float
    top: list[TopLogprob] = []


class TokenDelta(msgspec.Struct, frozen=True, array_like=True, omit_defaults=True, gc=False):
    """What one request produced in one engine step."""

    request_id: str
    token_ids: list[int]
    finish_reason: FinishReason | None = None
    logprobs: list[TokenLogprob] | None = None
    # Prompt tokens served from the prefix cache; sent with the first delta of a request.
    cached_tokens: int | None = None
    error: str | None = None


class WorkerStats(msgspec.Struct, frozen=True, array_like=True, gc=False):
    running: int
    waiting: int


class StepOutputs(msgspec.Struct, frozen=True, array_like=True, tag="step", gc=False):
    outputs: list[TokenDelta]
    stats: WorkerStats | None = None


class WorkerReady(msgspec.Struct, frozen=True, array_like=True, tag="ready", gc=False):
    """First frame from a worker: the model is loaded and the scheduler is running."""

    protocol_version: int
    model_id: str
    max_context: int
    pid: int


class WorkerFatal(msgspec.Struct, frozen=True, array_like=True, tag="fatal", gc=False):
    """Last frame from a worker that is dying of an error (e.g. the model failed to load)."""

    message: str


WorkerOutput = WorkerReady | StepOutputs | WorkerFatal

_encoder = msgspec.msgpack.Encoder()
_input_decoder = msgspec.msgpack.Decoder(WorkerInput)
_output_decoder = msgspec.msgpack.Decoder(WorkerOutput)


def encode_frame(message: WorkerInput | WorkerOutput) -> bytes:
    """Encode one message with its length prefix."""
    payload = _encoder.encode(message)
    return FRAME_HEADER.pack(len(payload)) + payload


def decode_input(payload: bytes) -> WorkerInput:
    return _input_decoder.decode(payload)


def decode_output(payload: bytes) -> WorkerOutput:
    return _output_decoder.decode(payload)


class WorkerSpec(msgspec.Struct, frozen=True, kw_only=True):
    """How to start a worker: handed to the process as JSON on its command line."""

    model_id: str
    model_path: str  # a local directory (the router resolves repo ids before spawning)
    socket_path: str
    max_concurrency: int
    prefill_step: int
    max_context: int
    log_level: str = "info"
