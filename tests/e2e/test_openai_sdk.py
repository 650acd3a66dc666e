"""The official openai SDK, in strict validation mode, against a live server with two tiny models."""

from __future__ import annotations

import httpx
import openai
import pytest

EOS_BLOCK = {"2": -100}  # the tiny models' <|im_end|>: suppressing it makes lengths predictable
HELLO = [{"role": "user", "content": "hello there"}]


@pytest.fixture(scope="module")
def server(servers, tiny_models):
    return servers.start({
        "qwen": {"path": str(tiny_models.path("qwen3")), "aliases": ["claude-*", "q"], "sampling": {"temperature": 0.0}},
        "llama": {"path": str(tiny_models.path("llama")), "max_context": 512, "sampling": {"temperature": 0.0}},
    })


@pytest.fixture
def client(server) -> openai.OpenAI:
    return server.openai()


def chat_text(client: openai.OpenAI, model: str, **kwargs) -> str:
    reply = client.chat.completions.create(model=model, messages=HELLO, max_tokens=12, logit_bias=EOS_BLOCK, **kwargs)
    return reply.choices[0].message.content


def test_list_and_retrieve_models(server, client):
    assert [m.id for m in client.models.list().data] == ["qwen", "llama"]
    assert client.models.retrieve("claude-sonnet-9").id == "claude-sonnet-9"
    # Hugging Face style names hold a slash: the path parameter takes it whole.
    assert httpx.get(server.base_url + "/v1/models/claude-org/sonnet").json()["id"] == "claude-org/sonnet"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("missing")


def test_chat_non_stream(client):
    reply = client.chat.completions.create(model="qwen", messages=HELLO, max_tokens=8, logit_bias=EOS_BLOCK)
    choice = reply.choices[0]
    assert reply.object == "chat.completion" and reply.id.startswith("chatcmpl-") and reply.model == "qwen"
    assert choice.message.role == "assistant" and choice.message.content
    assert choice.finish_reason == "length"
    assert reply.usage.completion_tokens == 8
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + 8
    assert reply.usage.prompt_tokens_details.cached_tokens == 0


def test_chat_stream_with_usage_matches_non_stream(client):
    chunks = list(client.chat.completions.create(
        model="qwen", messages=HELLO, max_tokens=12, logit_bias=EOS_BLOCK, stream=True, stream_options={"include_usage": True},
    ))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 12
    assert chunks[-2].choices[0].finish_reason == "length"
    assert all(c.usage is None for c in chunks[:-1])
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks[:-1])
    assert streamed == chat_text(client, "qwen")
    assert len({c.id for c in chunks}) == 1


def test_stream_without_include_usage_has_no_usage_chunk(client):
    chunks = list(client.chat.completions.create(model="qwen", messages=HELLO, max_tokens=4, stream=True))
    assert all(c.choices for c in chunks)
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")


def test_completions_stream_and_not(client, server):
    reply = client.completions.create(model="llama", prompt="the cache", max_tokens=6, logit_bias=EOS_BLOCK)
    assert reply.object == "text_completion" and reply.choices[0].finish_reason == "length"
    # Streamed text-completion chunks carry "finish_reason": null until the last one, as OpenAI's
    # own API does; the SDK reuses the non-stream type (finish_reason a non-null Literal) for them,
    # so strict validation would reject every faithful stream. This one call validates leniently.
    lenient = openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0)
    stream = lenient.completions.create(model="llama", prompt="the cache", max_tokens=6, logit_bias=EOS_BLOCK, stream=True,
                                       stream_options={"include_usage": True})
    chunks = list(stream)
    assert "".join(c.choices[0].text for c in chunks if c.choices) == reply.choices[0].text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].usage.completion_tokens == 6


def test_two_models_answer_by_id_alias_and_glob(client):
    by_id = chat_text(client, "qwen")
    assert chat_text(client, "q") == by_id
    assert chat_text(client, "claude-opus-5") == by_id
    assert chat_text(client, "llama") != by_id  # a different model really answered
    reply = client.chat.completions.create(model="claude-opus-5", messages=HELLO, max_tokens=2)
    assert reply.model == "claude-opus-5"


def test_logprobs(client):
    reply = client.chat.completions.create(model="qwen", messages=HELLO, max_tokens=5, logit_bias=EOS_BLOCK, logprobs=True, top_logprobs=3)
    entries = reply.choices[0].logprobs.content
    assert len(entries) == 5
    for entry in entries:
        assert len(entry.top_logprobs) == 3 and entry.logprob <= 0
        # Greedy decoding: the chosen token is the most likely one.
        assert entry.logprob == pytest.approx(entry.top_logprobs[0].logprob, abs=1e-5)
    text = client.completions.create(model="llama", prompt="hi", max_tokens=3, logit_bias=EOS_BLOCK, logprobs=2)
    assert len(text.choices[0].logprobs.tokens) == 3 and all(len(t) == 2 for t in text.choices[0].logprobs.top_logprobs)


def test_stop_string_cuts_the_output(client):
    full = chat_text(client, "qwen")
    stop = full[3:6]
    assert stop.strip(), full
    reply = client.chat.completions.create(model="qwen", messages=HELLO, max_tokens=12, logit_bias=EOS_BLOCK, stop=[stop])
    assert reply.choices[0].finish_reason == "stop"
    assert reply.choices[0].message.content == full[: full.index(stop)]


def test_seed_makes_sampling_reproducible(client):
    sample = lambda seed: chat_text(client, "qwen", temperature=1.0, seed=seed)  # noqa: E731
    assert sample(7) == sample(7)
    assert len({sample(s) for s in range(4)}) > 1


def test_max_tokens_is_clamped_to_the_context(client):
    reply = client.completions.create(model="llama", prompt="hi", max_tokens=100_000, logit_bias=EOS_BLOCK)
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage.prompt_tokens + reply.usage.completion_tokens == 512


def test_stop_token_ids(client, tiny_models):
    from mlx_lm.utils import load_tokenizer

    probe = client.completions.create(model="llama", prompt="the cache", max_tokens=4, logit_bias=EOS_BLOCK, logprobs=0)
    first = probe.choices[0].logprobs.tokens[0]
    ids = load_tokenizer(tiny_models.path("llama")).encode(first, add_special_tokens=False)
    if len(ids) != 1:
        pytest.skip(f"the first token's text {first!r} does not re-encode to one token")
    cut = client.completions.create(model="llama", prompt="the cache", max_tokens=4, logit_bias=EOS_BLOCK,
                                    extra_body={"stop_token_ids": ids})
    assert cut.choices[0].finish_reason == "stop" and cut.choices[0].text == ""
    assert cut.usage.completion_tokens == 0
