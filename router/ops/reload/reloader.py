"""The reload: read the file → validate (as ``rapid-mlx validate``) → diff per model → apply.

One reload at a time by construction: a run never awaits (reading, checking and diffing a
small file, then ``ModelPool.apply``, which only starts background work), so no two runs
interleave on the event loop, and every trigger reads the file as it is then: the latest
content wins. What outlives a run — a replacement worker loading, an old one draining — is the
pool's: a newer reload cancels a replacement it supersedes. An invalid file changes nothing:
the errors are logged and kept for ``/admin/status``, and the last good config keeps serving.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from router.ops.config import ConfigError, RouterConfig, load_config_text, read_config_text
from router.ops.reload.diff import diff_keys, diff_models, diff_server
from router.ops.auth.guard import Access
from router.pool import ModelPool
from router.upstream.registry import Upstreams
from router.turn.parser_choice import pin_problems

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReloadResult:
    ok: bool
    trigger: str  # "watch", "sighup", "api"
    at: float  # unix time
    version: int  # the config version serving after this reload
    errors: list[str] = field(default_factory=list)  # as `rapid-mlx validate` prints them
    changes: dict[str, str] = field(default_factory=dict)  # model id → "engine: kv_cache.bits", ...
    server_changes: list[str] = field(default_factory=list)
    key_changes: dict[str, str] = field(default_factory=dict)  # key name → "added", "changed: rpm", ...
    needs_restart: list[str] = field(default_factory=list)  # [server] fields left as they run

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_config(text: str, *, source: str, env: Mapping[str, str] | None = None,
                 overrides: Mapping[str, Any] | None = None) -> RouterConfig:
    """Everything ``rapid-mlx validate`` checks: the schema, then every pinned parser name.

    Raises:
        ConfigError: one line per problem, each naming its TOML path.
    """
    config = load_config_text(text, env=env, source=source, overrides=overrides)
    problems = [line for model_id, model in config.local_models.items()
                for line in pin_problems(model_id, tool_parser=model.tool_parser, reasoning_parser=model.reasoning_parser)]
    if problems:
        raise ConfigError(problems)
    return config


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Reloader:
    """Applies edits of ``path`` to ``pool``, one reload at a time."""

    def __init__(self, pool: ModelPool, path: Path | None, *, text: str | None = None,
                 env: Mapping[str, str] | None = None, overrides: Mapping[str, Any] | None = None,
                 access: Access | None = None, upstreams: Upstreams | None = None) -> None:
        self._pool = pool
        self._upstreams = upstreams
        self._access = access
        self.path = path  # None: serving a config built from arguments (the demo); nothing to reload
        self._env = env
        self._overrides = overrides
        self.version = 1
        self.hash = content_hash(text) if text is not None else None
        self.last: ReloadResult | None = None

    def file_changed(self) -> bool:
        """Whether the file now differs from what was last loaded (an edit the watcher started too late to see)."""
        try:
            return self.path is not None and content_hash(self.path.read_text(encoding="utf-8")) != self.hash
        except (OSError, UnicodeDecodeError):
            return True  # the reload reports why it cannot read it

    def reload(self, source: str) -> ReloadResult:
        """Reload now, on the event loop's thread (the watcher, the SIGHUP handler, the admin route).

        Never overlaps another run: see the module docstring.
        """
        self.last = result = self._run(source)
        metrics = self._pool.metrics
        metrics.config_reloads.labels("success" if result.ok else "failure").inc()
        metrics.config_last_reload_ok.set(1 if result.ok else 0)
        if result.ok:
            metrics.config_last_success.set(result.at)
        return result

    def _run(self, source: str) -> ReloadResult:
        now = time.time()
        if self.path is None:
            return ReloadResult(False, source, now, self.version, ["no config file: the server was started without --config"])
        try:
            text = read_config_text(self.path)
            config = check_config(text, source=str(self.path), env=self._env, overrides=self._overrides)
        except ConfigError as exc:
            return self._rejected(source, now, exc.errors)
        changes = diff_models(self._pool.running_configs(), config.local_models)
        server = diff_server(self._pool.config.server, config.server)
        keys = diff_keys(self._pool.config.keys, config.keys)
        self._pool.apply(config, changes)
        upstream_changes = self._upstreams.apply(config) if self._upstreams is not None else {}
        if self._access is not None:
            self._access.update(config, self._env)  # keys and their settings: live
        if content_hash(text) != self.hash:  # the version counts the file's contents, not reloads
            self.version += 1
            self.hash = content_hash(text)
        described = {c.model_id: c.describe() for c in changes} | {model_id: f"upstream {what}" for model_id, what in upstream_changes.items()}
        result = ReloadResult(True, source, now, self.version, changes=described,
                              server_changes=list(server.live), key_changes=keys,
                              needs_restart=list(server.needs_restart))
        logger.info("config reloaded (%s): version %d, %s", source, self.version,
                    "; ".join(f"{model_id} {what}" for model_id, what in result.changes.items()) or "no model changed")
        if server.needs_restart:
            logger.warning("config reload: %s changed; these apply at the next restart", ", ".join(f"server.{f}" for f in server.needs_restart))
        return result

    def _rejected(self, source: str, now: float, errors: list[str]) -> ReloadResult:
        logger.error("config reload (%s) rejected; the last good config keeps serving:\n%s", source, "\n".join(errors))
        return ReloadResult(False, source, now, self.version, errors)
