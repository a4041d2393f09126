"""compare_runs: contract enforcement with --allow recorded, and per-source paired results."""

from __future__ import annotations

from pathlib import Path

import pytest

from aethersearch.compare.checkpoints import compare_runs
from aethersearch.errors import ConfigError, DataError, IntegrityError
from aethersearch.records import Budget
from aethersearch.scoring.api import score_run
from tests.scoring.factory import eval_rows, write_release, write_run


@pytest.fixture()
def setup(tmp_path: Path):
    rows = eval_rows(30)
    return write_release(tmp_path / "release", rows), rows


def _scored(path: Path, release: Path, rows, correct, **kwargs) -> Path:
    run = write_run(path, rows, correct, **kwargs)
    score_run(run, release, resamples=200)
    return run


def test_checkpoints_are_compared_per_source_with_holm_and_flips(tmp_path: Path, setup) -> None:
    release, rows = setup
    base_correct = {r.id for i, r in enumerate(rows) if i % 4 == 0}
    rl_correct = base_correct | {r.id for r in rows if r.source_dataset == "nq"}
    base = _scored(tmp_path / "base", release, rows, base_correct, model="base")
    rl = _scored(tmp_path / "rl", release, rows, rl_correct - {rows[40].id}, model="rl")
    same = _scored(tmp_path / "same", release, rows, base_correct, model="sft")
    result = compare_runs([base, rl, same], resamples=300, out_path=tmp_path / "cmp.json")
    assert (tmp_path / "cmp.json").is_file()
    assert result["reference"] == "base" and [p["b"] for p in result["pairs"]] == ["rl", "same"]
    rl_pair, same_pair = result["pairs"]
    nq = rl_pair["results"]["nq"]["em"]
    assert nq["method"] == "mcnemar-exact" and nq["wrong_to_right"] == 22 and nq["significant"]
    assert rl_pair["results"]["hotpotqa"]["em"]["p_value"] == 1.0  # unchanged there except one id
    assert rl_pair["results"]["overall"]["f1"]["method"] == "paired-bootstrap"
    assert rl_pair["tests_corrected"] == 8  # (overall + 3 sources) x (em, f1)
    assert all(e["p_holm"] >= e["p_value"] for s in rl_pair["results"].values() for e in s.values())
    assert {f["id"] for f in rl_pair["flips"]["em"]["right_to_wrong"]} == {rows[40].id}
    assert len(rl_pair["flips"]["em"]["wrong_to_right"]) == 22
    assert same_pair["results"]["overall"]["em"]["p_value"] == 1.0
    assert not same_pair["results"]["overall"]["em"]["significant"]
    assert result["allowed_overrides"] == []


def test_contract_mismatch_is_refused_naming_the_field(tmp_path: Path, setup) -> None:
    release, rows = setup
    base = _scored(tmp_path / "base", release, rows, set())
    other = _scored(tmp_path / "other", release, rows, set(), fp_changes={"budget": Budget(max_tool_calls=2)})
    with pytest.raises(IntegrityError, match="budget") as info:
        compare_runs([base, other])
    assert "--allow budget" in str(info.value)


def test_allow_overrides_and_is_recorded(tmp_path: Path, setup) -> None:
    release, rows = setup
    base = _scored(tmp_path / "base", release, rows, set())
    other = _scored(tmp_path / "other", release, rows, set(), fp_changes={"prompt_template_hash": "p2"})
    result = compare_runs([base, other], allow=["prompt_template_hash"], resamples=100)
    assert result["allowed_overrides"] == ["prompt_template_hash"]
    assert result["contract_differences"][0]["field"] == "prompt_template_hash"


def test_allow_must_name_a_contract_field(tmp_path: Path, setup) -> None:
    release, rows = setup
    base = _scored(tmp_path / "base", release, rows, set())
    with pytest.raises(ConfigError, match="model"):
        compare_runs([base, base], allow=["model"])


def test_unscored_run_is_a_clear_error(tmp_path: Path, setup) -> None:
    release, rows = setup
    base = _scored(tmp_path / "base", release, rows, set())
    raw = write_run(tmp_path / "raw", rows, set())
    with pytest.raises(DataError, match="aether score"):
        compare_runs([base, raw])


def test_every_differing_field_is_listed_at_once_with_one_fix(tmp_path: Path, setup) -> None:
    release, rows = setup
    base = _scored(tmp_path / "base", release, rows, set())
    other = _scored(tmp_path / "other", release, rows, set(),
                    fp_changes={"budget": Budget(max_tool_calls=2), "prompt_template_hash": "p2", "index_hash": "i2"})
    with pytest.raises(IntegrityError) as info:
        compare_runs([base, other])
    message = str(info.value)
    assert "3 contract field(s)" in message
    assert "--allow index_hash --allow prompt_template_hash --allow budget" in message
    assert compare_runs([base, other], allow=["index_hash", "prompt_template_hash", "budget"], resamples=50)


def test_no_allow_is_suggested_or_accepted_for_a_different_release(tmp_path: Path, setup) -> None:
    release, rows = setup
    base = _scored(tmp_path / "base", release, rows, set())
    other = write_run(tmp_path / "other", rows, set(), fp_changes={"release_id": "another-release"})
    score_run(other, write_release(tmp_path / "rel2", rows, release_id="another-release"), resamples=50)
    with pytest.raises(IntegrityError) as info:
        compare_runs([base, other])
    assert "pass --allow" not in (info.value.fix or "") and "same release" in (info.value.fix or "")
    with pytest.raises(ConfigError, match="cannot work"):
        compare_runs([base, other], allow=["release_id"])
