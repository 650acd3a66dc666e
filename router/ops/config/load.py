"""Loading `rapidmlx.toml`: parse -> environment overlay -> validate -> cross-model checks.

Pure: the text (or path), the environment mapping and any explicit overrides are arguments, and nothing
is cached, so a reload can load a candidate config while the last good one keeps serving.
pydantic-settings merges the layers (explicit overrides > `RAPIDMLX_` environment > file); the schema
lives in `schema.py` and the wording of errors in `errors.py`.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from .errors import ConfigError, dotted_path, translate_errors
from .fleet import fleet_problems, raw_fleet_problems
from .schema import AnyModelConfig, KeyConfig, ModelConfig, ModelId, RouterConfig, ServerConfig, UpstreamModelConfig

__all__ = [
    "ENV_PREFIX",
    "alias_conflicts",
    "load_config",
    "load_config_text",
    "read_config_text",
    "resolve_runtime_dir",
    "single_model_config",
    "validate_file",
]

ENV_PREFIX = "RAPIDMLX_"
_ENV_DELIMITER = "__"
_GLOB_CHARS = frozenset("*?[")
# tomllib (3.11-3.13) only puts the position into the message text.
_TOML_POSITION = re.compile(r"^(?P<msg>.*?) \((?:at line (?P<line>\d+), column (?P<col>\d+)|at end of document)\)$")


def load_config(
    path: str | os.PathLike[str],
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> RouterConfig:
    """Load and validate a `rapidmlx.toml` file.

    Args:
        path: The TOML file; its name prefixes syntax errors.
        env: Environment to take `RAPIDMLX_*` overrides from; None means `os.environ`.
        overrides: Nested values that beat both the file and the environment
            (e.g. `{"server": {"port": 9000}}` from CLI flags).

    Returns:
        The validated config, models in file order.

    Raises:
        ConfigError: The file is unreadable or invalid; `errors` lists every problem found.
    """
    return load_config_text(read_config_text(path), env=env, source=os.fspath(path), overrides=overrides)


def read_config_text(path: str | os.PathLike[str]) -> str:
    """The file's text, or a ConfigError naming the file (unreadable, not UTF-8)."""
    source = os.fspath(path)
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError([f"{source}: not UTF-8 text"]) from None
    except OSError as exc:
        raise ConfigError([f"{source}: cannot read ({exc.strerror or exc})"]) from None


def load_config_text(
    text: str,
    *,
    env: Mapping[str, str] | None = None,
    source: str = "<string>",
    overrides: Mapping[str, Any] | None = None,
) -> RouterConfig:
    """Load and validate TOML text, as `load_config` does for a file.

    Args:
        text: The TOML document.
        env: Environment to take `RAPIDMLX_*` overrides from; None means `os.environ`.
        source: Name used in syntax errors (`rapidmlx.toml: line 3, column 7: ...`).
        overrides: Nested values that beat both the text and the environment.

    Returns:
        The validated config.

    Raises:
        ConfigError: The text is not TOML or does not fit the schema.
    """
    document = _parse_toml(text, source)
    return _build(document, os.environ if env is None else env, overrides or {})


def single_model_config(
    model_id: str, path: str, *, model_options: Mapping[str, Any] | None = None, **server_overrides: Any
) -> RouterConfig:
    """The config `serve` runs with when no file is given: one model, server defaults plus overrides.

    The environment is not consulted, so the result depends only on the arguments.

    Args:
        model_id: Name clients send.
        path: Local directory or Hugging Face repo id.
        model_options: Other `[models.<id>]` keys, e.g. `{"sampling": {"temperature": 0.0}}`.
        **server_overrides: `[server]` fields, e.g. `port=9000`.

    Raises:
        ConfigError: An argument breaks the schema (the message names the TOML path it would have).
    """
    document = {"models": {model_id: {**(model_options or {}), "path": path}}}
    return _build(document, {}, {"server": server_overrides} if server_overrides else {})


def validate_file(path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None) -> list[str]:
    """Check a config file against the schema (`rapid-mlx validate` adds the pinned parser names:
    `router.ops.reload.reloader.check_config`).

    Args:
        path: The TOML file.
        env: Environment overrides to apply; None means `os.environ`.

    Returns:
        One line per problem, or [] when the file is valid.
    """
    try:
        load_config(path, env=env)
    except ConfigError as exc:
        return exc.errors
    return []


def resolve_runtime_dir(server: ServerConfig, *, env: Mapping[str, str] | None = None) -> Path:
    """Where sockets and worker state go. Computes the path only; creating it (0700) is the caller's job.

    Args:
        server: The `[server]` table; a non-empty `runtime_dir` wins (`~` expanded).
        env: Environment for `XDG_RUNTIME_DIR`; None means `os.environ`.

    Returns:
        `runtime_dir`, else `$XDG_RUNTIME_DIR/rapid-mlx`, else `<tempdir>/rapid-mlx-<uid>`.
    """
    if server.runtime_dir:
        return Path(server.runtime_dir).expanduser()
    xdg = (os.environ if env is None else env).get("XDG_RUNTIME_DIR")
    if xdg:
        return Path(xdg) / "rapid-mlx"
    # Per-uid name: a shared /tmp must not let two users collide on (or hijack) each other's sockets.
    return Path(tempfile.gettempdir()) / f"rapid-mlx-{os.getuid()}"


def alias_conflicts(models: Any) -> list[str]:
    """Cross-model alias checks, on raw tables or `ModelConfig`s (so they run even when fields fail).

    An alias must not equal any model id, and an exact (non-glob) alias must belong to one model only.
    Overlapping glob aliases are allowed: the first declared model wins at routing time.

    Returns:
        One line per conflict, naming both places.
    """
    if not isinstance(models, Mapping):
        return []
    lines: list[str] = []
    owners: dict[str, list[str]] = {}
    for model_id, table in models.items():
        where = dotted_path(("models", model_id, "aliases"))
        for alias in dict.fromkeys(_aliases_of(table)):
            if alias in models:
                lines.append(f"{where}: {json.dumps(alias)} is also a model id ({dotted_path(('models', alias))})")
            elif not _GLOB_CHARS.intersection(alias):
                owners.setdefault(alias, []).append(model_id)
    for alias, model_ids in owners.items():
        first, *others = model_ids
        if others:
            named = ", ".join(dotted_path(("models", other)) for other in others)
            where = dotted_path(("models", first, "aliases"))
            lines.append(f"{where}: {json.dumps(alias)} is also an alias of {named}")
    return lines


def key_name_conflicts(keys: Any) -> list[str]:
    """`[[keys]]` names must be unique: logs, metrics and limits are kept by name."""
    if not isinstance(keys, (list, tuple)):
        return []
    seen: dict[str, int] = {}
    lines = []
    for index, key in enumerate(keys):
        name = key.name if isinstance(key, KeyConfig) else key.get("name") if isinstance(key, Mapping) else None
        if not isinstance(name, str):
            continue
        if name in seen:
            lines.append(f"keys[{index}].name: {json.dumps(name)} is also the name of keys[{seen[name]}]")
        else:
            seen[name] = index
    return lines


def _aliases_of(table: Any) -> list[str]:
    if isinstance(table, (ModelConfig, UpstreamModelConfig)):
        return list(table.aliases)
    aliases = table.get("aliases", ()) if isinstance(table, Mapping) else ()
    if not isinstance(aliases, (list, tuple)):
        return []  # not a list: field validation reports it
    return [alias for alias in aliases if isinstance(alias, str)]


def _parse_toml(text: str, source: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = _TOML_POSITION.match(str(exc))
        if match is None:
            raise ConfigError([f"{source}: {exc}"]) from None
        where = f"line {match['line']}, column {match['col']}" if match["line"] else "end of file"
        raise ConfigError([f"{source}: {where}: {match['msg']}"]) from None


class _Invalid(Exception):
    """Carries every problem out of validation. Not a ValueError, so pydantic lets it through untouched."""

    def __init__(self, exc: ValidationError | None, conflicts: list[str]) -> None:
        super().__init__("invalid config")
        self.exc = exc
        self.conflicts = conflicts


class _RouterSettings(BaseSettings):
    """The settings view of `RouterConfig` (same fields); subclassed per load to bind its sources."""

    # case_sensitive: TOML keys are; env names are lower-cased by `_env_entries` before they get here.
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=_ENV_DELIMITER,
        case_sensitive=True,
        extra="forbid",
        frozen=True,
    )

    server: ServerConfig = Field(default_factory=ServerConfig)
    models: dict[ModelId, AnyModelConfig] = Field(default_factory=dict)
    keys: tuple[KeyConfig, ...] = ()

    @model_validator(mode="wrap")
    @classmethod
    def _validate_all(cls, data: Any, handler: Any) -> Any:
        # Cross-model checks run on the merged raw data as well, so one pass reports field errors and
        # alias conflicts together instead of making the operator fix them in rounds.
        conflicts = alias_conflicts(data.get("models") if isinstance(data, Mapping) else None)
        conflicts += key_name_conflicts(data.get("keys") if isinstance(data, Mapping) else None)
        conflicts += raw_fleet_problems(data.get("models") if isinstance(data, Mapping) else None)
        try:
            settings = handler(data)
        except ValidationError as exc:
            raise _Invalid(exc, conflicts) from None
        if conflicts:
            raise _Invalid(None, conflicts)
        return settings


class _TomlDocumentSource(InitSettingsSource):
    """The file layer: an already-parsed TOML document.

    pydantic-settings' `TomlConfigSettingsSource` is this same `InitSettingsSource` fed by reading a path;
    parsing first lets syntax errors carry the file name and `load_config_text` work without a file.
    """


class _MappingEnvSource(EnvSettingsSource):
    """The environment layer, read from a given mapping instead of `os.environ`."""

    def __init__(self, settings_cls: type[BaseSettings], env_vars: Mapping[str, str]) -> None:
        self._mapping = dict(env_vars)
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return self._mapping

    def decode_complex_value(self, field_name: str, field: Any, value: Any) -> Any:
        # A non-JSON value for a list/table field goes on to validation as a string, so the error names
        # the TOML path and the variable instead of surfacing as an opaque SettingsError.
        try:
            return super().decode_complex_value(field_name, field, value)
        except ValueError:
            return value


def _env_key(name: str) -> str:
    return re.sub(r"[^0-9a-z]", "_", name.lower())


def _env_entries(env: Mapping[str, str], model_ids: list[str]) -> list[tuple[str, tuple[str, ...], str]]:
    """`(variable, TOML path, value)` for each `RAPIDMLX_<SERVER|MODELS>__...` variable.

    Path segments are lower-cased, except a model segment, which maps to the file's model id it spells
    (`RAPIDMLX_MODELS__QWEN3_8B__...` -> `models.Qwen3-8B`), since ids may hold characters and cases
    that variable names cannot. Other `RAPIDMLX_*` names (say, the CLI's) are not config and are skipped.
    """
    entries = []
    by_env_key = {}
    for model_id in model_ids:
        by_env_key.setdefault(_env_key(model_id), model_id)
    for name, value in env.items():
        if not name.upper().startswith(ENV_PREFIX):
            continue
        segments = [segment.lower() for segment in name[len(ENV_PREFIX) :].split(_ENV_DELIMITER)]
        if segments[0] not in RouterConfig.model_fields or not all(segments):
            continue
        if segments[0] == "models" and len(segments) > 1:
            segments[1] = by_env_key.get(_env_key(segments[1]), segments[1])
        entries.append((name, tuple(segments), value))
    return entries


def _settings_class(document: dict[str, Any], env_vars: Mapping[str, str]) -> type[_RouterSettings]:
    """Bind this load's inputs to the sources pydantic-settings asks for (it only asks the class)."""

    class _BoundSettings(_RouterSettings):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            # Order is priority: explicit overrides > environment > file. No dotenv or secrets dir: every
            # input is an argument, which keeps loading pure.
            return (
                init_settings,
                _MappingEnvSource(settings_cls, env_vars),
                _TomlDocumentSource(settings_cls, document),
            )

    return _BoundSettings


def _build(document: dict[str, Any], env: Mapping[str, str], overrides: Mapping[str, Any]) -> RouterConfig:
    models = document.get("models")
    entries = _env_entries(env, list(models) if isinstance(models, dict) else [])
    env_vars = {ENV_PREFIX + _ENV_DELIMITER.join(path): value for _, path, value in entries}
    origins = {dotted_path(path): name for name, path, _ in entries}
    try:
        settings = _settings_class(document, env_vars)(**overrides)
    except _Invalid as invalid:
        lines = translate_errors(invalid.exc, RouterConfig, origins=origins) if invalid.exc else []
        raise ConfigError(lines + invalid.conflicts) from None
    except ValidationError as exc:  # raised outside the model validator, e.g. by a source
        raise ConfigError(translate_errors(exc, RouterConfig, origins=origins)) from None
    except SettingsError as exc:
        raise ConfigError([f"environment: {exc}"]) from None
    missing = [f"keys[{i}].key_env: environment variable {key.key_env} is not set (it holds the key's secret)"
               for i, key in enumerate(settings.keys) if key.key_env and not env.get(key.key_env)]
    config = RouterConfig(server=settings.server, models=settings.models, keys=settings.keys)
    missing += [f"{dotted_path(('models', model_id, 'api_key_env'))}: environment variable {model.api_key_env} is not set "
                "(it holds the key sent upstream)"
                for model_id, model in config.upstream_models.items() if model.api_key_env and not env.get(model.api_key_env)]
    problems = missing + fleet_problems(config)
    if problems:
        raise ConfigError(problems)
    return config
