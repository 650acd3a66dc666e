"""``GET /metrics`` and the counting of every HTTP response (by API and status, refusals by reason)."""

from __future__ import annotations

from litestar import Controller, Response
from litestar.di import NamedDependency
from litestar.types import Message, Scope
from prometheus_client import generate_latest

from router.http.methods import get_or_head
from router.ops.metrics.families import Metrics
from router.ops.metrics.workers import PoolCollector

# Path prefixes → the API label; anything else is "other".
_APIS = (("/v1/chat/completions", "chat"), ("/v1/completions", "completions"), ("/v1/responses", "responses"),
         ("/v1/messages", "messages"), ("/v1/models", "models"), ("/admin", "admin"), ("/metrics", "metrics"))
# Statuses that refuse a request before it generates: what the rejections family counts.
_REFUSALS = frozenset({403, 404, 408, 413, 429, 503})


def api_of(path: str) -> str:
    return next((api for prefix, api in _APIS if path.startswith(prefix)), "other")


def counting_hook(metrics: Metrics):
    """A ``before_send`` hook counting each response once, at its start."""

    async def count_response(message: Message, scope: Scope) -> None:
        if message["type"] != "http.response.start":
            return
        status = message["status"]
        metrics.http_requests.labels(api_of(scope.get("path", "")), str(status)).inc()
        if status == 401:
            metrics.auth_failures.inc()
        elif status in _REFUSALS:
            metrics.rejections.labels(scope.get("state", {}).get("error_code") or str(status)).inc()

    return count_response


class MetricsController(Controller):
    path = "/metrics"
    opt = {"metrics": True}

    @get_or_head()
    async def scrape(self, metrics: NamedDependency[Metrics], collector: NamedDependency[PoolCollector]) -> Response[bytes]:
        await collector.refresh()
        # The text format every Prometheus reads; Litestar adds the charset.
        return Response(generate_latest(metrics.registry), media_type="text/plain; version=0.0.4")
