"""Real data: the audited eval1400 build against the ~47k real training questions, then its replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aethersearch.audit.near_duplicates import audit_selection_file
from aethersearch.curation.build import BuildResult
from aethersearch.jsonl import read_jsonl
from aethersearch.release.manifest import load_manifest
from aethersearch.release.replay import replay_release
from aethersearch.release.verify import verify_release
from aethersearch.release_layout import release_layout
from aethersearch.text import question_key
from tests.conftest import Eval1400Build

pytestmark = [pytest.mark.realdata, pytest.mark.slow, pytest.mark.timeout(1800)]  # the shared build


@pytest.fixture(scope="module")
def audited(eval1400_build: Eval1400Build) -> tuple[Path, BuildResult]:
    """The README's eval1400 build (audit on, --auto-review; PopQA's public slice is 200 of the card's 213,
    so the audit's exclusions are replaced by quota redistribution), shared with the other real-data tests."""
    release = eval1400_build.release_dir
    result = BuildResult(release, load_manifest(release), {}, verify_release(release))
    return eval1400_build.root, result


def test_every_selected_question_was_audited_against_every_training_question(
        audited: tuple[Path, BuildResult]) -> None:
    _, result = audited
    report = result.manifest.audit["report"]
    union = result.manifest.training.union_size
    assert union > 40_000
    counts = report["counts"]
    # Every round audits the questions it has not seen yet, each against the whole union.
    assert report["methods"]["similarity"]["pairs_visited"] == counts["questions_audited"] * union
    assert counts["questions_audited"] >= result.manifest.question_count == 1400
    assert counts["pairs_flagged"] > 0 and 0 < counts["questions_excluded"] <= counts["questions_involved"]
    assert all(p["decision"] in ("exclude", "retain") and p["reason"] for p in report["flagged_pairs"])
    assert report["settings"]["similarity"] == {"scorer": "ratio", "threshold": 85.0}
    methods = {("similarity" if p["similarity"] is not None else "") + ("rare" if p["rare_token"] is not None else "")
               for p in report["flagged_pairs"]}
    assert {"similarity", "rare"} <= methods, "both passes find real near-duplicates the other misses"
    selected = {question_key(r["question"]) for r in read_jsonl(release_layout(result.release_dir).eval)}
    assert not selected & set(report["excluded"]), "no excluded question is in the release"
    assert result.manifest.isolation["final_exact_overlap_by_stage"] == {"RL": 0, "SFT": 0}


def test_replay_of_the_real_release_agrees(audited: tuple[Path, BuildResult]) -> None:
    root, result = audited
    report = replay_release(result.release_dir, base_dir=root / "cfg")
    assert report.ok, [c.line() for c in report.failures]
    written = json.loads(report.output.read_text(encoding="utf-8"))
    assert {c["name"] for c in written["checks"]} == {
        "training_hashes", "source_hashes", "exclusion_sets", "rows_match_originals", "sampling_replay"}


def test_standalone_audit_of_the_real_release_finds_nothing_left(audited: tuple[Path, BuildResult]) -> None:
    root, result = audited
    standalone = audit_selection_file(result.release_dir, root / "cfg" / "training_registry.yaml")
    assert standalone.report["questions"] == 1400
    assert standalone.report["counts"]["unreviewed"] == 0, "every flagged pair has the decision the build recorded"
    assert all(p["decision"] in ("exclude", "retain") for p in standalone.pairs)
