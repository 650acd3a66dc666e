"""Admission: a request holds its places on a model once, and spillover takes them as it decides "local".

The race this guards: spillover routing saw room, then the endpoint awaited the worker before taking
the place, so a burst all saw the same room and part of it got 429 instead of spilling. The upstream
here is a closed loopback port (a real refused connection), so the third request's spill attempt
fails fast and shows that it was tried.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import msgspec
import pytest
from litestar import Request

from router.admission import admit, release_admissions
from router.api.fleet import route_to_fleet
from router.errors import OverloadedError
from router.ops.config import load_config
from router.pool import ModelPool
from router.upstream.health import UpstreamState
from router.upstream.proxy import API_CHAT, API_COUNT_TOKENS
from router.upstream.registry import Upstreams


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def fleet(tmp_path: Path, tiny_models):
    file = tmp_path / "rapidmlx.toml"
    file.write_text(
        f'[models.coder]\npath = "{tiny_models.path("qwen3")}"\npreload = false\nmax_concurrency = 1\nmax_queue = 1\n'
        'spillover = ["far"]\n'
        f'[models.far]\nupstream = "http://127.0.0.1:{closed_port()}/v1"\n')
    config = load_config(file, env={})
    pool = ModelPool(config, tmp_path / "run")
    return pool, Upstreams(config, env={}, metrics=pool.metrics)


def in_request(handler):
    """Run ``handler`` inside the release_admissions middleware, as one HTTP exchange; returns what it returned."""
    outcome: list = []

    async def app(scope, receive, send):
        outcome.append(await handler(Request(scope)))

    async def exchange():
        await release_admissions(app)({"type": "http", "method": "POST", "path": "/", "headers": []}, None, None)
        return outcome[0]

    return exchange()


def chat(model: str = "coder") -> bytes:
    return msgspec.json.encode({"model": model, "messages": [{"role": "user", "content": "hi"}]})


def test_a_request_holds_its_places_once_and_gives_them_back_when_it_ends(fleet):
    pool, _ = fleet
    handle = pool.handles["coder"]

    async def twice(request):
        admit(handle, 1)
        admit(handle, 1)  # the endpoint asking again for the same model takes nothing more
        held = handle.inflight
        admit(handle, 2)  # asking for more tops up to what is asked
        return held, handle.inflight

    assert asyncio.run(in_request(twice)) == (1, 2)
    assert handle.inflight == 0


def test_spillover_takes_the_place_when_it_decides_local_so_a_burst_cannot_share_one_room(fleet):
    pool, upstreams = fleet
    handle = pool.handles["coder"]

    async def scenario():
        release = asyncio.Event()
        outcomes: list[str] = []

        async def request(req):
            try:
                routed = await route_to_fleet(req, chat(), pool, upstreams, API_CHAT)
                assert routed is None  # served locally, or refused below
                await asyncio.sleep(0)  # the endpoint awaits the worker here (ensure_ready always yields)
                admit(handle, 1)  # what open_model does next
            except OverloadedError:
                outcomes.append("429")
                return
            outcomes.append("local")
            await release.wait()

        tasks = [asyncio.create_task(in_request(request)) for _ in range(3)]
        while len(outcomes) < 3:
            await asyncio.sleep(0.01)
        inflight = handle.inflight
        release.set()
        await asyncio.gather(*tasks)
        return sorted(outcomes), inflight

    outcomes, inflight = asyncio.run(scenario())
    assert outcomes == ["429", "local", "local"]
    assert inflight == 2  # each local request counted once, not once by routing and again by the endpoint
    # The third saw the room taken and tried its spillover upstream (refused: nothing listens there).
    assert upstreams.get("far").health.state is UpstreamState.UNREACHABLE
    assert handle.inflight == 0


def test_token_counting_takes_no_place_even_with_spillover(fleet):
    pool, upstreams = fleet
    handle = pool.handles["coder"]

    async def count(req):
        await route_to_fleet(req, chat(), pool, upstreams, API_COUNT_TOKENS)
        return handle.inflight

    assert asyncio.run(in_request(count)) == 0
