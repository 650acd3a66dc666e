"""/metrics after real traffic: the counters equal what the APIs reported, per model and per key."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from engines.demo import build
from router.cli import DEMO_MODEL_OPTIONS
from tests.support.server import wait_for

ALICE, BOB, OPS = "sk-alice-metrics", "sk-bob-metrics", "sk-ops-metrics"
PARAMETERS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
CHAT_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.",
                                              "parameters": PARAMETERS}}
ANTHROPIC_TOOL = {"name": "get_weather", "description": "Get the current weather in a city.", "input_schema": PARAMETERS}
ASK = [{"role": "user", "content": "What is the weather in Lisbon?"}]
HELLO = [{"role": "user", "content": "Hello!"}]


@pytest.fixture(scope="module")
def server(servers):
    return servers.start({"demo": {"path": str(build.ARTIFACT_DIR), **DEMO_MODEL_OPTIONS}},
                         keys=[{"name": "alice", "key_env": "ALICE_KEY"}, {"name": "bob", "key_env": "BOB_KEY"},
                               {"name": "ops", "key_env": "OPS_KEY", "admin": True}],
                         env={"ALICE_KEY": ALICE, "BOB_KEY": BOB, "OPS_KEY": OPS}, ready_key=OPS)


class Ledger:
    """What the APIs said: usage and finish reasons, per key."""

    def __init__(self) -> None:
        self.tokens: dict[str, Counter] = defaultdict(Counter)  # key → prompt, cached, generation
        self.finishes: Counter = Counter()  # the engine's reasons: stop, length
        self.requests: Counter = Counter()  # key → requests sent
        self.generations = 0

    def add(self, key: str, prompt: int, cached: int, generated: int, finish: str) -> None:
        self.tokens[key].update(prompt=prompt, cached=cached, generation=generated)
        self.finishes[finish] += 1
        self.generations += 1


def post(server, path: str, secret: str, body: dict) -> httpx.Response:
    reply = httpx.post(server.base_url + path, json=body, headers={"authorization": f"Bearer {secret}"}, timeout=120)
    assert reply.status_code == 200, reply.text
    return reply


def stream_events(server, path: str, secret: str, body: dict) -> list[tuple[str | None, dict]]:
    events, name = [], None
    with httpx.stream("POST", server.base_url + path, json=body, headers={"x-api-key": secret}, timeout=120) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: ") and line != "data: [DONE]":
                events.append((name, json.loads(line[6:])))
    return events


# chat's finish reasons → the engine's (tool calls end with the model's stop token)
CHAT_FINISH = {"stop": "stop", "tool_calls": "stop", "length": "length"}
ANTHROPIC_FINISH = {"end_turn": "stop", "tool_use": "stop", "max_tokens": "length", "stop_sequence": "stop"}


def drive_traffic(server) -> Ledger:
    ledger = Ledger()

    def chat(secret: str, key: str, messages, **fields) -> None:
        usage = post(server, "/v1/chat/completions", secret, {"model": "demo", "messages": messages, **fields}).json()
        choice = usage["choices"][0]
        u = usage["usage"]
        ledger.add(key, u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"], u["completion_tokens"],
                   CHAT_FINISH[choice["finish_reason"]])
        ledger.requests[key] += 1

    chat(ALICE, "alice", ASK, tools=[CHAT_TOOL])  # a tool call
    chat(ALICE, "alice", ASK, tools=[CHAT_TOOL])  # the same prompt again: a cache hit
    chat(BOB, "bob", HELLO, max_tokens=3)  # cut by max_tokens

    # chat, streamed, usage in the last chunk
    events = stream_events(server, "/v1/chat/completions", BOB,
                           {"model": "demo", "messages": ASK, "tools": [CHAT_TOOL], "stream": True, "stream_options": {"include_usage": True}})
    finish = next(e["choices"][0]["finish_reason"] for _, e in events if e.get("choices") and e["choices"][0].get("finish_reason"))
    u = events[-1][1]["usage"]
    ledger.add("bob", u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"], u["completion_tokens"], CHAT_FINISH[finish])
    ledger.requests["bob"] += 1

    # completions with two prompts: two generations, one request
    reply = post(server, "/v1/completions", ALICE, {"model": "demo", "prompt": ["Hello", "The weather"], "max_tokens": 4}).json()
    u = reply["usage"]
    for choice in reply["choices"]:
        ledger.finishes[choice["finish_reason"]] += 1
        ledger.generations += 1
    ledger.tokens["alice"].update(prompt=u["prompt_tokens"], cached=u.get("prompt_tokens_details", {}).get("cached_tokens", 0),
                                  generation=u["completion_tokens"])
    ledger.requests["alice"] += 1

    # Responses, whole and streamed
    reply = post(server, "/v1/responses", BOB, {"model": "demo", "input": "Hello!", "max_output_tokens": 16}).json()
    u = reply["usage"]
    ledger.add("bob", u["input_tokens"], u["input_tokens_details"]["cached_tokens"], u["output_tokens"],
               "length" if reply["status"] == "incomplete" else "stop")
    ledger.requests["bob"] += 1
    events = stream_events(server, "/v1/responses", ALICE, {"model": "demo", "input": "Hello!", "stream": True})
    done = next(e["response"] for name, e in events if name in ("response.completed", "response.incomplete"))
    u = done["usage"]
    ledger.add("alice", u["input_tokens"], u["input_tokens_details"]["cached_tokens"], u["output_tokens"],
               "length" if done["status"] == "incomplete" else "stop")
    ledger.requests["alice"] += 1

    # Anthropic Messages, whole (a tool call) and streamed
    reply = post(server, "/v1/messages", ALICE, {"model": "demo", "max_tokens": 64, "messages": ASK, "tools": [ANTHROPIC_TOOL]}).json()
    u = reply["usage"]
    ledger.add("alice", u["input_tokens"] + u["cache_read_input_tokens"], u["cache_read_input_tokens"], u["output_tokens"],
               ANTHROPIC_FINISH[reply["stop_reason"]])
    ledger.requests["alice"] += 1
    events = stream_events(server, "/v1/messages", BOB, {"model": "demo", "max_tokens": 64, "messages": HELLO, "stream": True})
    # message_start goes out before the cache lookup is known; message_delta's usage is the final count.
    delta = next(e for name, e in events if name == "message_delta")
    u = delta["usage"]
    ledger.add("bob", u["input_tokens"] + u["cache_read_input_tokens"], u["cache_read_input_tokens"],
               u["output_tokens"], ANTHROPIC_FINISH[delta["delta"]["stop_reason"]])
    ledger.requests["bob"] += 1
    return ledger


def scrape(server) -> dict[tuple[str, tuple], float]:
    reply = httpx.get(server.base_url + "/metrics", headers={"authorization": f"Bearer {OPS}"}, timeout=30)
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(reply.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_equal_what_the_apis_reported(server):
    ledger = drive_traffic(server)
    samples = scrape(server)
    total = Counter()
    for counts in ledger.tokens.values():
        total.update(counts)
    demo = {"model_name": "demo"}
    assert value(samples, "rapidmlx_prompt_tokens_total", **demo) == total["prompt"]
    assert value(samples, "rapidmlx_generation_tokens_total", **demo) == total["generation"]
    assert value(samples, "rapidmlx_prompt_tokens_cached_total", **demo) == total["cached"] > 0
    assert value(samples, "rapidmlx_time_to_first_token_seconds_count", **demo) == ledger.generations
    assert value(samples, "rapidmlx_e2e_request_latency_seconds_count", **demo) == ledger.generations
    assert value(samples, "rapidmlx_request_queue_time_seconds_count", **demo) == ledger.generations
    assert value(samples, "rapidmlx_request_prefill_time_seconds_count", **demo) == ledger.generations
    for reason, count in ledger.finishes.items():
        assert value(samples, "rapidmlx_request_success_total", finished_reason=reason, **demo) == count, reason
    assert ledger.finishes["length"] and ledger.finishes["stop"]
    # Buckets the dashboards' quantiles need.
    for bound in ("0.1", "0.5", "1.0", "2.0", "5.0", "10.0", "30.0"):
        assert ("rapidmlx_time_to_first_token_seconds_bucket", tuple(sorted({**demo, "le": bound}.items()))) in samples
    for key in ("alice", "bob"):
        assert value(samples, "rapidmlx_key_requests_total", key_name=key) == ledger.requests[key], key
        assert value(samples, "rapidmlx_key_tokens_total", key_name=key, kind="prompt") == ledger.tokens[key]["prompt"]
        assert value(samples, "rapidmlx_key_tokens_total", key_name=key, kind="generation") == ledger.tokens[key]["generation"]
    # What the worker and the pool report.
    assert value(samples, "rapidmlx_prefix_cache_hits_total", **demo) >= total["cached"]
    assert value(samples, "rapidmlx_prefix_cache_queries_total", **demo) >= total["prompt"]
    assert value(samples, "rapidmlx_prefix_cache_memory_bytes", **demo) > 0
    assert value(samples, "rapidmlx_num_requests_running", **demo) == 0
    assert value(samples, "rapidmlx_model_state", state="idle", **demo) == 1
    assert value(samples, "rapidmlx_models_resident") == 1
    assert value(samples, "rapidmlx_model_loads_total", result="ready", **demo) == 1
    assert value(samples, "rapidmlx_http_requests_total", api="chat", status="200") == 4


def test_refusals_are_counted_by_reason(server):
    before = scrape(server)
    httpx.post(server.base_url + "/v1/chat/completions", json={"model": "demo", "messages": HELLO}, timeout=30)  # no key
    httpx.post(server.base_url + "/v1/chat/completions", json={"model": "nope", "messages": HELLO},
               headers={"x-api-key": ALICE}, timeout=30)
    httpx.get(server.base_url + "/metrics", headers={"x-api-key": ALICE}, timeout=30)  # not an admin key
    after = scrape(server)
    assert value(after, "rapidmlx_auth_failures_total") == value(before, "rapidmlx_auth_failures_total") + 1
    for reason in ("model_not_found", "permission_denied"):
        assert value(after, "rapidmlx_rejections_total", reason=reason) == value(before, "rapidmlx_rejections_total", reason=reason) + 1


def test_metrics_auth_off_opens_metrics_to_a_scraper_without_a_key(server):
    assert httpx.get(server.base_url + "/metrics", timeout=30).status_code == 401
    server.config["server"]["metrics_auth"] = False
    server.write_config()
    wait_for(lambda: httpx.get(server.base_url + "/metrics", timeout=30).status_code == 200, what="the reload")
    assert httpx.get(server.base_url + "/v1/models", timeout=30).status_code == 401  # the rest still needs a key
