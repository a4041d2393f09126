"""Every score is bound to the exact gold it was computed with (issue 11).

An edited gold alias must stop ``aether score`` even when the editor also
regenerated ``checksums.sha256`` (the run pinned the eval sha256 in ``run.json``
when it was rolled out); ``scores.json`` records the hashes it was computed
against; a run that changed after scoring is not read back as if scored.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from aethersearch.errors import DataError, IntegrityError
from aethersearch.jsonl import read_jsonl, sha256_file, write_jsonl
from aethersearch.release_layout import release_layout
from aethersearch.scoring.api import ScoreRefused, read_scores, score_run
from tests.scoring.factory import eval_rows, write_checksums, write_release, write_run

REPO = Path(__file__).resolve().parents[2]


def aether(*args: str) -> subprocess.CompletedProcess[str]:
    """The real ``aether`` entry point in a subprocess: exit code, stdout and stderr as a user sees them."""
    env = {**os.environ, "COLUMNS": "400", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-c", "from aethersearch.cli import main; main()", *args],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=120, check=False)


@pytest.fixture()
def scored_setup(tmp_path: Path) -> tuple[Path, Path, list]:
    rows = eval_rows(4)
    release = write_release(tmp_path / "release", rows)
    run = write_run(tmp_path / "run", rows, {r.id for r in rows[:6]})
    return release, run, rows


def _edit_first_alias(release: Path, new_alias: str) -> None:
    rows = read_jsonl(release_layout(release).eval)
    rows[0]["answers"][0] = new_alias
    write_jsonl(release_layout(release).eval, rows)


def _one_line(output: str) -> str:
    return " ".join(output.split())


def test_edited_gold_alias_with_regenerated_checksums_is_refused_by_score(scored_setup) -> None:
    release, run, _ = scored_setup
    pinned = json.loads((run / "run.json").read_text())["release_data_sha256"]
    assert pinned == sha256_file(release_layout(release).eval)
    _edit_first_alias(release, "wrong guess")  # the run's wrong answer now "matches" gold
    write_checksums(release)  # the tamperer also regenerated checksums.sha256: they verify again
    found = sha256_file(release_layout(release).eval)
    done = aether("score", str(run), "--release", str(release))
    assert done.returncode == 2
    out = _one_line(done.stdout + done.stderr)
    assert "eval.jsonl" in out and pinned in out and found in out
    assert "run.json" in out and "fix:" in out and "Traceback" not in done.stderr
    assert not (run / "scores.json").exists()


def test_edited_gold_alias_without_new_checksums_is_refused_naming_the_checksum_file(scored_setup) -> None:
    release, run, _ = scored_setup
    expected = sha256_file(release_layout(release).eval)
    _edit_first_alias(release, "wrong guess")
    with pytest.raises(IntegrityError) as info:
        score_run(run, release)
    message = str(info.value)
    assert "checksums.sha256" in message and expected in message and sha256_file(release_layout(release).eval) in message
    assert info.value.fix and "aether verify" in info.value.fix


def test_edited_manifest_data_sha_is_refused(scored_setup) -> None:
    release, run, _ = scored_setup
    manifest = json.loads((release_layout(release).manifest).read_text())
    (release_layout(release).manifest).write_text(json.dumps({**manifest, "data_sha256": "0" * 64}))
    write_checksums(release)
    with pytest.raises(IntegrityError, match=r"manifest\.json"):
        score_run(run, release)


def test_release_without_checksums_is_refused(scored_setup) -> None:
    release, run, _ = scored_setup
    (release / "checksums.sha256").unlink()
    with pytest.raises(IntegrityError, match=r"checksums\.sha256 is missing") as info:
        score_run(run, release)
    assert info.value.fix


def test_scores_json_records_the_hashes_it_was_computed_against(scored_setup) -> None:
    release, run, _ = scored_setup
    scores = score_run(run, release)
    on_disk = json.loads((run / "scores.json").read_text())["gold"]
    assert on_disk == scores.gold.model_dump(mode="json")
    assert on_disk["eval_sha256"] == sha256_file(release_layout(release).eval)
    assert on_disk["checksums_sha256"] == sha256_file(release / "checksums.sha256")
    assert on_disk["manifest_sha256"] == sha256_file(release_layout(release).manifest)
    assert on_disk["run_json_sha256"] == sha256_file(run / "run.json")
    assert on_disk["run_file"] == "traces.jsonl"
    assert on_disk["run_file_sha256"] == sha256_file(run / "traces.jsonl")
    assert on_disk["release_id"] == "test-release"


def test_scores_of_a_run_that_changed_after_scoring_are_not_read_back(scored_setup) -> None:
    release, run, _ = scored_setup
    score_run(run, release)
    traces = read_jsonl(run / "traces.jsonl")
    write_jsonl(run / "traces.jsonl", [*traces, traces[0]])  # e.g. a resume appended rows
    with pytest.raises(IntegrityError, match=r"traces\.jsonl.*earlier state") as info:
        read_scores(run)
    assert "aether score" in (info.value.fix or "")


def test_a_predictions_only_run_is_bound_to_the_release_but_not_to_a_run_json(tmp_path: Path) -> None:
    rows = eval_rows(2)
    release = write_release(tmp_path / "release", rows)
    run = tmp_path / "preds"
    run.mkdir()
    write_jsonl(run / "predictions.jsonl", [{"id": r.id, "prediction": r.answers[0], "outcome": "answered"}
                                            for r in rows])
    scores = score_run(run, release)
    assert scores.gold.run_json_sha256 is None and scores.gold.run_file == "predictions.jsonl"
    assert scores.overall.micro.metrics["em"].mean == 1.0


def test_an_older_scores_json_schema_is_refused_with_the_fix(scored_setup) -> None:
    release, run, _ = scored_setup
    score_run(run, release)
    raw = json.loads((run / "scores.json").read_text())
    (run / "scores.json").write_text(json.dumps({**raw, "schema_version": 1}))
    with pytest.raises(DataError, match="schema_version 1") as info:
        read_scores(run)
    assert "aether score" in (info.value.fix or "")


# ----------------------------------------------------------------------------- runs with errors


def _run_with_errors(tmp_path: Path) -> tuple[Path, Path]:
    rows = eval_rows(4)
    release = write_release(tmp_path / "release", rows)
    outcomes = {rows[0].id: "endpoint_error", rows[1].id: "endpoint_error", rows[5].id: "tool_error"}
    run = write_run(tmp_path / "run", rows, {r.id for r in rows}, outcomes=outcomes)
    return release, run


def test_figures_over_a_run_with_errors_carry_the_error_count(tmp_path: Path) -> None:
    release, run = _run_with_errors(tmp_path)
    done = aether("score", str(run), "--release", str(release), "--resamples", "100")
    assert done.returncode == 0, done.stderr
    want = {"nq": "(2 err)", "hotpotqa": "(1 err)", "bamboogle": None,
            "overall (micro)": "(3 err)", "overall (macro)": "(3 err)"}
    figures_of: dict[str, list[str]] = {}  # a row's figures over the table's parts (it splits at 100 columns)
    for line in done.stdout.splitlines():
        label = next((name for name in want if re.match(rf"[│|] {re.escape(name)} ", line)), None)
        if label is not None:
            figures_of.setdefault(label, []).extend(
                cell for cell in re.split(r"[│|]", line) if re.search(r"\d+\.\d \[", cell))
    assert set(figures_of) == set(want)
    for label, figures in figures_of.items():
        assert len(figures) == 5, (label, figures)
        if want[label] is None:
            assert not any("err" in cell for cell in figures)
        else:
            assert all(want[label] in cell for cell in figures), figures  # beside every figure of that row
    assert "3 err: each scored 0 in every figure" in _one_line(done.stdout)
    scores = read_scores(run)
    assert scores.errors.count == 3 and scores.errors.by_outcome == {"endpoint_error": 2, "tool_error": 1}
    assert scores.by_source["nq"].errors == 2 and scores.by_source["hotpotqa"].errors == 1
    assert scores.overall.micro.errors == 3


def test_strict_refuses_a_run_with_errors_with_a_summary(tmp_path: Path) -> None:
    release, run = _run_with_errors(tmp_path)
    done = aether("score", str(run), "--release", str(release), "--strict")
    assert done.returncode == 3
    out = _one_line(done.stderr)
    assert "--strict" in out and "2 endpoint_error" in out and "1 tool_error" in out and "3 of 12" in out
    assert "fix:" in out and "Traceback" not in done.stderr
    assert not (run / "scores.json").exists()
    with pytest.raises(ScoreRefused) as info:
        score_run(run, release, strict=True)
    assert info.value.errors == {"endpoint_error": 2, "tool_error": 1} and info.value.missing == 0


def test_strict_refuses_missing_questions_and_accepts_a_clean_run(tmp_path: Path) -> None:
    rows = eval_rows(2)
    release = write_release(tmp_path / "release", rows)
    partial = write_run(tmp_path / "partial", rows, set(), skip={rows[0].id})
    with pytest.raises(ScoreRefused, match="1 missing"):
        score_run(partial, release, strict=True)
    clean = write_run(tmp_path / "clean", rows, {r.id for r in rows})
    assert score_run(clean, release, strict=True).errors.unscored == 0


def test_reading_scores_of_a_missing_run_directory_says_it_is_missing(tmp_path: Path) -> None:
    from aethersearch.errors import DataError
    from aethersearch.scoring.scores_file import read_scores

    with pytest.raises(DataError, match="no such run directory"):
        read_scores(tmp_path / "nope")
