"""The IPC contract round-trips every message through its frame encoding."""

from __future__ import annotations

import pytest

from engines.protocol import (
    FRAME_HEADER,
    PROTOCOL_VERSION,
    AbortRequest,
    AddRequest,
    ErrorKind,
    FinishReason,
    RouterWelcome,
    SamplingParams,
    Shutdown,
    StepOutputs,
    TokenDelta,
    TokenLogprob,
    TopLogprob,
    WorkerFatal,
    WorkerHello,
    WorkerReady,
    decode_input,
    decode_output,
    encode_frame,
)


def payload(frame: bytes) -> bytes:
    (size,) = FRAME_HEADER.unpack(frame[: FRAME_HEADER.size])
    assert size == len(frame) - FRAME_HEADER.size
    return frame[FRAME_HEADER.size :]


@pytest.mark.parametrize(
    "message",
    [
        AddRequest("r1", [1, 2, 3], 16, SamplingParams(temperature=0.5, seed=3, logit_bias={7: -100.0}, top_logprobs=2), [2]),
        AbortRequest(["r1", "r2"]),
        Shutdown(),
        RouterWelcome("secret"),
    ],
)
def test_inputs_round_trip(message):
    assert decode_input(payload(encode_frame(message))) == message


@pytest.mark.parametrize(
    "message",
    [
        WorkerHello(PROTOCOL_VERSION, "secret", 1234),
        WorkerReady(PROTOCOL_VERSION, "coder", 4096, 1234, 151936),
        WorkerFatal("boom"),
        StepOutputs([
            TokenDelta("a", [5], None, [TokenLogprob(5, -0.1, [TopLogprob(5, -0.1), TopLogprob(9, -2.5)])], cached_tokens=0),
            TokenDelta("b", [], FinishReason.STOP),
            TokenDelta("c", [], FinishReason.ERROR, error="bad", error_kind=ErrorKind.INVALID_REQUEST),
        ]),
    ],
)
def test_outputs_round_trip(message):
    assert decode_output(payload(encode_frame(message))) == message


def test_finish_reason_prints_as_the_api_string():
    assert [str(r) for r in FinishReason] == ["stop", "length", "abort", "error"]
