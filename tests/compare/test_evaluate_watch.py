"""Training-time evaluation: ``aethersearch.api.evaluate`` against the scripted OpenAI server, and ``watch``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aethersearch.api import evaluate, evaluate_run
from aethersearch.compare.watch import Checkpoint, discover, read_history, watch
from aethersearch.environment import ToolResult
from aethersearch.errors import AetherError, ConfigError, DataError
from aethersearch.jsonl import read_jsonl
from aethersearch.records import Document, EvalRow, ToolCall
from aethersearch.release_layout import release_layout
from aethersearch.testing.scripted_server import ScriptedServer, search_r1_rule
from tests.scoring.factory import eval_rows, write_release


class OnePageEnvironment:
    """A search tool that always returns the same page (enough for a scripted Search-R1 policy)."""

    tools = ("search",)

    async def search(self, query: str, k: int) -> ToolResult:
        doc = Document(id="d1", title="Page", text="Some text.")
        return ToolResult([doc], ToolCall(tool="search", arguments={"query": query, "k": k}, returned_ids=["d1"]))

    async def visit(self, page: str) -> ToolResult:
        return ToolResult([], ToolCall(tool="visit", arguments={"page": page}, error="no visit"))

    async def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def demo_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real, verifiable release: ``evaluate`` verifies it like ``aether run`` does."""
    from aethersearch.curation.build import build_from_config
    from aethersearch.sources.demo import write_demo_sources

    root = tmp_path_factory.mktemp("demo")
    return build_from_config(write_demo_sources(root / "src"), root / "release").release_dir


@pytest.fixture()
def release(tmp_path: Path):
    rows = eval_rows(4)
    return write_release(tmp_path / "release", rows), rows


def test_evaluate_returns_searchr1_metric_keys(tmp_path: Path, demo_release: Path) -> None:
    rows = [EvalRow.model_validate(row) for row in read_jsonl(release_layout(demo_release).eval)]
    wrong = sorted({r.source_dataset for r in rows})[0]
    # the scripted policy answers every source right except one
    answers = {r.question.rstrip("?"): (r.answers[0] if r.source_dataset != wrong else "no idea") for r in rows}
    # (the agent sees NQ's questions with Search-R1's appended "?")
    with ScriptedServer(search_r1_rule(lambda q: answers[q.rstrip("?")], searches=1)) as server:
        got = evaluate(server.url, demo_release, model="scripted",
                       environment_factory=lambda q: OnePageEnvironment(), run_dir=tmp_path / "run")
        calls = server.stats.requests
        only_searchr1 = evaluate(server.url, demo_release, model="scripted", run_dir=tmp_path / "run",
                                 environment_factory=lambda q: OnePageEnvironment(), metric_keys="searchr1")
        resumed_calls = server.stats.requests - calls
    sources = sorted({r.source_dataset for r in rows})
    per_source = {s: (0.0 if s == wrong else 1.0) for s in sources}
    per_source["all"] = sum(r.source_dataset != wrong for r in rows) / len(rows)
    assert got == pytest.approx({**{f"val/test_score/{s}": v for s, v in per_source.items()},
                                 **{f"val-core/{s}/reward/mean@1": v for s, v in per_source.items()}})
    assert only_searchr1 == pytest.approx({f"val/test_score/{s}": v for s, v in per_source.items()})
    assert resumed_calls <= 1  # the finished run resumed (at most a preflight call), nothing regenerated
    scores = json.loads((tmp_path / "run" / "scores.json").read_text())
    assert scores["usage"]["tool_calls"]["total"] == len(rows)


def test_evaluate_without_tools_for_a_search_agent_is_a_config_error(tmp_path: Path, release) -> None:
    release_dir, _ = release
    with pytest.raises(ConfigError, match="search"):
        evaluate_run("http://127.0.0.1:9/v1", release_dir, model="m")


def test_discover_checkpoint_dirs_and_endpoint_lists(tmp_path: Path) -> None:
    ckpts = tmp_path / "ckpts"
    for name in ("global_step_200", "global_step_100", ".hidden", "global_step_300.tmp"):
        (ckpts / name).mkdir(parents=True)
        (ckpts / name / "config.json").write_text("{}")
    found = discover(ckpts, settle_s=0)
    assert [(c.name, c.step) for c in found] == [("global_step_100", 100), ("global_step_200", 200)]
    assert discover(ckpts, settle_s=3600) == []  # still being written: not evaluated yet
    listing = tmp_path / "endpoints.txt"
    listing.write_text("# name url [step]\nsft http://127.0.0.1:8001/v1 50\nrl-step-300 http://127.0.0.1:8002/v1\n")
    assert [(c.name, c.step, c.kind) for c in discover(listing)] == [("sft", 50, "endpoint"),
                                                                     ("rl-step-300", 300, "endpoint")]
    listing.write_text("sft not-a-url\n")
    with pytest.raises(DataError, match="endpoints.txt:1"):
        discover(listing)


def test_watch_evaluates_each_new_checkpoint_once_and_appends_history(tmp_path: Path) -> None:
    listing = tmp_path / "endpoints.txt"
    listing.write_text("step-100 http://127.0.0.1:1/v1 100\n")
    history = tmp_path / "history.jsonl"
    calls: list[str] = []

    def fake_evaluate(checkpoint: Checkpoint) -> dict[str, Any]:
        calls.append(checkpoint.name)
        if checkpoint.name == "broken":
            raise AetherError("endpoint unreachable")
        return {"val/test_score/nq": checkpoint.step / 1000}

    def add_checkpoint(_: float) -> None:  # the trainer writes a new checkpoint while we sleep
        with listing.open("a") as handle:
            handle.write("step-200 http://127.0.0.1:2/v1 200\nbroken http://127.0.0.1:3/v1 250\n")

    result = watch(listing, fake_evaluate, history=history, plot=tmp_path / "curve.svg", poll_s=0,
                   max_polls=2, sleep=add_checkpoint)
    assert [r.checkpoint for r in result.evaluated] == ["step-100", "step-200"]
    assert [f.checkpoint for f in result.failed] == ["broken"]
    assert [(r.metrics or {})["val/test_score/nq"] for r in read_history(history)] == [0.1, 0.2]
    assert (tmp_path / "curve.svg").read_text().lstrip().startswith("<svg")
    # a restarted watcher skips what the history already holds, retrying only the failure
    calls.clear()
    watch(listing, fake_evaluate, history=history, max_polls=1, sleep=lambda s: None)
    assert calls == ["broken"]


def test_watch_recovers_from_a_torn_history_line(tmp_path: Path) -> None:
    listing = tmp_path / "endpoints.txt"
    listing.write_text("a http://127.0.0.1:1/v1 1\nb http://127.0.0.1:2/v1 2\n")
    history = tmp_path / "history.jsonl"
    history.write_text(json.dumps({"checkpoint": "a", "location": "http://127.0.0.1:1/v1", "metrics": {}})
                       + '\n{"checkpoint": "b", "locat')
    watch(listing, lambda c: {"x": 1.0}, history=history, max_polls=1, sleep=lambda s: None)
    assert [r.checkpoint for r in read_history(history)] == ["a", "b"]


def test_models_served_at_one_url_are_distinct_checkpoints(tmp_path: Path) -> None:
    listing = tmp_path / "endpoints.txt"
    listing.write_text("sft http://127.0.0.1:8000/v1 100\nrl http://127.0.0.1:8000/v1 200\n")
    history = tmp_path / "history.jsonl"
    calls: list[str] = []

    def fake_evaluate(checkpoint: Checkpoint) -> dict[str, Any]:
        calls.append(checkpoint.name)
        return {"em": 0.5}

    watch(listing, fake_evaluate, history=history, max_polls=1, sleep=lambda s: None)
    assert calls == ["sft", "rl"]
    calls.clear()
    watch(listing, fake_evaluate, history=history, max_polls=1, sleep=lambda s: None)
    assert calls == []


def test_watch_records_a_failed_checkpoint_as_failed_and_retries_it_with_backoff(tmp_path: Path) -> None:
    from aethersearch.compare.watch import read_history_rows
    from aethersearch.errors import RunFailed

    listing = tmp_path / "endpoints.txt"
    listing.write_text("step-100 http://127.0.0.1:1/v1 100\n")
    history = tmp_path / "history.jsonl"
    now = [0.0]
    sleeps: list[float] = []
    outcomes = iter(["fail", "fail", "ok"])

    def flaky(checkpoint: Checkpoint) -> dict[str, Any]:
        if next(outcomes) == "fail":
            raise RunFailed("run x: 140 of 140 questions ended in error", run_dir=None, total=140, errored=140,
                            kinds={"connection": 140}, retryable=140, max_error_rate=0.0, fix="start the server")
        return {"em": 0.4}

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    result = watch(listing, flaky, history=history, plot=tmp_path / "curve.svg", poll_s=1000, max_polls=3,
                   sleep=sleep, clock=lambda: now[0], retry_base_s=30, retry_cap_s=3600)
    assert sleeps == [30, 60]  # backoff doubles, and is shorter than the poll interval
    assert [f.attempt for f in result.failed] == [1, 2]
    assert [r.metrics for r in result.evaluated] == [{"em": 0.4}]
    rows = read_history_rows(history)
    assert [r.status for r in rows] == ["failed", "failed", "ok"]
    assert all(r.metrics is None and "140 of 140" in (r.error or "") for r in rows[:2])
    assert [(r.metrics or {})["em"] for r in read_history(history)] == [0.4]  # the curve never shows a failure as 0
    assert (tmp_path / "curve.svg").read_text().lstrip().startswith("<svg")  # redrawn from scored rows only


def test_watch_gives_up_after_max_attempts_counted_across_restarts(tmp_path: Path) -> None:
    listing = tmp_path / "endpoints.txt"
    listing.write_text("dead http://127.0.0.1:1/v1 1\n")
    history = tmp_path / "history.jsonl"
    calls: list[str] = []

    def dead(checkpoint: Checkpoint) -> dict[str, Any]:
        calls.append(checkpoint.name)
        raise AetherError("unreachable")

    for _ in range(4):  # each restart retries at once, until max_attempts failures are in the history
        watch(listing, dead, history=history, max_polls=1, sleep=lambda s: None, max_attempts=3)
    assert calls == ["dead"] * 3
    assert read_history(history) == []


def test_aether_watch_against_a_dead_endpoint_writes_no_score(tmp_path: Path, demo_release: Path) -> None:
    import socket

    from typer.testing import CliRunner

    from aethersearch.cli import app
    from aethersearch.compare.watch import read_history_rows

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    listing = tmp_path / "endpoints.txt"
    listing.write_text(f"step-100 http://127.0.0.1:{port}/v1 100\n")
    history = tmp_path / "history.jsonl"
    result = CliRunner().invoke(app, ["watch", str(listing), "--release", str(demo_release), "--history",
                                      str(history), "--agent", "direct", "--runs-dir", str(tmp_path / "runs"),
                                      "--once"])
    assert result.exit_code == 3
    rows = read_history_rows(history)
    assert [(r.checkpoint, r.status) for r in rows] == [("step-100", "failed")]
    assert "metrics" not in rows[0].line() and "connection" in (rows[0].error or "")
    assert read_history(history) == []


def test_evaluate_with_samples_rolls_each_question_out_k_times_with_its_own_seeds(tmp_path: Path,
                                                                                   demo_release: Path) -> None:
    from aethersearch.records import Decoding
    from aethersearch.testing.scripted_server import question_of

    rows = [EvalRow.model_validate(row) for row in read_jsonl(release_layout(demo_release).eval)]
    answers = {r.question.rstrip("?"): r.answers[0] for r in rows}
    key = lambda request: f"{question_of(request)}|{request.body.get('seed')}"  # noqa: E731
    with ScriptedServer(search_r1_rule(lambda q: answers[q.rstrip("?")], searches=1), key=key) as server:
        got = evaluate(server.url, demo_release, model="scripted", samples=3, decoding=Decoding(temperature=0.7),
                       environment_factory=lambda q: OnePageEnvironment(), run_dir=tmp_path / "run",
                       metric_keys="verl")
        keys = set(server.stats.by_key)
        calls = server.stats.requests
        evaluate(server.url, demo_release, model="scripted", samples=3, decoding=Decoding(temperature=0.7),
                 environment_factory=lambda q: OnePageEnvironment(), run_dir=tmp_path / "run")
        assert server.stats.requests - calls <= 1  # resumed: every (id, sample) was final
    assert len(keys) == 3 * len(rows)  # three distinct seeded requests per question
    assert got["val-core/all/reward/mean@3"] == pytest.approx(1.0)
    assert json.loads((tmp_path / "run" / "run.json").read_text())["samples"] == 3


def test_a_history_line_that_is_not_a_row_is_refused_with_its_line(tmp_path: Path) -> None:
    from aethersearch.compare.watch import read_history_rows
    from aethersearch.errors import DataError

    history = tmp_path / "history.jsonl"
    history.write_text('{"checkpoint": "a", "metrics": {"em": 0.1}}\n{"checkpoint": "b", "metric": {"em": 0.2}}\n')
    with pytest.raises(DataError, match=r"history.jsonl:2: not a history row: metric"):
        read_history_rows(history)
