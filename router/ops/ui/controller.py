"""``GET /ui``: the status page; ``GET /ui/status``: its live fragment; ``/ui/static/*``: its
script and style, shipped as package data (no build step, no CDN: the server may be offline).

Access follows the admin routes (router/ops/admin.py). Without keys, the page and its fragment
answer on loopback only and the first paint carries the whole status. With keys, the page itself
is open but carries no status: its script asks for an admin key, keeps it in the tab's session
storage and sends it as a header to ``/ui/status`` and the admin actions, which need one.
"""

from __future__ import annotations

import functools
from importlib import resources

from litestar import Controller, MediaType, Response
from litestar.di import NamedDependency
from litestar.exceptions import NotFoundException
from litestar.params import FromPath

from router.http.methods import get_or_head
from router.ops.admin import fleet_status, loopback_only
from router.ops.auth.guard import Access
from router.ops.metrics.families import Metrics
from router.ops.reload.reloader import Reloader
from router.ops.ui.render import page, status_fragment
from router.pool import ModelPool
from router.upstream.registry import Upstreams

STATIC = {"status.js": "text/javascript; charset=utf-8", "status.css": "text/css; charset=utf-8", "favicon.svg": "image/svg+xml"}

# Only this origin's script and style; no inline code, no frames, no referrer leaving the page.
PAGE_HEADERS = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
    "referrer-policy": "no-referrer", "x-content-type-options": "nosniff", "cache-control": "no-store",
}


class StatusPageController(Controller):
    path = "/ui"
    guards = [loopback_only]

    @get_or_head("/", opt={"open": True}, media_type=MediaType.HTML)
    async def page(self, pool: NamedDependency[ModelPool], reloader: NamedDependency[Reloader],
                   upstreams: NamedDependency[Upstreams], access: NamedDependency[Access],
                   metrics: NamedDependency[Metrics]) -> Response[str]:
        keys = access.keys.enabled
        fragment = None if keys else status_fragment(await fleet_status(pool, reloader, upstreams, access, metrics))
        return Response(page(fragment=fragment, keys=keys, reloadable=reloader.path is not None), media_type=MediaType.HTML,
                        headers=PAGE_HEADERS)

    @get_or_head("/status", opt={"admin": True}, media_type=MediaType.HTML)
    async def fragment(self, pool: NamedDependency[ModelPool], reloader: NamedDependency[Reloader],
                       upstreams: NamedDependency[Upstreams], access: NamedDependency[Access],
                       metrics: NamedDependency[Metrics]) -> Response[str]:
        status = await fleet_status(pool, reloader, upstreams, access, metrics)
        return Response(status_fragment(status), media_type=MediaType.HTML, headers=PAGE_HEADERS)

    @get_or_head("/static/{name:str}", opt={"open": True})
    async def static(self, name: FromPath[str]) -> Response[bytes]:
        if name not in STATIC:
            raise NotFoundException(f"No static file {name!r}.")
        return Response(_static_bytes(name), media_type=STATIC[name], headers={"cache-control": "no-cache", "x-content-type-options": "nosniff"})


@functools.cache
def _static_bytes(name: str) -> bytes:
    """A shipped file, read once (the page asks again on every load)."""
    return resources.files("router.ops.ui").joinpath("static", name).read_bytes()
