"""The load rounds' dropped connections at 2,048 clients, reproduced and made visible (issue 49, point 5).

The cause: the server closes a keep-alive connection idle for ``--keep-alive-s``
(normal HTTP); a load generator whose event loop is too busy to process that close
(2,048 clients on one loaded core) sends its next request on the dead connection
and reads "server disconnected". The server logged nothing and counted nothing;
now ``/health`` counts each such close, so every client-side drop is matched by a
server-side count.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import httpx
import pytest

from aethersearch.search.http_guard import LISTEN_BACKLOG, HttpTimeouts, TimedHttpToolsProtocol, uvicorn_options
from aethersearch.search.index_dir import OpenedIndex
from aethersearch.search.server import ServerLimits, create_app
from tests.search.test_refusal_reasons import _serve

TIMEOUTS = HttpTimeouts(header_timeout_s=5.0, body_timeout_s=5.0, keep_alive_s=1)
PARSERS = ["h11"] + (["httptools"] if TimedHttpToolsProtocol is not None else [])


@pytest.fixture(params=PARSERS)
def url(request: pytest.FixtureRequest, demo_index: OpenedIndex) -> Iterator[str]:
    yield from _serve(create_app(demo_index.index, demo_index.store, ServerLimits(timeouts=TIMEOUTS)),
                      request.param, TIMEOUTS)


def _idle_closes(url: str) -> int:
    return int(httpx.get(f"{url}/health").json()["connections"]["by_kind"].get("keep_alive_idle_closed", 0))


def test_a_busy_client_loses_its_idle_connection_and_the_server_counts_it(url: str) -> None:
    async def busy_client() -> str:
        async with aiohttp.ClientSession() as session:
            async with session.post(f"{url}/retrieve", json={"queries": ["Morulistan"]}) as reply:
                assert reply.status == 200
            # the loop is blocked: the server's close goes unseen. Wait until the server has closed the idle
            # connection (its counter says so), not a fixed time a loaded machine may overrun.
            deadline = time.monotonic() + TIMEOUTS.keep_alive_s + 30
            while _idle_closes(url) < before + 1 and time.monotonic() < deadline:
                time.sleep(0.1)
            try:
                async with session.post(f"{url}/retrieve", json={"queries": ["Morulistan"]}) as reply:
                    return str(reply.status)
            except aiohttp.ServerDisconnectedError as error:
                return type(error).__name__

    before = _idle_closes(url)
    # what the load rounds saw is the ServerDisconnectedError; aiohttp may also notice the close at an await
    # before it reuses the connection and reconnect (a 200): which one is a race in the client, not the server
    assert asyncio.run(busy_client()) in ("ServerDisconnectedError", "200")
    assert _idle_closes(url) == before + 1  # before: nothing counted, nothing logged


def test_the_servers_ask_for_a_deep_accept_queue() -> None:
    options: dict[str, Any] = uvicorn_options("auto", TIMEOUTS)
    assert options["backlog"] == LISTEN_BACKLOG > 2048  # uvicorn's default 2,048 = the top load level
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert soft == hard or hard == resource.RLIM_INFINITY  # raised to the hard limit
