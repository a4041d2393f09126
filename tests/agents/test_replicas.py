"""Several replicas: least-outstanding balancing, failover when one dies mid-run, same-model check."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from aethersearch.agents.replicas import ReplicaPool, split_endpoints
from aethersearch.agents.search_r1 import SearchR1Agent
from aethersearch.errors import ConfigError, EndpointError
from aethersearch.jsonl import read_jsonl
from aethersearch.records import Budget, Decoding
from aethersearch.rollout.runner import run_questions
from aethersearch.testing.scripted_server import ScriptedServer
from tests.agents.fakes import FakeSearchEnv
from tests.rollout import helpers


def test_one_replica_dying_mid_run_loses_nothing(tmp_path: Path) -> None:
    qs = helpers.questions(60)
    rollout = helpers.write_rollout(tmp_path / "rollout_questions.jsonl", qs)
    agent = SearchR1Agent()
    with ScriptedServer(helpers.MODEL, latency_s=0.01) as a, ScriptedServer(helpers.MODEL, latency_s=0.01) as b:
        pool = ReplicaPool([a.url, b.url], "m", call_timeout_s=2.0, deadline_s=20.0, max_retries=4,
                           bench_s=0.2, seed=1)
        killed = threading.Event()

        def kill_b_after_40_requests() -> None:
            while b.stats.requests < 40:
                threading.Event().wait(0.002)
            b.stop()  # in-flight handlers are cancelled, the port closes: resets and refusals from now on
            killed.set()

        killer = threading.Thread(target=kill_b_after_40_requests, daemon=True)
        killer.start()
        fp = helpers.fingerprint(rollout, agent, pool.endpoint, count=len(qs))
        summary = run_questions(qs, agent, lambda q: FakeSearchEnv(), Budget(), tmp_path / "run", fp,
                                llm=pool, concurrency=16)
        killer.join(5)
        served_by_a, served_by_b = a.stats.requests, b.stats.requests
    assert killed.is_set(), "replica b was never killed: the test did not exercise failover"
    assert summary.outcomes == {"answered": len(qs)}, summary.outcomes
    traces = {t["id"]: t for t in read_jsonl(tmp_path / "run" / "traces.jsonl")}
    assert set(traces) == {q.id for q in qs}
    assert all(traces[q.id]["prediction"] == helpers.answer_for(q.question) for q in qs)
    assert served_by_b >= 40 and served_by_a > served_by_b  # b served until it died, a took over
    assert pool.retries >= 1  # calls cut off on b were resent to a


def test_least_outstanding_sends_more_to_the_faster_replica() -> None:
    # 2 ms vs 250 ms: a gap wide enough that a loaded machine's scheduling delays (tens of ms) cannot close it
    with ScriptedServer(helpers.MODEL, latency_s=0.002) as fast, ScriptedServer(helpers.MODEL, latency_s=0.25) as slow:

        async def go() -> None:
            async with ReplicaPool([fast.url, slow.url], "m") as pool:
                prompts = [f"Question: q{i}?\n" for i in range(120)]
                sem = asyncio.Semaphore(8)

                async def one(p: str) -> None:
                    async with sem:
                        await pool.complete(p, Decoding())
                await asyncio.gather(*(one(p) for p in prompts))

        asyncio.run(go())
        assert fast.stats.requests + slow.stats.requests == 120
        assert fast.stats.requests > 3 * slow.stats.requests, (fast.stats.requests, slow.stats.requests)


def test_replicas_serving_different_models_refuse_the_run() -> None:
    with ScriptedServer(helpers.MODEL, model="ckpt-a") as a, ScriptedServer(helpers.MODEL, model="ckpt-b") as b:

        async def go() -> None:
            async with ReplicaPool([a.url, b.url], "ckpt-a") as pool:
                await pool.served_model()

        with pytest.raises(ConfigError, match="do not serve the same model"):
            asyncio.run(go())

        async def same() -> object:
            async with ReplicaPool([a.url, a.url.replace("127.0.0.1", "localhost")], "ckpt-a") as pool:
                return await pool.served_model()

        assert asyncio.run(same()) is not None


def test_all_replicas_down_is_a_typed_transient_error() -> None:
    with ScriptedServer(helpers.MODEL) as a:
        url = a.url
    async def go() -> EndpointError:
        async with ReplicaPool([url], "m", max_retries=2, bench_s=0.01, backoff_base_s=0.01, deadline_s=5) as pool:
            with pytest.raises(EndpointError) as info:
                await pool.complete("Question: x\n", Decoding())
            return info.value
    error = asyncio.run(go())
    assert error.transient and "giving up after 3 attempts" in str(error)


def test_endpoint_list_parsing() -> None:
    assert split_endpoints("http://a/v1, http://b/v1") == ["http://a/v1", "http://b/v1"]
    with pytest.raises(ConfigError):
        split_endpoints("http://a/v1,,http://b/v1")
    with pytest.raises(ConfigError):
        split_endpoints("http://a/v1,http://a/v1")


def test_cli_run_over_two_replicas_and_refusal_of_mixed_models(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from aethersearch import demo
    from aethersearch.cli import app
    from aethersearch.testing.scripted_server import search_r1_rule

    release, index = demo.build_demo_inputs(tmp_path / "demo")
    rule = search_r1_rule(lambda q: "Paris", searches=1)
    with ScriptedServer(rule, model="qwen-sft") as a, ScriptedServer(rule, model="qwen-sft") as b, \
            ScriptedServer(rule, model="other") as c:
        args = ["run", str(release), "--agent", "search-r1", "--model", "qwen-sft", "--index", str(index),
                "--no-progress"]
        ok = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "ok"), "--endpoint", f"{a.url},{b.url}"])
        assert ok.exit_code == 0, ok.output
        assert a.stats.requests > 10 and b.stats.requests > 10  # both replicas did real work
        mixed = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "mixed"), "--endpoint", f"{a.url},{c.url}"])
        assert mixed.exit_code != 0 and isinstance(mixed.exception, ConfigError)  # cli.main prints it, no traceback
        assert "do not serve the same model" in str(mixed.exception)
        assert not (tmp_path / "mixed" / "traces.jsonl").exists()  # refused before any question ran
