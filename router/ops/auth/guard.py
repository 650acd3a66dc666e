"""The guard on every route: which key a request presents, what that key may reach, its limits.

With no `[[keys]]` the endpoint is open (and `/admin/*` answers only on loopback, see
router/ops/admin.py). With keys, every route needs one except those marked ``opt={"open": True}``
(`/health`, the status page's shell and files); routes marked ``admin`` need an admin key, and ``metrics`` routes too while
`[server] metrics_auth` is on (off, they are open). The key found is the request's for the
rest of its exchange (``current_key``): the model allowlist is checked where the model name
resolves (router/api/dispatch.py), and `/v1/models` lists only what the key may use.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from dataclasses import dataclass, field

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from router.admission import on_release
from router.errors import AuthenticationError, PermissionDeniedError
from router.http.browser import wants_html
from router.ops.auth.keys import KeyRing, secret_from_headers
from router.ops.auth.limits import KeyLimits
from router.ops.config import KeyConfig, RouterConfig

# The key of the request being handled (None: no keys configured, or an open route).
current_key: contextvars.ContextVar[KeyConfig | None] = contextvars.ContextVar("rapidmlx_key", default=None)


@dataclass
class Access:
    """The keys in force (replaced on every reload) and the per-key counts (kept across reloads)."""

    keys: KeyRing = field(default_factory=KeyRing)
    metrics_auth: bool = True
    limits: KeyLimits = field(default_factory=KeyLimits)

    def update(self, config: RouterConfig, env: Mapping[str, str] | None = None) -> None:
        self.keys = KeyRing(config.keys, env)
        self.metrics_auth = config.server.metrics_auth


async def require_key(connection: ASGIConnection, handler: BaseRouteHandler) -> None:
    access: Access = connection.app.state.access
    if not access.keys.enabled or handler.opt.get("open") or (handler.opt.get("metrics") and not access.metrics_auth):
        return  # metrics_auth = false: /metrics is open, for a scraper on a private network
    if handler.opt.get("browser_redirect") and wants_html(connection):
        return  # `/` sends a browser to /ui, which reveals nothing without a key
    key = access.keys.identify(secret_from_headers(connection.headers.get("authorization"), connection.headers.get("x-api-key")))
    if key is None:
        raise AuthenticationError("Invalid or missing API key: send it as 'Authorization: Bearer <key>' or 'x-api-key: <key>'.")
    if handler.opt.get("admin") and not key.admin:
        raise PermissionDeniedError(f"Key {key.name!r} may not use the admin routes.")
    if handler.opt.get("metrics") and not key.admin:
        raise PermissionDeniedError(f"Key {key.name!r} may not read /metrics (metrics_auth = true needs an admin key).")
    access.limits.take(key)
    on_release(lambda: access.limits.give_back(key.name))
    connection.app.state.metrics.key_requests.labels(key.name).inc()
    current_key.set(key)
