"""POST /v1/completions: the legacy text endpoint (reference/api-conformance.md §1.5).

A list of prompts is served as concurrent generations, one choice per prompt (as vLLM does).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from litestar import Controller, Request, post
from msgspec import UNSET

from engines.protocol import token_problem
from router.api.dispatch import new_id, now, open_model
from router.api.fleet import route_to_fleet
from router.upstream.proxy import API_COMPLETIONS
from router.api.services import pool_of, upstreams_of
from router.api.openai.chat import openai_error_frame, usage_of
from router.turn.template import tokenize_text
from router.errors import InvalidRequestError
from router.pool import ModelHandle
from router.api.decode import decode_body
from router.api.openai.schemas import Completion, CompletionBody, CompletionChoice, CompletionLogprobs, CompletionTokensDetails, PromptTokensDetails, Usage
from router.sse import COMMENT_KEEPALIVE, DONE_FRAME, data_frame, sse_response
from router.turn.textgen import Generation, GenerationRequest, TextDelta, TokenInfo
from router.turn.sampling import build_sampling, normalize_stop, resolve_max_tokens, sampling_input, stop_token_ids

MAX_COMPLETION_LOGPROBS = 5


class CompletionsController(Controller):
    path = "/v1/completions"

    @post(status_code=200)
    async def create(self, request: Request) -> object:
        pool, raw = pool_of(request), await request.body()
        if (reply := await route_to_fleet(request, raw, pool, upstreams_of(request), API_COMPLETIONS)) is not None:
            return reply
        body = decode_body(raw, CompletionBody)
        _reject_unsupported(body)
        prompts = _prompt_list(body.prompt)
        # Each prompt is a generation of its own, and takes its own place in the model's limit.
        handle = await open_model(pool, body.model, generations=len(prompts), wait=not body.stream)
        token_lists = await _token_lists(handle, prompts)
        generations = [_generation(handle, body, tokens) for tokens in token_lists]
        echoes = [handle.tokenizer.decode(tokens) if body.echo else "" for tokens in token_lists]
        if body.stream:
            include_usage = bool(body.stream_options and body.stream_options.include_usage)
            return sse_response(_stream(generations, echoes, body, include_usage), openai_error_frame)
        results = await asyncio.gather(*(_collect(g) for g in generations))
        choices = [
            CompletionChoice(i, echoes[i] + text, _logprobs(infos) if body.logprobs is not None else None, g.finish_reason)
            for i, (g, (text, infos)) in enumerate(zip(generations, results))
        ]
        return Completion(new_id("cmpl-"), "text_completion", now(), body.model, choices, _total_usage(generations))


def _reject_unsupported(body: CompletionBody) -> None:
    if body.n not in (None, 1):
        raise InvalidRequestError("Only n=1 is supported.", param="n")
    if body.suffix:
        raise InvalidRequestError("'suffix' is not supported.", param="suffix")
    if body.logprobs is not None and not 0 <= body.logprobs <= MAX_COMPLETION_LOGPROBS:
        raise InvalidRequestError(f"'logprobs' must be between 0 and {MAX_COMPLETION_LOGPROBS}.", param="logprobs")


def _prompt_list(prompt) -> list[str | list[int]]:
    """str | [str] | [int] | [[int]] → one prompt (text or token ids) per generation."""
    if isinstance(prompt, str):
        prompts = [prompt]
    elif prompt and all(_is_token(p) for p in prompt):
        prompts = [list(prompt)]
    else:
        prompts = list(prompt)
    if not prompts:
        raise InvalidRequestError("'prompt' must not be empty.", param="prompt")
    if not all(isinstance(p, str) or (isinstance(p, list) and all(_is_token(t) for t in p)) for p in prompts):
        raise InvalidRequestError("'prompt' must be a string, a list of strings, a list of token ids or a list of such lists.", param="prompt")
    return prompts


async def _token_lists(handle: ModelHandle, prompts: list[str | list[int]]) -> list[list[int]]:
    token_lists = [await tokenize_text(handle, p) if isinstance(p, str) else list(p) for p in prompts]
    for i, tokens in enumerate(token_lists):
        if not tokens:
            raise InvalidRequestError("A prompt must contain at least one token.", param="prompt")
        if (problem := token_problem(tokens, handle.vocab_size, "prompt")) is not None:
            raise InvalidRequestError(f"Prompt {i}: {problem[1]}", param="prompt")
    return token_lists


def _is_token(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _generation(handle: ModelHandle, body: CompletionBody, tokens: list[int]) -> Generation:
    max_tokens = resolve_max_tokens(handle, body.max_tokens, len(tokens), context_param="prompt")
    sampling = build_sampling(handle, sampling_input(body, body.logprobs))
    return Generation(handle, GenerationRequest(tokens, max_tokens, sampling, normalize_stop(body.stop), stop_token_ids(handle, body.stop_token_ids)))


async def _collect(generation: Generation) -> tuple[str, list[TokenInfo]]:
    text, infos = [], []
    async for delta in generation.stream():
        text.append(delta.text)
        infos.extend(delta.logprobs)
    return "".join(text), infos


async def _stream(generations: list[Generation], echoes: list[str], body: CompletionBody, include_usage: bool) -> AsyncIterator[bytes]:
    chunk_id, created = new_id("cmpl-"), now()
    usage_field = None if include_usage else UNSET

    def chunk(index: int, text: str, finish: str | None, infos: list[TokenInfo]) -> bytes:
        choice = CompletionChoice(index, text, _logprobs(infos) if body.logprobs is not None else None, finish)
        return data_frame(Completion(chunk_id, "text_completion", created, body.model, [choice], usage_field))

    for index, echo in enumerate(echoes):
        if echo:
            yield chunk(index, echo, None, [])
    async for index, delta in _merged(generations):
        if delta.text or delta.finish_reason or delta.logprobs:
            yield chunk(index, delta.text, delta.finish_reason, delta.logprobs)
        else:
            yield COMMENT_KEEPALIVE  # a heartbeat: the engine is still prefilling
    if include_usage:
        yield data_frame(Completion(chunk_id, "text_completion", created, body.model, [], _total_usage(generations)))
    yield DONE_FRAME


async def _merged(generations: list[Generation]) -> AsyncIterator[tuple[int, TextDelta]]:
    """Interleave several generations' deltas as they arrive, tagged with their choice index."""
    if len(generations) == 1:
        async for delta in generations[0].stream():
            yield 0, delta
        return
    queue: asyncio.Queue = asyncio.Queue()

    async def pump(index: int, generation: Generation) -> None:
        async for delta in generation.stream():
            await queue.put((index, delta))

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(pump(i, g)) for i, g in enumerate(generations)]
        done = asyncio.gather(*tasks)
        while not (done.done() and queue.empty()):
            getter = asyncio.ensure_future(queue.get())
            await asyncio.wait({getter, done}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield getter.result()
            else:
                getter.cancel()


def _logprobs(infos: list[TokenInfo]) -> CompletionLogprobs:
    offsets, position = [], 0
    for info in infos:
        offsets.append(position)
        position += len(info.token)
    return CompletionLogprobs(
        tokens=[i.token for i in infos],
        token_logprobs=[i.logprob for i in infos],
        top_logprobs=[{t.token: t.logprob for t in i.top} for i in infos],
        text_offset=offsets,
    )


def _total_usage(generations: list[Generation]) -> Usage:
    if len(generations) == 1:
        return usage_of(generations[0])
    prompt = sum(g.prompt_tokens for g in generations)
    completion = sum(g.completion_tokens for g in generations)
    return Usage(prompt, completion, prompt + completion, PromptTokensDetails(sum(g.cached_tokens for g in generations)), CompletionTokensDetails(0))
