"""One measured request to an OpenAI- or Anthropic-compatible server, as a raw record.

Every figure the bench reports is computed from these records, so each holds what was
observed and nothing derived: when the request was sent, when its first output arrived,
when it ended, the HTTP status, the usage the server reported, and the tool calls and text
it returned. A failure is a record too (status 0 when no HTTP response came at all).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import httpx

Api = Literal["openai", "anthropic"]
TRANSPORT_ERROR = 0  # the status of a request that got no HTTP response


@dataclass
class ToolCall:
    name: str
    arguments: str  # as the server sent it: a JSON text (Anthropic's input is re-serialised)


@dataclass
class RequestRecord:
    """What one request observed. Times are seconds; ``sent_at`` counts from the phase's start."""

    target: str
    round: int
    phase: str
    index: int
    sent_at: float
    status: int
    e2e_s: float
    ttft_s: float | None = None
    error: str | None = None
    stream: bool = True
    session: int | None = None
    turn: int | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    ideal_cached_tokens: int | None = None
    # Seconds between consecutive output events of a stream (one event carries what the
    # server flushed at once: a token, or several a server sent together).
    gaps_s: list[float] = field(default_factory=list)
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    labels: dict[str, Any] = field(default_factory=dict)  # workload-specific facts (expected tool, context step)

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.error is None

    @property
    def decode_tok_s(self) -> float | None:
        """Tokens per second after the first, for one request."""
        if self.ttft_s is None or not self.completion_tokens or self.completion_tokens < 2 or self.e2e_s <= self.ttft_s:
            return None
        return (self.completion_tokens - 1) / (self.e2e_s - self.ttft_s)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RequestRecord:
        calls = [ToolCall(**c) for c in data.get("tool_calls", [])]
        return cls(**{**data, "tool_calls": calls})


@dataclass
class _Reply:
    """What a response carried, filled in as it streams."""

    ttft_s: float | None = None
    last_output_at: float | None = None
    gaps_s: list[float] = field(default_factory=list)
    content: str = ""
    calls: dict[int, list[str]] = field(default_factory=dict)  # index -> [name, arguments text]
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None

    def tool_calls(self) -> list[ToolCall]:
        return [ToolCall(name, arguments) for name, arguments in (self.calls[i] for i in sorted(self.calls))]


class BenchClient:
    """Sends chat turns to one server and records each as a ``RequestRecord``."""

    def __init__(self, http: httpx.AsyncClient, *, api: Api, model: str, api_key: str = "bench") -> None:
        self._http = http
        self._api = api
        self._model = model
        self._headers = {"authorization": f"Bearer {api_key}"} if api == "openai" else {
            "x-api-key": api_key, "anthropic-version": "2023-06-01"}

    @property
    def api(self) -> Api:
        return self._api

    async def send(self, request: dict[str, Any], *, max_tokens: int, stream: bool, phase_start: float,
                   sampling: dict[str, Any] | None = None, **record_fields: Any) -> RequestRecord:
        """Send one chat turn (``request``: messages/tools, plus ``system`` for Anthropic) and time it."""
        body = {"model": self._model, "max_tokens": max_tokens, "stream": stream, "temperature": 0.0, **(sampling or {}), **request}
        if stream and self._api == "openai":
            body["stream_options"] = {"include_usage": True}
        path = "/v1/chat/completions" if self._api == "openai" else "/v1/messages"
        start = time.perf_counter()
        reply, status, error = _Reply(), TRANSPORT_ERROR, None
        try:
            if stream:
                async with self._http.stream("POST", path, json=body, headers=self._headers) as response:
                    status = response.status_code
                    if status != 200:
                        error = _error_text(await response.aread())
                    else:
                        error = await self._read_stream(response, reply, start)
            else:
                response = await self._http.post(path, json=body, headers=self._headers)
                status = response.status_code
                if status != 200:
                    error = _error_text(response.content)
                else:
                    # A whole response shows no first token: its TTFT stays unknown, not its e2e.
                    self._read_whole(response.json(), reply)
        except (httpx.HTTPError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        return RequestRecord(
            sent_at=start - phase_start, status=status, e2e_s=time.perf_counter() - start, ttft_s=reply.ttft_s, error=error,
            stream=stream, prompt_tokens=reply.prompt_tokens, cached_tokens=reply.cached_tokens,
            completion_tokens=reply.completion_tokens, gaps_s=reply.gaps_s, content=reply.content, tool_calls=reply.tool_calls(), **record_fields)

    async def _read_stream(self, response: httpx.Response, reply: _Reply, start: float) -> str | None:
        """Read SSE events to the end; returns an error if the stream reported one or ended early."""
        done = False
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                continue
            event = json.loads(data)
            if "error" in event and event.get("type") in (None, "error"):
                return f"stream error: {json.dumps(event['error'])[:300]}"
            got_output = self._openai_chunk(event, reply) if self._api == "openai" else self._anthropic_event(event, reply)
            if self._api == "anthropic" and event.get("type") == "message_stop":
                done = True
            if got_output:
                now = time.perf_counter()
                if reply.ttft_s is None:
                    reply.ttft_s = now - start
                else:
                    reply.gaps_s.append(now - reply.last_output_at)
                reply.last_output_at = now
        return None if done else "stream ended without its terminal event"

    @staticmethod
    def _openai_chunk(chunk: dict[str, Any], reply: _Reply) -> bool:
        if chunk.get("usage"):
            _openai_usage(chunk["usage"], reply)
        output = False
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            # Reasoning is output too: a model may open with a think block.
            for key in ("reasoning_content", "reasoning"):
                output |= bool(delta.get(key))
            if delta.get("content"):
                reply.content += delta["content"]
                output = True
            for call in delta.get("tool_calls") or []:
                slot = reply.calls.setdefault(call.get("index", 0), ["", ""])
                function = call.get("function") or {}
                slot[0] += function.get("name") or ""
                slot[1] += function.get("arguments") or ""
                output = True
        return output

    @staticmethod
    def _anthropic_event(event: dict[str, Any], reply: _Reply) -> bool:
        kind = event.get("type")
        if kind == "message_start":
            _anthropic_usage(event["message"].get("usage") or {}, reply)
        elif kind == "message_delta":
            _anthropic_usage(event.get("usage") or {}, reply)
        elif kind == "content_block_start":
            block = event["content_block"]
            if block.get("type") == "tool_use":
                reply.calls[event["index"]] = [block["name"], ""]
                return True
        elif kind == "content_block_delta":
            delta = event["delta"]
            if delta.get("type") == "text_delta":
                reply.content += delta["text"]
            elif delta.get("type") == "input_json_delta":
                reply.calls.setdefault(event["index"], ["", ""])[1] += delta["partial_json"]
            return bool(delta.get("text") or delta.get("thinking") or delta.get("partial_json"))
        return False

    def _read_whole(self, data: dict[str, Any], reply: _Reply) -> None:
        if self._api == "openai":
            message = data["choices"][0]["message"]
            reply.content = message.get("content") or ""
            for i, call in enumerate(message.get("tool_calls") or []):
                reply.calls[i] = [call["function"]["name"], call["function"]["arguments"]]
            _openai_usage(data.get("usage") or {}, reply)
            return
        for i, block in enumerate(data["content"]):
            if block["type"] == "text":
                reply.content += block["text"]
            elif block["type"] == "tool_use":
                reply.calls[i] = [block["name"], json.dumps(block["input"])]
        _anthropic_usage(data.get("usage") or {}, reply)


def _openai_usage(usage: dict[str, Any], reply: _Reply) -> None:
    reply.prompt_tokens = usage.get("prompt_tokens")
    reply.completion_tokens = usage.get("completion_tokens")
    details = usage.get("prompt_tokens_details") or {}
    reply.cached_tokens = details.get("cached_tokens", 0) if reply.prompt_tokens is not None else None


def _anthropic_usage(usage: dict[str, Any], reply: _Reply) -> None:
    # Anthropic counts cache reads and writes apart from input_tokens; the prompt is their sum.
    if "input_tokens" in usage:
        read = usage.get("cache_read_input_tokens") or 0
        reply.prompt_tokens = usage["input_tokens"] + read + (usage.get("cache_creation_input_tokens") or 0)
        reply.cached_tokens = read
    if "output_tokens" in usage:
        reply.completion_tokens = usage["output_tokens"]


def _error_text(body: bytes) -> str:
    text = body.decode(errors="replace")
    try:
        error = json.loads(text).get("error")
        if isinstance(error, dict):
            return str(error.get("message") or error)[:300]
    except (json.JSONDecodeError, AttributeError):
        pass  # not JSON: the raw text below says what it was
    return text[:300] or "(empty body)"
