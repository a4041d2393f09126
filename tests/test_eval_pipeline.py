"""`aether eval`: the embedded demo end to end, resume, verification refusal, an LLM agent run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner, Result

from aethersearch import pipeline
from aethersearch.cli import app
from aethersearch.demo import DEMO_BUDGET
from aethersearch.errors import IntegrityError
from aethersearch.jsonl import read_jsonl
from aethersearch.release_layout import release_layout
from aethersearch.testing.scripted_server import Reply, ScriptedServer


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("demo") / "demo_out"
    result = CliRunner().invoke(app, ["eval", "--out", str(out), "--no-progress"], catch_exceptions=False)
    return out, result.output


def test_eval_with_no_arguments_runs_the_embedded_demo(demo: tuple[Path, str]) -> None:
    out, output = demo
    # the same per-source table as `aether score`: CIs, labelled overall rows
    assert "bamboogle" in output and "overall (micro)" in output and "overall (macro)" in output
    run = out / "run"
    fingerprint = orjson.loads((run / "run.json").read_bytes())
    assert (fingerprint["agent"], fingerprint["release_id"], fingerprint["endpoint"]) == ("lexical", "demo", None)
    assert fingerprint["corpus_hash"] and fingerprint["index_hash"]
    predictions = read_jsonl(run / "predictions.jsonl")
    eval_ids = [r["id"] for r in read_jsonl(release_layout(out / "release").eval)]
    assert [p["id"] for p in predictions] == eval_ids
    assert {p["outcome"] for p in predictions} <= {"answered", "abstained"}
    scores = orjson.loads((run / "scores.json").read_bytes())
    em = scores["overall"]["micro"]["metrics"]["em"]["mean"]
    assert 0.05 < em < 1.0  # the lexical baseline really answers some questions, not all
    assert (out / "report.html").stat().st_size > 1000
    assert "sandbox evaluation" in output and "GenScore" in output and "lead_astray" in output
    assert "Search Score" in output and "Evidence coverage" in output and "budget" in output
    assert (out / "sandbox_run" / "traces.jsonl").exists()


def test_the_demo_prints_no_table_wider_than_100_columns(demo: tuple[Path, str]) -> None:
    _, output = demo
    table_lines = [line for line in output.splitlines() if line[:1] in "┏┃┡│└"]
    assert len(table_lines) > 20  # the score tables and the factorised table are there
    assert max(len(line) for line in table_lines) <= 100, max(table_lines, key=len)
    # every metric still printed whole: the score table split in two rather than dropping a column
    assert all(metric in output for metric in ("subem_answered", "cover_em", " f1 "))


def test_the_demo_ends_with_three_next_commands_that_parse(demo: tuple[Path, str]) -> None:
    import shlex

    import typer

    out, output = demo
    tail = output[output.index("next:"):].replace("\\\n", " ")
    lines = [line.strip() for line in tail.splitlines()[1:] if line.strip() and not line.strip().startswith("#")]
    commands = [part.strip() for line in lines for part in line.split("&&")]
    assert len(lines) == 3 and str(out / "run") in lines[0] and "--endpoint URL" in lines[1]
    assert "eval1400-config" in lines[2]
    root = typer.main.get_command(app)
    for command in commands:
        words = shlex.split(command)[1:]
        leaf: typer.core.TyperCommand | typer.core.TyperGroup = root  # type: ignore[assignment]
        while isinstance(leaf, typer.core.TyperGroup) and words and words[0] in leaf.commands:
            leaf = leaf.commands[words.pop(0)]  # type: ignore[assignment]
        leaf.make_context("aether", words)  # raises on an unknown option or a missing argument


def test_the_demo_report_shows_both_evaluations_with_factorised_metrics_and_probes(
        demo: tuple[Path, str]) -> None:
    out, _ = demo
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "run: per-source scores" in html and "sandbox_run: per-source scores" in html
    assert "Factorised metrics" in html and "gen_score" in html
    assert "Probes (Forget / Lead-astray)" in html and "lead_astray_rate" in html


def test_eval_resumes_the_finished_demo_run_without_redoing_it(demo: tuple[Path, str]) -> None:
    out, _ = demo
    before = (out / "run" / "traces.jsonl").read_bytes()
    result = pipeline.run_eval(out / "release", out, pipeline.index_search(out / "index"), agent="lexical",
                               budget=DEMO_BUDGET)
    assert (result.summary.attempted, result.summary.skipped) == (0, 140)
    assert (out / "run" / "traces.jsonl").read_bytes() == before
    assert result.table[-1]["source"] == "all" and result.table[-1]["n"] == 140


def test_eval_refuses_a_release_that_fails_verification(demo: tuple[Path, str], tmp_path: Path) -> None:
    out, _ = demo
    release = tmp_path / "release"
    shutil.copytree(out / "release", release)
    eval_file = release_layout(release).eval
    eval_file.write_bytes(eval_file.read_bytes().replace(b'"answers":["', b'"answers":["x', 1))
    with pytest.raises(IntegrityError, match="fails verification"):
        pipeline.run_eval(release, tmp_path / "out", pipeline.index_search(out / "index"), agent="lexical")
    assert not (tmp_path / "out" / "run").exists()


def test_eval_with_an_llm_agent_against_the_scripted_server(demo: tuple[Path, str], tmp_path: Path) -> None:
    out, _ = demo
    with ScriptedServer(lambda request: Reply("<answer> I don't know </answer>")) as server:
        result = pipeline.run_eval(out / "release", tmp_path, pipeline.no_search(), agent="direct",
                                   endpoint=server.url, model="scripted", concurrency=8)
        assert server.stats.requests == 140
    assert result.summary.outcomes == {"abstained": 140}
    fingerprint = orjson.loads((tmp_path / "run" / "run.json").read_bytes())
    assert (fingerprint["agent"], fingerprint["environment"], fingerprint["model"]) == ("direct", "none", "scripted")
    assert result.table[-1]["abstained"] == 140


def test_aether_run_drives_search_r1_over_the_index_and_resumes(demo: tuple[Path, str], tmp_path: Path) -> None:
    from aethersearch.testing.scripted_server import search_r1_rule

    out, _ = demo
    args = ["run", str(out / "release"), "--out", str(tmp_path / "run"), "--agent", "search-r1",
            "--model", "scripted", "--index", str(out / "index"), "--concurrency", "16"]
    with ScriptedServer(search_r1_rule(lambda q: "Paris", searches=2)) as server:
        first = CliRunner().invoke(app, [*args, "--endpoint", server.url], catch_exceptions=False)
        calls = server.stats.requests
        again = CliRunner().invoke(app, [*args, "--endpoint", server.url, "--no-progress"],
                                   catch_exceptions=False)
        assert server.stats.requests == calls == 140 * 3
    assert first.exit_code == 0 and "140 run, 0 already finished, 0 errored" in first.output
    assert "rollout" in first.output  # the progress bar
    assert "0 run, 140 already finished" in again.output
    traces = read_jsonl(tmp_path / "run" / "traces.jsonl")
    assert len(traces) == 140 and all(len(t["steps"]) == 3 for t in traces)
    assert traces[0]["steps"][0]["tool_calls"][0]["returned_ids"]  # real BM25 hits from the demo index


@pytest.mark.slow
def test_eval_through_a_started_search_server_gives_the_same_predictions(demo: tuple[Path, str],
                                                                          tmp_path: Path) -> None:
    out, _ = demo
    with pipeline.search_server_process(out / "index") as url:
        search = pipeline.server_search(url)
        result = pipeline.run_eval(out / "release", tmp_path, search, agent="lexical",
                                   budget=DEMO_BUDGET, concurrency=8)
    in_process = orjson.loads((out / "run" / "run.json").read_bytes())
    served = orjson.loads((tmp_path / "run" / "run.json").read_bytes())
    assert (served["corpus_hash"], served["index_hash"]) == (in_process["corpus_hash"], in_process["index_hash"])
    assert (tmp_path / "run" / "predictions.jsonl").read_bytes() == (out / "run" / "predictions.jsonl").read_bytes()
    assert result.summary.errored == 0


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed entry point in a subprocess: errors must be one message, exit code 2."""
    return subprocess.run([sys.executable, "-m", "aethersearch.cli", *args], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200"})


def test_aether_run_refuses_a_release_whose_gold_file_fails_verification(demo: tuple[Path, str],
                                                                          tmp_path: Path) -> None:
    out, _ = demo
    release = tmp_path / "release"
    shutil.copytree(out / "release", release)
    eval_file = release_layout(release).eval
    eval_file.write_bytes(eval_file.read_bytes().replace(b'"answers":["', b'"answers":["x', 1))
    result = _cli("run", str(release), "--out", str(tmp_path / "run"), "--agent", "lexical",
                  "--index", str(out / "index"), "--no-progress")
    assert result.returncode == 2 and "fails verification" in result.stderr and eval_file.name in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()  # nothing half-written


@pytest.mark.parametrize(("config", "message"), [
    ("nosuch=3", "agent 'lexical' has no setting(s) 'nosuch'"),
    ("topk", "is not KEY=VALUE"),
    ("topk=five", "setting topk='five' should be a int"),
])
def test_aether_run_bad_agent_config_is_a_one_line_error(demo: tuple[Path, str], tmp_path: Path,
                                                         config: str, message: str) -> None:
    out, _ = demo
    result = _cli("run", str(out / "release"), "--out", str(tmp_path / "run"), "--agent", "lexical",
                  "--agent-config", config, "--index", str(out / "index"), "--no-progress")
    assert result.returncode == 2 and message in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr and "fix:" in result.stderr
    assert not (tmp_path / "run").exists()


def test_a_bad_search_r1_chat_template_fails_before_any_question_runs(demo: tuple[Path, str],
                                                                      tmp_path: Path) -> None:
    from aethersearch.agents.base import make_agent
    from aethersearch.errors import ConfigError

    with pytest.raises(ConfigError, match="chat template 'nope'"):
        make_agent("search-r1", chat_template="nope")
    with pytest.raises(ConfigError, match="should be a float"):
        make_agent("lexical", min_score="high")
    assert make_agent("lexical", min_score=1).config()["min_score"] == 1  # an int is a fine float


@pytest.mark.skipif(__import__("importlib.util").util.find_spec("vllm") is not None,
                    reason="vllm is installed: the missing-package error cannot occur")
def test_the_offline_vllm_endpoint_is_reachable_from_the_run_command(demo: tuple[Path, str],
                                                                     tmp_path: Path) -> None:
    out, _ = demo
    result = _cli("run", str(out / "release"), "--out", str(tmp_path / "run"), "--agent", "search-r1",
                  "--endpoint", "vllm-offline", "--model", "/models/none", "--index", str(out / "index"),
                  "--no-progress")
    assert result.returncode == 2 and "needs the vllm package" in result.stderr
    assert not (tmp_path / "run").exists()


def test_a_three_sample_demo_scores_pass_mean_and_maj_at_3(tmp_path: Path) -> None:
    """`aether eval --samples 3`: 3 rollouts per demo question, scored with pass@1..3, mean@3 and maj@3."""
    out = tmp_path / "demo3"
    result = CliRunner().invoke(app, ["eval", "--out", str(out), "--no-sandbox", "--no-progress", "--samples", "3"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "420 run, 0 already finished, 0 errored" in result.output  # 140 questions x 3
    scores = orjson.loads((out / "run" / "scores.json").read_bytes())
    assert scores["samples"] == 3 and scores["question_count"] == 140
    for block in (scores["overall"]["micro"], scores["overall"]["macro"], *scores["by_source"].values()):
        assert set(block["reducers"]["em"]) == {"mean@3", "pass@1", "pass@2", "pass@3", "maj@3"}
        assert block["reducers"]["em"]["mean@3"] == block["metrics"]["em"]
    # the lexical agent is deterministic: its 3 samples agree, so every reducer is the same figure
    micro = scores["overall"]["micro"]["reducers"]["em"]
    assert micro["pass@3"]["mean"] == micro["maj@3"]["mean"] == micro["mean@3"]["mean"]
    assert scores["overall"]["micro"]["variance"]["em"]["share"] == 0.0  # no within-question noise at all
    rows = read_jsonl(out / "run" / "scores_questions.jsonl")
    assert all(row["correct"]["em"] in (0, 3) and len(row["samples"]) == 3 for row in rows)
    assert [(p["id"], p["sample"]) for p in read_jsonl(out / "run" / "predictions.jsonl")][:4] == [
        (rows[0]["id"], 0), (rows[0]["id"], 1), (rows[0]["id"], 2), (rows[1]["id"], 0)]
    assert "c of 3 correct" in (out / "report.html").read_text(encoding="utf-8")


def _sampled_run(out: Path, run_dir: Path, *extra: str) -> Result:
    return CliRunner().invoke(app, ["run", str(out / "release"), "--out", str(run_dir), "--index", str(out / "index"),
                                    "--agent", "lexical", "--no-progress", *extra], catch_exceptions=False)


def test_the_lexical_agent_samples_so_pass_and_maj_differ_from_mean_and_reruns_repeat(
        demo: tuple[Path, str], tmp_path: Path) -> None:
    """`--samples 5 --temperature 0.8` with no model: seeded choices among candidates, reproducible per sample."""
    out, _ = demo
    first = _sampled_run(out, tmp_path / "a", "--samples", "5", "--temperature", "0.8")
    assert first.exit_code == 0 and "identical" not in first.output, first.output
    again = _sampled_run(out, tmp_path / "b", "--samples", "5", "--temperature", "0.8")
    assert again.exit_code == 0
    answers = [(p["id"], p["sample"], p["prediction"]) for p in read_jsonl(tmp_path / "a" / "predictions.jsonl")]
    assert answers == [(p["id"], p["sample"], p["prediction"]) for p in read_jsonl(tmp_path / "b" / "predictions.jsonl")]
    by_question: dict[str, set[str | None]] = {}
    for question_id, _, answer in answers:
        by_question.setdefault(question_id, set()).add(answer)
    assert sum(len(found) > 1 for found in by_question.values()) > 20  # the samples really differ
    assert CliRunner().invoke(app, ["score", str(tmp_path / "a"), "--release", str(out / "release")]).exit_code == 0
    micro = orjson.loads((tmp_path / "a" / "scores.json").read_bytes())["overall"]["micro"]
    em = micro["reducers"]["em"]
    assert em["pass@5"]["mean"] > em["pass@1"]["mean"] and em["pass@1"]["mean"] == em["mean@5"]["mean"]
    assert micro["variance"]["em"]["share"] > 0


def test_samples_with_an_agent_that_cannot_vary_warn_once(demo: tuple[Path, str], tmp_path: Path) -> None:
    out, _ = demo
    greedy = _sampled_run(out, tmp_path / "greedy", "--samples", "2")
    assert greedy.output.count("identical") == 1 and "--temperature 0" in greedy.output
    from aethersearch.agents.base import AGENTS
    from aethersearch.registry import resolve

    assert not resolve("agent", "lexical-browse", AGENTS).can_sample and resolve("agent", "lexical", AGENTS).can_sample
    fixed = CliRunner().invoke(app, ["run", str(out / "sandbox_release"), "--out", str(tmp_path / "browse"),
                                     "--index", str(out / "sandbox_index"), "--agent", "lexical-browse",
                                     "--samples", "2", "--temperature", "0.8", "--no-progress"],
                               catch_exceptions=False)
    assert fixed.output.count("identical") == 1 and "makes no random choice" in fixed.output, fixed.output
