"""``GET /episodes/{id}/trace`` latency against the action log's size, for ids the log never opened (issue 49).

Why: a client (careless or hostile) asking for random episode ids used to make
the sandbox read its whole action log per request: 6 ms with an 88 KB log,
275 ms with a 25.7 MB one, and eight such clients slowed ``/health`` from 0.8 to
172 ms. ``sandbox.action_log.SeenIds`` now answers "never opened" without
reading the log. This benchmark writes synthetic action logs of the sizes asked
(the real event shapes: open, calls, close; 64 episodes still open at the end),
starts the sandbox app over the six-page test sandbox on each (its start-up
recovery reads the log once), and times, in-process through httpx's ASGI
transport, the median of ``--requests`` trace requests for random unknown ids,
beside the same requests with the filter disabled (every id "maybe", the old
path) up to ``--old-up-to`` bytes. It prints the latency per size and the ratio
of the largest to the smallest (goal: flat, about 1).

Usage: ``.venv/bin/python benchmarks/sandbox_trace.py [--sizes-mb 1,100,1000] [--requests 200]``
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CALL = {"tool": "search", "arguments": {"query": "Kane Cornes", "k": 3}, "returned_ids": ["kane", "chad", "nicole"],
        "suppressed_ids": ["graham"], "error": None, "elapsed_s": 0.0012, "started_at": 1765000000.0}


def write_log(path: Path, size: int) -> int:
    """A synthetic action log of about ``size`` bytes; returns how many episodes it opened."""
    episodes = 0
    with path.open("wb") as out:
        written = 0
        while written < size:
            block = []
            for _ in range(256):
                eid = uuid.uuid4().hex
                block.append({"event": "open", "episode_id": eid, "question_id": "q1", "run_id": f"r{episodes}"})
                block.extend({"event": "call", "episode_id": eid, "seq": seq, "status": 200, "call": CALL}
                             for seq in range(4))
                block.append({"event": "close", "episode_id": eid, "question_id": "q1", "run_id": f"r{episodes}",
                              "calls": 4})
                episodes += 1
            data = b"".join(orjson.dumps(row) + b"\n" for row in block)
            out.write(data)
            written += len(data)
    return episodes


async def median_latency(app: Any, requests: int) -> float:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sandbox") as http:
        times = []
        for _ in range(requests):
            started = time.perf_counter()
            response = await http.get(f"/episodes/{uuid.uuid4().hex}/trace")
            times.append(time.perf_counter() - started)
            assert response.status_code == 404, response.text
        return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    from aethersearch.sandbox.server import create_app
    from aethersearch.search.index_dir import build_index
    from tests.sandbox.conftest import PAGES, make_masks

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", default="1,100,1000")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--old-up-to", type=float, default=30.0, help="MB: time the old path up to this size")
    args = parser.parse_args(argv)
    logging.getLogger("uvicorn.error.aethersearch").setLevel(logging.ERROR)  # the 404s are the point, not news
    from aethersearch.corpus.store import build_store
    from aethersearch.sandbox.episode import Sandbox

    with tempfile.TemporaryDirectory(prefix="bench-sandbox-trace-") as tmp:
        root = Path(tmp)
        store = build_store(PAGES, root / "store")
        index = build_index(store, "bm25", root / "index", config={"numba": False}).index
        sandbox = Sandbox(make_masks(), index, store, release_id="mini")
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        new: dict[float, float] = {}
        for size_mb in (float(s) for s in args.sizes_mb.split(",")):
            log = root / f"log-{size_mb:g}.jsonl"
            episodes = write_log(log, int(size_mb * 1e6))
            started = time.perf_counter()
            app = create_app(sandbox, action_log=log)
            recovered_s = time.perf_counter() - started
            new[size_mb] = asyncio.run(median_latency(app, args.requests))
            line = (f"{size_mb:>7g} MB log ({episodes:,} episodes, start-up {recovered_s:.1f}s): unknown id "
                    f"{1e3 * new[size_mb]:.2f} ms median")
            if size_mb <= args.old_up_to:  # the old path: every id might be in the log, so the log is read
                app.state.action_log.seen = type("Everything", (), {"__contains__": lambda self, _id: True})()
                old = asyncio.run(median_latency(app, max(10, args.requests // 10)))
                line += f"; old path (log read per id) {1e3 * old:.2f} ms ({old / new[size_mb]:.0f}x)"
            app.state.action_log.close()
            log.unlink()
            print(line)
        sizes = sorted(new)
        print(f"largest / smallest log: {new[sizes[-1]] / new[sizes[0]]:.2f}x latency (goal: flat, ~1)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
