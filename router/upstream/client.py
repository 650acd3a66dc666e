"""One upstream model: its pooled HTTP client, its health checks and its requests in flight.

The client is an ``httpx.AsyncClient`` per upstream (keep-alive connections reused across requests).
Its health task asks ``GET <upstream>/models`` on the schedule ``health.py`` keeps; any HTTP answer
below 500 counts as reachable (a 401 still proves the host serves). Nothing here knows an API's
body shapes: ``proxy.py`` sends requests through ``send``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Mapping

import httpx

from router.ops.config import ServerConfig, UpstreamModelConfig, is_off_fleet
from router.ops.metrics.families import Metrics
from router.upstream.health import Health, UpstreamState
from router.upstream.asyncio_streams import AsyncioBackend
from router.upstream.held_writes import held_writes_transport

__all__ = ["CHECK_TIMEOUT_S", "Upstream"]

logger = logging.getLogger(__name__)

CHECK_TIMEOUT_S = 5.0
CONNECT_TIMEOUT_S = 5.0


class Upstream:
    """A configured ``[models.<id>] upstream = ...`` entry, live."""

    def __init__(self, model_id: str, config: UpstreamModelConfig, server: ServerConfig, *,
                 env: Mapping[str, str], metrics: Metrics) -> None:
        self.model_id = model_id
        self.config = config
        self.off_fleet = is_off_fleet(config, server)
        self.created = int(time.time())
        self.health = Health()
        self.inflight = 0
        self.requests = 0
        self._metrics = metrics
        self._api_key = env.get(config.api_key_env) if config.api_key_env else None
        self._base = config.upstream.rstrip("/")
        timeout = httpx.Timeout(config.timeout_s, connect=min(CONNECT_TIMEOUT_S, config.timeout_s))
        limits = httpx.Limits(max_connections=config.max_concurrency + 1, max_keepalive_connections=config.max_concurrency)
        # Environment proxies only for hosts off the fleet: fleet traffic goes straight to the machine named.
        # Sockets on asyncio's transports (asyncio_streams.py), one write per request (held_writes.py),
        # and TCP_NODELAY: a request longer than a segment ends in a short one, which Nagle's algorithm
        # holds for the upstream's (delayed, up to 40 ms) ACK.
        transport = held_writes_transport(network_backend=AsyncioBackend(), limits=limits,
                                          socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
        self.client = httpx.AsyncClient(timeout=timeout, transport=transport, trust_env=self.off_fleet)
        self._client_headers = dict(self.client.headers)  # httpx's defaults (user-agent, accept, ...)
        self._timeouts = timeout.as_dict()
        self._urls: dict[str, httpx.URL] = {}
        self._recheck = asyncio.Event()
        self._health_task: asyncio.Task | None = None
        metrics.upstream_healthy.labels(model_id).set(1)

    def same_as(self, config: UpstreamModelConfig, server: ServerConfig, env: Mapping[str, str]) -> bool:
        """Whether a reloaded table (and the key its env var now holds) leaves this upstream as it is."""
        key = env.get(config.api_key_env) if config.api_key_env else None
        return config == self.config and key == self._api_key and is_off_fleet(config, server) == self.off_fleet

    @property
    def upstream_model(self) -> str:
        return self.config.upstream_model or self.model_id

    def url(self, path: str) -> str:
        return self._base + path

    def post(self, path: str, content: bytes, headers: Mapping[str, str]) -> httpx.Request:
        """A POST of ``content`` to ``path`` below the upstream's base URL, for ``client.send``.

        Not ``client.build_request``, which parses the URL and merges the client's headers, cookies
        and query parameters again for every request, a fifth of the front's own time before its
        upstream request went out (docs/benchmarks.md, "One upstream hop"). Here a path's URL is
        parsed once and the client's default headers were read once. No cookie the upstream set is
        sent back: one client's cookies are not another's.
        """
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = httpx.URL(self.url(path))
        return httpx.Request("POST", url, content=content, headers={**self._client_headers, **headers},
                             extensions={"timeout": self._timeouts})

    def auth_headers(self, *, anthropic: bool) -> dict[str, str]:
        """The upstream's own key (never a client's): x-api-key for Anthropic's API, else a bearer token."""
        if not self._api_key:
            return {}
        return {"x-api-key": self._api_key} if anthropic else {"Authorization": f"Bearer {self._api_key}"}

    # ------------------------------------------------------------------ requests in flight

    def has_room(self) -> bool:
        return self.health.available and self.inflight < self.config.max_concurrency

    def take(self) -> None:
        self.inflight += 1
        self.requests += 1
        self._metrics.upstream_running.labels(self.model_id).inc()

    def give_back(self) -> None:
        self.inflight -= 1
        self._metrics.upstream_running.labels(self.model_id).dec()

    def unreachable(self, error: str) -> None:
        """A request could not reach the upstream: refuse the next ones until a check answers."""
        self.health.failed(error, check=False)
        self._metrics.upstream_errors.labels(self.model_id, "unreachable").inc()
        self._metrics.upstream_healthy.labels(self.model_id).set(0)
        logger.warning("upstream %s (%s): unreachable: %s", self.model_id, self._base, error)
        self._recheck.set()

    # ------------------------------------------------------------------ health checks

    def start(self) -> None:
        if self._health_task is None:
            self._health_task = asyncio.create_task(self._check_forever(), name=f"upstream-health[{self.model_id}]")

    async def close(self) -> None:
        if self._health_task is not None:
            self._health_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._health_task
        await self.client.aclose()

    async def check(self) -> bool:
        """One health check now; True if the upstream answered."""
        started = time.perf_counter()
        try:
            response = await self.client.get(self.url("/models"), headers=self.auth_headers(anthropic=False),
                                              timeout=min(CHECK_TIMEOUT_S, self.config.timeout_s))
        except httpx.HTTPError as exc:
            return self._check_failed(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        if response.status_code >= 500:
            return self._check_failed(f"GET /models answered {response.status_code}")
        was = self.health.state
        self.health.succeeded(time.perf_counter() - started)
        self._metrics.upstream_healthy.labels(self.model_id).set(1)
        if was is UpstreamState.UNREACHABLE:
            logger.info("upstream %s (%s): reachable again", self.model_id, self._base)
        return True

    def _check_failed(self, error: str) -> bool:
        first = self.health.state is not UpstreamState.UNREACHABLE
        self.health.failed(error, check=True)
        self._metrics.upstream_errors.labels(self.model_id, "check").inc()
        self._metrics.upstream_healthy.labels(self.model_id).set(0)
        if first:
            logger.warning("upstream %s (%s): health check failed: %s", self.model_id, self._base, error)
        return False

    async def _check_forever(self) -> None:
        while True:
            await self.check()
            self._recheck.clear()
            # A request that fails meanwhile wakes the loop early: its backoff starts over at 1 s.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._recheck.wait(), max(0.0, self.health.next_check_at - time.monotonic()))
                await asyncio.sleep(max(0.0, self.health.next_check_at - time.monotonic()))

    def status(self) -> dict[str, object]:
        """What /admin/status shows for it."""
        return {
            "upstream": self._base, "upstream_model": self.upstream_model, "off_fleet": self.off_fleet,
            "aliases": list(self.config.aliases), "inflight": self.inflight, "max_concurrency": self.config.max_concurrency,
            "requests": self.requests, **self.health.as_dict(),
        }
