"""What a config edit changed, per model: the reload applies exactly that and nothing more.

A model's change is ``engine`` when its worker must be replaced (the process holds those settings),
``router`` when the router alone applies it with the worker untouched. Of ``[server]``, a few
fields are bound when the server starts (the socket, the app's body limits); those are reported
as needing a restart and left as they run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from router.ops.config import KeyConfig, ModelConfig, ServerConfig

# ModelConfig fields the worker process is started with.
ENGINE_FIELDS = frozenset({"path", "kv_cache", "prefix_cache", "max_concurrency", "max_context", "prefill_step", "shard"})
# ServerConfig fields bound at start: the listening socket, the app's limits, where sockets live,
# whether the file is watched at all.
RESTART_FIELDS = frozenset({"host", "port", "runtime_dir", "max_body_mb", "header_timeout_s", "body_timeout_s", "watch_config",
                            "cors_origins"})

ChangeKind = Literal["added", "removed", "engine", "router"]


@dataclass(frozen=True)
class ModelChange:
    model_id: str
    kind: ChangeKind
    fields: tuple[str, ...] = ()  # dotted TOML paths below [models.<id>], e.g. "kv_cache.bits"

    def describe(self) -> str:
        return f"{self.kind}: {', '.join(self.fields)}" if self.fields else self.kind


@dataclass(frozen=True)
class ServerChange:
    live: tuple[str, ...] = ()
    needs_restart: tuple[str, ...] = ()


def diff_models(old: Mapping[str, ModelConfig], new: Mapping[str, ModelConfig]) -> list[ModelChange]:
    """One change per model that was added, removed or edited (unchanged models are left out)."""
    changes = [ModelChange(model_id, "removed") for model_id in old if model_id not in new]
    for model_id, config in new.items():
        if model_id not in old:
            changes.append(ModelChange(model_id, "added"))
            continue
        fields = changed_fields(old[model_id], config)
        if fields:
            engine = any(field.split(".", 1)[0] in ENGINE_FIELDS for field in fields)
            changes.append(ModelChange(model_id, "engine" if engine else "router", tuple(fields)))
    return changes


def diff_keys(old: tuple[KeyConfig, ...], new: tuple[KeyConfig, ...]) -> dict[str, str]:
    """Key name → "added", "removed" or "changed: rpm, models" (names only: secrets stay out of results)."""
    before, after = {key.name: key for key in old}, {key.name: key for key in new}
    changes = {name: "removed" for name in before if name not in after}
    for name, key in after.items():
        if name not in before:
            changes[name] = "added"
        elif fields := changed_fields(before[name], key):
            changes[name] = f"changed: {', '.join(fields)}"
    return changes


def diff_server(old: ServerConfig, new: ServerConfig) -> ServerChange:
    fields = changed_fields(old, new)
    return ServerChange(tuple(f for f in fields if f not in RESTART_FIELDS), tuple(f for f in fields if f in RESTART_FIELDS))


def changed_fields(old: BaseModel, new: BaseModel, prefix: str = "") -> list[str]:
    """Dotted paths of the fields whose values differ, descending into nested tables."""
    changed: list[str] = []
    for name in type(new).model_fields:
        before, after = getattr(old, name), getattr(new, name)
        if before == after:
            continue
        if isinstance(before, BaseModel) and isinstance(after, BaseModel):
            changed.extend(changed_fields(before, after, f"{prefix}{name}."))
        else:
            changed.append(prefix + name)
    return changed
