"""Finished episodes leave no memory behind (issue 36: "RSS flat over any number of finished episodes").

The sandbox app runs in-process; ``tracemalloc`` measures what stays allocated
after N finished episodes (create, search, visit, close), at two N. Every
episode searches words no other episode used, as real agents' queries do: that
is what filled PyStemmer's per-thread word caches (10,000 words per worker
thread) and made a long-running sandbox grow with every episode. The two
bounded maps of closed episodes (``RECENTLY_CLOSED``, ``REMEMBERED_OFFSETS``) are
shrunk so they are full before measuring; they are bounded by design.
"""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from pathlib import Path

import httpx
import pytest

import aethersearch.sandbox.action_log as action_log_module
import aethersearch.sandbox.server as server_module
from aethersearch.sandbox.episode import Sandbox
from aethersearch.sandbox.server import create_app

# What N episodes may leave allocated, whatever N is. Measured 2026-12-05: before the fix
# 100 episodes left 59 KB and 200 left 109 KB (two stemmer cache entries of ~235 B per episode);
# after it 13-14 KB and 7 KB.
BOUND_BYTES = 24_000


async def _episodes(client: httpx.AsyncClient, start: int, count: int) -> None:
    for n in range(start, start + count):
        created = await client.post("/episodes", json={"question_id": "q1", "run_id": f"mem-{n}"})
        assert created.status_code == 200, created.text
        eid = created.json()["episode_id"]
        found = await client.post(f"/episodes/{eid}/search", json={"query": f"cornes zqa{n}x zqb{n}ing", "k": 3})
        assert found.status_code == 200, found.text
        await client.post(f"/episodes/{eid}/visit", json={"page": "Kane Cornes"})
        closed = await client.post(f"/episodes/{eid}/close")
        assert closed.status_code == 200, closed.text


def test_finished_episodes_leave_memory_flat(mini_sandbox: Sandbox, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_module, "RECENTLY_CLOSED", 8)
    monkeypatch.setattr(action_log_module, "REMEMBERED_OFFSETS", 8)
    app = create_app(mini_sandbox, action_log=tmp_path / "actions.jsonl")
    growth: dict[int, int] = {}

    async def scenario() -> None:
        async with app.router.lifespan_context(app), httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://sandbox") as client:
            await _episodes(client, 0, 40)  # warm: lazy imports, caches of fixed size, the bounded maps full
            tracemalloc.start(1)
            try:
                # and warm under tracing: what is allocated once (e.g. the first allocations tracing
                # sees of structures that then stay) must not count against the episodes measured
                await _episodes(client, 40, 120)
                done = 160
                for count in (100, 200):
                    gc.collect()
                    before = tracemalloc.get_traced_memory()[0]
                    await _episodes(client, done, count)
                    done += count
                    gc.collect()
                    growth[count] = tracemalloc.get_traced_memory()[0] - before
            finally:
                tracemalloc.stop()

    asyncio.run(scenario())
    assert len(app.state.episodes) == 0
    assert growth[100] < BOUND_BYTES and growth[200] < BOUND_BYTES, (
        f"memory left by finished episodes: {growth} bytes (bound {BOUND_BYTES}, independent of N)")
