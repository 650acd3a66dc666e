"""Keys: the ring (secrets → keys), the allowlist, per-key limits, and the config rules for [[keys]]."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from router.errors import OverloadedError
from router.ops.auth.keys import KeyRing, may_use, secret_from_headers
from router.ops.auth.limits import KeyLimits
from router.ops.config import ConfigError, KeyConfig, load_config_text

EXAMPLE = Path(__file__).resolve().parents[3] / "rapidmlx.toml.example"
MODEL = '[models.m]\npath = "org/name"\n'


def key(**fields) -> KeyConfig:
    return KeyConfig(**{"name": "k", "key_sha256": hashlib.sha256(b"secret").hexdigest(), **fields})


def test_the_ring_finds_keys_by_hashed_and_environment_secrets():
    ring = KeyRing([key(name="hashed"), KeyConfig(name="from-env", key_env="MY_KEY")], env={"MY_KEY": "env-secret"})
    assert ring.enabled
    assert ring.identify("secret").name == "hashed"
    assert ring.identify("env-secret").name == "from-env"
    assert ring.identify("secret ") is None and ring.identify("wrong") is None
    assert ring.identify("") is None and ring.identify(None) is None
    assert not KeyRing().enabled


def test_an_unset_environment_secret_matches_nothing():
    # load_config refuses this config; the ring still never lets an empty secret in.
    ring = KeyRing([KeyConfig(name="k", key_env="UNSET")], env={})
    assert ring.identify("") is None and ring.identify("anything") is None


@pytest.mark.parametrize(("authorization", "x_api_key", "secret"), [
    ("Bearer abc", None, "abc"),
    ("bearer  abc ", None, "abc"),
    (None, "abc", "abc"),
    ("Bearer abc", "other", "abc"),  # OpenAI's header wins when both come
    ("Basic abc", None, None),
    ("Bearer ", "xyz", "xyz"),
    (None, "  ", None),
    (None, None, None),
])
def test_secrets_come_from_either_header(authorization, x_api_key, secret):
    assert secret_from_headers(authorization, x_api_key) == secret


def test_the_allowlist_matches_the_name_sent_or_the_model_id():
    coder = key(models=("coder",))
    assert may_use(coder, "coder", "coder") and may_use(coder, "claude-3", "coder")  # any alias of coder
    assert not may_use(coder, "small", "small")
    claude = key(models=("claude-*",))
    assert may_use(claude, "claude-3", "coder") and not may_use(claude, "coder", "coder")
    assert may_use(key(), "anything", "m")  # default ["*"]
    assert may_use(None, "anything", "m")  # no keys configured


def test_rpm_is_a_sliding_minute_with_retry_after():
    limits, k = KeyLimits(), key(rpm=2)
    limits.take(k, now=100.0)
    limits.give_back("k")
    limits.take(k, now=110.0)
    limits.give_back("k")
    with pytest.raises(OverloadedError) as refused:
        limits.take(k, now=130.0)
    assert refused.value.status == 429 and refused.value.retry_after_s == pytest.approx(30.0)
    limits.take(k, now=160.5)  # the first request left the window


def test_max_concurrent_counts_requests_in_flight():
    limits, k = KeyLimits(), key(max_concurrent=2)
    limits.take(k)
    limits.take(k)
    with pytest.raises(OverloadedError) as refused:
        limits.take(k)
    assert "max_concurrent 2" in refused.value.message and refused.value.retry_after_s == 1.0
    limits.give_back("k")
    limits.take(k)
    assert limits.inflight("k") == 2


def test_a_refused_request_takes_nothing():
    limits, k = KeyLimits(), key(max_concurrent=1, rpm=5)
    limits.take(k)
    with pytest.raises(OverloadedError):
        limits.take(k)
    limits.give_back("k")
    assert limits.inflight("k") == 0
    for _ in range(3):  # 1 counted above, the refused one not: 4 more fit in the minute
        limits.take(k)
        limits.give_back("k")
    limits.take(k)


def errors(text: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config_text(MODEL + text, env=env or {}, source="rapidmlx.toml")
    return caught.value.errors


def test_key_tables_are_checked_with_their_paths():
    assert errors('[[keys]]\nname = "a"\n') == ["keys[0]: set exactly one of key_env and key_sha256"]
    assert errors('[[keys]]\nname = "a"\nkey_env = "A"\nkey_sha256 = "' + "0" * 64 + '"\n') == [
        "keys[0]: set exactly one of key_env and key_sha256"]
    assert errors('[[keys]]\nname = "a"\nkey_sha256 = "xyz"\n') == [
        'keys[0].key_sha256: must be 64 hexadecimal characters (a SHA-256) (got "xyz")']
    assert errors('[[keys]]\nname = "a"\nkey_env = "A"\n') == [
        "keys[0].key_env: environment variable A is not set (it holds the key's secret)"]
    duplicate = '[[keys]]\nname = "a"\nkey_env = "A"\n[[keys]]\nname = "a"\nkey_env = "B"\n'
    assert errors(duplicate, {"A": "1", "B": "2"}) == ['keys[1].name: "a" is also the name of keys[0]']
    assert errors('[[keys]]\nkey_env = "A"\n', {"A": "1"}) == ["keys[0].name: required"]


def test_the_examples_commented_key_table_loads_once_uncommented():
    text = EXAMPLE.read_text()
    block = text[text.index("# [[keys]]"):]
    uncommented = "\n".join(re.sub(r"^# ?", "", line) for line in block.splitlines())
    config = load_config_text(MODEL + uncommented, env={"ALICE_KEY": "s"})
    assert config.keys == (KeyConfig(name="alice", key_env="ALICE_KEY"),)
