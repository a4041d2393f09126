"""The sandbox demo (what `make demo` adds) and the `aether factorise` / `aether probe` commands."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aethersearch.cli import app
from aethersearch.demo import run_sandbox_demo
from aethersearch.errors import DataError
from aethersearch.jsonl import loads

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("demo_out")
    return out, run_sandbox_demo(out)


def test_demo_writes_scores_factorised_and_probes_into_the_run(demo) -> None:
    _out, summary = demo
    run = Path(summary["run_dir"])
    for name in ("run.json", "traces.jsonl", "scores.json", "factorised.json", "probes.json"):
        assert (run / name).is_file(), name
    factorised = loads((run / "factorised.json").read_bytes())
    assert factorised["overall"] == summary["factorised"] and factorised["n"] == summary["questions"] == 60
    assert sum(group["n"] for group in factorised["by_hops"].values()) == 60
    assert set(factorised["by_hops"]) <= {"2", "3", "4"} and list(factorised["by_source"]) == ["webdetective-demo"]
    overall = factorised["overall"]
    assert overall["gen_score"] == pytest.approx(
        (overall["f1_good_refusal"] + overall["f1_knowledge_utilisation"]) / 2 * overall["knowledge_score"])
    # the honest baseline: distinct failure modes, not the old F1_GR = F1_KU = 1.0 tautology
    assert overall["f1_good_refusal"] < 1 and overall["f1_knowledge_utilisation"] < 1
    assert overall["pass_at_1"] == pytest.approx(summary["em"])  # factorised Pass@1 agrees with the scorer
    probes = loads((run / "probes.json").read_bytes())
    assert probes["forget"]["applicable"] is False and "no parametric knowledge" in probes["forget"]["reason"]
    assert probes["distractors"]["n"] == 60 and probes["distractors"]["ratio"] == 0.5
    # both paper probes are rates over the same sufficient-evidence failures, denominators written down
    eligible = probes["lead_astray"]["n_eligible"]
    assert eligible == probes["forget"]["n_eligible"] == overall["n_sufficient"] - overall["n_correct_sufficient"]
    assert probes["degradation"]["lead_astray_n_eligible"] == eligible
    assert summary["budget"]["max_tool_calls"] == 10 and factorised["run"]["budget"] == summary["budget"]
    assert summary["outcomes"] and sum(summary["outcomes"].values()) == 60


def test_demo_rerun_resumes_and_reproduces_the_files(demo) -> None:
    out, summary = demo
    run = Path(summary["run_dir"])
    before = (run / "factorised.json").read_bytes(), (run / "traces.jsonl").read_bytes()
    again = run_sandbox_demo(out)
    assert again["factorised"] == summary["factorised"]
    assert ((run / "factorised.json").read_bytes(), (run / "traces.jsonl").read_bytes()) == before


def test_cli_factorise_and_probes(demo) -> None:
    out, summary = demo
    run, release = summary["run_dir"], summary["release_dir"]
    result = runner.invoke(app, ["factorise", run, "--release", release, "--corpus", str(out / "sandbox_corpus")])
    assert result.exit_code == 0, result.output
    assert "GenScore" in result.output and "Good-Refusal F1" in result.output and "factorised.json" in result.output
    assert "Search Score" in result.output and "Evidence coverage" in result.output and "budget 10 tool calls" in \
        result.output
    result = runner.invoke(app, ["probe", "forget", run, "--release", release])
    assert result.exit_code == 0, result.output
    assert "not applicable" in result.output
    result = runner.invoke(app, ["probe", "distractors", run, "--release", release, "--corpus",
                                 str(out / "sandbox_corpus"), "--index", str(out / "sandbox_index"),
                                 "--ratio", "0.25", "--seed", "3"])
    assert result.exit_code == 0, result.output
    probes = loads((Path(run) / "probes.json").read_bytes())
    assert probes["distractors"]["ratio"] == 0.25 and probes["distractors"]["seed"] == 3
    assert (Path(run) / "probes" / "distractors-r0.25-s3" / "traces.jsonl").is_file()
    result = runner.invoke(app, ["probe", "lead-astray", run, "--release", release, "--corpus",
                                 str(out / "sandbox_corpus")])
    assert result.exit_code == 0, result.output
    assert "lead_astray_rate" in result.output and "n_eligible" in result.output


def test_cli_bad_run_dir_is_a_clear_error(tmp_path: Path, demo) -> None:
    result = runner.invoke(app, ["factorise", str(tmp_path), "--release", demo[1]["release_dir"],
                                 "--corpus", str(demo[0] / "sandbox_corpus")])
    assert result.exit_code != 0
    assert isinstance(result.exception, DataError)
    assert "run.json" in str(result.exception) and "fix:" in str(result.exception)


def test_report_renders_the_factorised_table_and_probe_rates(demo, tmp_path: Path) -> None:
    from aethersearch.report.html import write_report

    _out, summary = demo
    html = write_report([Path(summary["run_dir"])], tmp_path / "report.html").read_text(encoding="utf-8")
    assert "Factorised metrics" in html and "Probes (Forget / Lead-astray)" in html
    for key in ("gen_score", "f1_good_refusal", "f1_knowledge_utilisation", "knowledge_sufficiency",
                "search_score", "lead_astray_rate"):
        assert key in html, key


def test_demo_writes_a_sandbox_report_with_the_factorised_table_and_probe_rates(demo) -> None:
    out, summary = demo
    report = Path(summary["report"])
    assert report == out / "sandbox_report.html" and report.is_file()
    html = report.read_text(encoding="utf-8")
    assert "Factorised metrics" in html and "Probes (Forget / Lead-astray)" in html
    # the new fields: 0/1 Search Score beside evidence coverage, both paper probes with their denominators
    # side by side, and the budget the run used
    for key in ("gen_score", "f1_good_refusal", "knowledge_sufficiency", "lead_astray_rate", "search_score",
                "evidence_coverage", "forget_rate", "forget_n_eligible", "lead_astray_n_eligible",
                "forget_minus_lead_astray", "distractor_rate", "max_tool_calls", "max_context_tokens"):
        assert key in html, key


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]


def _paper_rows(dom: str) -> dict[str, dict[str, float]]:
    """The report's runs x metrics table under the papers' names, as rendered: run -> paper label -> mean."""
    rows: dict[str, dict[str, float]] = {}
    for table in re.findall(r'<table class="paper">(.*?)</table>', dom, re.DOTALL):
        header = re.findall(r"<th[^>]*>([^<]*)</th>", table)
        for row in re.findall(r"<tr><td>(.*?)</tr>", table, re.DOTALL):
            values = [c.strip() for c in re.findall(r"<td>([^<]*)", "<td>" + row)]
            rows[values[0]] = {label: float(v) for label, v in zip(header[2:], values[2:], strict=True) if v}
    return rows


@pytest.mark.skipif(CHROMIUM is None, reason="Debian `chromium` not installed (apt-get install -y chromium)")
def test_sandbox_report_renders_in_chromium_with_distinct_failure_modes(demo, tmp_path: Path) -> None:
    _out, summary = demo
    url = Path(summary["report"]).resolve().as_uri()
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'p'}", "--dump-dom", url],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    check = re.search(r'<div id="render-check" data-ready="(\d)" data-tables="(\d+)"', dom.stdout)
    assert check and check.group(1) == "1", "the page's render self-check did not run"
    errors = re.search(r'<pre id="console-errors" data-count="(\d+)">', dom.stdout)
    assert errors and errors.group(1) == "0"
    (overall,) = _paper_rows(dom.stdout).values()  # the report opens with the runs x metrics table
    f1_gr, f1_ku = overall["F1_GR"], overall["F1_KU"]
    # the honest baseline fails in distinct ways: it guesses without evidence (F1_GR) and sometimes refuses
    # or misreads with the chain served (F1_KU); neither is the old 1.000 tautology
    assert f1_gr < 1 and f1_ku < 1 and f1_gr != f1_ku
    assert overall["GenScore"] < overall["Knowledge Sufficiency"]
    shots = REPO / "test-artifacts"
    shots.mkdir(exist_ok=True)
    shot = shots / "sandbox_report.png"
    shot.unlink(missing_ok=True)
    done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'q'}", "--window-size=1280,3000",
                           f"--screenshot={shot}", url], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
