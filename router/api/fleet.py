"""Where an inference request is served: the local worker, an upstream model, or a spillover upstream.

Every inference endpoint asks ``route_to_fleet`` first, with the raw body: a name that resolves to an
upstream model is proxied; a local model with ``spillover`` may be sent to one of its upstreams
(router/upstream/spillover.py); otherwise the endpoint serves it locally as before. The response says
where it was served in ``x-rapidmlx-served-by`` (``local`` or ``upstream:<id>``) whenever the config
has upstream models.
"""

from __future__ import annotations

import fnmatch
from typing import Any

import msgspec
from litestar import Request, Response
from litestar.response import Stream
from litestar.types import Message, Scope

from router.admission import admit
from router.errors import ModelNotFoundError, PermissionDeniedError
from router.ops.auth.guard import current_key
from router.ops.auth.keys import may_use
from router.pool import ModelHandle, ModelPool
from router.upstream.client import Upstream
from router.upstream.proxy import Api, UpstreamUnreachableError, forward
from router.upstream.registry import Upstreams
from router.upstream.spillover import choose_spillover

__all__ = ["SERVED_BY_HEADER", "add_served_by_header", "allowed_target", "resolve_target", "route_to_fleet"]

SERVED_BY_HEADER = "x-rapidmlx-served-by"


def resolve_target(pool: ModelPool, upstreams: Upstreams, name: str) -> ModelHandle | Upstream:
    """The model a client named, local or upstream: by id, exact alias, then glob alias in file order."""
    if name in pool.handles:
        return pool.handles[name]
    if (upstream := upstreams.get(name)) is not None:
        return upstream
    models = pool.config.models
    for model_id, model in models.items():
        if name in model.aliases and (target := _target(pool, upstreams, model_id)) is not None:
            return target
    for model_id, model in models.items():
        if any(_is_glob(alias) and fnmatch.fnmatchcase(name, alias) for alias in model.aliases):
            if (target := _target(pool, upstreams, model_id)) is not None:
                return target
    raise ModelNotFoundError(name)


def allowed_target(pool: ModelPool, upstreams: Upstreams, name: str) -> ModelHandle | Upstream:
    """``resolve_target``, then the request's key must be allowed the model (403)."""
    target = resolve_target(pool, upstreams, name)
    key = current_key.get()
    if not may_use(key, name, target.model_id):
        raise PermissionDeniedError(f"Key {key.name!r} may not use model `{name}`.", param="model")
    return target


async def route_to_fleet(request: Request, raw: bytes, pool: ModelPool, upstreams: Upstreams, api: Api) -> Response | Stream | None:
    """The reply when an upstream serves this request; None when the endpoint should serve it locally."""
    if not upstreams.by_id:  # a single machine: nothing to route (no header), and no second decode of the body
        return None
    state = request.scope.setdefault("state", {})
    body = _json_object(raw)
    if body is None or not isinstance(body.get("model"), str):
        return None  # the endpoint's own decoding reports what is wrong
    name = body["model"]
    target = allowed_target(pool, upstreams, name)
    metrics = pool.metrics
    if isinstance(target, Upstream):
        state["served_by"] = f"upstream:{target.model_id}"
        return await forward(target, api, body, client_name=name, client_headers=request.headers, metrics=metrics)
    spill = choose_spillover(target, upstreams, _generations(body)) if api.generates else None
    if spill is not None:
        for upstream in spill.targets:
            try:
                reply = await forward(upstream, api, body, client_name=name, client_headers=request.headers, metrics=metrics)
            except UpstreamUnreachableError:
                continue  # found down just now: the next target, else the local model as usual
            state["served_by"] = f"upstream:{upstream.model_id}"
            metrics.spillover.labels(target.model_id, upstream.model_id, spill.reason).inc()
            return reply
    if target.config.spillover and api.generates:
        # Take the places in the step that decided local (no await since the room was seen): the
        # endpoint's admit then takes nothing more, and a burst cannot all see one room and get 429.
        admit(target, _generations(body))
    state["served_by"] = "local"
    return None


async def add_served_by_header(message: Message, scope: Scope) -> None:
    """``before_send`` hook: the response's ``x-rapidmlx-served-by``, when routing decided it."""
    if message["type"] != "http.response.start":
        return
    served_by = scope.get("state", {}).get("served_by")
    if served_by:
        message["headers"] = [*message.get("headers", ()), (SERVED_BY_HEADER.encode(), served_by.encode())]


def _json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    return body if isinstance(body, dict) else None


def _generations(body: dict[str, Any]) -> int:
    """Places the request takes locally: a completions request with a list of prompts takes one each."""
    prompt = body.get("prompt")
    if isinstance(prompt, list) and prompt and all(isinstance(item, (str, list)) for item in prompt):
        return len(prompt)
    return 1


def _target(pool: ModelPool, upstreams: Upstreams, model_id: str) -> ModelHandle | Upstream | None:
    return pool.handles.get(model_id) or upstreams.get(model_id)


def _is_glob(alias: str) -> bool:
    return any(ch in alias for ch in "*?[")
