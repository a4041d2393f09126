"""The static HTML report: self-contained, complete, and rendering cleanly in headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from aethersearch.errors import DataError
from aethersearch.records import Budget
from aethersearch.report.html import write_report
from tests.scoring.factory import eval_rows, write_release, write_run

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report")
    rows = eval_rows(20)
    release = write_release(root / "release", rows)
    base = write_run(root / "base", rows, {r.id for i, r in enumerate(rows) if i % 3 == 0}, model="base",
                     outcomes={rows[1].id: "budget", rows[2].id: "no_answer_tag"})
    rl = write_run(root / "rl", rows, {r.id for i, r in enumerate(rows) if i % 3 == 0 or r.source_dataset == "nq"},
                   model="rl")
    (rl / "factorised.json").write_text(json.dumps(
        {"overall": {"knowledge_sufficiency": 0.41, "genscore": 0.23},
         "by_hops": {"2": {"knowledge_sufficiency": 0.5}, "3": {"knowledge_sufficiency": 0.3}},
         "by_source": {"hotpotqa": {"genscore": 0.2}}}))
    (rl / "probes.json").write_text(json.dumps({"forget": {"forget_rate": 0.125, "n_eligible": 16},
                                                "lead_astray": {"lead_astray_rate": 0.0625, "n_eligible": 16}}))
    history = root / "history.jsonl"
    history.write_text("".join(json.dumps({"checkpoint": f"global_step_{s}", "location": str(s), "step": s,
                                           "metrics": {"val/test_score/nq": i / 10, "val/test_score/hotpotqa": i / 20}})
                               + "\n" for i, s in enumerate((100, 200, 300))))
    return write_report([base, rl], root / "report.html", release_dir=release, history=history)


def test_report_is_one_self_contained_file(report: Path) -> None:
    html = report.read_text(encoding="utf-8")
    # nothing is fetched: no external scripts, styles, images or fonts
    assert not re.findall(r'(?:src|href)\s*=\s*"(?:https?:)?//', html)
    assert "<link" not in html and "@import" not in html and "url(http" not in html
    # every in-page link resolves to an anchor of the same file
    anchors = set(re.findall(r'id="([^"]+)"', html))
    targets = set(re.findall(r'href="#([^"]+)"', html))
    assert targets and targets <= anchors


def test_report_has_every_section(report: Path) -> None:
    html = report.read_text(encoding="utf-8")
    for needle in ("per-source scores", "overall (micro)", "overall (macro)", "em by source", "Outcomes",
                   "mean tool calls", "Checkpoint comparison", "mcnemar-exact", "paired-bootstrap",
                   "p (Holm)", "em wrong to right", "Training-time evaluation", "val/test_score/nq",
                   "knowledge_sufficiency", "lead_astray", "Traces of flipped questions"):
        assert needle in html, needle
    assert html.count("<svg") >= 6
    # significance is marked on the nq gain (all 20 nq questions flipped to right)
    assert re.search(r'class="sig">\+0\.\d+ \*</span>', html)


def test_flips_link_to_their_traces(report: Path) -> None:
    html = report.read_text(encoding="utf-8")
    flip_block = html.split("em wrong to right", 1)[1].split("</details>", 1)[0]
    linked = re.findall(r'href="#(trace-1-[^"]+)"', flip_block)
    assert len(linked) >= 10
    for anchor in linked:
        assert f'<details id="{anchor}">' in html


def test_contract_mismatch_is_shown_as_refusal(tmp_path: Path) -> None:
    rows = eval_rows(4)
    release = write_release(tmp_path / "release", rows)
    a = write_run(tmp_path / "a", rows, set())
    b = write_run(tmp_path / "b", rows, set(), fp_changes={"budget": Budget(max_turns=2)})
    html = write_report([a, b], tmp_path / "r.html", release_dir=release).read_text()
    assert "Comparison refused" in html and "budget" in html
    allowed = write_report([a, b], tmp_path / "r2.html", release_dir=release, allow=["budget"]).read_text()
    assert "Contract override" in allowed


@pytest.mark.skipif(CHROMIUM is None, reason="Debian `chromium` not installed (apt-get install -y chromium)")
def test_report_renders_in_headless_chromium_without_console_errors(report: Path, tmp_path: Path) -> None:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]
    url = report.resolve().as_uri()
    dom = subprocess.run([CHROMIUM, *flags, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", url],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    check = re.search(r'<div id="render-check" data-ready="(\d)" data-tables="(\d+)" data-svgs="(\d+)"',
                      dom.stdout)
    assert check, "the page's render self-check did not run"
    ready, tables, svgs = map(int, check.groups())
    assert ready == 1 and tables >= 8 and svgs >= 6
    overlap = re.search(r'data-legend-overlaps="(\d+)" data-overlap-detail="([^"]*)"', dom.stdout)
    assert overlap, "the page's legend check did not run"
    assert overlap.group(1) == "0", f"legends over data: {overlap.group(2)}"
    errors = re.search(r'<pre id="console-errors" data-count="(\d+)">([^<]*)</pre>', dom.stdout)
    assert errors and errors.group(1) == "0", errors.group(2) if errors else dom.stdout[-2000:]
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report_screenshot.png"
    shot.unlink(missing_ok=True)
    done = subprocess.run([CHROMIUM, *flags, f"--user-data-dir={tmp_path / 'profile2'}", "--window-size=1280,3600",
                           f"--screenshot={shot}", url], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.stat().st_size > 20_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_budget_exhaustion_table_counts_forced_answers(tmp_path: Path) -> None:
    rows = eval_rows(3)
    release = write_release(tmp_path / "release", rows)
    run = write_run(tmp_path / "run", rows, {r.id for r in rows}, outcomes={rows[1].id: "budget"})
    traces = [json.loads(line) for line in (run / "traces.jsonl").read_text().splitlines()]
    traces[0]["stop_reason"] = "budget"  # the runner's forced final answer produced a (correct) answer
    (run / "traces.jsonl").write_text("".join(json.dumps(t) + "\n" for t in traces))
    html = write_report([run], tmp_path / "r.html", release_dir=release).read_text(encoding="utf-8")
    table = re.search(r'<table class="budget">(.*?)</table>', html, re.DOTALL)
    assert table, "no budget-exhaustion table"
    cells = re.findall(r"<td>([^<]*)</td>", table.group(1))
    # run, hit budget, answered after budget, EM of those, ended without answer, stop reasons
    assert cells[:5] == ["run", "2", "1", "1.000", "1"]
    assert cells[5] == "answer=7, budget=1, max_turns=1"  # the factory's budget-outcome trace says max_turns
    assert "% hit budget" in html  # the budget-usage chart shows the share of questions that ran out
    # a scores.json missing a field is refused naming the field and the fix (never half-rendered)
    scores = json.loads((run / "scores.json").read_text())
    del scores["budget"]
    (run / "scores.json").write_text(json.dumps(scores))
    with pytest.raises(DataError, match=r"scores.json \(field 'budget'\)") as info:
        write_report([run], tmp_path / "old.html")
    assert "aether score" in (info.value.fix or "")
    # ... and so is one of an older schema version
    (run / "scores.json").write_text(json.dumps({**scores, "schema_version": 1}))
    with pytest.raises(DataError, match="schema_version 1"):
        write_report([run], tmp_path / "old.html")


def test_missing_history_is_an_error_and_history_alone_makes_a_report(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from aethersearch.cli import app

    runner = CliRunner()
    out = tmp_path / "curve.html"
    done = runner.invoke(app, ["report", "--out", str(out), "--history", str(tmp_path / "nope.jsonl")])
    assert done.exit_code != 0 and "training history not found" in str(done.exception)
    assert not out.exists()  # no report silently missing its training curve
    history = tmp_path / "history.jsonl"
    history.write_text("".join(json.dumps({"checkpoint": f"step_{s}", "location": str(s), "step": s,
                                           "metrics": {"em": s / 1000}}) + "\n" for s in (100, 200)))
    done = runner.invoke(app, ["report", "--out", str(out), "--history", str(history)])
    assert done.exit_code == 0, done.output
    html = out.read_text(encoding="utf-8")
    assert "Training-time evaluation" in html and "step_200" in html


def test_report_shows_the_error_count_beside_every_figure_of_a_run_with_errors(tmp_path: Path) -> None:
    rows = eval_rows(3)
    release = write_release(tmp_path / "release", rows)
    run = write_run(tmp_path / "run", rows, {r.id for r in rows}, outcomes={rows[0].id: "endpoint_error"})
    html = write_report([run], tmp_path / "r.html", release_dir=release).read_text(encoding="utf-8")
    table = re.search(r'<table class="per-source">(.*?)</table>', html, re.DOTALL)
    assert table
    body = table.group(1)
    nq = re.search(r"<tr><td>nq</td>(.*?)</tr>", body, re.DOTALL)
    other = re.search(r"<tr><td>hotpotqa</td>(.*?)</tr>", body, re.DOTALL)
    assert nq and other
    figures = re.findall(r"<td>[^<]*<span class=\"ci\">.*?</td>", nq.group(1), re.DOTALL)
    assert figures and all("(1 err)" in cell for cell in figures)
    assert "err)" not in other.group(1)
    runs = re.search(r'<table class="runs">(.*?)</table>', html, re.DOTALL)
    assert runs and "<th>errors</th>" in runs.group(1)


def test_a_run_that_changed_since_scoring_is_rescored_with_a_release_and_refused_without(tmp_path: Path) -> None:
    from aethersearch.errors import IntegrityError
    from aethersearch.jsonl import read_jsonl, write_jsonl
    from aethersearch.scoring.api import score_run

    rows = eval_rows(2)
    release = write_release(tmp_path / "release", rows)
    run = write_run(tmp_path / "run", rows, set(), skip={rows[0].id})
    score_run(run, release, resamples=50)
    traces = read_jsonl(run / "traces.jsonl")
    resumed = dict(traces[0], id=rows[0].id, question_seen=rows[0].question,
                   response=f"<answer> {rows[0].answers[0]} </answer>", prediction=rows[0].answers[0])
    write_jsonl(run / "traces.jsonl", [*traces, resumed])  # the resume answered the missing question
    with pytest.raises(IntegrityError, match="earlier state"):
        write_report([run], tmp_path / "stale.html")
    write_report([run], tmp_path / "fresh.html", release_dir=release)
    from aethersearch.scoring.scores_file import read_scores

    assert read_scores(run).join.missing == []
