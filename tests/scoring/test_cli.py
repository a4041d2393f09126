"""The `aether score | compare | report | watch` commands: thin wrappers that print and exit cleanly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from aethersearch.cli import app
from aethersearch.release_layout import release_layout
from tests.scoring.factory import eval_rows, write_release, write_run

runner = CliRunner(env={"COLUMNS": "200"})


def test_score_compare_report_end_to_end(tmp_path: Path) -> None:
    rows = eval_rows(10)
    release = write_release(tmp_path / "release", rows)
    base = write_run(tmp_path / "base", rows, {r.id for r in rows[:10]})
    rl = write_run(tmp_path / "rl", rows, {r.id for r in rows[:20]}, model="rl")
    for run in (base, rl):
        done = runner.invoke(app, ["score", str(run), "--release", str(release), "--resamples", "200"])
        assert done.exit_code == 0, done.output
        assert "overall (micro)" in done.output and "overall (macro)" in done.output
        assert "mean usage per question (30 recorded): prompt_tokens=100.0" in done.output
    done = runner.invoke(app, ["compare", str(base), str(rl), "--out", str(tmp_path / "cmp.json")])
    assert done.exit_code == 0, done.output
    assert "wrong->right 10" in done.output
    assert json.loads((tmp_path / "cmp.json").read_text())["pairs"][0]["b"] == "rl"
    done = runner.invoke(app, ["report", str(base), str(rl), "--out", str(tmp_path / "r.html")])
    assert done.exit_code == 0, done.output
    assert (tmp_path / "r.html").stat().st_size > 10_000


def test_errors_are_one_clean_message_without_traceback(tmp_path: Path) -> None:
    rows = eval_rows(2)
    release = write_release(tmp_path / "release", rows)
    empty = tmp_path / "empty"
    empty.mkdir()
    done = subprocess.run([sys.executable, "-m", "aethersearch.cli", "score", str(empty), "--release", str(release)],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert "neither traces.jsonl nor predictions.jsonl" in done.stderr and "fix:" in done.stderr
    assert "Traceback" not in done.stderr


def test_watch_once_on_an_empty_endpoint_list(tmp_path: Path) -> None:
    rows = eval_rows(2)
    release = write_release(tmp_path / "release", rows)
    listing = tmp_path / "endpoints.txt"
    listing.write_text("# nothing served yet\n")
    done = runner.invoke(app, ["watch", str(listing), "--release", str(release), "--history",
                               str(tmp_path / "h.jsonl"), "--once"])
    assert done.exit_code == 0, done.output


def test_watch_evaluates_served_checkpoints_appends_history_and_plots_the_curve(tmp_path: Path) -> None:
    from aethersearch.curation.build import build_from_config
    from aethersearch.jsonl import read_jsonl
    from aethersearch.sources.demo import write_demo_sources
    from aethersearch.testing.scripted_server import Reply, ScriptedServer, question_of

    # watch evaluates through the one run path, which verifies the release: a real (demo) release
    release = build_from_config(write_demo_sources(tmp_path / "src"), tmp_path / "release").release_dir
    answers = {r["question"]: r["answers"][0] for r in read_jsonl(release_layout(release).eval)}
    history = tmp_path / "h.jsonl"
    with ScriptedServer(lambda request: Reply(f"<answer> {answers.get(question_of(request) or '', '?')} </answer>")
                        ) as server:
        listing = tmp_path / "endpoints.txt"
        listing.write_text(f"sft {server.url} 100\n")
        done = runner.invoke(app, ["watch", str(listing), "--release", str(release), "--history", str(history),
                                   "--agent", "direct", "--runs-dir", str(tmp_path / "runs"), "--once"])
    assert done.exit_code == 0, done.output
    assert "sft (step 100): em=1.000" in done.output
    row = json.loads(history.read_text().splitlines()[0])
    assert row["checkpoint"] == "sft" and row["metrics"]["val/test_score/nq"] == 1.0
    assert history.with_suffix(".svg").read_text().lstrip().startswith("<svg")  # the curve, by default
    assert (tmp_path / "runs" / "sft" / "scores.json").is_file()
