"""The real benchmark over ../shared/data: 0 training overlap, the card's composition, PopQA's shortage."""

from __future__ import annotations

from pathlib import Path

import pytest

from aethersearch.curation.build import build_from_config
from aethersearch.curation.eval1400 import write_eval1400_config
from aethersearch.errors import ShortageError
from aethersearch.jsonl import read_jsonl
from aethersearch.release_layout import release_layout
from aethersearch.text import question_key

pytestmark = pytest.mark.realdata


@pytest.mark.parametrize(("popqa", "available"), [("parquet200", 200), ("flashrag16", 16)])
def test_popqa_slices_fail_with_a_clear_shortage(shared_data: Path, tmp_path: Path, popqa: str,
                                                 available: int) -> None:
    # planned 200 without a cap: PopQA receives the card's share of Bamboogle's shortfall (213)
    config = write_eval1400_config(shared_data, tmp_path / "cfg", popqa=popqa, popqa_plan={"planned": 200},
                                   audit=False)
    with pytest.raises(ShortageError) as info:
        build_from_config(config, tmp_path / "release")
    message = str(info.value)
    assert f"source 'popqa' is short: needed 213 eligible questions, available {available}" in message
    assert f"cap 'popqa' at what it has (cap: {available}" in message  # not "planned: N": that gives the same error
    assert not (tmp_path / "release").exists()


def test_real_build_has_zero_training_overlap_and_the_card_composition(shared_data: Path, tmp_path: Path) -> None:
    config = write_eval1400_config(shared_data, tmp_path / "cfg", popqa_plan={"planned": 150}, audit=False)
    result = build_from_config(config, tmp_path / "eval1400")
    composition = {c["dataset"]: c["selected"] for c in result.manifest.composition}
    assert composition == {"nq": 213, "triviaqa": 213, "popqa": 163, "hotpotqa": 212, "2wikimultihopqa": 212,
                           "musique": 212, "bamboogle": 125}
    iso = result.manifest.isolation
    assert iso["final_exact_overlap_by_stage"] == {"SFT": 0, "RL": 0}
    assert iso["input_rows"] == 3610 + 11313 + 200 + 7405 + 12576 + 2417 + 125
    assert result.manifest.training.union_size > 40_000
    assert {f.stage for f in result.manifest.training.files} == {"SFT", "RL"}
    # independently of the builder's counters: no selected key is a training key
    from aethersearch.isolation.training import build_exclusion_sets, load_registry

    registry = tmp_path / "cfg" / "training_registry.yaml"
    sets = build_exclusion_sets(load_registry(registry), registry.parent)
    rows = read_jsonl(release_layout(result.release_dir).eval)
    for stage, keys in sets.keys.items():
        assert not {question_key(r["question"]) for r in rows} & keys, stage
    assert rows[0]["id"] == "eval1400_0001" and len(rows) == 1350
    assert {r["source_id"] for r in rows if r["source_dataset"] in {"nq", "bamboogle"}} == {None}
    assert result.verify.ok


def test_cli_writes_the_real_config_and_builds_it(shared_data: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from aethersearch.cli import app

    runner = CliRunner()
    done = runner.invoke(app, ["eval1400-config", str(shared_data), "--out", str(tmp_path / "cfg"), "--popqa", "flashrag16",
                               "--popqa-cap", "16", "--no-audit"])
    assert done.exit_code == 0, done.output
    done = runner.invoke(app, ["build", str(tmp_path / "cfg" / "build.yaml"), "--out", str(tmp_path / "rel")])
    assert done.exit_code == 0, done.output
    assert "eval1400: 1400 questions" in done.output  # PopQA's shortfall of 184 went to the other five
    from aethersearch.release.manifest import load_manifest

    quotas = [c["quota"] for c in load_manifest(tmp_path / "rel").composition]
    assert quotas == [252, 252, 16, 252, 252, 251, 125]
