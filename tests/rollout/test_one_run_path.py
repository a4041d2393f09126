"""One run path: the CLI and the Python API write the same run.json for the same settings."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from aethersearch import pipeline
from aethersearch.api import evaluate_run
from aethersearch.cli import app
from aethersearch.demo import DEMO_BUDGET, build_demo_inputs
from aethersearch.records import RunFingerprint
from aethersearch.release_layout import release_layout
from aethersearch.testing.scripted_server import ScriptedServer, search_r1_rule


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build_demo_inputs(tmp_path_factory.mktemp("demo"))


def test_api_and_cli_write_identical_run_json_for_identical_settings(demo: tuple[Path, Path],
                                                                     tmp_path: Path) -> None:
    release, index = demo
    with ScriptedServer(search_r1_rule(lambda q: "Paris", searches=1), model="qwen-sft") as server:
        cli = CliRunner().invoke(app, ["run", str(release), "--out", str(tmp_path / "cli"), "--agent", "search-r1",
                                       "--endpoint", server.url, "--model", "qwen-sft", "--index", str(index),
                                       "--agent-config", "topk=5", "--no-progress"], catch_exceptions=False)
        assert cli.exit_code == 0, cli.output
        api = evaluate_run(server.url, release, model="qwen-sft", index=index, agent_config={"topk": 5},
                           run_dir=tmp_path / "api")
    cli_json = (tmp_path / "cli" / "run.json").read_bytes()
    assert (api.run_dir / "run.json").read_bytes() == cli_json
    recorded = RunFingerprint.model_validate(orjson.loads(cli_json))
    assert recorded.retrieval_topk == 5 and recorded.agent_config["topk"] == 5  # not a hard-coded 3
    assert recorded.concurrency == 64 and recorded.limits is not None
    assert recorded.limits.question_deadline_s is not None and recorded.limits.question_deadline_s < 600
    assert recorded.served_model is not None
    assert recorded.served_model["id"] == "qwen-sft"  # what GET /v1/models reported
    assert recorded.served_model["server"]["tokenize"] == "/tokenize"  # and what the server says of its model
    assert recorded.sent_decoding is not None
    assert recorded.sent_decoding["temperature"] == 0.0 and "max_tokens" in recorded.sent_decoding
    assert recorded.sent_decoding.get("stop") == recorded.decoding.stop or "stop" not in recorded.sent_decoding


def test_a_resume_with_other_concurrency_or_limits_is_the_same_run(demo: tuple[Path, Path], tmp_path: Path) -> None:
    release, index = demo
    args = ["run", str(release), "--out", str(tmp_path / "run"), "--agent", "lexical", "--index", str(index),
            "--no-progress"]
    first = CliRunner().invoke(app, args, catch_exceptions=False)
    again = CliRunner().invoke(app, [*args, "--concurrency", "4", "--call-timeout", "10"], catch_exceptions=False)
    assert first.exit_code == again.exit_code == 0
    assert "0 run, 140 already finished" in again.output
    recorded = orjson.loads((tmp_path / "run" / "run.json").read_bytes())
    assert recorded["concurrency"] == 4 and recorded["limits"]["call_timeout_s"] == 10.0


def test_the_api_verifies_the_release_like_the_cli(demo: tuple[Path, Path], tmp_path: Path) -> None:
    import shutil

    from aethersearch.errors import IntegrityError

    release, index = demo
    tampered = tmp_path / "release"
    shutil.copytree(release, tampered)
    eval_file = release_layout(tampered).eval
    eval_file.write_bytes(eval_file.read_bytes().replace(b'"answers":["', b'"answers":["x', 1))
    with pytest.raises(IntegrityError, match="fails verification"):
        evaluate_run("http://127.0.0.1:9/v1", tampered, model="m", index=index, run_dir=tmp_path / "run")
    assert not (tmp_path / "run" / "run.json").exists()


def test_a_finished_run_resumes_without_its_model_server(demo: tuple[Path, Path], tmp_path: Path) -> None:
    import socket

    release, index = demo
    with ScriptedServer(search_r1_rule(lambda q: "Paris", searches=1)) as server:
        first = evaluate_run(server.url, release, model="scripted", index=index, run_dir=tmp_path / "run")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    again = evaluate_run(dead, release, model="scripted", index=index, run_dir=tmp_path / "run")  # no preflight
    assert again.metrics == first.metrics


def test_run_json_records_what_replicas_are_sent_and_serve(demo: tuple[Path, Path], tmp_path: Path) -> None:
    from aethersearch.testing.scripted_server import Reply

    release, _ = demo
    with ScriptedServer(lambda r: Reply("<answer> Paris </answer>"), model="m") as a, \
            ScriptedServer(lambda r: Reply("<answer> Paris </answer>"), model="m") as b:
        result = CliRunner().invoke(app, ["run", str(release), "--out", str(tmp_path / "run"), "--agent", "direct",
                                          "--endpoint", f"{a.url},{b.url}", "--model", "m", "--temperature", "0.7",
                                          "--no-progress"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    recorded = orjson.loads((tmp_path / "run" / "run.json").read_bytes())
    assert recorded["served_model"]["id"] == "m"
    assert recorded["sent_decoding"]["temperature"] == 0.7


def test_sharded_runs_go_through_the_same_path_and_write_the_same_run(demo: tuple[Path, Path],
                                                                      tmp_path: Path) -> None:
    from aethersearch.rollout.session import RunSettings

    release, index = demo
    settings = RunSettings(agent="lexical", budget=DEMO_BUDGET)
    search = pipeline.index_search(index)
    single = pipeline.run_release(release, tmp_path / "single", settings, search)
    sharded = pipeline.run_release(release, tmp_path / "sharded", settings, search, shards=3, executor="local")
    assert single.errors.errored == sharded.errors.errored == 0
    for name in ("run.json", "predictions.jsonl"):
        assert (tmp_path / "sharded" / name).read_bytes() == (tmp_path / "single" / name).read_bytes()


def test_a_finished_run_on_a_llama_cpp_server_resumes(demo: tuple[Path, Path], tmp_path: Path) -> None:
    # llama.cpp's top_k "off" is 0, known only once the server is asked; a finished run resumes without
    # asking it, so the recorded sent_decoding must stand (it was refused as "different settings")
    release, index = demo
    args = ["run", str(release), "--out", str(tmp_path / "run"), "--agent", "search-r1", "--model", "m",
            "--index", str(index), "--no-progress"]
    with ScriptedServer(search_r1_rule(lambda q: "Paris", searches=0), chat_template="t") as server:
        first = CliRunner().invoke(app, [*args, "--endpoint", server.url], catch_exceptions=False)
        again = CliRunner().invoke(app, [*args, "--endpoint", server.url], catch_exceptions=False)
    assert first.exit_code == 0, first.output
    assert orjson.loads((tmp_path / "run" / "run.json").read_bytes())["sent_decoding"]["top_k"] == 0
    assert again.exit_code == 0, again.output
    assert "already finished" in again.output
