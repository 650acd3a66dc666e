"""Structure-aware fuzzing of every route on one live server.

Valid request templates for each route (tools, tool calls, tool results, content parts,
system blocks, streamed and not) are mutated: a value at a random path replaced by one of
another type, a field deleted, unknown fields added; plus bodies that are not JSON, JSON
that is not an object, wrong content types, GET/HEAD routes and unknown paths. Whatever
is sent, the server must answer below 500 in the API's own error shape, every stream must
end properly, and both models must still answer afterwards (DESIGN.md, "Limits and bad
input": nothing a client sends can crash a worker or the router).

The run is deterministic (``derandomize=True``). Failures are collected rather than raised
inside hypothesis, so one run reports every distinct failure (and the status histogram)
instead of spending minutes shrinking the first one against a live server.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.slow

MAX_EXAMPLES = 5000
ANTHROPIC_PREFIX = "/v1/messages"

# ---------------------------------------------------------------- valid templates

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
CHAT_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city", "parameters": WEATHER}}
CHAT_HISTORY = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    {"role": "assistant", "content": "Sunny.", "reasoning_content": "easy"},
    {"role": "user", "content": "And Rome?", "name": "bob"},
]
CHAT = [
    {"model": "a", "messages": [{"role": "user", "content": "hi"}]},
    {"model": "a", "messages": CHAT_HISTORY, "tools": [CHAT_TOOL], "tool_choice": "auto", "parallel_tool_calls": True,
     "max_tokens": 4, "temperature": 0.7, "top_p": 0.9, "stop": ["\n\n"], "seed": 1},
    {"model": "b", "messages": CHAT_HISTORY, "tools": [CHAT_TOOL], "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
     "stream": True, "stream_options": {"include_usage": True}},
    {"model": "a", "messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"}],
     "max_completion_tokens": 3, "logprobs": True, "top_logprobs": 2, "stream": True, "response_format": {"type": "text"},
     "reasoning_effort": "low", "logit_bias": {"5": 1.0}},
]
COMPLETIONS = [
    {"model": "a", "prompt": "Once upon a time", "max_tokens": 4},
    {"model": "b", "prompt": ["a", "b"], "max_tokens": 3, "stream": True, "stream_options": {"include_usage": True}},
    {"model": "a", "prompt": [1, 2, 3], "echo": True, "logprobs": 2, "stop": "x", "temperature": 0},
]
RESPONSES_TOOLS = [
    {"type": "function", "name": "get_weather", "description": "Weather", "parameters": WEATHER, "strict": False},
    {"type": "namespace", "name": "mcp", "tools": [{"type": "function", "name": "mcp__read", "parameters": {"type": "object"}}]},
    {"type": "web_search"},
]
RESPONSES_INPUT = [
    {"type": "message", "role": "developer", "content": "Be terse."},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "look it up"}], "content": None},
    {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}]},
    {"role": "user", "content": "And Rome?"},
]
RESPONSES = [
    {"model": "a", "input": "hi", "max_output_tokens": 4},
    {"model": "a", "input": RESPONSES_INPUT, "instructions": "Answer in English.", "tools": RESPONSES_TOOLS, "tool_choice": "auto",
     "reasoning": {"effort": "low", "summary": "auto"}, "store": False, "parallel_tool_calls": True, "text": {"format": {"type": "text"}}},
    {"model": "b", "input": RESPONSES_INPUT, "tools": RESPONSES_TOOLS, "tool_choice": {"type": "function", "name": "get_weather"},
     "stream": True, "temperature": 0.5, "top_p": 0.9, "metadata": {"k": "v"}},
]
ANTHROPIC_TOOL = {"name": "get_weather", "description": "Weather in a city", "input_schema": WEATHER}
ANTHROPIC_HISTORY = [
    {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "look it up", "signature": "sig"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}], "is_error": False},
        {"type": "text", "text": "And Rome?"}]},
]
SYSTEM_BLOCKS = [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
MESSAGES = [
    {"model": "a", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]},
    {"model": "a", "max_tokens": 8, "system": SYSTEM_BLOCKS, "messages": ANTHROPIC_HISTORY, "tools": [ANTHROPIC_TOOL, {"type": "web_search_20250305", "name": "web_search"}],
     "tool_choice": {"type": "auto", "disable_parallel_tool_use": True}, "thinking": {"type": "enabled", "budget_tokens": 1024},
     "stop_sequences": ["\n\n"], "temperature": 0.5, "top_k": 5},
    {"model": "b", "max_tokens": 6, "system": "Be brief.", "messages": [{"role": "system", "content": "inline"}, *ANTHROPIC_HISTORY],
     "tools": [ANTHROPIC_TOOL], "tool_choice": {"type": "tool", "name": "get_weather"}, "stream": True, "metadata": {"user_id": "u"}},
]
COUNT_TOKENS = [
    {"model": "a", "messages": [{"role": "user", "content": "hi"}]},
    {"model": "b", "system": SYSTEM_BLOCKS, "messages": ANTHROPIC_HISTORY, "tools": [ANTHROPIC_TOOL], "thinking": {"type": "disabled"}},
]
TEMPLATES: dict[str, list[dict[str, Any]]] = {
    "/v1/chat/completions": CHAT,
    "/v1/completions": COMPLETIONS,
    "/v1/responses": RESPONSES,
    "/v1/messages": MESSAGES,
    "/v1/messages?beta=true": MESSAGES,
    "/v1/messages/count_tokens": COUNT_TOKENS,
}
BODILESS = [
    ("GET", "/"), ("HEAD", "/"), ("GET", "/health"), ("HEAD", "/ready"), ("GET", "/ready"), ("GET", "/v1/models"),
    ("HEAD", "/v1/models"), ("GET", "/v1/models/a"), ("GET", "/v1/models/ghost"), ("GET", "/v1/models/%00%ff"), ("GET", "/metrics"),
    ("GET", "/v1/nothing-here"), ("POST", "/v1/nothing-here"), ("GET", "/v1/messages/nothing"), ("POST", "/v1/messages/nothing"),
    ("GET", "/v1/chat/completions"), ("PUT", "/v1/responses"), ("DELETE", "/v1/models"), ("GET", "/v1/messages"),
    ("POST", "/v1/chat/completions/extra"), ("PATCH", "/v1/messages/count_tokens"), ("GET", "/" + "x" * 3000),
]

# ---------------------------------------------------------------- mutations


def nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


# Values json.dumps cannot write (it would recurse too deep) or would write differently:
# placeholders spliced into the encoded text.
RAW_LITERALS = {"\u2063deep": "[" * 3000 + "]" * 3000, "\u2063huge-float": "1e999", "\u2063huge-int": "9" * 400}


WEIRD_VALUES: list[Any] = [
    0, 5, -1, -(2**31), 2**63, 2**70, -(2**70), 1.5, -0.0, 1e308, float("nan"), float("inf"),
    "nan", "inf", "-inf", "", "x", "5", "\x00", "\udcff", "é" * 3, [], [1], ["x"], [{}], [None], {}, {"a": 1}, {"type": "text"},
    None, True, False, nested(40), *RAW_LITERALS,
]
NOT_OBJECTS = [b"", b" ", b"{", b"}", b"nul", b"\xff\xfe\x00", b"[1, 2]", b'"text"', b"42", b"null", b"true", b"{}",
               b'{"model": "a"', b"{'model': 'a'}", b'{"model": "a", "messages": [}', b"[" * 100000, b'{"a":' * 50000]
CONTENT_TYPES = ["application/json", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data", "", "application/json; charset=latin-1"]


def all_paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value below ``value`` (dict keys and list indices), outermost first."""
    out = []
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        out.append(prefix + (key,))
        out += all_paths(child, prefix + (key,))
    return out


def container_paths(value: Any) -> list[tuple]:
    """Paths to every object (where an unknown field can be added), the root included."""
    return [()] + [p for p in all_paths(value) if isinstance(_at(value, p), dict)]


def _at(value: Any, path: tuple) -> Any:
    for key in path:
        value = value[key]
    return value


def _replace(body: dict, path: tuple, new: Any) -> dict:
    out = copy.deepcopy(body)
    _at(out, path[:-1])[path[-1]] = new
    return out


def _delete(body: dict, path: tuple) -> dict:
    out = copy.deepcopy(body)
    del _at(out, path[:-1])[path[-1]]
    return out


def _add(body: dict, path: tuple, key: str, value: Any) -> dict:
    out = copy.deepcopy(body)
    _at(out, path)[key] = value
    return out


@st.composite
def mutated(draw: st.DrawFn, body: dict) -> tuple[dict, list[str]]:
    """One to three structural mutations of ``body``, with a note on each."""
    notes = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add"]))
        paths = all_paths(body)
        if kind == "add" or not paths:
            where = draw(st.sampled_from(container_paths(body)))
            key = draw(st.sampled_from(["type", "x_unknown", "role", "content", "text", "name", "arguments", "id", "tools", "stream"]))
            value = draw(st.sampled_from(WEIRD_VALUES))
            body = _add(body, where, key, value)
            notes.append(f"add {where}+{key!r}={_short(value)}")
        elif kind == "delete":
            where = draw(_some_path(paths))
            body = _delete(body, where)
            notes.append(f"delete {where}")
        else:
            where = draw(_some_path(paths))
            value = draw(st.sampled_from(WEIRD_VALUES))
            body = _replace(body, where, value)
            notes.append(f"replace {where}={_short(value)}")
    return body, notes


def _some_path(paths: list[tuple]) -> st.SearchStrategy[tuple]:
    """Any path, or (as often) a top-level field: most paths sit inside messages, and the
    sampling and tool fields at the top deserve their share of mutations."""
    return st.one_of(st.sampled_from([p for p in paths if len(p) == 1]), st.sampled_from(paths))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass
class Probe:
    method: str
    path: str
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    note: str = ""

    def __repr__(self) -> str:
        body = (self.content or b"")[:600].decode(errors="replace")
        return f"{self.method} {self.path} [{self.note}] {body}"


def _dumps(body: Any) -> bytes:
    # allow_nan: NaN/Infinity literals are not JSON; sending them is part of the fuzz.
    text = json.dumps(body, allow_nan=True)
    for placeholder, literal in RAW_LITERALS.items():
        text = text.replace(json.dumps(placeholder), literal)
    return text.encode()


@st.composite
def probes(draw: st.DrawFn) -> Probe:
    route = draw(st.sampled_from(sorted(TEMPLATES)))
    template = draw(st.sampled_from(TEMPLATES[route]))
    if route != "/v1/messages/count_tokens" and draw(st.booleans()):
        template = {**template, "stream": True}  # half of all bodies stream: stream endings are where clients break
    kind = draw(st.sampled_from(["mutate"] * 12 + ["valid", "raw", "content_type", "bodiless"]))
    if kind == "bodiless":
        method, path = draw(st.sampled_from(BODILESS))
        return Probe(method, path, note="bodiless")
    if kind == "raw":
        return Probe("POST", route, draw(st.sampled_from(NOT_OBJECTS)), {"content-type": "application/json"}, "not a JSON object")
    if kind == "content_type":
        content_type = draw(st.sampled_from(CONTENT_TYPES))
        return Probe("POST", route, _dumps(template), {"content-type": content_type} if content_type else {}, f"content-type {content_type!r}")
    if kind == "valid":
        return Probe("POST", route, _dumps(template), {"content-type": "application/json"}, "valid")
    body, notes = draw(mutated(template))
    return Probe("POST", route, _dumps(body), {"content-type": "application/json"}, "; ".join(notes))


# ---------------------------------------------------------------- checks

OPENAI_STREAM_SERVER_TYPES = {"server_error"}
ANTHROPIC_SERVER_TYPES = {"api_error", "overloaded_error"}
RESPONSES_TERMINAL = {"response.completed", "response.incomplete", "response.failed"}


def error_shape_problem(path: str, body: Any) -> str | None:
    """Why ``body`` is not an error in the route's own shape, or None if it is."""
    if path.startswith(ANTHROPIC_PREFIX):
        ok = (isinstance(body, dict) and body.get("type") == "error" and isinstance(body.get("error"), dict)
              and isinstance(body["error"].get("type"), str) and isinstance(body["error"].get("message"), str) and body["error"]["message"])
        return None if ok else "not Anthropic's error shape"
    error = body.get("error") if isinstance(body, dict) else None
    ok = (isinstance(error, dict) and set(error) == {"message", "type", "param", "code"} and isinstance(error["message"], str)
          and error["message"] and isinstance(error["type"], str) and isinstance(error["param"], (str, type(None)))
          and isinstance(error["code"], (str, type(None))))
    return None if ok else "not OpenAI's error shape"


def sse_events(text: str) -> list[tuple[str | None, str]]:
    """(event name, data) of every SSE event; comments and blank keepalives dropped."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if name is not None or data:
            events.append((name, "\n".join(data)))
    return events


def _json(data: str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def stream_problem(path: str, text: str) -> str | None:
    """Why a 200 stream did not end the way its API ends streams, or None if it did."""
    events = sse_events(text)
    if not events:
        return "empty stream"
    last_name, last_data = events[-1]
    if path.startswith(ANTHROPIC_PREFIX):
        if last_name == "error":
            kind = (_json(last_data) or {}).get("error", {}).get("type")
            return f"stream ended with a server error ({kind})" if kind in ANTHROPIC_SERVER_TYPES else None
        return None if last_name == "message_stop" else f"stream ended with {last_name!r}, not message_stop"
    if path.startswith("/v1/responses"):
        terminals = [name for name, _ in events if name in RESPONSES_TERMINAL]
        if len(terminals) != 1 or last_name not in RESPONSES_TERMINAL:
            return f"stream has terminal events {terminals}, last {last_name!r}"
        failed = ((_json(last_data) or {}).get("response") or {}).get("error") or {}
        return f"stream failed with a server error ({failed.get('code')})" if last_name == "response.failed" and failed.get("code") in ("server_error", "engine_error") else None
    if last_data == "[DONE]":
        return None
    error = (_json(last_data) or {}).get("error")
    if not isinstance(error, dict):
        return f"stream ended with {last_data[:80]!r}, not [DONE] or an error"
    return f"stream ended with a server error ({error.get('code')})" if error.get("type") in OPENAI_STREAM_SERVER_TYPES else None


def response_problem(probe: Probe, status: int, headers: httpx.Headers, text: str) -> str | None:
    if status >= 500 or status in (429,):
        return f"status {status}"
    is_stream = headers.get("content-type", "").startswith("text/event-stream")
    if status == 200 and is_stream:
        return stream_problem(probe.path, text)
    if probe.method == "HEAD":
        return None
    body = _json(text)
    if status >= 400:
        return error_shape_problem(probe.path, body)
    if probe.path != "/metrics" and not isinstance(body, (dict, list)):
        return "a 2xx body that is not JSON"
    return None


class Tally:
    """Requests sent, statuses seen, and failures grouped by what went wrong where."""

    def __init__(self) -> None:
        self.statuses: Counter[int | str] = Counter()
        self.streams = 0
        self.failures: dict[str, list[Probe]] = {}

    def record(self, probe: Probe, status: int | str, problem: str | None, *, streamed: bool = False) -> None:
        self.statuses[status] += 1
        self.streams += streamed
        if problem is not None:
            self.failures.setdefault(f"{probe.method} {probe.path.split('?')[0]}: {problem}", []).append(probe)

    def summary(self) -> str:
        statuses = dict(sorted(self.statuses.items(), key=str))
        return f"fuzz: {sum(self.statuses.values())} requests {statuses}, {self.streams} streams read to the end"

    def report(self) -> str:
        lines = [self.summary(), f"{len(self.failures)} distinct failures:"]
        for signature, examples in sorted(self.failures.items()):
            lines.append(f"- {signature} ({len(examples)}x), e.g.")
            unique = {repr(probe): probe for probe in examples}.values()  # hypothesis may draw one probe twice
            lines += [f"    {probe!r}" for probe in sorted(unique, key=lambda p: len(p.content or b""))[:3]]
        return "\n".join(lines)


def send(http: httpx.Client, probe: Probe, tally: Tally) -> int | str:
    """Send one probe, judge the answer and record it; returns the status."""
    try:
        with http.stream(probe.method, probe.path, content=probe.content, headers=probe.headers) as response:
            text = response.read().decode(errors="replace")
    except httpx.HTTPError as exc:
        tally.record(probe, type(exc).__name__, f"transport error {type(exc).__name__}: {exc}")
        return type(exc).__name__
    streamed = response.headers.get("content-type", "").startswith("text/event-stream")
    tally.record(probe, response.status_code, response_problem(probe, response.status_code, response.headers, text), streamed=streamed)
    return response.status_code


def tracebacks(log: str) -> list[str]:
    """Tracebacks in the server log: an exception nobody answered for, even if no 5xx went out."""
    return [block[:1500] for block in log.split("Traceback (most recent call last)")[1:]]


# ---------------------------------------------------------------- the test


@pytest.fixture(scope="module")
def server(servers, tiny_models):
    return servers.start({
        "a": {"path": str(tiny_models.path("qwen3")), "max_concurrency": 8, "max_queue": 16, "max_context": 256, "sampling": {"max_tokens": 8}},
        "b": {"path": str(tiny_models.path("llama")), "max_context": 256, "sampling": {"max_tokens": 8}},
    })


def test_fuzz_every_route(server):
    tally = Tally()
    with httpx.Client(base_url=server.base_url, timeout=60) as http:

        @settings(max_examples=MAX_EXAMPLES, derandomize=True, deadline=None, database=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(probes())
        def fuzz(probe: Probe) -> None:
            send(http, probe, tally)

        fuzz()
        for model in ("a", "b"):
            body = _dumps({"model": model, "messages": [{"role": "user", "content": "hi"}]})
            status = send(http, Probe("POST", "/v1/chat/completions", body, {"content-type": "application/json"}, "still serving"), tally)
            if status != 200:
                tally.failures[f"model {model} no longer answers ({status})"] = []
    print(tally.summary())
    logged = tracebacks(server.log())
    assert not tally.failures and not logged, tally.report() + "".join(f"\nserver log traceback:{t}" for t in logged[:3])
