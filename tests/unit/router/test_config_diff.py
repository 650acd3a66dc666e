"""What a config edit changed: per model "router" (applied live) or "engine" (a new worker), and
which `[server]` fields apply live or only at the next restart. Configs are loaded from TOML text."""

from __future__ import annotations

import pytest

from router.ops.config import load_config_text
from router.ops.reload.diff import ModelChange, ServerChange, diff_keys, diff_models, diff_server

BASE = {
    "path": '"/models/a"',
    "preload": "true",
    "ttl": "0",
    "pin": "false",
    "memory_gb": "0",
    "max_concurrency": "8",
    "max_queue": "64",
    "max_context": "0",
    "prefill_step": "512",
    "tool_parser": '"auto"',
    "chat_template_kwargs": "{ enable_thinking = true }",
}


def models_toml(**tables: dict[str, str]) -> str:
    """`[models.<id>]` tables; a key containing a dot is written into its sub-table (`sampling.temperature`)."""
    out = []
    for model_id, overrides in tables.items():
        keys = {**BASE, "aliases": f'["{model_id}-alias"]', **overrides}
        flat = {k: v for k, v in keys.items() if "." not in k}
        nested: dict[str, dict[str, str]] = {}
        for key, value in keys.items():
            if "." in key:
                table, name = key.split(".", 1)
                nested.setdefault(table, {})[name] = value
        out.append(f"[models.{model_id}]")
        out += [f"{k} = {v}" for k, v in flat.items()]
        for table, values in nested.items():
            out.append(f"[models.{model_id}.{table}]")
            out += [f"{k} = {v}" for k, v in values.items()]
    return "\n".join(out) + "\n"


def models(**tables: dict[str, str]):
    return load_config_text(models_toml(**tables), env={}).models


def server(**fields: str):
    text = "[server]\n" + "".join(f"{k} = {v}\n" for k, v in fields.items())
    return load_config_text(text, env={}).server


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("aliases", '["b"]', "aliases"),
        ("sampling.temperature", "0.2", "sampling.temperature"),
        ("chat_template_kwargs", "{ enable_thinking = false }", "chat_template_kwargs"),
        ("tool_parser", '"hermes"', "tool_parser"),
        ("max_queue", "3", "max_queue"),
        ("ttl", "60", "ttl"),
        ("pin", "true", "pin"),
        ("memory_gb", "4.5", "memory_gb"),
        ("preload", "false", "preload"),
    ],
)
def test_a_router_setting_changes_the_model_live(key, value, field):
    (change,) = diff_models(models(m={}), models(m={key: value}))
    assert change == ModelChange("m", "router", (field,))
    assert change.describe() == f"router: {field}"


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("path", '"/models/b"', "path"),
        ("kv_cache.bits", "8", "kv_cache.bits"),
        ("prefix_cache.memory_gb", "0.5", "prefix_cache.memory_gb"),
        ("max_concurrency", "2", "max_concurrency"),
        ("max_context", "2048", "max_context"),
        ("prefill_step", "256", "prefill_step"),
    ],
)
def test_an_engine_setting_needs_a_new_worker(key, value, field):
    (change,) = diff_models(models(m={}), models(m={key: value}))
    assert change == ModelChange("m", "engine", (field,))
    assert change.describe() == f"engine: {field}"


def test_a_mixed_edit_is_an_engine_change_listing_every_field_in_schema_order():
    # Written in the file in an order unlike the schema's.
    new = models(m={"kv_cache.bits": "4", "sampling.temperature": "0.5", "max_concurrency": "2", "aliases": '["x", "y"]',
                    "prefix_cache.enabled": "false"})
    (change,) = diff_models(models(m={}), new)
    assert change.kind == "engine"
    assert change.fields == ("aliases", "max_concurrency", "sampling.temperature", "kv_cache.bits", "prefix_cache.enabled")
    assert change.describe() == "engine: aliases, max_concurrency, sampling.temperature, kv_cache.bits, prefix_cache.enabled"


def test_router_only_fields_in_several_tables_stay_a_router_change():
    (change,) = diff_models(models(m={}), models(m={"sampling.top_k": "20", "reasoning_parser": '"none"', "ttl": "5"}))
    assert change.kind == "router"
    assert change.fields == ("ttl", "reasoning_parser", "sampling.top_k")


def test_added_and_removed_models_and_unchanged_ones_left_out():
    old = models(keep={}, gone={}, edited={})
    new = models(keep={}, edited={"max_queue": "1"}, fresh={})
    changes = {c.model_id: c for c in diff_models(old, new)}
    assert set(changes) == {"gone", "edited", "fresh"}
    assert changes["gone"] == ModelChange("gone", "removed")
    assert changes["fresh"] == ModelChange("fresh", "added")
    assert changes["edited"] == ModelChange("edited", "router", ("max_queue",))
    assert changes["gone"].describe() == "removed" and changes["fresh"].describe() == "added"


def test_the_same_config_loaded_twice_has_no_changes():
    text = models_toml(a={"sampling.temperature": "0.3", "kv_cache.bits": "8"}, b={})
    assert diff_models(load_config_text(text, env={}).models, load_config_text(text, env={}).models) == []
    assert diff_server(server(port="9000", log_level='"debug"'), server(port="9000", log_level='"debug"')) == ServerChange()


def test_a_value_written_differently_but_equal_is_no_change():
    # 1 and 1.0 validate to the same float: the reload must not count it as an edit.
    assert diff_models(models(m={"ttl": "1"}), models(m={"ttl": "1.0"})) == []


@pytest.mark.parametrize(
    ("field", "value"),
    [("log_level", '"debug"'), ("keepalive_s", "1.5"), ("drain_timeout_s", "5"), ("memory_budget_gb", "16")],
)
def test_a_live_server_field(field, value):
    change = diff_server(server(), server(**{field: value}))
    assert change.live == (field,) and change.needs_restart == ()


@pytest.mark.parametrize(
    ("field", "value"),
    [("host", '"0.0.0.0"'), ("port", "9001"), ("max_body_mb", "64"), ("runtime_dir", '"/tmp/elsewhere"'),
     ("header_timeout_s", "3"), ("body_timeout_s", "7"), ("watch_config", "false")],
)
def test_a_server_field_bound_at_start_needs_a_restart(field, value):
    change = diff_server(server(), server(**{field: value}))
    assert change.needs_restart == (field,) and change.live == ()


def test_server_changes_split_into_live_and_restart_in_schema_order():
    change = diff_server(server(), server(memory_budget_gb="8", port="1234", log_level='"error"', host='"::1"'))
    assert change.live == ("log_level", "memory_budget_gb")
    assert change.needs_restart == ("host", "port")


def keys(*tables: str):
    return load_config_text("".join(f"[[keys]]\n{table}\n" for table in tables),
                            env={"BOB_KEY": "b0b", "CAROL_KEY": "car0l", "DAVE_KEY": "dave"}).keys


def test_key_changes_name_keys_and_fields_never_secrets():
    old = keys('name = "alice"\nkey_sha256 = "' + "a" * 64 + '"', 'name = "bob"\nkey_env = "BOB_KEY"\nrpm = 10',
               'name = "carol"\nkey_env = "CAROL_KEY"')
    new = keys('name = "alice"\nkey_sha256 = "' + "b" * 64 + '"\nadmin = true', 'name = "bob"\nkey_env = "BOB_KEY"\nrpm = 10',
               'name = "dave"\nkey_env = "DAVE_KEY"\nmodels = ["qwen*"]')
    assert diff_keys(old, new) == {"carol": "removed", "alice": "changed: key_sha256, admin", "dave": "added"}
    assert diff_keys(new, new) == {}
