"""``aether import aethersearch``: their fixed-eval predictions.jsonl becomes a run scored like ours.

The fixture is what their ``async_eval_worker._evaluate_row`` (d2a21bd) wrote for
the 140 demo questions (``scripts/record_aethersearch_loop.py``, behaviour i mod 4).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aethersearch.cli import app
from aethersearch.scoring.api import score_run

runner = CliRunner()
PREDICTIONS = Path(__file__).parent / "fixtures" / "aethersearch_demo_predictions.jsonl"


@pytest.fixture(scope="module")
def demo_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from aethersearch.curation.build import build_from_config
    from aethersearch.sources.demo import write_demo_sources

    root = tmp_path_factory.mktemp("demo")
    build_from_config(write_demo_sources(root / "demo_release_sources"), root / "demo_release")
    return root / "demo_release"


def _lines() -> list[dict]:
    return [json.loads(line) for line in PREDICTIONS.read_text().splitlines()]


def test_their_predictions_import_and_rescore_to_their_r_task(demo_release: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["import", "aethersearch", str(PREDICTIONS), "--release", str(demo_release),
                                 "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    scores = score_run(tmp_path / "run", demo_release, compat="aethersearch", resamples=10)
    theirs = {line["dataset_row_id"]: line for line in _lines()}
    mine = {q.id: q.values for q in scores.per_question}
    assert {qid: mine[qid]["aethersearch_f1"] for qid in theirs} == {qid: t["R_task"] for qid, t in theirs.items()}
    assert scores.aethersearch is not None
    assert scores.aethersearch["overall"]["avg_search"] == pytest.approx(
        sum(t["search_count"] for t in theirs.values()) / len(theirs))
    assert 0 < scores.aethersearch["overall"]["f1"] < 1  # the behaviours mix zeros and full credit


def test_a_line_for_another_release_is_refused_with_its_line(demo_release: Path, tmp_path: Path) -> None:
    lines = _lines()
    lines[3]["dataset_row_id"] = "eval1400_9999"
    bad = tmp_path / "predictions.jsonl"
    bad.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = runner.invoke(app, ["import", "aethersearch", str(bad), "--release", str(demo_release)])
    assert result.exit_code != 0
    message = str(result.exception)
    assert "predictions.jsonl:4" in message and "eval1400_9999" in message and "fix:" in message
    assert not (tmp_path / "aether_run").exists()


def test_a_line_without_their_fields_is_refused(demo_release: Path, tmp_path: Path) -> None:
    bad = tmp_path / "predictions.jsonl"
    bad.write_text(json.dumps({"dataset_row_id": "x"}) + "\n")
    result = runner.invoke(app, ["import", "aethersearch", str(bad), "--release", str(demo_release)])
    assert result.exit_code != 0 and "missing" in str(result.exception)
