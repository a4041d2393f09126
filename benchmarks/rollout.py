"""Rollout harness overhead: N questions × 4 turns against the scripted server at fixed latency.

What it measures (issue 6): the whole runner — budget wrappers, the Search-R1 agent
loop, the aiohttp client, trace records, the group-committed fsynced traces.jsonl —
driving the Search-R1 protocol (3 searches then an answer = 4 model calls per
question) against the scripted OpenAI server running in its own process with a fixed
50 ms latency per call, at concurrency 64. It prints

* wall time ÷ the latency-bound ideal ``N·4·0.05/64`` s (target ≤ 1.15),
* the same ratio for a bare aiohttp client making the same calls (the floor of what
  any harness could reach on this machine, measured side by side in the same run),
* harness CPU per step (process CPU time ÷ model calls) for both, and for the
  harness with the same scripted model called in-process (no HTTP, no latency):
  the cost of the runner, budget, agent loop and fsynced traces alone.

What is compared, and why it is fair: the scripted server runs in its own process, so
its CPU is in neither number; harness, bare loop and no-HTTP run are interleaved in one
process against that one server (same window, same 4 calls per question, same latency),
and each number is this process's CPU time (``time.process_time``: every thread, user
and system) over the run divided by the HTTP calls made. The harness number includes
everything a real ``aether run`` does per question: the runner with its default
per-question deadline, budget wrappers, the Search-R1 loop and its observation cut,
the aiohttp client with its retries/timeouts, trace records, the group-committed
fsynced ``traces.jsonl`` (writer thread and fsync system time included) and the run's
GC policy (restored, and its deferred collection paid, before the clock stops). The
bare loop sends a short prompt without decoding fields (a harness sends the Search-R1
prompt and observations, ~3 KB by turn 4): a floor, not a replica.

Medians over ``--repeats`` runs; the machine's load average is printed with each level. ``--quick`` uses 200 questions. ``--concurrency 64,1024``
runs each level in turn and prints the issue-16 ratios: harness CPU per call ÷ the bare
loop's (target ≤ 1.3 at every level) and harness wall ÷ bare wall (target ≤ 1.1 at 64).
``--profile`` runs the harness once more under cProfile and prints the top functions
by own time (what to optimise next).
Usage: ``.venv/bin/python benchmarks/rollout.py [--quick] [--repeats 3] [--concurrency 64,1024] [--profile]``
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

from aethersearch.agents.llm import Completion, OpenAIClient
from aethersearch.agents.scripted_server import (
    ScriptedRequest,
    apply_stop,
    count_tokens,
    search_r1_rule,
    serve_in_process,
)
from aethersearch.agents.search_r1 import SearchR1Agent
from aethersearch.environment import ToolResult
from aethersearch.jsonl import write_jsonl
from aethersearch.records import Budget, Decoding, Document, RolloutQuestion, RunLimits, ToolCall
from aethersearch.rollout.fingerprint import build_fingerprint, rollout_file_info
from aethersearch.rollout.runner import run_questions_async

TURNS = 4
LATENCY_S = 0.05
CONCURRENCY = 64
# raw prompt and a local word tokenizer: the same single completion per turn as the bare loop
# (the default "served" tokenizer and chat template would add tokenize/template calls it does not make)
AGENT = {"tokenizer": "regex", "prompt_format": "raw", "chat_template": "raw"}
#: what ``aether run`` uses by default (the per-question deadline is part of the real run path)
LIMITS = RunLimits()
DOCS = [Document(id=f"d{i}", title=f"Page {i}", text=f"Passage {i} about the topic. " * 8) for i in range(3)]


def responder(request: ScriptedRequest):  # top-level: picklable for the server process
    return _RULE(request)


_RULE = search_r1_rule(lambda q: "answer " + q.split()[-1].rstrip("?"), searches=TURNS - 1)


class StaticSearch:
    """Instant search (the benchmark measures the harness, not retrieval)."""

    tools = ("search",)

    async def search(self, query: str, k: int) -> ToolResult:
        return ToolResult(DOCS[:k], ToolCall(tool="search", arguments={"query": query, "k": k},
                                             returned_ids=[d.id for d in DOCS[:k]]))

    async def visit(self, page: str) -> ToolResult:
        return ToolResult([], ToolCall(tool="visit", arguments={"page": page}, error="no pages"))

    async def close(self) -> None:
        return None


async def harness(url: str, n: int, out: Path, concurrency: int = CONCURRENCY) -> tuple[float, float, int]:
    questions = [RolloutQuestion(id=f"q{i:05d}", question=f"Which page covers item {i}") for i in range(n)]
    rollout = out / "rollout_questions.jsonl"
    write_jsonl(rollout, questions)
    agent = SearchR1Agent(**AGENT)
    budget = Budget(max_tool_calls=8, max_turns=TURNS)
    fp = build_fingerprint(rollout_file_info(rollout), question_count=n, agent=agent, budget=budget,
                           decoding=Decoding(), endpoint=url, model="m", corpus_hash=None, index_hash=None)
    env = StaticSearch()
    async with OpenAIClient(url, "m", concurrency=concurrency) as llm:
        wall0, cpu0 = time.perf_counter(), time.process_time()
        summary = await run_questions_async(questions, agent, lambda q: env, budget, out / "run", fp,
                                            llm=llm, concurrency=concurrency,
                                            question_timeout_s=LIMITS.question_deadline_s)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        calls = llm.calls
    assert summary.outcomes == {"answered": n}, summary.outcomes
    return wall, cpu, calls


class InProcessModel:
    """The same scripted replies without HTTP: isolates the harness's own CPU per step."""

    endpoint = "in-process"
    model = "m"

    @property
    def served(self) -> InProcessModel:
        """Unbudgeted completions for stop checks: the same stop path as the HTTP client takes."""
        return self

    async def complete(self, prompt: str, decoding: Decoding) -> Completion:
        reply = _RULE(ScriptedRequest("completions", {"prompt": prompt}, prompt))
        text, finish, stop = apply_stop(reply.text, decoding.stop, decoding.max_tokens)
        # usage without a regex pass over the prompt: the fake model's own CPU is not the harness's
        return Completion(text, finish, stop, len(prompt) // 4, count_tokens(text), [], 0.0, 1)


async def harness_only(n: int, out: Path) -> tuple[float, float, int]:
    questions = [RolloutQuestion(id=f"q{i:05d}", question=f"Which page covers item {i}") for i in range(n)]
    rollout = out / "rollout_questions.jsonl"
    write_jsonl(rollout, questions)
    agent = SearchR1Agent(**AGENT)
    budget = Budget(max_tool_calls=8, max_turns=TURNS)
    fp = build_fingerprint(rollout_file_info(rollout), question_count=n, agent=agent, budget=budget,
                           decoding=Decoding(), endpoint="in-process", model="m", corpus_hash=None, index_hash=None)
    env = StaticSearch()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    summary = await run_questions_async(questions, agent, lambda q: env, budget, out / "run", fp,
                                        llm=InProcessModel(), concurrency=CONCURRENCY,
                                        question_timeout_s=LIMITS.question_deadline_s)
    assert summary.outcomes == {"answered": n}, summary.outcomes
    return time.perf_counter() - wall0, time.process_time() - cpu0, n * TURNS


async def bare_client(url: str, n: int, concurrency: int = CONCURRENCY) -> tuple[float, float, int]:
    """The same 4 calls per question with a bare aiohttp session and no harness."""
    prompt = "Answer the given question. Question: Which page covers item 1?\n"
    semaphore = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:

        async def one(i: int) -> None:
            text = prompt
            for _ in range(TURNS):
                async with semaphore:
                    body = orjson.dumps({"model": "m", "prompt": text, "max_tokens": 512,
                                         "stop": ["</search>", "</answer>"]})
                    async with session.post(url + "/completions", data=body,
                                            headers={"Content-Type": "application/json"}) as resp:
                        data = orjson.loads(await resp.read())
                text += data["choices"][0]["text"] + "</search>\n\n<information>Doc 1</information>\n\n"

        wall0, cpu0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(one(i) for i in range(n)))
        return time.perf_counter() - wall0, time.process_time() - cpu0, n * TURNS


def _profile(url: str, n: int, concurrency: int) -> None:
    """One harness run under cProfile: the top functions by own time."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    with tempfile.TemporaryDirectory() as tmp:
        profiler.enable()
        asyncio.run(harness(url, n, Path(tmp), concurrency))
        profiler.disable()
    print(f"\ncProfile of one harness run ({n} questions, concurrency {concurrency}), top 25 by own time:")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 questions instead of 1,400")
    parser.add_argument("--questions", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", default=str(CONCURRENCY), help="comma-separated in-flight levels")
    parser.add_argument("--profile", action="store_true", help="also profile one harness run (cProfile)")
    args = parser.parse_args()
    n = args.questions or (200 if args.quick else 1400)
    levels = [int(x) for x in args.concurrency.split(",")]

    ctx = multiprocessing.get_context("spawn")
    ports = ctx.Queue()
    server = ctx.Process(target=serve_in_process, args=(responder, ports, LATENCY_S), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{ports.get(timeout=60)}/v1"
    failed = False
    try:
        for level in levels:
            failed |= _level(url, n, level, args.repeats)
        if args.profile:
            _profile(url, n, levels[-1])
    finally:
        server.terminate()
        server.join(5)
    sys.exit(1 if failed else 0)


def _load(load: tuple[float, float, float]) -> str:
    return "/".join(f"{x:.2f}" for x in load)


def _level(url: str, n: int, concurrency: int, repeats: int) -> bool:
    """Measure one in-flight level; True when a target is missed."""
    ideal = n * TURNS * LATENCY_S / concurrency
    results: dict[str, list[tuple[float, float, int]]] = {"harness": [], "bare aiohttp": [], "no HTTP": []}
    load_before = os.getloadavg()
    for _ in range(repeats):  # interleaved, so drifting machine load hits both alike
        with tempfile.TemporaryDirectory() as tmp:
            results["harness"].append(asyncio.run(harness(url, n, Path(tmp), concurrency)))
        results["bare aiohttp"].append(asyncio.run(bare_client(url, n, concurrency)))
        with tempfile.TemporaryDirectory() as tmp:
            results["no HTTP"].append(asyncio.run(harness_only(n, Path(tmp))))
    load_after = os.getloadavg()
    print(f"{n} questions x {TURNS} turns, {LATENCY_S * 1000:.0f} ms latency, concurrency {concurrency}; "
          f"ideal {ideal:.3f} s; medians of {repeats} interleaved runs; machine: {os.cpu_count()} CPUs, "
          f"load average (1/5/15 min) {_load(load_before)} before, {_load(load_after)} after "
          "(other processes' load makes every CPU number noisy)")
    for name, runs in results.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] / r[2] for r in runs)
        ratio_text = f"wall/ideal {wall / ideal:5.3f}" if name != "no HTTP" else "(no latency)     "
        spread = " ".join(f"{r[1] / r[2] * 1e3:.3f}" for r in runs)
        print(f"  {name:13s} wall {wall:7.3f} s   {ratio_text}   client CPU/call {cpu * 1e3:6.3f} ms  (runs: {spread})")
    cpu_ratio = statistics.median(r[1] / r[2] for r in results["harness"]) / statistics.median(
        r[1] / r[2] for r in results["bare aiohttp"])
    wall_ratio = statistics.median(r[0] for r in results["harness"]) / statistics.median(
        r[0] for r in results["bare aiohttp"])
    cpu_ok = cpu_ratio <= 1.3
    wall_ok = wall_ratio <= 1.1 or concurrency != 64
    print(f"concurrency {concurrency}: harness/bare CPU per call = {cpu_ratio:.2f} (target <= 1.3: "
          f"{'OK' if cpu_ok else 'ABOVE TARGET'}); harness/bare wall = {wall_ratio:.2f}"
          + (f" (target <= 1.1 at 64: {'OK' if wall_ok else 'ABOVE TARGET'})" if concurrency == 64 else ""))
    return not (cpu_ok and wall_ok)


if __name__ == "__main__":
    main()
