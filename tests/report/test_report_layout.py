"""The paper-facing layout: one source x run table labelled by model (else by what differs), EM deltas with CIs and p,
flipped traces with gold and right/wrong, no empty usage chart, no table or chart mixing two releases."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from aethersearch.report.html import write_report
from aethersearch.report.layout import run_labels
from tests.scoring.factory import eval_rows, fingerprint, write_release, write_run

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def two_checkpoints(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:  # type: ignore[type-arg]
    root = tmp_path_factory.mktemp("layout")
    rows = eval_rows(20)
    release = write_release(root / "release", rows)
    base = write_run(root / "run_a", rows, {r.id for i, r in enumerate(rows) if i % 3 == 0}, model="sft-ckpt")
    rl = write_run(root / "run_b", rows, {r.id for i, r in enumerate(rows) if i % 3 == 0 or r.source_dataset == "nq"},
                   model="rl-ckpt")
    return write_report([base, rl], root / "report.html", release_dir=release), rows


def test_one_source_by_run_table_labelled_by_model_name(two_checkpoints) -> None:  # type: ignore[no-untyped-def]
    html = two_checkpoints[0].read_text(encoding="utf-8")
    matrix = re.search(r'<table class="matrix">(.*?)</table>', html, re.DOTALL)
    assert matrix and html.count('<table class="matrix">') == 1
    headers = re.findall(r"<th>([^<]*)</th>", matrix.group(1))
    assert headers == ["source", "n", "sft-ckpt", "rl-ckpt"]
    nq = re.search(r"<tr><td>nq</td><td>20</td>(.*?)</tr>", matrix.group(1), re.DOTALL)
    assert nq and re.findall(r'(\d\.\d{3}) <span class="ci">\[', nq.group(1)) == ["0.350", "1.000"]
    assert "overall (micro)" in matrix.group(1) and "overall (macro)" in matrix.group(1)


def test_em_deltas_carry_a_ci_and_a_p_value(two_checkpoints) -> None:  # type: ignore[no-untyped-def]
    html = two_checkpoints[0].read_text(encoding="utf-8")
    table = re.search(r'<table class="comparison">(.*?)</table>', html, re.DOTALL)
    assert table and "delta [95% CI]" in table.group(1)
    em_nq = re.search(r"<tr><td>nq</td><td>em</td>(.*?)</tr>", table.group(1), re.DOTALL)
    assert em_nq
    assert re.search(r'\+0\.650 \*</span> <span class="ci">\[\+0\.\d{3}, \+0\.\d{3}\]</span>', em_nq.group(1))
    assert re.search(r"<td>mcnemar-exact</td><td>0\.\d{4}</td>", em_nq.group(1))


def test_flipped_traces_show_gold_and_right_or_wrong(two_checkpoints) -> None:  # type: ignore[no-untyped-def]
    html, rows = two_checkpoints[0].read_text(encoding="utf-8"), two_checkpoints[1]
    flipped = next(r for i, r in enumerate(rows) if r.source_dataset == "nq" and i % 3)
    block = re.search(rf'<details id="trace-1-{flipped.id}">(.*?)</details>', html, re.DOTALL)
    assert block, "the flipped question's trace is missing"
    text = block.group(1)
    assert '<span class="right">right</span>' in text  # the later checkpoint got it right
    assert f"gold: <strong>{flipped.answers[0]} | {flipped.answers[1]}</strong>" in text
    assert 'sft-ckpt: <span class="wrong">wrong</span>' in text  # and the reference got it wrong


def test_no_usage_chart_for_runs_without_a_model(tmp_path: Path) -> None:
    rows = eval_rows(3)
    release = write_release(tmp_path / "release", rows)
    run = write_run(tmp_path / "lexical", rows, {r.id for r in rows}, model=None,  # type: ignore[arg-type]
                    fp_changes={"endpoint": None, "agent": "lexical"})
    html = write_report([run], tmp_path / "r.html", release_dir=release).read_text(encoding="utf-8")
    assert "mean tool calls" not in html and "no model, so no tokens to count" in html


def test_runs_on_two_releases_never_share_a_table_or_chart(tmp_path: Path) -> None:
    rows = eval_rows(3)
    other_rows = [r.model_copy(update={"answers": ["different gold"]}) for r in rows]
    a = write_run(tmp_path / "a", rows, {r.id for r in rows}, fp_changes={"release_id": "rel-a"})
    b = write_run(tmp_path / "b", other_rows, set(), fp_changes={"release_id": "rel-b"})
    from aethersearch.scoring.api import score_run

    score_run(a, write_release(tmp_path / "rel_a", rows, release_id="rel-a"), resamples=50)
    score_run(b, write_release(tmp_path / "rel_b", other_rows, release_id="rel-b"), resamples=50)
    html = write_report([a, b], tmp_path / "r.html").read_text(encoding="utf-8")
    assert html.count('<table class="matrix">') == 2
    assert "EM by source: release rel-a" in html and "EM by source: release rel-b" in html
    assert "Scores by source: release rel-a" in html and "Scores by source: release rel-b" in html
    assert "Comparison refused" in html


def test_labels_fall_back_to_names_when_no_setting_differs() -> None:
    fp = fingerprint(3)
    assert run_labels(["x", "y"], [fp, fp]) == ["x", "y"]
    assert run_labels(["x", "y"], [fp, fp.model_copy(update={"agent_config": {"topk": 5}})]) == [
        "topk=None", "topk=5"]


@pytest.mark.skipif(CHROMIUM is None, reason="Debian `chromium` not installed (apt-get install -y chromium)")
def test_screenshot_at_1400_px(two_checkpoints, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    shot = REPO / "test-artifacts" / "report_1400.png"
    shot.parent.mkdir(exist_ok=True)
    shot.unlink(missing_ok=True)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars"]
    done = subprocess.run([CHROMIUM, *flags, f"--user-data-dir={tmp_path / 'p'}", "--window-size=1400,2400",
                           f"--screenshot={shot}", two_checkpoints[0].resolve().as_uri()],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


