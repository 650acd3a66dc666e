"""Upstream pieces without a network: model renaming in bodies and SSE, the health schedule, the fleet rules."""

from __future__ import annotations

import json

import pytest

from router.ops.config import ConfigError, ServerConfig, UpstreamModelConfig, is_off_fleet, load_config_text
from router.upstream.health import Health, UpstreamState, backoff_s
from router.upstream.rewrite import SseFrames, rewrite_model


def errors_of(text: str, **env: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config_text(text, env=env)
    return caught.value.errors


# --- renaming ----------------------------------------------------------------------------------------


def test_rewrite_replaces_only_the_reported_model_and_keeps_every_other_byte():
    body = b'{"id":"x","model":"tiny","choices":[{"delta":{"content":"the \\"model\\":\\"tiny\\" text"}}]}'
    out = rewrite_model(body, "remote")
    assert out == body.replace(b'"model":"tiny"', b'"model":"remote"', 1)
    assert json.loads(out)["choices"][0]["delta"]["content"] == 'the "model":"tiny" text'


@pytest.mark.parametrize("document", [
    {"type": "message_start", "message": {"id": "m", "model": "tiny", "content": []}},
    {"type": "response.created", "sequence_number": 0, "response": {"id": "r", "model": "tiny", "tools": []}},
])
def test_rewrite_finds_the_name_one_level_down(document):
    out = json.loads(rewrite_model(json.dumps(document, separators=(",", ":")).encode(), "remote"))
    assert (out.get("message") or out.get("response"))["model"] == "remote"


def test_rewrite_leaves_non_json_and_model_less_payloads_alone():
    assert rewrite_model(b"[DONE]", "remote") == b"[DONE]"
    assert rewrite_model(b'{"type":"ping"}', "remote") == b'{"type":"ping"}'
    assert rewrite_model(b'{"input":{"model":"tiny"}}', "remote") == b'{"input":{"model":"tiny"}}'  # not where APIs put it


def test_rewrite_keeps_the_spacing_an_upstream_writes_and_handles_dated_names():
    body = b'{"model": "gpt-4.1-2025-04-14", "object": "chat.completion"}'
    assert rewrite_model(body, "gpt") == b'{"model": "gpt", "object": "chat.completion"}'


def test_sse_frames_survive_any_chunking():
    stream = (b'data: {"model":"tiny","n":1}\n\n: keepalive\n\nevent: message_start\ndata: {"message":{"model":"tiny"}}\n\n'
              b'data: [DONE]\n\n')
    expected = stream.replace(b'"model":"tiny"', b'"model":"remote"')
    for size in (1, 3, 7, len(stream)):
        frames = SseFrames("remote")
        out = b"".join(frames.feed(stream[i:i + size]) for i in range(0, len(stream), size)) + frames.rest()
        assert out == expected, size


def test_sse_frames_keep_crlf_and_an_unterminated_tail():
    frames = SseFrames("remote")
    assert frames.feed(b'data: {"model":"tiny"}\r\n\r\ndata: {"model":"ti') == b'data: {"model":"remote"}\r\n\r\n'
    assert frames.feed(b'ny"}') == b""
    assert frames.rest() == b'data: {"model":"tiny"}'  # never ended: passed on as it came


# --- health ------------------------------------------------------------------------------------------


def test_backoff_doubles_from_one_second_to_thirty():
    assert [backoff_s(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]


def test_health_goes_unreachable_and_back_with_retry_after():
    health = Health()
    assert health.state is UpstreamState.CHECKING and health.available
    health.failed("ConnectError", check=False)
    health.failed("ConnectError", check=True)
    assert health.state is UpstreamState.UNREACHABLE and not health.available
    assert 1.0 <= health.retry_after_s() <= 2.0 and health.errors == 2 and health.checks == 1
    health.succeeded(0.004)
    assert health.available and health.consecutive_failures == 0
    assert health.as_dict()["last_check_latency_ms"] == 4.0


# --- the fleet ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("url", "off"), [
    ("http://127.0.0.1:8000/v1", False), ("http://[::1]:8000/v1", False), ("http://localhost:8000/v1", False),
    ("http://10.1.2.3/v1", False), ("http://192.168.1.20:8000/v1", False), ("http://172.16.0.9/v1", False),
    ("http://[fd00::5]/v1", False), ("http://169.254.10.1/v1", False), ("http://studio2.local:8000/v1", False),
    ("https://api.openai.com/v1", True), ("https://api.anthropic.com/v1", True), ("http://8.8.8.8/v1", True),
    ("http://100.101.102.103/v1", True),  # CGNAT / tailnet: only by fleet_hosts
    ("http://mac2.corp.lan/v1", True), ("http://localhost.evil.com/v1", True),
])
def test_off_the_fleet_is_decided_conservatively(url, off):
    assert is_off_fleet(UpstreamModelConfig(upstream=url), ServerConfig()) is off


def test_fleet_hosts_and_cloud_override_the_address_rules():
    server = ServerConfig(fleet_hosts=("mac2.corp.lan", "100.101.102.103"))
    assert not is_off_fleet(UpstreamModelConfig(upstream="http://MAC2.corp.lan:8000/v1"), server)
    assert not is_off_fleet(UpstreamModelConfig(upstream="http://100.101.102.103/v1"), server)
    assert is_off_fleet(UpstreamModelConfig(upstream="http://127.0.0.1/v1", cloud=True), server)


@pytest.mark.parametrize(("url", "why"), [
    ("ftp://host/v1", "ftp"), ("http:///v1", "no host"), ("http://user:pw@host/v1", "creds"),
    ("http://host/v1?x=1", "query"), ("http://host:notaport/v1", "port"), ("host:8000/v1", "scheme"),
])
def test_upstream_urls_must_be_well_formed(url, why):
    (line,) = errors_of(f'[models.far]\nupstream = "{url}"\n')
    assert line.startswith("models.far.upstream: must be an http:// or https:// base URL"), why


def test_a_table_is_local_or_upstream_never_both_and_fields_stay_in_their_kind():
    lines = errors_of('[models.a]\npath = "x"\nupstream = "http://127.0.0.1/v1"\n[models.b]\nupstream = "http://127.0.0.1/v1"\n'
                      'kv_cache = {bits = 4}\n')
    assert "models.a: set exactly one of path (served here) and upstream (proxied)" in lines
    assert any(line.startswith("models.b.kv_cache: unknown key; allowed keys: upstream, upstream_model,") for line in lines)


def test_spillover_targets_must_be_upstreams_of_the_file():
    lines = errors_of('[models.a]\npath = "x"\nspillover = ["b", "b", "nope"]\n[models.b]\nupstream = "http://127.0.0.1/v1"\n'
                      '[models.c]\npath = "y"\nspillover = ["a"]\n')
    assert lines == [
        'models.a.spillover[1]: "b" is listed twice',
        'models.a.spillover[2]: "nope" is not an upstream model of this file (a [models.<id>] with upstream = ...)',
        'models.c.spillover[0]: "a" is not an upstream model of this file (a [models.<id>] with upstream = ...)',
    ]


def test_local_only_per_model_and_per_server():
    cloud = '[models.gpt]\nupstream = "https://api.openai.com/v1"\n'
    assert load_config_text(cloud, env={}).upstream_models["gpt"].upstream == "https://api.openai.com/v1"
    (line,) = errors_of(cloud + "local_only = true\n")
    assert line.endswith("and models.gpt.local_only is true")
    (line,) = errors_of("[server]\nlocal_only = true\n" + cloud)
    assert line.endswith("and server.local_only is true")
    near = '[models.near]\nupstream = "http://192.168.1.5:8000/v1"\n'
    assert load_config_text("[server]\nlocal_only = true\n" + near, env={}).upstream_models["near"]


def test_an_upstream_key_env_must_be_set_and_env_overrides_reach_upstream_tables():
    text = '[models.gpt]\nupstream = "https://api.openai.com/v1"\napi_key_env = "OPENAI_API_KEY"\n'
    (line,) = errors_of(text)
    assert line == "models.gpt.api_key_env: environment variable OPENAI_API_KEY is not set (it holds the key sent upstream)"
    config = load_config_text(text, env={"OPENAI_API_KEY": "sk", "RAPIDMLX_MODELS__GPT__TIMEOUT_S": "5"})
    assert config.upstream_models["gpt"].timeout_s == 5.0 and not config.local_models


# --- the registry on reload ----------------------------------------------------------------------------


def test_a_reload_keeps_unchanged_upstreams_and_replaces_or_removes_the_rest():
    import asyncio

    from router.ops.metrics.families import Metrics
    from router.upstream.registry import Upstreams

    def config(**tables: str):
        text = "".join(f'[models.{model_id}]\nupstream = "{url}"\n' for model_id, url in tables.items())
        return load_config_text(text, env={})

    async def scenario() -> None:
        upstreams = Upstreams(config(a="http://127.0.0.1:9/v1", b="http://127.0.0.1:9/v1", c="http://127.0.0.1:9/v1"),
                              env={}, metrics=Metrics())
        kept = upstreams.get("a")
        changes = upstreams.apply(config(a="http://127.0.0.1:9/v1", b="http://127.0.0.2:9/v1"))
        assert changes == {"b": "changed", "c": "removed"}
        assert upstreams.get("a") is kept and upstreams.get("c") is None
        await upstreams.stop()

    asyncio.run(scenario())
