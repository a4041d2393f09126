"""The sharded backend writes the same run directory as one process: resume, retries, merges."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

from aethersearch.agents.llm import OpenAIClient
from aethersearch.agents.search_r1 import SearchR1Agent
from aethersearch.errors import ConfigError
from aethersearch.jsonl import read_jsonl
from aethersearch.records import Budget
from aethersearch.rollout.ray_backend import ray_available, run_shard, run_sharded, shard_questions
from aethersearch.rollout.runner import run_questions
from aethersearch.testing.scripted_server import Faults, ScriptedServer
from tests.agents.fakes import FakeSearchEnv
from tests.rollout import helpers


def _env_builder():
    return lambda q: FakeSearchEnv()


def _setup(tmp_path: Path, n: int):
    qs = helpers.questions(n)
    rollout = helpers.write_rollout(tmp_path / "rollout_questions.jsonl", qs)
    return qs, rollout


def test_sharded_run_matches_a_single_process_run_and_resumes_without_calls(tmp_path: Path) -> None:
    qs, rollout = _setup(tmp_path, 24)
    agent = SearchR1Agent()
    with ScriptedServer(helpers.MODEL) as server:
        fp = helpers.fingerprint(rollout, agent, server.url, count=len(qs))
        run_questions(qs, agent, lambda q: FakeSearchEnv(), Budget(), tmp_path / "single", fp,
                      llm=OpenAIClient(server.url, "m"))
        url = server.url
        summary = run_sharded(qs, "search-r1", _env_builder, Budget(), tmp_path / "sharded", fp,
                              llm_builder=lambda: OpenAIClient(url, "m"), shards=3, executor="local")
        calls = server.stats.requests
        again = run_sharded(qs, "search-r1", _env_builder, Budget(), tmp_path / "sharded", fp,
                            llm_builder=lambda: OpenAIClient(url, "m"), shards=3, executor="local")
        assert server.stats.requests == calls  # nothing finished is ever called again
    assert summary.outcomes == {"answered": 24} and summary.attempted == 24
    assert (again.skipped, again.attempted) == (24, 0)
    run = tmp_path / "sharded"
    assert (run / "predictions.jsonl").read_bytes() == (tmp_path / "single" / "predictions.jsonl").read_bytes()
    assert Counter(t["id"] for t in read_jsonl(run / "traces.jsonl")) == {q.id: 1 for q in qs}
    assert not any((run / "shards").iterdir())  # merged shards are removed
    assert (run / "run.json").read_bytes() == (tmp_path / "single" / "run.json").read_bytes()


def test_errored_ids_are_retried_with_the_next_attempt_number(tmp_path: Path) -> None:
    qs, rollout = _setup(tmp_path, 6)
    agent = SearchR1Agent()
    with ScriptedServer(helpers.MODEL, faults=Faults(rate=1.0, kinds=("401",))) as bad:
        fp = helpers.fingerprint(rollout, agent, bad.url, count=len(qs))
        url = bad.url
        first = run_sharded(qs, "search-r1", _env_builder, Budget(), tmp_path / "run", fp,
                            llm_builder=lambda: OpenAIClient(url, "m"), shards=2, executor="local")
    assert first.outcomes == {"endpoint_error": 6} and first.errored == 6
    with ScriptedServer(helpers.MODEL) as good:
        url = good.url
        fp = helpers.fingerprint(rollout, agent, url, count=len(qs))
        second = run_sharded(qs, "search-r1", _env_builder, Budget(), tmp_path / "run", fp,
                             llm_builder=lambda: OpenAIClient(url, "m"), shards=2, executor="local")
    assert second.outcomes == {"answered": 6} and second.skipped == 0
    traces = read_jsonl(tmp_path / "run" / "traces.jsonl")
    assert sorted((t["attempt"], t["outcome"]) for t in traces) == [(1, "endpoint_error")] * 6 + [(2, "answered")] * 6


def test_shards_left_by_an_interrupted_run_count_as_finished(tmp_path: Path) -> None:
    qs, rollout = _setup(tmp_path, 10)
    agent = SearchR1Agent()
    with ScriptedServer(helpers.MODEL) as server:
        url = server.url
        fp = helpers.fingerprint(rollout, agent, url, count=len(qs))
        leftover = tmp_path / "run" / "shards" / "shard-000"
        run_shard(qs[:4], "search-r1", {}, _env_builder, lambda: OpenAIClient(url, "m"), Budget(),
                  str(leftover), fp, 4)  # a worker that finished before the driver died
        before = server.stats.by_key.copy()
        summary = run_sharded(qs, "search-r1", _env_builder, Budget(), tmp_path / "run", fp,
                              llm_builder=lambda: OpenAIClient(url, "m"), shards=2, executor="local")
        called = server.stats.by_key - before
    assert summary.skipped == 4 and summary.attempted == 6
    assert not {q.question + "?" for q in qs[:4]} & set(called)
    ids = [t["id"] for t in read_jsonl(tmp_path / "run" / "traces.jsonl")]
    assert sorted(ids) == sorted(q.id for q in qs)


def test_bad_backend_settings_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="at least 1"):
        shard_questions(helpers.questions(2), 0)
    assert [len(s) for s in shard_questions(helpers.questions(5), 3)] == [2, 2, 1]
    qs, rollout = _setup(tmp_path, 2)
    fp = helpers.fingerprint(rollout, SearchR1Agent(), None, count=2)
    with pytest.raises(ConfigError, match="unknown executor"):
        run_sharded(qs, "search-r1", _env_builder, Budget(), tmp_path / "run", fp, executor="dask")


def test_the_ray_executor_without_ray_explains_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if absent, also where ray is installed
    qs, rollout = _setup(tmp_path, 2)
    fp = helpers.fingerprint(rollout, SearchR1Agent(), None, count=2)
    with pytest.raises(ConfigError, match="needs the ray package"):
        run_sharded(qs, "lexical", _env_builder, Budget(), tmp_path / "run", fp, executor="ray")


@pytest.mark.skipif(not ray_available(), reason="needs the ray extra (pip install 'aethersearch[ray]')")
def test_ray_workers_write_the_same_run_directory(tmp_path: Path) -> None:
    import ray

    qs, rollout = _setup(tmp_path, 8)
    agent = SearchR1Agent()
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True)
    try:
        with ScriptedServer(helpers.MODEL) as server:
            url = server.url
            fp = helpers.fingerprint(rollout, agent, url, count=len(qs))
            summary = run_sharded(qs, "search-r1", _env_builder, Budget(), tmp_path / "run", fp,
                                  llm_builder=lambda: OpenAIClient(url, "m"), shards=2, executor="ray")
    finally:
        ray.shutdown()
    assert summary.outcomes == {"answered": 8}
    assert [p["id"] for p in read_jsonl(tmp_path / "run" / "predictions.jsonl")] == [q.id for q in qs]


def test_sharded_samples_send_the_same_seeded_requests_as_one_process(tmp_path: Path) -> None:
    """K = 3 over 2 shards: every (id, sample) once, each with the seed a single process sends."""
    from aethersearch.records import Decoding
    from aethersearch.testing.scripted_server import question_of

    qs, rollout = _setup(tmp_path, 8)
    agent = SearchR1Agent()
    key = lambda request: f"{question_of(request)}|{request.body.get('seed')}"  # noqa: E731
    requests = {}
    for name, shards in (("single", None), ("sharded", 2)):
        with ScriptedServer(helpers.MODEL, key=key) as server:
            fp = helpers.fingerprint(rollout, agent, server.url, count=len(qs), samples=3,
                                     decoding=Decoding(temperature=0.7))
            url = server.url
            if shards is None:
                run_questions(qs, agent, lambda q: FakeSearchEnv(), Budget(), tmp_path / name, fp,
                              llm=OpenAIClient(url, "m"))
            else:
                summary = run_sharded(qs, "search-r1", _env_builder, Budget(), tmp_path / name, fp,
                                      llm_builder=lambda url=url: OpenAIClient(url, "m"), shards=shards,
                                      executor="local")
                assert (summary.total, summary.attempted) == (24, 24)
            requests[name] = Counter(server.stats.by_key)
    assert requests["sharded"] == requests["single"] and len(requests["single"]) == 24
    sharded = tmp_path / "sharded" / "predictions.jsonl"
    assert sharded.read_bytes() == (tmp_path / "single" / "predictions.jsonl").read_bytes()
    assert Counter((t["id"], t["sample"]) for t in read_jsonl(tmp_path / "sharded" / "traces.jsonl")) == {
        (q.id, k): 1 for q in qs for k in range(3)}
