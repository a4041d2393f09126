"""`aether run --ray ADDRESS`: shards on a real local Ray cluster, one run directory, resumable."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from aethersearch.jsonl import read_jsonl
from aethersearch.rollout.ray_backend import ray_available


def test_shards_without_ray_are_refused_cleanly(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from aethersearch.cli import app
    from aethersearch.errors import ConfigError

    result = CliRunner().invoke(app, ["run", str(tmp_path), "--out", str(tmp_path / "r"), "--agent", "direct",
                                      "--shards", "2", "--no-progress"])
    assert result.exit_code != 0 and isinstance(result.exception, ConfigError)
    assert "--shards needs --ray" in str(result.exception)


@pytest.mark.skipif(not ray_available(), reason="needs the ray extra (pip install 'aethersearch[ray]')")
@pytest.mark.timeout(600)
def test_cli_run_on_a_local_ray_cluster_writes_one_resumable_run(tmp_path: Path) -> None:
    import ray

    from aethersearch import demo
    from aethersearch.testing.scripted_server import ScriptedServer, search_r1_rule

    release, index = demo.build_demo_inputs(tmp_path / "demo")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=80 * 2**20)
    try:
        address = ray.get_runtime_context().gcs_address  # the cluster this test started
        with ScriptedServer(search_r1_rule(lambda q: "Paris", searches=1), model="qwen-sft") as server:
            args = [sys.executable, "-m", "aethersearch.cli", "run", str(release), "--out", str(tmp_path / "run"),
                    "--agent", "search-r1", "--endpoint", server.url, "--model", "qwen-sft", "--index", str(index),
                    "--ray", address, "--shards", "2", "--no-progress"]
            env = {**os.environ, "RAY_ADDRESS": ""}
            first = subprocess.run(args, capture_output=True, text=True, timeout=400, env=env)
            assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
            calls = server.stats.requests
            again = subprocess.run(args, capture_output=True, text=True, timeout=400, env=env)
            assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
            assert server.stats.requests == calls  # the resume made no model call
    finally:
        ray.shutdown()
    traces = read_jsonl(tmp_path / "run" / "traces.jsonl")
    ids = Counter(t["id"] for t in traces)
    questions = read_jsonl(next(release.glob("*rollout_questions.jsonl")))
    assert set(ids) == {q["id"] for q in questions}
    assert max(ids.values()) == 1  # no duplicate ids across shards and reruns
    assert all(t["outcome"] == "answered" for t in traces)
    assert calls >= len(questions)  # both shards really called the model
    assert "already finished" in again.stdout
