"""POST /v1/chat/completions (reference/api-conformance.md §1.1–1.4)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from litestar import Controller, Request, post
from msgspec import UNSET
from litestar.response import Response

from engines.errors import EngineError
from router.api.dispatch import new_id, now, open_model
from router.chat import normalize_messages, render_chat
from router.errors import InvalidRequestError, RouterError, as_router_error, error_body
from router.pool import ModelHandle, ModelPool
from router.schemas.decode import decode_body
from router.schemas.openai import (
    ChatChoice,
    ChatCompletion,
    ChatCompletionBody,
    ChatCompletionChunk,
    ChatMessage,
    ChoiceLogprobs,
    ChunkChoice,
    ChunkDelta,
    CompletionTokensDetails,
    LogprobEntry,
    PromptTokensDetails,
    TopLogprobEntry,
    Usage,
)
from router.sse import DONE_FRAME, data_frame, sse_response
from router.textgen import Generation, GenerationRequest, TokenInfo
from router.translate import SamplingInput, build_sampling, normalize_stop, resolve_max_tokens


class ChatCompletionsController(Controller):
    path = "/v1/chat/completions"

    @post(status_code=200)
    async def create(self, request: Request, pool: ModelPool) -> Response | object:
        body = decode_body(await request.body(), ChatCompletionBody)
        if body.n not in (None, 1):
            raise InvalidRequestError("Only n=1 is supported.", param="n")
        handle = await open_model(pool, body.model)
        generation = await _prepare_generation(handle, body)
        if body.stream:
            include_usage = bool(body.stream_options and body.stream_options.include_usage)
            return sse_response(_stream_chunks(pool, generation, body.model, include_usage, bool(body.logprobs)))
        with pool.admitted(handle):
            text, logprobs = [], []
            async for delta in generation.stream():
                text.append(delta.text)
                logprobs.extend(delta.logprobs)
        message = ChatMessage(role="assistant", content="".join(text))
        choice = ChatChoice(0, message, _choice_logprobs(logprobs) if body.logprobs else None, generation.finish_reason)
        return ChatCompletion(new_id("chatcmpl-"), "chat.completion", now(), body.model, [choice], usage_of(generation))


async def _prepare_generation(handle: ModelHandle, body: ChatCompletionBody) -> Generation:
    messages = normalize_messages(body.messages)
    template_kwargs = {**handle.config.chat_template_kwargs, **(body.chat_template_kwargs or {})}
    prompt = await render_chat(handle, messages, tools=body.tools, template_kwargs=template_kwargs)
    requested = body.max_completion_tokens if body.max_completion_tokens is not None else body.max_tokens
    param = "max_completion_tokens" if body.max_completion_tokens is not None else "max_tokens"
    max_tokens = resolve_max_tokens(handle, requested, len(prompt.tokens), param=param)
    top_logprobs = (body.top_logprobs or 0) if body.logprobs else None
    sampling = build_sampling(handle, _sampling_input(body, top_logprobs))
    return Generation(handle, GenerationRequest(prompt.tokens, max_tokens, sampling, normalize_stop(body.stop)))


def _sampling_input(body, top_logprobs: int | None) -> SamplingInput:
    return SamplingInput(
        temperature=body.temperature, top_p=body.top_p, top_k=body.top_k, min_p=body.min_p,
        repetition_penalty=body.repetition_penalty, presence_penalty=body.presence_penalty,
        frequency_penalty=body.frequency_penalty, seed=body.seed, logit_bias=body.logit_bias,
        top_logprobs=top_logprobs,
    )


async def _stream_chunks(pool: ModelPool, generation: Generation, model: str, include_usage: bool, logprobs: bool) -> AsyncIterator[bytes]:
    """The §1.3 sequence: role chunk, content chunks, finish chunk, optional usage chunk, [DONE]."""
    chunk_id, created = new_id("chatcmpl-"), now()
    usage_field = None if include_usage else UNSET

    def chunk(delta: ChunkDelta, finish: str | None = None, lp: list[TokenInfo] | None = None) -> bytes:
        choice = ChunkChoice(0, delta, _choice_logprobs(lp) if lp else None, finish)
        return data_frame(ChatCompletionChunk(chunk_id, "chat.completion.chunk", created, model, [choice], usage_field))

    with pool.admitted(generation.handle):
        yield chunk(ChunkDelta(role="assistant", content=""))
        try:
            async for delta in generation.stream():
                if delta.text or (logprobs and delta.logprobs):
                    yield chunk(ChunkDelta(content=delta.text), lp=delta.logprobs if logprobs else None)
                if delta.finish_reason is not None:
                    yield chunk(ChunkDelta(), delta.finish_reason)
        except (RouterError, EngineError) as exc:
            # Mid-stream failure: one terminal error frame in OpenAI's dialect, then close.
            yield data_frame(error_body(as_router_error(exc)))
            return
    if include_usage:
        yield data_frame(ChatCompletionChunk(chunk_id, "chat.completion.chunk", created, model, [], usage_of(generation)))
    yield DONE_FRAME


def usage_of(generation: Generation, reasoning_tokens: int = 0) -> Usage:
    return Usage(
        prompt_tokens=generation.prompt_tokens,
        completion_tokens=generation.completion_tokens,
        total_tokens=generation.prompt_tokens + generation.completion_tokens,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=generation.cached_tokens),
        completion_tokens_details=CompletionTokensDetails(reasoning_tokens=reasoning_tokens),
    )


def _choice_logprobs(infos: list[TokenInfo]) -> ChoiceLogprobs:
    return ChoiceLogprobs(
        content=[
            LogprobEntry(
                info.token, info.logprob, list(info.token.encode()),
                [TopLogprobEntry(t.token, t.logprob, list(t.token.encode())) for t in info.top],
            )
            for info in infos
        ]
    )

