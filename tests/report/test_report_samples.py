"""The report of a K-sample run: reducers with CIs, the variance share and the c-of-K histogram."""

from __future__ import annotations

from pathlib import Path

from aethersearch.report.html import write_report
from aethersearch.report.samples_view import correct_histogram
from aethersearch.scoring.api import score_run
from tests.scoring.factory import eval_rows, write_release, write_run, write_sampled_run


def test_a_sampled_run_reports_c_of_k_per_question_and_its_histogram(tmp_path: Path) -> None:
    rows = eval_rows(4)
    release = write_release(tmp_path / "release", rows)

    def answer(row, k: int) -> str:  # question number i: i % 4 of its 3 samples right (3 -> all 3)
        return row.answers[0] if k < int(row.id.split("_")[1]) % 4 else "wrong guess"

    run = write_sampled_run(tmp_path / "sampled", rows, 3, answer)
    scores = score_run(run, release, resamples=200)
    by_c = correct_histogram(scores)
    assert {c: len(ids) for c, ids in by_c.items()} == {0: 3, 1: 3, 2: 3, 3: 3}
    assert by_c[3] == ["eval_0003", "eval_0007", "eval_0011"]
    html = write_report([run], tmp_path / "report.html").read_text()
    assert "3 samples per question" in html and "pass@2" in html and "maj@3" in html
    assert "c of 3 correct" in html and "c = 3 of 3: 3 questions" in html
    assert "eval_0007" in html and "within-question variance share" in html


def test_a_one_sample_run_has_no_samples_section(tmp_path: Path) -> None:
    rows = eval_rows(2)
    release = write_release(tmp_path / "release", rows)
    run = write_run(tmp_path / "one", rows, {rows[0].id})
    score_run(run, release, resamples=100)
    assert "samples per question" not in write_report([run], tmp_path / "report.html").read_text()
