"""The key ring: a request's secret → the `[[keys]]` entry it belongs to, and what that key may use.

Secrets are kept only as SHA-256 digests (from `key_sha256`, or hashed from `key_env` when the
config loads), and a presented secret is compared with every digest in constant time, so
neither the secret nor which key almost matched leaks through timing. Nothing here logs.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from router.ops.config import KeyConfig


@dataclass(frozen=True)
class _Entry:
    digest: bytes
    key: KeyConfig


class KeyRing:
    """The configured keys; empty means the endpoint is open."""

    def __init__(self, keys: Iterable[KeyConfig] = (), env: Mapping[str, str] | None = None) -> None:
        environment = os.environ if env is None else env
        keys = tuple(keys)
        self._enabled = bool(keys)
        self.names = tuple(key.name for key in keys)
        # A key_env key whose variable is unset matches nothing (load_config refuses that config).
        self._entries = tuple(_Entry(digest, key) for key in keys if (digest := _digest_of(key, environment)) is not None)

    @property
    def enabled(self) -> bool:
        return self._enabled

    def identify(self, secret: str | None) -> KeyConfig | None:
        """The key ``secret`` belongs to, or None."""
        if not secret:
            return None
        presented = hashlib.sha256(secret.encode()).digest()
        found = None
        for entry in self._entries:  # no early exit: every comparison runs
            if hmac.compare_digest(presented, entry.digest):
                found = entry.key
        return found


def may_use(key: KeyConfig | None, requested: str, model_id: str) -> bool:
    """Whether ``key`` may use the model a client named ``requested`` (resolved to ``model_id``).

    A pattern of the allowlist (an id, an alias, a glob) may match either: `models = ["coder"]`
    allows every alias of coder, `models = ["claude-*"]` the names a client may send.
    """
    if key is None:
        return True
    return any(fnmatch.fnmatchcase(requested, pattern) or fnmatch.fnmatchcase(model_id, pattern) for pattern in key.models)


def secret_from_headers(authorization: str | None, x_api_key: str | None) -> str | None:
    """The secret a request presents: `Authorization: Bearer <secret>` (OpenAI) or `x-api-key` (Anthropic)."""
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    return x_api_key.strip() if x_api_key and x_api_key.strip() else None


def _digest_of(key: KeyConfig, env: Mapping[str, str]) -> bytes | None:
    if key.key_sha256:
        return bytes.fromhex(key.key_sha256)
    secret = env.get(key.key_env)
    return hashlib.sha256(secret.encode()).digest() if secret else None
