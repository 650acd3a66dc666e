"""Config layer: loading `rapidmlx.toml` from inline TOML, env overlays, error lines, and the example file."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pydantic
import pytest

from router.ops.config import (
    ConfigError,
    KVCacheConfig,
    ModelConfig,
    PrefixCacheConfig,
    RouterConfig,
    SamplingDefaults,
    ServerConfig,
    UpstreamModelConfig,
    load_config,
    load_config_text,
    resolve_runtime_dir,
    single_model_config,
    validate_file,
)

EXAMPLE = Path(__file__).resolve().parents[3] / "rapidmlx.toml.example"
# The unknown-key message lists every [server] field in schema order; derived, so new fields need no edit here.
SERVER_KEYS = ", ".join(ServerConfig.model_fields)
# Keys the example must set to something other than the default, to show what a value looks like.
EXAMPLE_NON_DEFAULT = {"path", "aliases", "upstream"}

MINIMAL = """
[models.coder]
path = "mlx-community/Qwen3-8B-4bit"
"""


def load(text: str, **env: str) -> RouterConfig:
    """Load with an explicit (usually empty) environment so the test machine's env never leaks in."""
    return load_config_text(text, env=env)


def errors_of(text: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config_text(text, env=env or {}, source="rapidmlx.toml")
    assert str(caught.value) == "\n".join(caught.value.errors)
    return caught.value.errors


# --- valid files ---------------------------------------------------------------------------------------


def test_minimal_file_gets_every_default_from_the_spec():
    config = load(MINIMAL)
    assert config.server == ServerConfig(
        host="127.0.0.1", port=8000, log_level="info", offline=False, max_body_mb=32, runtime_dir=""
    )
    model = config.models["coder"]
    assert model.path == "mlx-community/Qwen3-8B-4bit"
    assert (model.aliases, model.preload, model.max_concurrency, model.max_queue) == ((), True, 8, 64)
    assert (model.max_context, model.prefill_step, model.chat_template_kwargs) == (0, 512, {})
    assert (model.tool_parser, model.reasoning_parser) == ("auto", "auto")
    assert model.sampling == SamplingDefaults(
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        min_p=0.0,
        repetition_penalty=1.0,
        presence_penalty=0.0,
        frequency_penalty=0.0,
        max_tokens=4096,
    )
    assert model.kv_cache == KVCacheConfig(bits=0, group_size=64, quantize_after=0, window=0)
    assert model.prefix_cache == PrefixCacheConfig(enabled=True, memory_gb=2.0, dir="", persist=True)


def test_full_file_loads_values_and_keeps_model_order():
    config = load(
        """
        [server]
        host = "0.0.0.0"
        port = 9001
        log_level = "debug"
        offline = true

        [models.zeta]
        path = "/models/zeta"
        aliases = ["claude-*", "fast"]
        preload = false
        chat_template_kwargs = {enable_thinking = false}
        tool_parser = "hermes"

        [models.zeta.sampling]
        temperature = 0.6
        top_p = 0.95

        [models.zeta.kv_cache]
        bits = 4
        group_size = 32

        [models.alpha]
        path = "org/alpha"
        """
    )
    assert list(config.models) == ["zeta", "alpha"]
    assert (config.server.host, config.server.port, config.server.log_level) == ("0.0.0.0", 9001, "debug")
    assert config.server.offline is True
    zeta = config.models["zeta"]
    assert zeta.aliases == ("claude-*", "fast")
    assert zeta.preload is False
    assert zeta.chat_template_kwargs == {"enable_thinking": False}
    assert zeta.tool_parser == "hermes"
    assert (zeta.sampling.temperature, zeta.sampling.top_p, zeta.sampling.max_tokens) == (0.6, 0.95, 4096)
    assert (zeta.kv_cache.bits, zeta.kv_cache.group_size) == (4, 32)


def test_config_objects_are_frozen():
    config = load(MINIMAL)
    with pytest.raises(pydantic.ValidationError):
        config.server.port = 1  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError):
        config.models["coder"].kv_cache.bits = 8  # type: ignore[misc]


def test_empty_text_is_a_valid_config_with_no_models():
    config = load("")
    assert config.models == {}
    assert config.server.port == 8000


# --- environment and overrides -------------------------------------------------------------------------


def test_env_overrides_nested_fields_over_the_file():
    config = load(
        MINIMAL + "max_concurrency = 2\n[server]\nport = 8100\n",
        RAPIDMLX_SERVER__PORT="9000",
        RAPIDMLX_MODELS__CODER__MAX_CONCURRENCY="4",
        RAPIDMLX_MODELS__CODER__KV_CACHE__BITS="8",
        RAPIDMLX_MODELS__CODER__ALIASES='["fast", "gpt-*"]',
        RAPIDMLX_SERVER__OFFLINE="true",
    )
    assert config.server.port == 9000
    assert config.server.offline is True
    model = config.models["coder"]
    assert (model.max_concurrency, model.kv_cache.bits, model.aliases) == (4, 8, ("fast", "gpt-*"))
    assert model.path == "mlx-community/Qwen3-8B-4bit"  # untouched siblings survive the overlay


def test_env_table_value_merges_into_the_file_table():
    config = load(
        MINIMAL + "chat_template_kwargs = {a = 1}\n",
        RAPIDMLX_MODELS__CODER__CHAT_TEMPLATE_KWARGS='{"enable_thinking": false}',
    )
    assert config.models["coder"].chat_template_kwargs == {"a": 1, "enable_thinking": False}


def test_env_model_segment_matches_file_id_spelled_as_a_variable():
    config = load(
        '[models."Qwen3-8B"]\npath = "q"\n',
        RAPIDMLX_MODELS__QWEN3_8B__MAX_QUEUE="3",
    )
    assert list(config.models) == ["Qwen3-8B"]
    assert config.models["Qwen3-8B"].max_queue == 3


def test_env_ignores_variables_that_are_not_config():
    config = load(MINIMAL, RAPIDMLX_CONFIG="/etc/rapidmlx.toml", OTHER__SERVER__PORT="1")
    assert config.server.port == 8000


def test_env_none_means_os_environ(monkeypatch):
    monkeypatch.setenv("RAPIDMLX_SERVER__PORT", "7001")
    assert load_config_text(MINIMAL).server.port == 7001
    assert load_config_text(MINIMAL, env={}).server.port == 8000


def test_overrides_beat_env_and_file(tmp_path):
    path = tmp_path / "rapidmlx.toml"
    path.write_text(MINIMAL + "[server]\nport = 1\nhost = \"::1\"\n")
    config = load_config(path, env={"RAPIDMLX_SERVER__PORT": "2"}, overrides={"server": {"port": 3}})
    assert (config.server.port, config.server.host) == (3, "::1")


def test_env_errors_name_the_path_and_the_variable():
    errors = errors_of(MINIMAL, {"RAPIDMLX_SERVER__PORT": "abc", "RAPIDMLX_MODELS__CODER__ALIASES": "fast"})
    assert errors == [
        'server.port: must be an integer from 0 to 65535 (got "abc") (from RAPIDMLX_SERVER__PORT)',
        'models.coder.aliases: must be a list (got "fast") (from RAPIDMLX_MODELS__CODER__ALIASES)',
    ]


# --- error lines ---------------------------------------------------------------------------------------


# (id, TOML text, the one expected line)
FIELD_ERRORS = [
    (
        "choice",
        MINIMAL + "[models.coder.kv_cache]\nbits = 3\n",
        "models.coder.kv_cache.bits: must be 0, 4 or 8 (got 3)",
    ),
    (
        "window-small",
        MINIMAL + "[models.coder.kv_cache]\nwindow = 32\n",
        "models.coder.kv_cache: window: at least 64 tokens (or 0: the whole context)",
    ),
    (
        "window-with-bits",
        MINIMAL + "[models.coder.kv_cache]\nwindow = 1024\nbits = 4\n",
        "models.coder.kv_cache: window and bits cannot be combined: mlx-lm cannot quantize a rotating (windowed) cache",
    ),
    (
        "required",
        '[models.coder]\naliases = []\n',
        "models.coder.path: required",
    ),
    (
        "int-parse",
        '[server]\nport = "abc"\n',
        'server.port: must be an integer from 0 to 65535 (got "abc")',
    ),
    (
        "int-range",
        "[server]\nport = 70000\n",
        "server.port: must be an integer from 0 to 65535 (got 70000)",
    ),
    (
        "enum",
        '[server]\nlog_level = "verbose"\n',
        'server.log_level: must be "debug", "info", "warning" or "error" (got "verbose")',
    ),
    (
        "ge",
        MINIMAL + "max_concurrency = 0\n",
        "models.coder.max_concurrency: must be an integer >= 1 (got 0)",
    ),
    (
        "int-float",
        MINIMAL + "prefill_step = 8.5\n",
        "models.coder.prefill_step: must be an integer >= 16 (got 8.5)",
    ),
    (
        "gt-le",
        MINIMAL + "[models.coder.sampling]\ntop_p = 0\n",
        "models.coder.sampling.top_p: must be a number > 0 and <= 1 (got 0)",
    ),
    (
        "bool",
        MINIMAL + "preload = \"maybe\"\n",
        'models.coder.preload: must be true or false (got "maybe")',
    ),
    (
        "alias-item",
        MINIMAL + 'aliases = ["ok", "two words"]\n',
        'models.coder.aliases[1]: must be a non-empty name without whitespace (got "two words")',
    ),
    (
        "model-id",
        '[models."bad id"]\npath = "x"\n',
        'models."bad id": must be a non-empty name without whitespace (got "bad id")',
    ),
    (
        "quoted-id",
        '[models."qwen3.5"]\npath = ""\n',
        'models."qwen3.5".path: must be a non-empty string (got "")',
    ),
    (
        "cpu-blas",
        '[server]\ncpu_blas = "/nonexistent/libblas.so.3"\n' + MINIMAL,
        'server.cpu_blas: must be "auto", "off" or the absolute path of an existing shared library '
        '(got "/nonexistent/libblas.so.3")',
    ),
    (
        "output-ceiling",
        MINIMAL + "max_output_tokens = -1\n",
        "models.coder.max_output_tokens: must be an integer >= 0 (got -1)",
    ),
    (
        "table",
        "models = 3\n",
        "models: must be a table (got 3)",
    ),
    (
        "model-table",
        '[models]\ncoder = "x"\n',
        'models.coder: must be a table (got "x")',
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"), [case[1:] for case in FIELD_ERRORS], ids=[case[0] for case in FIELD_ERRORS]
)
def test_each_error_names_its_toml_path(text, expected):
    assert errors_of(text) == [expected]


def test_unknown_key_lists_allowed_keys():
    (line,) = errors_of(MINIMAL + "kv_bits = 4\n")
    assert line.startswith("models.coder.kv_bits: unknown key; allowed keys: path, aliases, preload, ")
    assert line.endswith(", sampling, kv_cache, prefix_cache, shard")
    (line,) = errors_of("[serverx]\n")
    assert line == "serverx: unknown key; allowed keys: server, models, keys"


def test_all_errors_of_a_file_are_collected():
    errors = errors_of(
        """
        [server]
        port = -1
        bogus = true

        [models.a]
        max_queue = -1
        aliases = ["b"]

        [models.a.kv_cache]
        group_size = 48

        [models.b]
        path = "org/b"
        [models.b.sampling]
        temperature = 2.5
        """
    )
    assert errors == [
        "server.port: must be an integer from 0 to 65535 (got -1)",
        f"server.bogus: unknown key; allowed keys: {SERVER_KEYS}",
        "models.a.path: required",
        "models.a.max_queue: must be an integer >= 0 (got -1)",
        "models.a.kv_cache.group_size: must be 32, 64 or 128 (got 48)",
        "models.b.sampling.temperature: must be a number from 0 to 2 (got 2.5)",
        # Cross-model checks are reported in the same pass as field errors.
        'models.a.aliases: "b" is also a model id (models.b)',
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "[server]\nport = 8000\n[models\n",
            "rapidmlx.toml: line 3, column 8: Expected ']' at the end of a table declaration",
        ),
        ("[server]\nport = \n", "rapidmlx.toml: line 2, column 8: Invalid value"),
        ('[server]\nhost = "x', "rapidmlx.toml: end of file: Unterminated string"),
    ],
)
def test_toml_syntax_error_names_file_line_and_column(text, expected):
    assert errors_of(text) == [expected]


# --- cross-model checks --------------------------------------------------------------------------------


def test_alias_equal_to_a_model_id_is_rejected():
    text = MINIMAL + 'aliases = ["helper"]\n[models.helper]\npath = "org/helper"\n'
    assert errors_of(text) == ['models.coder.aliases: "helper" is also a model id (models.helper)']


def test_exact_alias_in_two_models_names_both():
    text = """
    [models.a]
    path = "org/a"
    aliases = ["fast", "claude-*"]
    [models.b]
    path = "org/b"
    aliases = ["fast"]
    """
    assert errors_of(text) == ['models.a.aliases: "fast" is also an alias of models.b']


def test_glob_aliases_may_overlap():
    text = """
    [models.a]
    path = "org/a"
    aliases = ["claude-*", "gpt-?"]
    [models.b]
    path = "org/b"
    aliases = ["claude-*", "gpt-?"]
    """
    assert list(load(text).models) == ["a", "b"]


def test_alias_conflicts_also_checks_validated_models():
    from router.ops.config.load import alias_conflicts

    models = {"a": ModelConfig(path="x", aliases=("fast",)), "b": ModelConfig(path="y", aliases=("fast", "a"))}
    assert alias_conflicts(models) == [
        'models.b.aliases: "a" is also a model id (models.a)',
        'models.a.aliases: "fast" is also an alias of models.b',
    ]


def test_settings_view_mirrors_router_config():
    from router.ops.config.load import _RouterSettings

    # The pydantic-settings class repeats RouterConfig's fields; a new top-level table must go in both.
    assert {name: f.annotation for name, f in _RouterSettings.model_fields.items()} == {
        name: f.annotation for name, f in RouterConfig.model_fields.items()
    }


# --- helpers -------------------------------------------------------------------------------------------


def test_validate_file(tmp_path):
    good = tmp_path / "good.toml"
    good.write_text(MINIMAL)
    bad = tmp_path / "bad.toml"
    bad.write_text(MINIMAL + "[models.coder.kv_cache]\nbits = 3\n[server]\nport = 1.5\n")
    syntax = tmp_path / "syntax.toml"
    syntax.write_text("[server\n")
    assert validate_file(good, env={}) == []
    assert validate_file(bad, env={}) == [
        "server.port: must be an integer from 0 to 65535 (got 1.5)",
        "models.coder.kv_cache.bits: must be 0, 4 or 8 (got 3)",
    ]
    assert validate_file(syntax, env={}) == [
        f"{syntax}: line 1, column 8: Expected ']' at the end of a table declaration"
    ]
    (missing,) = validate_file(tmp_path / "nope.toml", env={})
    assert missing.startswith(f"{tmp_path / 'nope.toml'}: cannot read")


def test_single_model_config():
    config = single_model_config("demo", "/models/demo", port=9100, offline=True)
    assert list(config.models) == ["demo"]
    assert config.models["demo"] == ModelConfig(path="/models/demo")
    assert (config.server.port, config.server.offline, config.server.host) == (9100, True, "127.0.0.1")
    with pytest.raises(ConfigError) as caught:
        single_model_config("demo", "x", port=70000, colour="red")
    assert caught.value.errors == [
        "server.port: must be an integer from 0 to 65535 (got 70000)",
        f"server.colour: unknown key; allowed keys: {SERVER_KEYS}",
    ]


def test_resolve_runtime_dir(tmp_path):
    assert resolve_runtime_dir(ServerConfig(runtime_dir=str(tmp_path)), env={}) == tmp_path
    assert resolve_runtime_dir(ServerConfig(), env={"XDG_RUNTIME_DIR": "/run/user/7"}) == Path("/run/user/7/rapid-mlx")
    fallback = resolve_runtime_dir(ServerConfig(), env={})
    assert fallback.name.startswith("rapid-mlx-") and fallback.name != "rapid-mlx-"


# --- the example file stays in sync with the schema ----------------------------------------------------


def schema_leaves(model: type[pydantic.BaseModel], prefix: tuple[str, ...] = ()):
    """Yield (path, field) for every non-table field of `model`, descending into sub-tables."""
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
            yield from schema_leaves(annotation, (*prefix, name))
        else:
            yield (*prefix, name), field


def lookup(table: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        assert isinstance(table, dict) and key in table, f"example does not set {'.'.join(path)}"
        table = table[key]
    return table


def test_example_sets_every_field_to_its_default():
    raw = tomllib.loads(EXAMPLE.read_text())
    config = load_config(EXAMPLE, env={})
    assert config.models, "example declares no model"
    tables: list[tuple[tuple[str, ...], type[pydantic.BaseModel], Any]] = [(("server",), ServerConfig, config.server)]
    tables += [(("models", model_id), type(model), model) for model_id, model in config.models.items()]
    checked = 0
    for prefix, schema, loaded in tables:
        for path, field in schema_leaves(schema):
            lookup(raw, prefix + path)  # set explicitly, not merely defaulted
            value: Any = loaded
            for key in path:
                value = getattr(value, key)
            default = field.get_default(call_default_factory=True)
            name = ".".join(prefix + path)
            if path[-1] in EXAMPLE_NON_DEFAULT:
                assert value and value != default, f"{name}: example should show a real value"
            else:
                assert value == default, f"{name}: example has {value!r}, schema default is {default!r}"
            checked += 1
    per_model = sum(len(list(schema_leaves(type(model)))) for model in config.models.values())
    assert {type(model) for model in config.models.values()} == {ModelConfig, UpstreamModelConfig}, "example shows both kinds"
    assert checked == len(list(schema_leaves(ServerConfig))) + per_model
    assert checked >= 30


def test_example_comments_every_key():
    for line in EXAMPLE.read_text().splitlines():
        if re.match(r"\s*[A-Za-z_]+\s*=", line):
            _, _, comment = line.partition("#")
            assert comment.strip(), f"key without a comment: {line!r}"


def test_example_validates_cleanly():
    assert validate_file(EXAMPLE, env={}) == []
