"""``max_output_tokens``: a model's ceiling on every API's max_tokens, through the real SDKs."""

from __future__ import annotations

import pytest

CEILING = 6
EOS_BLOCK = {"2": -100}  # the tiny models' <|im_end|>: suppressed, every reply runs to its cap
HELLO = [{"role": "user", "content": "hello there"}]


@pytest.fixture(scope="module")
def server(servers, tiny_models):
    sampling = {"temperature": 0.0}
    return servers.start({
        "capped": {"path": str(tiny_models.path("qwen3")), "max_output_tokens": CEILING, "sampling": sampling},
        # A default above the ceiling is clamped too.
        "capped-default": {"path": str(tiny_models.path("qwen3")), "max_output_tokens": CEILING,
                           "sampling": {**sampling, "max_tokens": 100}},
        "free": {"path": str(tiny_models.path("qwen3")), "sampling": sampling},
    })


@pytest.mark.parametrize("model", ["capped", "capped-default"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_chat_completions(oai, model, stream):
    asked = {} if model == "capped-default" else {"max_tokens": 50}
    reply = oai.chat.completions.create(model=model, messages=HELLO, logit_bias=EOS_BLOCK, stream=stream,
                                        stream_options={"include_usage": True} if stream else None, **asked)
    if stream:
        chunks = list(reply)
        usage, finish = chunks[-1].usage, next(c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason)
    else:
        usage, finish = reply.usage, reply.choices[0].finish_reason
    assert (usage.completion_tokens, finish) == (CEILING, "length")


def test_a_request_below_the_ceiling_keeps_its_own_cap(oai):
    reply = oai.chat.completions.create(model="capped", messages=HELLO, logit_bias=EOS_BLOCK, max_tokens=3)
    assert reply.usage.completion_tokens == 3


def test_completions(oai):
    reply = oai.completions.create(model="capped", prompt="hello", max_tokens=50, logit_bias=EOS_BLOCK)
    assert (reply.usage.completion_tokens, reply.choices[0].finish_reason) == (CEILING, "length")


def test_messages(claude):
    # No logit_bias in Messages: the free model's greedy reply shows this prompt runs past the ceiling.
    free = claude.messages.create(model="free", max_tokens=50, messages=HELLO)
    assert free.usage.output_tokens > CEILING, free
    capped = claude.messages.create(model="capped", max_tokens=50, messages=HELLO)
    assert (capped.usage.output_tokens, capped.stop_reason) == (CEILING, "max_tokens")
    assert capped.content[0].text == free.content[0].text[:len(capped.content[0].text)]


def test_responses(oai):
    free = oai.responses.create(model="free", input="hello there", max_output_tokens=50)
    assert free.usage.output_tokens > CEILING, free
    capped = oai.responses.create(model="capped", input="hello there", max_output_tokens=50)
    assert capped.usage.output_tokens == CEILING
    assert capped.status == "incomplete" and capped.incomplete_details.reason == "max_output_tokens"
