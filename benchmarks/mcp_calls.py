"""MCP tool-call overhead: ``search`` through ``aether mcp`` against the same search through ``/retrieve`` (issue 52).

What it measures, on the demo world (its release and BM25 index), loopback only, side by side
in one run: the same queries (one per call, topk 3) sent

* to ``aether serve``'s ``POST /retrieve`` by a plain aiohttp client (the lean client the
  field's loops use: Search-R1, verl's search tool), and
* to ``aether mcp --transport http``'s ``search`` tool by the official MCP SDK's own client
  (``ClientSession`` over streamable HTTP), inside one started question whose budget is large
  enough for every call, so each call also goes through the run contract (budgeted
  environment, the episode's step record), and
* to the same tool by a lean JSON-RPC client over streamable HTTP (aiohttp: the like-for-like
  reading of the ``/retrieve`` one), and
* to the same tool over stdio (``aether mcp`` started by the client, as an MCP host starts it),
  by the SDK's client and by a lean client writing and reading one line per call.

It also times, in this process, what the run contract itself adds to a call: ``RemoteRun.call``
(the channel to the episode's agent loop, the budgeted environment, the step record) against
the environment's bare ``search``, so the SDK's own share of the MCP figure is visible.

Per path it reports CPU per call: the server process's (``psutil``) and the client's
(``time.process_time``), and their sum; then the MCP ÷ ``/retrieve`` ratio of each (goal: the
sum at most 1.5x). Medians over ``--repeats`` interleaved passes (order reversed every other
pass); the load average is printed. Run it alone (``flock /tmp/bench.lock``).

Usage: ``.venv/bin/python benchmarks/mcp_calls.py [--calls 2000] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import psutil  # noqa: E402


class Measured(NamedTuple):
    """CPU seconds per call: the server's and the client's."""

    server: float
    client: float

    @property
    def total(self) -> float:
        """Server plus client CPU per call."""
        return self.server + self.client


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"server exited: {proc.stderr.read().decode() if proc.stderr else ''}") from None
            time.sleep(0.1)
    raise SystemExit(f"no server on port {port}")


def _cpu(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


async def retrieve_calls(url: str, queries: Sequence[str]) -> None:
    """The /retrieve calls, one query each, with the lean client."""
    import aiohttp
    import orjson

    async with aiohttp.ClientSession() as session:
        for query in queries:
            body = orjson.dumps({"queries": [query], "topk": 3, "return_scores": False})
            async with session.post(url + "/retrieve", data=body,
                                    headers={"Content-Type": "application/json"}) as response:
                response.raise_for_status()
                orjson.loads(await response.read())


async def mcp_calls(url: str, queries: Sequence[str], question_id: str) -> None:
    """The same searches as MCP ``search`` calls of one started question, with the SDK's own client."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        started = await session.call_tool("start", {"question_id": question_id})
        assert not started.isError, started.content
        for query in queries:
            result = await session.call_tool("search", {"query": query, "topk": 3})
            assert not result.isError, result.content


Send = Callable[[dict[str, object]], Awaitable[dict[str, object] | None]]


async def lean_session(send: Send, queries: Sequence[str], question_id: str,
                       on_started: Callable[[], object] | None = None) -> None:
    """One lean MCP session over any transport's ``send``: initialize, the initialized notification, ``start``
    the question, then one ``tools/call`` of ``search`` per query (``on_started`` runs before the first)."""
    await send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}})
    await send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    started = await send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "start", "arguments": {"question_id": question_id}}})
    assert started is not None and not started["result"]["isError"], started  # type: ignore[index]
    if on_started is not None:
        on_started()
    for n, query in enumerate(queries, start=2):
        reply = await send({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                            "params": {"name": "search", "arguments": {"query": query, "topk": 3}}})
        assert reply is not None and not reply["result"]["isError"], reply  # type: ignore[index]


async def lean_mcp_calls(url: str, queries: Sequence[str], question_id: str) -> None:
    """The same searches as MCP ``search`` calls sent by a lean client: JSON-RPC over streamable HTTP with aiohttp.

    Why: the ``/retrieve`` figure is read with the lean client a search loop uses; this is the like-for-like
    MCP client (what an agent loop that speaks MCP without the SDK sends: initialize, the initialized
    notification, then one ``tools/call`` POST per call, with the session id the server gave).
    """
    import aiohttp
    import orjson

    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    async with aiohttp.ClientSession() as session:
        async def send(message: dict[str, object]) -> dict[str, object] | None:
            async with session.post(url, data=orjson.dumps(message), headers=headers) as response:
                response.raise_for_status()
                if "mcp-session-id" in response.headers:
                    headers["mcp-session-id"] = response.headers["mcp-session-id"]
                body = await response.read()
            return orjson.loads(body) if body else None

        await lean_session(send, queries, question_id)


async def stdio_calls(command: list[str], queries: Sequence[str], question_id: str, cpu: list[float]) -> None:
    """The same searches over stdio; ``cpu`` gets the server child's CPU seconds spent on them."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=command[0], args=command[1:])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        started = await session.call_tool("start", {"question_id": question_id})
        assert not started.isError, started.content
        marker = command[command.index("--out") + 1]  # this server's own run directory tells it apart
        child = next(p for p in psutil.Process().children(recursive=True) if marker in p.cmdline())
        before, client0 = _cpu(child.pid), time.process_time()
        for query in queries:
            result = await session.call_tool("search", {"query": query, "topk": 3})
            assert not result.isError, result.content
        cpu[:] = [_cpu(child.pid) - before, time.process_time() - client0]


async def lean_stdio_calls(command: list[str], queries: Sequence[str], question_id: str, cpu: list[float]) -> None:
    """The same searches over stdio sent by a lean client: newline-delimited JSON-RPC on the server's pipes.

    Why: as over HTTP, the SDK's client costs more CPU per call than a whole ``/retrieve`` call; an
    agent loop that speaks MCP without it writes one line and reads one line per call.
    """
    import orjson

    proc = await asyncio.create_subprocess_exec(*command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.DEVNULL, limit=1 << 24)
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    async def send(message: dict[str, object]) -> dict[str, object] | None:
        stdin.write(orjson.dumps(message) + b"\n")
        await stdin.drain()
        if "id" not in message:
            return None
        return orjson.loads(await stdout.readline())  # type: ignore[no-any-return]

    try:
        before: list[float] = []
        await lean_session(send, queries, question_id,
                           on_started=lambda: before.extend((_cpu(proc.pid), time.process_time())))
        cpu[:] = [_cpu(proc.pid) - before[0], time.process_time() - before[1]]
    finally:
        stdin.close()
        await proc.wait()


async def contract_overhead(release: Path, index: Path, queries: Sequence[str]) -> tuple[float, float]:
    """CPU per call of the bare in-process search and of the same search through ``RemoteRun.call``."""
    from aethersearch.mcp_bridge.episodes import RemoteRun
    from aethersearch.pipeline import index_search
    from aethersearch.records import Budget
    from aethersearch.rollout.fingerprint import load_rollout_questions, release_info

    search = index_search(index)
    question = load_rollout_questions(release_info(release).rollout_path)[0]
    env = search.factory(question)
    start = time.process_time()
    for query in queries:
        await env.search(query, 3)
    bare = (time.process_time() - start) / len(queries)
    with tempfile.TemporaryDirectory() as tmp:
        run = RemoteRun(release, Path(tmp) / "run", search, budget=Budget(max_tool_calls=None, max_turns=None),
                        tool_schema_sha256="0" * 64, tools=("search",))
        await run.start(question.id)
        start = time.process_time()
        for query in queries:
            await run.call(question.id, "search", {"query": query, "topk": 3})
        bridged = (time.process_time() - start) / len(queries)
        await run.close()
    return bare, bridged


def measure(pid: int, body: Callable[[], Awaitable[None]], calls: int) -> Measured:
    server0, client0 = _cpu(pid), time.process_time()
    asyncio.run(body())
    return Measured((_cpu(pid) - server0) / calls, (time.process_time() - client0) / calls)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    from aethersearch.demo import build_demo_inputs
    from aethersearch.rollout.fingerprint import load_rollout_questions, release_info

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        release, index = build_demo_inputs(root / "demo")
        questions = load_rollout_questions(release_info(release).rollout_path)
        queries = [questions[i % len(questions)].question for i in range(args.calls)]
        retrieve_port, mcp_port = _free_port(), _free_port()
        aether = [sys.executable, "-m", "aethersearch.cli"]
        serve = subprocess.Popen([*aether, "serve", "--index", str(index), "--port", str(retrieve_port)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        bridge = subprocess.Popen([*aether, "mcp", str(release), "--out", str(root / "run"), "--index", str(index),
                                   "--transport", "http", "--port", str(mcp_port),
                                   "--max-tool-calls", str(2 * args.calls * args.repeats + 10)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            _wait_port(retrieve_port, serve)
            _wait_port(mcp_port, bridge)
            retrieve_url, mcp_url = f"http://127.0.0.1:{retrieve_port}", f"http://127.0.0.1:{mcp_port}/mcp"
            asyncio.run(retrieve_calls(retrieve_url, queries[:50]))  # warm both (imports, JIT, caches)
            asyncio.run(mcp_calls(mcp_url, queries[:50], questions[0].id))
            results: dict[str, list[Measured]] = {"retrieve": [], "mcp": [], "mcp-lean": [], "mcp-stdio": [],
                                                  "stdio-lean": []}
            for rep in range(args.repeats):
                order = list(results) if rep % 2 == 0 else list(results)[::-1]
                for name in order:
                    question = questions[(rep + 1) % len(questions)].id
                    if name == "retrieve":
                        results[name].append(measure(serve.pid, lambda: retrieve_calls(retrieve_url, queries),
                                                     args.calls))
                    elif name == "mcp":
                        results[name].append(measure(bridge.pid, lambda q=question: mcp_calls(mcp_url, queries, q),
                                                     args.calls))
                    elif name == "mcp-lean":
                        other = questions[(rep + 1 + args.repeats) % len(questions)].id  # its own episode
                        results[name].append(measure(
                            bridge.pid, lambda q=other: lean_mcp_calls(mcp_url, queries, q), args.calls))
                    else:
                        cpu: list[float] = []
                        command = [*aether, "mcp", str(release), "--out", str(root / f"{name}-{rep}"), "--index",
                                   str(index), "--max-tool-calls", str(args.calls + 10)]
                        calls = stdio_calls if name == "mcp-stdio" else lean_stdio_calls
                        asyncio.run(calls(command, queries, question, cpu))
                        results[name].append(Measured(cpu[0] / args.calls, cpu[1] / args.calls))
            contract = [asyncio.run(contract_overhead(release, index, queries)) for _ in range(args.repeats)]
        finally:
            for proc in (serve, bridge):
                proc.terminate()
                proc.communicate(timeout=30)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{args.calls} calls per pass, {args.repeats} passes, medians; load average {load}")
    print(f"{'path':<10} {'server ms/call':>15} {'client ms/call':>15} {'total ms/call':>14}")
    medians = {}
    for name, runs in results.items():
        med = Measured(statistics.median(r.server for r in runs), statistics.median(r.client for r in runs))
        medians[name] = med
        print(f"{name:<10} {1000 * med.server:>15.3f} {1000 * med.client:>15.3f} {1000 * med.total:>14.3f}")
    bare, bridged = statistics.median(c[0] for c in contract), statistics.median(c[1] for c in contract)
    print(f"in process: bare search {1000 * bare:.3f} ms/call, through the run contract {1000 * bridged:.3f} "
          f"ms/call ({bridged / bare:.2f}x): the rest of the MCP figure is the SDK's transport and session")
    ret = medians["retrieve"]
    for name in ("mcp", "mcp-lean", "mcp-stdio", "stdio-lean"):
        mcp = medians[name]
        ratio = mcp.total / ret.total
        print(f"{name} / retrieve CPU per call: server {mcp.server / ret.server:.2f}x, client "
              f"{mcp.client / ret.client:.2f}x, total {ratio:.2f}x (goal <= 1.5x: {'met' if ratio <= 1.5 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
