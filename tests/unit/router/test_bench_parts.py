"""The bench's pure parts: statistics, ideal cached tokens, tool-call outcomes, synthetic profiles."""

from __future__ import annotations

import json
import random
import statistics

import pytest

from router.bench import stats
from router.bench.client import RequestRecord, ToolCall
from router.bench.cli import build_parser
from router.bench.ideal import fill_ideal
from router.bench.profiles import PROFILES, AgentPrefix, AgentSession
from router.bench.runner import phase_seed
from router.bench.workloads.tools import ToolCase, outcome

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def record(**fields) -> RequestRecord:
    base = {"target": "t", "round": 1, "phase": "p", "index": 0, "sent_at": 0.0, "status": 200, "e2e_s": 1.0}
    return RequestRecord(**{**base, **fields})


@pytest.mark.parametrize("values", [[3.0], [1.0, 2.0], [5.0, 1.0, 4.0, 2.0, 3.0], [0.1 * i for i in range(37)]])
def test_median_agrees_with_the_standard_library(values):
    assert stats.median(values) == pytest.approx(statistics.median(values))


def test_percentile_interpolates_and_skips_missing_values():
    assert stats.percentile([None, 10.0, 20.0, None], 95) == pytest.approx(19.5)
    assert stats.percentile([None], 50) is None


def test_cached_ratio_sums_usage_over_successful_requests_only():
    records = [record(prompt_tokens=1000, cached_tokens=900), record(prompt_tokens=3000, cached_tokens=0),
               record(status=500, prompt_tokens=5000, cached_tokens=5000), record(prompt_tokens=None, cached_tokens=None)]
    assert stats.cached_ratio(records) == pytest.approx(900 / 4000)


def test_decode_speed_counts_tokens_after_the_first():
    assert record(ttft_s=0.5, e2e_s=2.5, completion_tokens=11).decode_tok_s == pytest.approx(5.0)
    assert record(ttft_s=None, completion_tokens=11).decode_tok_s is None  # a whole response shows no first token


def test_errors_are_named_by_status():
    records = [record(), record(status=0, error="ConnectError"), record(status=503, error="busy"), record(error="stream error")]
    assert stats.errors_by_status(records) == {"no response": 1, "503": 1, "200 (stream error)": 1}


def test_ideal_from_usage_is_the_previous_turn_of_the_same_session():
    records = [record(index=i, session=s, turn=t, sent_at=float(i), prompt_tokens=p)
               for i, (s, t, p) in enumerate([(0, 1, 100), (1, 1, 120), (0, 2, 150), (1, 2, 170)])]
    fill_ideal(records, {r.index: {} for r in records}, tokenizer=None)
    assert [r.ideal_cached_tokens for r in records] == [None, None, 100, 120]


class _Tokens:
    """A stand-in tokenizer: the prompt's "tokens" are given in the request itself."""

    def tokens(self, request):
        return request["ids"]


def test_ideal_from_tokens_is_the_longest_prefix_shared_with_any_earlier_prompt():
    prompts = {0: {"ids": [1, 2, 3, 4]}, 1: {"ids": [1, 2, 9]}, 2: {"ids": [1, 2, 3, 4, 5, 6]}, 3: {"ids": [7]}}
    records = [record(index=i, sent_at=float(i)) for i in prompts]
    fill_ideal(records, prompts, tokenizer=_Tokens())
    # The first prompt has nothing before it; the third reuses all of the first.
    assert [r.ideal_cached_tokens for r in records] == [0, 2, 4, 0]


@pytest.mark.parametrize(("content", "calls", "expect", "expected"), [
    ("", [ToolCall("get_weather", '{"city": "Paris"}')], "get_weather", "ok"),
    ('<tool_call>{"name": "get_weather"}', [], "get_weather", "leaked"),
    ("It is sunny.", [], "get_weather", "missing"),
    ("", [ToolCall("get_weather", '{"city": ')], "get_weather", "unparsed"),
    ("", [ToolCall("get_weather", '["Paris"]')], "get_weather", "unparsed"),
    ("", [ToolCall("web_search", '{"query": "x"}')], "get_weather", "wrong_tool"),
    ("", [ToolCall("get_weather", '{"town": "Paris"}')], "get_weather", "invalid_arguments"),
    ("", [ToolCall("get_weather", '{"city": 3}')], "get_weather", "invalid_arguments"),
    ("Hello!", [], None, "ok"),
    ("", [ToolCall("get_weather", '{"city": "Paris"}')], None, "unexpected_call"),
])
def test_tool_outcomes(content, calls, expect, expected):
    case = ToolCase([{"role": "user", "content": "weather?"}], [WEATHER], expect)
    assert outcome(case, record(content=content, tool_calls=calls)) == expected


def test_a_failed_request_is_an_error_outcome():
    case = ToolCase([], [WEATHER], "get_weather")
    assert outcome(case, record(status=0, error="ConnectError")) == "error"


def test_agent_sessions_are_deterministic_and_grow_by_one_call_and_result_per_step():
    profile = PROFILES["small"]
    first = AgentSession.start(AgentPrefix.build(profile, 7), profile, seed=3)
    again = AgentSession.start(AgentPrefix.build(profile, 7), profile, seed=3)
    for session in (first, again):
        session.add_step(300)
        session.add_step(300)
    assert first.openai_request() == again.openai_request()
    messages = first.openai_request()["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert messages[2]["tool_calls"][0]["id"] == messages[3]["tool_call_id"]
    assert json.loads(messages[2]["tool_calls"][0]["function"]["arguments"])["path"].startswith("src/")
    anthropic = first.anthropic_request()
    assert anthropic["system"] == messages[0]["content"]
    assert anthropic["messages"][1]["content"][0]["type"] == "tool_use"
    assert anthropic["messages"][2]["content"][0]["tool_use_id"] == messages[3]["tool_call_id"]


def test_profiles_differ_in_size_and_seeds_differ_in_content():
    sizes = {name: len(AgentPrefix.build(p, 0).system) for name, p in PROFILES.items()}
    assert sizes["small"] < sizes["codex"] < sizes["claude-code"]
    assert len(AgentPrefix.build(PROFILES["claude-code"], 0).tools) >= 12
    assert AgentPrefix.build(PROFILES["small"], 0).system != AgentPrefix.build(PROFILES["small"], 1).system


def test_every_round_and_phase_gets_its_own_content_seed():
    seeds = {phase_seed(0, p, r) for p in range(4) for r in range(4)}
    assert len(seeds) == 16


@pytest.mark.parametrize("argv", [
    ["agent", "--model", "m"],  # no target
    ["agent", "--model", "m", "--base-url", "http://x", "--launch", "cmd {port}"],  # two targets
    ["agent", "--model", "m", "--base-url", "http://x", "--sessions", "1,0"],
    ["burst", "--model", "m", "--base-url", "http://x", "--n", "a"],
])
def test_bad_command_lines_are_refused(argv):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(argv)
    assert exit_info.value.code == 2


@pytest.mark.parametrize("arch", ["llama", "qwen3_next"])
def test_made_models_load_in_mlx_lm_with_a_chat_template_for_tools(tmp_path, arch):
    from mlx.utils import tree_flatten
    from mlx_lm import load

    from router.bench.models import make_model, parameter_count

    path = make_model(tmp_path / arch, arch=arch, size="tiny")
    model, tokenizer = load(str(path))
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tools=[WEATHER], add_generation_prompt=True)
    assert len(prompt) > 10 and parameter_count(path) == sum(v.size for _, v in tree_flatten(model.parameters()))


def test_the_median_interval_covers_the_true_median_95_times_in_100():
    assert stats.median_interval([float(v) for v in range(1, 401)]) == (180.0, 221.0)
    assert stats.median_interval([4.0, 1.0, 3.0, 2.0, 6.0, 5.0]) == (1.0, 6.0)  # too few pairs to narrow anything
    rng = random.Random(7)
    # Skewed like the hop's differences (a tail of slow pairs); the true median of expovariate(1) is ln 2.
    hits = 0
    for _ in range(2000):
        low, high = stats.median_interval([rng.expovariate(1.0) for _ in range(100)])
        hits += low <= 0.6931471805599453 <= high
    assert 0.93 <= hits / 2000 <= 0.98
