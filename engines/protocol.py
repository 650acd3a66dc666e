"""The wire contract between the router and a model worker: the only module both import.

Frames are msgpack-encoded msgspec Structs, each prefixed by a 4-byte big-endian length,
over a Unix-domain socket. The router sends ``WorkerInput``; the worker answers with a
``WorkerReady`` handshake, then one ``StepOutputs`` per engine step (every sequence that
produced a token in that step, batched), and ``WorkerFatal`` just before dying of an error.

A connection opens with a hello both ways (``WorkerHello`` then ``RouterWelcome``), each
carrying the spec's ``token``, so a worker that reached another router's listener, or a
listener that is not its router, is told apart before any request crosses.

``sampling_problem`` and ``token_problem`` say what a valid request is: the router checks a
request with them before sending it (a 400 naming the field), and the worker checks it again
on arrival, so a request that slips past one side still fails alone instead of failing a step.
"""

from __future__ import annotations

import enum
import math
import struct

import msgspec

PROTOCOL_VERSION = 7  # 7: AddRequest.grammar; 6: TokenDelta.queued_s/prefill_s; 5: the prefix cache's disk tier; 4: AddRequest.snapshot_at, ...
FRAME_HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 256 * 1024 * 1024
# The environment variable a worker's WorkerSpec travels in (JSON).
SPEC_ENV = "RAPIDMLX_WORKER_SPEC"

# Seeds are 64-bit as in vLLM and OpenAI (negative seeds allowed); msgpack carries at most 64 bits.
SEED_MIN, SEED_MAX = -(2**63), 2**64 - 1
MAX_TOP_LOGPROBS = 20
MAX_LOGIT_BIAS = 100.0


class FinishReason(enum.IntEnum):
    """Why a sequence ended; an IntEnum for compact frames, ``str()`` gives the API string."""

    STOP = 0  # a stop token (EOS or a requested stop token id)
    LENGTH = 1  # max_tokens reached
    ABORT = 2  # aborted by the router (client gone, stop string matched)
    ERROR = 3  # the request failed inside the engine; see TokenDelta.error

    def __str__(self) -> str:
        return self.name.lower()


class ErrorKind(enum.IntEnum):
    """Whose fault a failed request was: the router answers 400 for one, 500 for the other."""

    INVALID_REQUEST = 0  # the request breaks the contract (the router should have caught it)
    ENGINE = 1  # the engine failed while serving it; the details are in the worker's log


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
    # Prompt offsets where the next request is likely to branch (a chat turn's boundaries), sent
    # when the worker's prefix cache can only reuse exact snapshot points: it snapshots there.
    snapshot_at: tuple[int, ...] = ()
    # An llguidance grammar the output must follow (engines.grammar); "" leaves it free.
    grammar: str = ""


class AbortRequest(msgspec.Struct, frozen=True, array_like=True, tag="abort", gc=False):
    """Stop these requests and free their slots; unknown ids are ignored (aborts are idempotent)."""

    request_ids: list[str]


class Shutdown(msgspec.Struct, frozen=True, array_like=True, tag="shutdown", gc=False):
    """Finish the current step, then exit."""


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
    # With FinishReason.ERROR: a message in our words (no exception text) and whose fault it was.
    error: str | None = None
    error_kind: ErrorKind | None = None
    # With the first delta: seconds from arrival in the worker to joining the generator, and
    # from then to this first token (the prompt's prefill, cache lookups and loads included).
    queued_s: float | None = None
    prefill_s: float | None = None


class WorkerStats(msgspec.Struct, frozen=True, array_like=True, gc=False):
    running: int
    waiting: int


class StepOutputs(msgspec.Struct, frozen=True, array_like=True, tag="step", gc=False):
    outputs: list[TokenDelta]
    stats: WorkerStats | None = None


class WorkerHello(msgspec.Struct, frozen=True, array_like=True, tag="hello", gc=False):
    """First frame from a worker, sent as soon as it connects (before the model loads)."""

    protocol_version: int
    token: str  # WorkerSpec.token: proves this worker was started by the listening router
    pid: int


class RouterWelcome(msgspec.Struct, frozen=True, array_like=True, tag="welcome", gc=False):
    """The router's answer to a hello it accepted; a worker that never gets it exits."""

    token: str


class WorkerReady(msgspec.Struct, frozen=True, array_like=True, tag="ready", gc=False):
    """The model is loaded and the scheduler is running."""

    protocol_version: int
    model_id: str
    max_context: int
    pid: int
    vocab_size: int  # rows of the model's logits: the bound for token ids, top_k and logit_bias
    # The prefix cache reuses only exact snapshot points (state that cannot rewind): the router
    # should send turn boundaries as AddRequest.snapshot_at.
    exact_snapshots: bool = False


class StatusQuery(msgspec.Struct, frozen=True, array_like=True, tag="status?", gc=False):
    """Router → worker: answer with a ``WorkerStatus`` now (between engine steps)."""


class PrefixCacheCounters(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """The prefix cache's counters since the worker started (entries and bytes: now)."""

    lookups: int
    hits: int
    lookup_tokens: int  # prompt tokens looked up
    hit_tokens: int  # of those, served from the cache instead of prefilled
    stored: int
    evictions: int
    entries: int
    bytes: int
    budget_bytes: int
    shared_prefill_tokens: int  # served from a snapshot a request waited for instead of prefilling beside it


class DiskCounters(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """The prefix cache's disk tier since the worker started (entries, bytes, queue: now)."""

    entries: int
    bytes: int
    budget_bytes: int
    hits: int  # requests served from an entry loaded back from disk
    hit_tokens: int
    bytes_written: int
    bytes_read: int
    queue_depth: int  # entries waiting to be written
    dropped_writes: int  # not written: the queue was full
    failed_writes: int
    removed_unreadable: int  # corrupt, truncated or foreign files removed
    restore_seconds: float  # reading the index at start
    flush_seconds: float  # writing the queue at the last stop


class WorkerStatus(msgspec.Struct, frozen=True, array_like=True, tag="status", gc=False):
    """Worker → router, in answer to ``StatusQuery``."""

    running: int  # sequences in the generator
    waiting: int  # requests not in the generator yet: queued for it, waiting for another's prefill or for disk
    prefix_cache: PrefixCacheCounters | None = None  # None: the cache is off
    kv_bytes: int = 0  # cache memory of the sequences in the generator (prefix-cache entries not included)
    kv_quantized_bytes: int = 0  # of that, held quantized
    kv_bits: int = 0  # the KV quantization in use (0: none)
    prefix_disk: DiskCounters | None = None  # None: no disk tier


class WorkerFatal(msgspec.Struct, frozen=True, array_like=True, tag="fatal", gc=False):
    """Last frame from a worker that is dying of an error (e.g. the model failed to load)."""

    message: str


WorkerInput = AddRequest | AbortRequest | Shutdown | RouterWelcome | StatusQuery
WorkerOutput = WorkerHello | WorkerReady | StepOutputs | WorkerFatal | WorkerStatus

_encoder = msgspec.msgpack.Encoder()
_input_decoder = msgspec.msgpack.Decoder(WorkerInput)
_output_decoder = msgspec.msgpack.Decoder(WorkerOutput)


def encode_frame(message: WorkerInput | WorkerOutput) -> bytearray:
    """Encode one message with its length prefix, in one buffer (the payload is not copied
    behind a header: it is encoded after the header's room, which is then filled in)."""
    frame = bytearray(FRAME_HEADER.size)
    _encoder.encode_into(message, frame, FRAME_HEADER.size)
    FRAME_HEADER.pack_into(frame, 0, len(frame) - FRAME_HEADER.size)
    return frame


def decode_input(payload: bytes) -> WorkerInput:
    return _input_decoder.decode(payload)


def decode_output(payload: bytes) -> WorkerOutput:
    return _output_decoder.decode(payload)


class ShardSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A model sharded over a group of processes started by ``mlx.launch`` (engines/shard/)."""

    hosts: list[str]  # one entry per rank; rank 0 runs on the router's machine and talks to it
    backend: str = "ring"  # "ring" (TCP sockets) or "jaccl" (RDMA over Thunderbolt)
    mode: str = "tensor"  # "tensor": every layer split across the ranks; "pipeline": the layers divided among them
    hostfile: str = ""  # an mlx.launch hostfile (jaccl's RDMA devices); "" builds one from ``hosts``


class WorkerSpec(msgspec.Struct, frozen=True, kw_only=True):
    """How to start a worker: handed to the process as JSON in its environment.

    Not on the command line, which every local user can read: ``token`` is a secret between
    one router and the workers it starts.
    """

    model_id: str
    model_path: str  # a local directory (the router resolves repo ids before spawning)
    socket_path: str
    token: str
    max_concurrency: int
    prefill_step: int
    max_context: int
    log_level: str = "info"
    prefix_cache_bytes: int = 0  # the prefix cache's memory budget; 0 turns it off
    prefix_cache_min_tokens: int = 0  # shorter token sequences are not cached
    prefix_cache_dir: str = ""  # the disk tier's directory; "" turns it off
    prefix_cache_disk_bytes: int = 0
    prefix_cache_flush_timeout_s: float = 10.0
    kv_bits: int = 0  # quantized KV cache: 4 or 8 bits; 0 keeps it unquantized
    kv_group_size: int = 64
    kv_quantize_after: int = 0  # tokens a sequence attends to in full precision first
    kv_window: int = 0  # each layer's cache holds the latest this many tokens (mlx-lm's max_kv_size); 0 = all
    shard: ShardSpec | None = None  # None: one process holds the whole model


# ---------------------------------------------------------------- what a valid request is


def _finite_in(value: float, low: float, high: float, *, low_open: bool = False) -> bool:
    return math.isfinite(value) and (low < value if low_open else low <= value) and value <= high


def sampling_problem(params: SamplingParams, vocab_size: int) -> tuple[str, str] | None:
    """The first field of ``params`` the engine cannot sample with, as (field, message).

    Field names are the OpenAI request's names (``top_k``, ``logit_bias``...). NaN and
    infinities fail every range: a NaN temperature would sample garbage, a failed check in
    mlx-lm's compiled samplers poisons the process's random state.
    """
    ranges = (
        ("temperature", params.temperature, 0.0, 2.0, False),
        ("top_p", params.top_p, 0.0, 1.0, True),
        ("min_p", params.min_p, 0.0, 1.0, False),
        ("repetition_penalty", params.repetition_penalty, 0.0, 100.0, True),
        ("presence_penalty", params.presence_penalty, -2.0, 2.0, False),
        ("frequency_penalty", params.frequency_penalty, -2.0, 2.0, False),
    )
    for name, value, low, high, low_open in ranges:
        if not _finite_in(value, low, high, low_open=low_open):
            bound = f"({low}, {high}]" if low_open else f"[{low}, {high}]"
            return name, f"'{name}' must be a number in {bound}, got {value}."
    if not 0 <= params.top_k <= vocab_size:
        return "top_k", f"'top_k' must be between 0 (off) and the vocabulary size {vocab_size}, got {params.top_k}."
    if params.seed is not None and not SEED_MIN <= params.seed <= SEED_MAX:
        return "seed", f"'seed' must be a 64-bit integer, got {params.seed}."
    if params.top_logprobs is not None and not 0 <= params.top_logprobs <= min(MAX_TOP_LOGPROBS, vocab_size):
        return "top_logprobs", f"'top_logprobs' must be between 0 and {min(MAX_TOP_LOGPROBS, vocab_size)}."
    for token_id, bias in (params.logit_bias or {}).items():
        if not 0 <= token_id < vocab_size:
            return "logit_bias", f"'logit_bias' key {token_id} is not a token id of this model (0 to {vocab_size - 1})."
        if not _finite_in(bias, -MAX_LOGIT_BIAS, MAX_LOGIT_BIAS):
            return "logit_bias", f"'logit_bias' values must be between {-MAX_LOGIT_BIAS:g} and {MAX_LOGIT_BIAS:g}, got {bias}."
    return None


def token_problem(token_ids: list[int], vocab_size: int, field: str) -> tuple[str, str] | None:
    """``(field, message)`` if a token id lies outside the model's vocabulary."""
    for token_id in token_ids:
        if not 0 <= token_id < vocab_size:
            return field, f"'{field}' holds token id {token_id}, outside this model's vocabulary (0 to {vocab_size - 1})."
    return None
