"""The app-wide objects the inference endpoints serve with, read from the app's state.

The inference endpoints (chat, completions, Responses, Messages) take them from here, not as Litestar
dependencies: Litestar resolves two or more dependencies of one handler concurrently, in an anyio
task group with a task for each, and on a proxied request that was about a sixth of the front's own
time before its upstream request went out (docs/benchmarks.md, "One upstream hop"). The admin,
status and model-list routes, off that path, keep their dependencies (router/app.py).
"""

from __future__ import annotations

from litestar.connection import ASGIConnection

from router.api.responses.store import ResponseStore
from router.pool import ModelPool
from router.upstream.registry import Upstreams

__all__ = ["pool_of", "responses_of", "upstreams_of"]


def pool_of(connection: ASGIConnection) -> ModelPool:
    return connection.app.state.pool


def upstreams_of(connection: ASGIConnection) -> Upstreams:
    return connection.app.state.upstreams


def responses_of(connection: ASGIConnection) -> ResponseStore:
    return connection.app.state.responses
