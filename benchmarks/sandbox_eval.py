"""Sandbox evaluation throughput, and what the harness adds per sandbox action (issue 47).

What it measures: the demo world's hint-free release (60 questions, 1,067 pages,
BM25) run inside the masked sandbox, each question K times (``samples``) so that
64 or 1,024 episodes are in flight, and at least 1,200 episodes run in all. The agent replays, per question, the exact
actions the ``lexical-browse`` baseline took (recorded once before any timing),
so no agent thinking is measured: what is timed is the sandbox's work and the
harness around it. For each level it runs, interleaved (order reversed every
other pass, so steady drift favours none):

* ``harness in-process``: ``aether run``'s path (``rollout.session.execute_run``:
  runner, per-question deadline, budget wrappers, trace records, fsynced
  ``traces.jsonl``) over the in-process sandbox (``sandbox_eval.sandbox_in_process``);
* ``bare in-process``: a plain asyncio loop making the same calls on the same
  sandbox episodes (open, the same searches and visits, close), nothing else;
* ``harness HTTP``: the same run path through ``--sandbox-url`` (``HttpEpisodes``,
  the sandbox client with its ``seq`` retries) against ``aether sandbox serve`` in
  its own process (durable action log);
* ``bare HTTP``: a plain aiohttp session with orjson (the lean client the field's
  own loops use) making the same requests (create, search/visit with ``seq``,
  close) to the same server.

It prints, per level and medians over ``--repeats``: sandbox actions per CPU-second
(this process's CPU; for HTTP also with the server's CPU added, read from
``/proc`` through psutil), this process's CPU per action, and the harness ÷ bare
ratio of CPU per action (goal ≤ 1.3: the harness adds at most 30%, as for retrieval).
The load average is printed with each level; run it alone (``flock``).

Usage: ``.venv/bin/python benchmarks/sandbox_eval.py [--concurrency 64,1024] [--repeats 3]``
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
from collections.abc import Callable, Coroutine, Sequence
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import aiohttp
import httpx
import orjson
import psutil

from aethersearch.agents.base import Agent, AgentOutput, Episode, finish
from aethersearch.jsonl import iter_jsonl
from aethersearch.records import Budget, RolloutQuestion
from aethersearch.rollout.fingerprint import load_rollout_questions, release_info
from aethersearch.rollout.session import RunSettings, execute_run, prepare_run
from aethersearch.sandbox_eval import HttpEpisodes, SandboxTools, sandbox_in_process

Plan = list[tuple[str, Any]]
BUDGET = Budget(max_tool_calls=40, max_turns=None)
GOAL = 1.3
MIN_EPISODES = 1_200


class ReplayAgent(Agent):
    """Makes exactly the recorded actions of each question, then gives the recorded answer (no thinking)."""

    name: ClassVar[str] = "replay"
    needs_llm: ClassVar[bool] = False
    environment: ClassVar[str] = "sandbox"

    def __init__(self, plans: dict[str, tuple[Plan, str | None]]) -> None:
        self.plans = plans

    async def solve(self, episode: Episode) -> AgentOutput:
        plan, answer = self.plans[episode.question.id]
        for tool, argument in plan:  # recorded as an agent records its steps (the trace shows every call)
            result = await (episode.env.search(argument, 5) if tool == "search" else episode.env.visit(argument))
            episode.add_step(tool_calls=[result.call])
        return finish("", answer, "answer")


def build_world(root: Path) -> tuple[Path, Path]:
    """The demo's hint-free release, page store and BM25 index (as ``make demo`` builds them)."""
    from aethersearch.construct.build import build_demo_sandbox_release
    from aethersearch.corpus.importers import import_corpus
    from aethersearch.search.index_dir import build_index

    release = build_demo_sandbox_release(root / "release", seed=0)
    store = import_corpus("demo", "demo", root / "corpus", seed=0).store
    build_index(store, "bm25", root / "index", config={"numba": False})
    return release, root / "index"


def _run(release: Path, tools: SandboxTools, agent: Agent, run_dir: Path, samples: int, concurrency: int) -> Any:
    settings = RunSettings(agent=agent.name, budget=BUDGET, concurrency=concurrency, samples=samples)
    prepared = prepare_run(release_info(release), settings, tools.search, agent=agent)
    return execute_run(prepared, run_dir)


def record_plans(release: Path, index: Path, root: Path) -> dict[str, tuple[Plan, str | None]]:
    """What ``lexical-browse`` does on each question, read back from its traces."""
    from aethersearch.agents.browse import LexicalBrowseAgent

    run = root / "recorded"
    _run(release, sandbox_in_process(release, index, run_label="record"), LexicalBrowseAgent(), run, 1, 8)
    plans: dict[str, tuple[Plan, str | None]] = {}
    for _, trace in iter_jsonl(run / "traces.jsonl"):
        plan: Plan = [(call["tool"], call["arguments"]["query" if call["tool"] == "search" else "page"])
                      for step in trace["steps"] for call in step["tool_calls"]]
        plans[trace["id"]] = (plan, trace.get("prediction"))
    return plans


def _cpu(pid: int | None = None) -> float:
    if pid is None:
        return time.process_time()
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


class Measured:
    """One timed pass: actions made, this process's CPU, the server's CPU (HTTP), wall time."""

    def __init__(self, actions: int, cpu: float, server_cpu: float, wall: float) -> None:
        self.actions, self.cpu, self.server_cpu, self.wall = actions, cpu, server_cpu, wall


def timed(body: Callable[[], int], server_pid: int | None) -> Measured:
    server0 = _cpu(server_pid) if server_pid else 0.0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    actions = body()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return Measured(actions, cpu, (_cpu(server_pid) - server0) if server_pid else 0.0, wall)


def units(questions: Sequence[RolloutQuestion], samples: int) -> list[tuple[RolloutQuestion, int]]:
    return [(q, k) for k in range(samples) for q in questions]


async def bare_in_process(tools: SandboxTools, plans: dict[str, tuple[Plan, str | None]],
                          work: list[tuple[RolloutQuestion, int]], concurrency: int, label: str) -> int:
    """The same calls on in-process episodes, with nothing around them."""
    gate = asyncio.Semaphore(concurrency)
    opened = tools.clean_factory(label)

    async def one(question: RolloutQuestion) -> int:
        async with gate:
            env = opened(question)
            plan = plans[question.id][0]
            for tool, argument in plan:
                await (env.search(argument, 5) if tool == "search" else env.visit(argument))
            await env.close()
            return len(plan)

    return sum(await asyncio.gather(*(one(q) for q, _ in work)))


async def bare_http(url: str, plans: dict[str, tuple[Plan, str | None]], work: list[tuple[RolloutQuestion, int]],
                    concurrency: int, label: str) -> int:
    """The same requests through a plain aiohttp session and orjson (the field's lean client): create, the
    actions with their seq, close; nothing else (no retries, no records)."""
    gate = asyncio.Semaphore(concurrency)
    headers = {"content-type": "application/json"}

    async def post(session: aiohttp.ClientSession, path: str, body: dict[str, Any] | None = None) -> Any:
        async with session.post(path, data=orjson.dumps(body) if body is not None else None,
                                headers=headers) as response:
            return orjson.loads(await response.read())

    async with aiohttp.ClientSession(base_url=url, connector=aiohttp.TCPConnector(limit=concurrency)) as session:

        async def one(question: RolloutQuestion, sample: int) -> int:
            async with gate:
                episode = (await post(session, "/episodes", {"question_id": question.id,
                                                             "run_id": f"{label}#{sample}"}))["episode_id"]
                plan = plans[question.id][0]
                for seq, (tool, argument) in enumerate(plan):
                    body = {"query": argument, "k": 5, "seq": seq} if tool == "search" else {"page": argument, "seq": seq}
                    await post(session, f"/episodes/{episode}/{tool}", body)
                await post(session, f"/episodes/{episode}/close")
                return len(plan)

        return sum(await asyncio.gather(*(one(q, k) for q, k in work)))


def harness(release: Path, tools: SandboxTools, agent: ReplayAgent, run_dir: Path, samples: int,
            concurrency: int) -> int:
    """``aether run``'s path; returns the actions the plans make (checked against the traces, untimed, later)."""
    summary = _run(release, tools, agent, run_dir, samples, concurrency)
    assert summary.errored == 0, summary.errors.lines()
    return samples * sum(len(plan) for plan, _ in agent.plans.values())


def traced_actions(run_dir: Path) -> int:
    """The tool calls a harness run's traces hold (outside the timing: reading them is not the run's work)."""
    return sum(len(step["tool_calls"]) for _, trace in iter_jsonl(run_dir / "traces.jsonl") for step in trace["steps"])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(release: Path, index: Path, root: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "aethersearch.cli", "sandbox", "serve", str(release), "--index",
                             str(index), "--port", str(port), "--action-log", str(root / "actions.jsonl"),
                             "--max-open-episodes", "100000"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=5).json().get("ready"):
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit("the sandbox server did not come up")


def _run_async(coroutine: Coroutine[Any, Any, int]) -> int:
    return asyncio.run(coroutine)


def level(release: Path, index: Path, root: Path, plans: dict[str, tuple[Plan, str | None]], url: str,
          server_pid: int, concurrency: int, repeats: int) -> dict[str, list[Measured]]:
    questions = load_rollout_questions(release_info(release).rollout_path)
    # at least twice the level (it stays full) and 1,200 episodes (a run's fixed costs, run.json, the writer
    # thread, predictions.jsonl, ~5 ms, are spread as in a real evaluation, not over a few hundred actions)
    samples = max(1, -(-max(2 * concurrency, MIN_EPISODES) // len(questions)))
    work = units(questions, samples)
    agent = ReplayAgent(plans)
    results: dict[str, list[Measured]] = {k: [] for k in ("harness in-process", "bare in-process", "harness HTTP",
                                                          "bare HTTP")}
    for attempt in range(repeats):
        tag = f"c{concurrency}-r{attempt}"
        local = sandbox_in_process(release, index, run_label=f"h-{tag}")
        remote = SandboxTools(local.search._replace(factory=HttpEpisodes(url, f"h-{tag}")), local.store,
                              local.clean_factory)
        bodies: list[tuple[str, Callable[[], int], int | None]] = [
            ("harness in-process", partial(harness, release, local, agent, root / f"hi-{tag}", samples, concurrency),
             None),
            ("bare in-process", partial(_run_async, bare_in_process(local, plans, work, concurrency, f"b-{tag}")),
             None),
            ("harness HTTP", partial(harness, release, remote, agent, root / f"hh-{tag}", samples, concurrency),
             server_pid),
            ("bare HTTP", partial(_run_async, bare_http(url, plans, work, concurrency, f"bh-{tag}")), server_pid),
        ]
        for name, body, pid in (bodies if attempt % 2 == 0 else list(reversed(bodies))):
            results[name].append(timed(body, pid))
        for kind in ("hi", "hh"):  # the harness made exactly the calls counted for it
            assert traced_actions(root / f"{kind}-{tag}") == results["bare in-process"][-1].actions
    return results


def report(concurrency: int, results: dict[str, list[Measured]]) -> bool:
    print(f"\n{concurrency} episodes in flight; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    per_action = {name: statistics.median(m.cpu / m.actions for m in runs) for name, runs in results.items()}
    for name, runs in results.items():
        actions = runs[0].actions
        rate = statistics.median(m.actions / m.cpu for m in runs)
        line = (f"  {name:<20} {actions:>6} actions  {rate:>8,.0f} actions/CPU-s (this process)  "
                f"{1e6 * per_action[name]:>7.0f} us CPU/action  wall {statistics.median(m.wall for m in runs):6.2f}s")
        if "HTTP" in name:
            total = statistics.median(m.actions / (m.cpu + m.server_cpu) for m in runs)
            line += f"  {total:,.0f} actions/CPU-s with the server's"
        print(line)
    ok = True
    for where in ("in-process", "HTTP"):
        ratio = per_action[f"harness {where}"] / per_action[f"bare {where}"]
        ok &= ratio <= GOAL
        print(f"  harness / bare CPU per action, {where}: {ratio:.2f} (goal <= {GOAL})")
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="64,1024")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-eval-") as tmp:
        root = Path(tmp)
        release, index = build_world(root)
        plans = record_plans(release, index, root)
        print(f"replaying lexical-browse's actions: {sum(len(p) for p, _ in plans.values())} actions over "
              f"{len(plans)} questions")
        proc, url = start_server(release, index, root)
        try:
            ok = True
            for concurrency in (int(c) for c in args.concurrency.split(",")):
                ok &= report(concurrency, level(release, index, root, plans, url, proc.pid, concurrency,
                                                args.repeats))
        finally:
            proc.terminate()
            proc.wait(20)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
