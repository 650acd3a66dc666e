"""What a valid engine request is (``engines.protocol.sampling_problem``/``token_problem``):
the one set of rules the router answers 400 with and the worker rejects by."""

from __future__ import annotations

import pytest

from engines.protocol import SamplingParams, sampling_problem, token_problem

VOCAB = 512
NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    ("params", "field"),
    [
        (SamplingParams(temperature=NAN), "temperature"),
        (SamplingParams(temperature=INF), "temperature"),
        (SamplingParams(temperature=-0.1), "temperature"),
        (SamplingParams(top_p=NAN), "top_p"),
        (SamplingParams(top_p=0.0), "top_p"),
        (SamplingParams(min_p=NAN), "min_p"),
        (SamplingParams(min_p=1.5), "min_p"),
        (SamplingParams(repetition_penalty=NAN), "repetition_penalty"),
        (SamplingParams(repetition_penalty=0.0), "repetition_penalty"),
        (SamplingParams(presence_penalty=NAN), "presence_penalty"),
        (SamplingParams(frequency_penalty=-INF), "frequency_penalty"),
        (SamplingParams(top_k=-1), "top_k"),
        (SamplingParams(top_k=VOCAB + 1), "top_k"),
        (SamplingParams(top_k=2**70), "top_k"),
        (SamplingParams(seed=2**64), "seed"),
        (SamplingParams(seed=-(2**63) - 1), "seed"),
        (SamplingParams(top_logprobs=21), "top_logprobs"),
        (SamplingParams(top_logprobs=-1), "top_logprobs"),
        (SamplingParams(logit_bias={VOCAB: 1.0}), "logit_bias"),
        (SamplingParams(logit_bias={-1: 1.0}), "logit_bias"),
        (SamplingParams(logit_bias={3: NAN}), "logit_bias"),
        (SamplingParams(logit_bias={3: 101.0}), "logit_bias"),
    ],
)
def test_out_of_contract_fields_are_named(params, field):
    problem = sampling_problem(params, VOCAB)
    assert problem is not None and problem[0] == field and field in problem[1]


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(),
        SamplingParams(temperature=0.0, top_k=VOCAB),  # the whole vocabulary: no filter
        SamplingParams(temperature=2.0, top_p=1.0, min_p=1.0, top_k=0),
        SamplingParams(seed=-1),
        SamplingParams(seed=2**64 - 1),
        SamplingParams(top_logprobs=20, logit_bias={0: -100.0, VOCAB - 1: 100.0}),
    ],
)
def test_edges_of_the_contract_are_valid(params):
    assert sampling_problem(params, VOCAB) is None


def test_top_logprobs_cannot_exceed_a_small_vocabulary():
    assert sampling_problem(SamplingParams(top_logprobs=10), 8)[0] == "top_logprobs"


def test_token_ids_must_be_the_models():
    assert token_problem([0, 5, VOCAB - 1], VOCAB, "prompt") is None
    assert token_problem([0, VOCAB], VOCAB, "prompt")[0] == "prompt"
    assert token_problem([-1], VOCAB, "stop_token_ids")[0] == "stop_token_ids"
    assert token_problem([2**70], VOCAB, "stop_token_ids") is not None
