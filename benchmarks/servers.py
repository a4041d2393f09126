"""Servers under closed-loop load: ``/retrieve`` and the masked sandbox, three rounds, loopback only.

Run ``.venv/bin/python benchmarks/servers.py`` (levels 64, 512, 2048 clients, three
rounds, ``--seconds`` per level), or ``--episodes 100000`` to drive the sandbox
through that many finished episodes and report its RSS along the way.

Both servers run as separate processes on 127.0.0.1 (``aether serve`` and the
sandbox over the demo world's pages, with a durable action log). Each client is
closed-loop: it sends its next request as soon as the previous one answered.

* ``/retrieve``: one query, topk 3 (one rollout step of Search-R1).
* sandbox: one *episode* per loop: create, search, visit a page of the result,
  close; each of the four requests is counted.

Per round and level it prints requests/s, p50/p99 latency, errors by kind, the
requests retried once because a pooled keep-alive connection had been closed by the
server while idle (``ServerDisconnectedError``; the load generator's busy loop had
not seen the close), the server's own counts over the run (``/health``: connections
closed by kind, refusals by status, the kernel's listen-queue drops), the drops no
server count explains, the generator's worst event-loop lag, and the
server's RSS at the end of the round; then RSS of every round relative to the
first (the goal: within 5%) and p99 per level across rounds. The load generator
is one aiohttp process; everything runs on this machine's shared cores, so quote
medians and say the machine was shared.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

LEVELS = (64, 512, 2048)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def build(workdir: Path) -> tuple[Path, list[str]]:
    """The demo world's store and bm25 index in ``workdir``, and the words queries are drawn from."""
    from aethersearch.corpus.demo_world import generate_world
    from aethersearch.corpus.store import build_store
    from aethersearch.search.index_dir import build_index

    world = generate_world()
    build_index(build_store(world.documents, workdir / "store"), "bm25", workdir / "index")
    words = sorted({w for doc in world.documents for w in doc.title.split() if w.isalpha()})
    return workdir / "index", words


def sandbox_masks(index_dir: Path, n: int = 200, seed: int = 0) -> dict[str, Any]:
    """``n`` synthetic two-hop chains a -> b -> c along the demo world's links (b and c masked)."""
    from aethersearch.sandbox.mask import ChainMask
    from aethersearch.search.index_dir import open_index

    store = open_index(index_dir).store
    docs = {doc.id: doc for doc in store}
    rng = random.Random(seed)
    masks: dict[str, Any] = {}
    ids = sorted(docs)
    while len(masks) < n:
        a = docs[rng.choice(ids)]
        nexts = [x for x in a.links if x in docs and x != a.id]
        if not nexts:
            continue
        b = docs[rng.choice(nexts)]
        lasts = [x for x in b.links if x in docs and x not in (a.id, b.id)]
        if lasts:
            c = docs[rng.choice(lasts)]
            masks[f"q{len(masks)}"] = ChainMask([a.id, b.id, c.id], {b.id: [b.title], c.id: [c.title]})
    return masks


def serve_sandbox(index_dir: str, port: int, log: str, keep_alive_s: int) -> None:
    """Subprocess body: the sandbox over the demo world with :func:`sandbox_masks`."""
    from aethersearch.sandbox.episode import Sandbox
    from aethersearch.sandbox.server import SandboxLimits, serve
    from aethersearch.search.http_guard import HttpTimeouts
    from aethersearch.search.index_dir import open_index

    opened = open_index(index_dir)
    serve(Sandbox(sandbox_masks(Path(index_dir)), opened.index, opened.store, release_id="bench"), port=port,
          action_log=log, limits=SandboxLimits(timeouts=HttpTimeouts(keep_alive_s=keep_alive_s)))


def _wait_ready(url: str, process: subprocess.Popen[bytes], limit_s: float = 600) -> None:
    import httpx

    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server at {url} exited with {process.returncode}")
        try:
            if httpx.get(url + "/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"the server at {url} did not answer /health within {limit_s:.0f} s")


def _rss_mb(pid: int) -> float:
    import psutil

    return float(psutil.Process(pid).memory_info().rss) / 2**20


class Load:
    """Closed-loop clients against one server; latencies and errors per run."""

    def __init__(self, base: str, words: list[str], kind: str) -> None:
        self.base, self.words, self.kind = base, words, kind
        self.latencies: list[float] = []
        self.errors = 0
        self.error_kinds: Counter[str] = Counter()
        self.episodes = 0
        self.stale_retries = 0
        self.max_lag_s = 0.0
        self.runs = 0  # run ids carry it: a later round never reuses an id an earlier one left open

    def _query(self, rng: random.Random) -> str:
        return " ".join(rng.choice(self.words) for _ in range(rng.randint(1, 3)))

    async def _timed(self, session: Any, method: str, path: str, body: Any = None) -> Any:
        import aiohttp

        started = time.perf_counter()
        for attempt in (1, 2):
            try:
                async with session.request(method, self.base + path, json=body) as response:
                    data = await response.json(content_type=None)
                    ok = response.status < 500 and (response.status == 200 or "call" in data)
                break
            except aiohttp.ServerDisconnectedError as error:
                # a pooled keep-alive connection the server had closed while idle, its close unseen by this
                # busy loop: retried once, as HTTP/1.1 clients retry a request that got no reply on a reused
                # connection (RFC 9112 section 9.3.1); counted apart and matched against the server's count
                if attempt == 1:
                    self.stale_retries += 1
                    continue
                return self._failed(error)
            except Exception as error:  # noqa: BLE001 -- counted: a load test reports errors, it does not stop at one
                return self._failed(error)
        self.latencies.append(time.perf_counter() - started)
        if not ok:
            self.errors += 1
            self.error_kinds[f"HTTP {response.status} {method} {path.split('/')[-1] or path}"] += 1
            return None
        return data

    def _failed(self, error: Exception) -> None:
        self.errors += 1
        self.error_kinds[type(error).__name__] += 1
        return None

    async def _lag_probe(self, stop: asyncio.Event) -> None:
        """The load generator's own event-loop lag (the longest a 50 ms sleep overran): a busy loop does
        not see the server's keep-alive closes in time."""
        while not stop.is_set():
            before = time.perf_counter()
            await asyncio.sleep(0.05)
            self.max_lag_s = max(self.max_lag_s, time.perf_counter() - before - 0.05)

    async def _client(self, session: Any, number: int, stop_at: float, max_episodes: int | None) -> None:
        rng = random.Random(number)
        while time.monotonic() < stop_at and (max_episodes is None or self.episodes < max_episodes):
            if self.kind == "retrieve":
                await self._timed(session, "POST", "/retrieve", {"queries": [self._query(rng)], "topk": 3})
                continue
            created = await self._timed(session, "POST", "/episodes",
                                        {"question_id": f"q{rng.randrange(200)}", "run_id": f"r{self.runs}-c{number}-{rng.random()}"})
            if created is None:
                continue
            eid = created["episode_id"]
            found = await self._timed(session, "POST", f"/episodes/{eid}/search", {"query": self._query(rng), "k": 3})
            page = found["documents"][0]["id"] if found and found.get("documents") else "nowhere"
            await self._timed(session, "POST", f"/episodes/{eid}/visit", {"page": page})
            await self._timed(session, "POST", f"/episodes/{eid}/close")
            self.episodes += 1

    async def run(self, clients: int, seconds: float, max_episodes: int | None = None) -> dict[str, Any]:
        import aiohttp

        self.latencies, self.errors, self.error_kinds = [], 0, Counter()
        self.stale_retries, self.max_lag_s = 0, 0.0
        self.runs += 1
        before = server_counts(self.base)
        connector = aiohttp.TCPConnector(limit=0, force_close=False)
        timeout = aiohttp.ClientTimeout(total=120)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            started = time.monotonic()
            stop_at = started + seconds
            stop = asyncio.Event()
            probe = asyncio.create_task(self._lag_probe(stop))
            await asyncio.gather(*(self._client(session, n, stop_at, max_episodes) for n in range(clients)))
            stop.set()
            await probe
            wall = time.monotonic() - started
        after = server_counts(self.base)
        lat = sorted(self.latencies) or [float("nan")]
        closes = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
        server_closed = closes.get("keep_alive_idle_closed", 0) + closes.get("header_timeout_closed", 0)
        return {"requests_per_s": len(self.latencies) / wall, "p50_ms": 1000 * lat[len(lat) // 2],
                "p99_ms": 1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))], "errors": self.errors,
                "error_kinds": dict(self.error_kinds.most_common(4)),
                "requests": len(self.latencies), "stale_retries": self.stale_retries,
                "server_counts": closes, "max_lag_ms": 1000 * self.max_lag_s,
                # a client-side drop is explained when the server counted a close for it (or refused it)
                "unexplained": self.errors + max(0, self.stale_retries - server_closed)}


def server_counts(base: str) -> dict[str, int]:
    """The server's own counts of what it closed or refused (``/health``: ``connections`` by kind, refusals
    by status) and the kernel's listen-queue drops (machine-wide), for the change over one run."""
    import httpx

    health = httpx.get(base + "/health", timeout=30).json()
    connections = health.get("connections", {})
    out = {str(k): int(v) for k, v in connections.get("by_kind", {}).items()}
    out.update({f"refused {k}": int(v) for k, v in health.get("refusals", {}).get("by_status", {}).items()})
    out.update({f"kernel {k}": int(v) for k, v in (connections.get("kernel_listen_drops") or {}).items()})
    return out


def run_text(result: dict[str, Any]) -> str:
    """Errors, retries and the server's counts of one run, side by side."""
    return (f"errors {result['errors']} {result['error_kinds'] or ''} stale keep-alive retries "
            f"{result['stale_retries']}, server counted {result['server_counts'] or '{}'}, unexplained "
            f"{result['unexplained']}; client loop lag max {result['max_lag_ms']:.0f} ms")


def rounds(name: str, load: Load, pid: int, levels: list[int], seconds: float, repeat: int) -> None:
    rss_by_round: list[float] = []
    p99: dict[int, list[float]] = {level: [] for level in levels}
    print(f"\n== {name} (pid {pid}); RSS after start-up {_rss_mb(pid):.0f} MB; {load_text()}", flush=True)
    for number in range(1, repeat + 1):
        for level in levels:
            result = asyncio.run(load.run(level, seconds))
            p99[level].append(result["p99_ms"])
            print(f"round {number} clients {level:5d}: {result['requests_per_s']:8.0f} req/s  p50 "
                  f"{result['p50_ms']:7.1f} ms  p99 {result['p99_ms']:8.1f} ms  {run_text(result)}  "
                  f"RSS {_rss_mb(pid):.0f} MB; {load_text()}", flush=True)
        rss_by_round.append(_rss_mb(pid))
    first = rss_by_round[0]
    print(f"{name}: RSS per round (MB) {', '.join(f'{r:.0f}' for r in rss_by_round)}; relative to round 1: "
          + ", ".join(f"{r / first:.3f}" for r in rss_by_round))
    for level, values in p99.items():
        print(f"{name}: p99 at {level} clients per round (ms): {', '.join(f'{v:.1f}' for v in values)}")


def episodes_run(load: Load, pid: int, total: int, clients: int, every: int | None = None) -> None:
    """Drive ``total`` finished episodes; RSS after warm-up, after the first 1%, then every ``every`` (10%)."""
    start = _rss_mb(pid)
    step = every or max(1, total // 10)
    began = time.monotonic()
    asyncio.run(load.run(clients, 1e9, max_episodes=max(1, total // 100)))
    first = _rss_mb(pid)
    print(f"\n== sandbox episodes, {clients} clients: RSS after start-up {start:.0f} MB, after {load.episodes:,} "
          f"episodes {first:.0f} MB; {load_text()}", flush=True)
    while load.episodes < total:
        result = asyncio.run(load.run(clients, 1e9, max_episodes=min(total, load.episodes + step)))
        rss = _rss_mb(pid)
        print(f"{load.episodes:9,d} episodes in {time.monotonic() - began:6.0f} s: RSS {rss:.0f} MB ({rss / first:.3f} "
              f"of the first 1%; {rss / start:.3f} of start-up); last stretch {result['requests_per_s']:.0f} req/s, "
              f"p50 {result['p50_ms']:.1f} ms, p99 {result['p99_ms']:.1f} ms, {run_text(result)}; "
              f"{load_text()}",
              flush=True)


def bytes_per_action(index_dir: Path, episodes: int, actions: int) -> None:
    """Bytes one open action holds, in-process (``tracemalloc``): the compact records open episodes keep
    now (``sandbox.action_record``) beside the ``records.ToolCall`` objects they kept before, for the same
    actions (a search of the demo world's title words, then a visit of its first hit, alternately)."""
    import gc
    import tracemalloc

    from aethersearch.sandbox.action_record import episode_ceiling_bytes, worst_action_bytes
    from aethersearch.sandbox.episode import MAX_K, Sandbox
    from aethersearch.sandbox.server import SandboxLimits
    from aethersearch.search.index_dir import open_index

    opened = open_index(index_dir)
    masks = sandbox_masks(index_dir)
    sandbox = Sandbox(masks, opened.index, opened.store, release_id="bench")
    words = sorted({w for doc in opened.store for w in doc.title.split() if w.isalpha()})
    rng = random.Random(0)

    def drive(keep_calls: list[Any] | None) -> float:
        held = [sandbox.episode(f"q{e % len(masks)}", run_id=f"b{e}") for e in range(episodes)]
        gc.collect()
        tracemalloc.start(1)
        try:
            before = tracemalloc.get_traced_memory()[0]
            for episode in held:
                page = "nowhere"
                for n in range(actions):
                    if n % 2 == 0:
                        result = episode.search_sync(" ".join(rng.choice(words) for _ in range(2)), 5)
                        page = result.documents[0].id if result.documents else "nowhere"
                    else:
                        episode.visit_sync(page)
                    call = episode.take_last_call()
                    if keep_calls is not None:  # the old representation: the full ToolCall, per action
                        keep_calls.append(call)
            gc.collect()
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        return grown / (episodes * actions)

    drive(None)  # warm: lazy imports, interned ids, caches
    compact = drive(None)
    kept: list[Any] = []
    both = drive(kept)
    old = both - compact + 8  # the ToolCall objects on top of the records (+ the old list's slot, 8 B)
    max_masked = max(len(mask.masked) for mask in masks.values())
    limits = SandboxLimits()
    per_episode = episode_ceiling_bytes(limits.max_actions, MAX_K, max_masked)
    print(f"bytes per open action ({episodes} episodes x {actions} actions, demo world): compact records "
          f"{compact:,.0f} B; as records.ToolCall (before) {old:,.0f} B; ratio {old / compact:.1f}x. Worst case "
          f"by construction {worst_action_bytes(MAX_K, max_masked):,} B an action; ceiling at "
          f"{limits.max_actions} actions {per_episode:,} B an episode, so --max-episode-memory-mb "
          f"{limits.max_episode_memory_mb:,} holds {(limits.max_episode_memory_mb << 20) // per_episode:,} open "
          f"episodes; {load_text()}", flush=True)


def load_text() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default=",".join(map(str, LEVELS)))
    parser.add_argument("--seconds", type=float, default=10.0, help="per level and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=("retrieve", "sandbox"), default=None)
    parser.add_argument("--episodes", type=int, default=0, help="instead: this many sandbox episodes, RSS along")
    parser.add_argument("--episode-clients", type=int, default=64)
    parser.add_argument("--report-every", type=int, default=None, help="episodes between RSS lines (default 10%%)")
    parser.add_argument("--keep-alive-s", type=int, default=None,
                        help="the servers' idle keep-alive (default theirs, 5 s): shorter shows the busy-client drops")
    parser.add_argument("--bytes-per-action", action="store_true",
                        help="instead: bytes one open action holds, now and as before (in-process)")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    if max(levels) > 4096 or args.rounds > 10:
        raise SystemExit("bounded: at most 4,096 clients and 10 rounds")
    with tempfile.TemporaryDirectory(prefix="aether-bench-servers-") as tmp:
        work = Path(tmp)
        index_dir, words = build(work)
        if args.bytes_per_action:
            bytes_per_action(index_dir, 100, 40)
            return
        processes: list[subprocess.Popen[bytes]] = []
        try:
            if args.only != "sandbox" and not args.episodes:
                port = _free_port()
                keep_alive = ["--keep-alive-s", str(args.keep_alive_s)] if args.keep_alive_s else []
                process = subprocess.Popen([sys.executable, "-c", "from aethersearch.cli import main; main()", "serve", str(index_dir),
                                            "--host", "127.0.0.1", "--port", str(port), *keep_alive],
                                           stdout=subprocess.DEVNULL)
                processes.append(process)
                _wait_ready(f"http://127.0.0.1:{port}", process)
                rounds("/retrieve", Load(f"http://127.0.0.1:{port}", words, "retrieve"), process.pid, levels,
                       args.seconds, args.rounds)
            if args.only != "retrieve":
                port = _free_port()
                process = subprocess.Popen([sys.executable, __file__, "--serve-sandbox", str(index_dir), str(port),
                                            str(work / "actions.jsonl"), str(args.keep_alive_s or 5)])
                processes.append(process)
                _wait_ready(f"http://127.0.0.1:{port}", process)
                load = Load(f"http://127.0.0.1:{port}", words, "sandbox")
                if args.episodes:
                    episodes_run(load, process.pid, args.episodes, args.episode_clients, args.report_every)
                else:
                    rounds("sandbox", load, process.pid, levels, args.seconds, args.rounds)
        finally:
            for process in processes:
                process.terminate()
                process.wait(30)


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--serve-sandbox":
        serve_sandbox(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
    else:
        main()
