"""OpenAI Chat Completions and Completions bodies (reference/api-conformance.md §1).

Inbound Structs are lenient: unknown fields are ignored, and content parts stay plain dicts
(msgspec's tagged unions would reject part types we do not know). Outbound Structs are exact:
``None`` fields are sent as ``null`` because clients expect ``finish_reason: null``, and
``UNSET`` fields are left out.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType


class StreamOptions(msgspec.Struct):
    include_usage: bool = False


class SamplingFields(msgspec.Struct):
    """Fields shared by both endpoints; ``None`` means "use the model's default"."""

    model: str
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    seed: int | None = None
    logit_bias: dict[str, float] | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None  # vLLM's extension: token ids that also end the output
    n: int | None = None


class ChatCompletionBody(SamplingFields):
    messages: list[dict[str, Any]] = []
    max_completion_tokens: int | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    reasoning_effort: str | None = None
    response_format: dict[str, Any] | None = None


class CompletionBody(SamplingFields):
    # str | [str] | [int] | [[int]]; msgspec cannot union several list types, so the adapter checks.
    prompt: str | list[Any] = ""
    logprobs: int | None = None
    echo: bool = False
    suffix: str | None = None


# ---------------------------------------------------------------- outbound


class PromptTokensDetails(msgspec.Struct):
    cached_tokens: int


class CompletionTokensDetails(msgspec.Struct):
    reasoning_tokens: int


class Usage(msgspec.Struct):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails
    completion_tokens_details: CompletionTokensDetails


class TopLogprobEntry(msgspec.Struct):
    token: str
    logprob: float
    bytes: list[int]


class LogprobEntry(msgspec.Struct):
    token: str
    logprob: float
    bytes: list[int]
    top_logprobs: list[TopLogprobEntry]


class ChoiceLogprobs(msgspec.Struct):
    content: list[LogprobEntry]
    refusal: None = None


class ToolCallFunction(msgspec.Struct, omit_defaults=True):
    arguments: str
    name: str | UnsetType = UNSET


class ToolCall(msgspec.Struct, omit_defaults=True):
    index: int | UnsetType = UNSET
    id: str | UnsetType = UNSET
    type: str | UnsetType = UNSET
    function: ToolCallFunction | UnsetType = UNSET


class ChatMessage(msgspec.Struct, omit_defaults=True):
    role: str
    content: str | None
    refusal: None = None
    tool_calls: list[ToolCall] | UnsetType = UNSET
    reasoning_content: str | UnsetType = UNSET
    reasoning: str | UnsetType = UNSET


class ChatChoice(msgspec.Struct):
    index: int
    message: ChatMessage
    logprobs: ChoiceLogprobs | None
    finish_reason: str


class ChatCompletion(msgspec.Struct, omit_defaults=True):
    id: str
    object: str  # "chat.completion"; no default, since omit_defaults would drop it
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage
    system_fingerprint: str | UnsetType = UNSET


class ChunkDelta(msgspec.Struct, omit_defaults=True):
    role: str | UnsetType = UNSET
    content: str | None | UnsetType = UNSET
    reasoning_content: str | UnsetType = UNSET
    reasoning: str | UnsetType = UNSET
    tool_calls: list[ToolCall] | UnsetType = UNSET


class ChunkChoice(msgspec.Struct):
    index: int
    delta: ChunkDelta
    logprobs: ChoiceLogprobs | None = None
    finish_reason: str | None = None


class ChatCompletionChunk(msgspec.Struct, omit_defaults=True):
    id: str
    object: str  # "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    # Present (as null) on every chunk only when the client asked for include_usage.
    usage: Usage | None | UnsetType = UNSET


class CompletionLogprobs(msgspec.Struct):
    tokens: list[str]
    token_logprobs: list[float]
    top_logprobs: list[dict[str, float]]
    text_offset: list[int]


class CompletionChoice(msgspec.Struct):
    index: int
    text: str
    logprobs: CompletionLogprobs | None
    finish_reason: str | None


class Completion(msgspec.Struct, omit_defaults=True):
    id: str
    object: str  # "text_completion" for whole responses and stream chunks alike
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage | None | UnsetType = UNSET
