"""The dataset card has the Eval-1400 card's structure, and every figure on it is checked against the files.

The lists below are written from the published Eval-1400 card (``shared/seeds``): its
section headings in order and the rows of its "Release at a glance" table. A card edited
by hand after the build (even by an editor careful enough to update the manifest's file
hash and ``checksums.sha256``) must fail both verifiers, naming what differs.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from aethersearch.release.verify import verify_release
from aethersearch.release_layout import release_layout

from .conftest_helpers import build_demo
from .test_tamper import load_verifier, regenerate_checksums

#: The Eval-1400 card's sections, in its order.
CARD_SECTIONS = ["Dataset overview", "Evaluation contract", "Release at a glance", "Source composition",
                 "Public schema", "Load with Datasets", "Curation and integrity", "Files",
                 "Checksums and versioning", "Attribution and rights"]
#: The Eval-1400 card's "Release at a glance" rows, in its order.
CARD_GLANCE = ["Evaluation questions", "Source datasets", "Unique raw / normalized questions", "Hub split",
               "Sampling seed", "Training-question exclusion union", "Exact SFT / DPO / RL question overlap",
               "Internal / cross-dataset duplicates", "Records with non-empty gold aliases",
               "Records with verified provenance", "Known high-confidence training near-duplicates after audit",
               "Release revision"]
CARD_CONTRACT = ["During training", "After training", "Base / SFT / DPO / RL comparison", "Agent rollout",
                 "Scoring", "Evidence diagnostics"]


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _, result = build_demo(tmp_path_factory.mktemp("card"))
    return result.release_dir


def card_structure(text: str) -> tuple[list[str], list[str], list[str]]:
    """(section headings, glance row labels, contract row labels) of a card's markdown."""
    sections = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    tables = _standalone_tables(text)
    return sections, [r[0] for r in tables["Release at a glance"][1]], [r[0] for r in tables["Evaluation contract"][1]]


def _standalone_tables(text: str) -> dict[str, tuple[tuple[str, ...], list[tuple[str, ...]]]]:
    from aethersearch.release.verify_release_template import card_tables

    return card_tables(text)


def assert_card_structure(text: str) -> None:
    """The checks a card of any build must pass against the Eval-1400 card's lists."""
    sections, glance, contract = card_structure(text)
    assert sections == CARD_SECTIONS
    assert glance == CARD_GLANCE
    assert contract == CARD_CONTRACT
    front = text.split("\n---\n", 1)[0]
    for key in ("license:", "pretty_name:", "tags:", "configs:"):
        assert re.search(rf"^{key}", front, flags=re.MULTILINE), key


def test_the_card_has_every_section_and_glance_row_of_the_eval1400_card(release: Path) -> None:
    text = (release / "README.md").read_text(encoding="utf-8")
    assert_card_structure(text)
    tables = _standalone_tables(text)
    glance = dict(tables["Release at a glance"][1])
    rows = [json.loads(line) for line in release_layout(release).eval.read_text(encoding="utf-8").splitlines()]
    assert glance["Evaluation questions"] == str(len(rows))
    assert glance["Unique raw / normalized questions"] == f"{len(rows)} / {len(rows)}"
    assert glance["Records with verified provenance"] == str(len(rows))
    composition = tables["Source composition"]
    assert composition[0] == ("Source dataset", "Questions", "Official source split", "Release variant")
    assert [r[0] for r in composition[1]][-1] == "Total"
    assert sum(int(r[1]) for r in composition[1][:-1]) == len(rows)


def test_the_load_with_datasets_snippet_works_on_the_release(release: Path) -> None:
    datasets = pytest.importorskip("datasets")
    text = (release / "README.md").read_text(encoding="utf-8")
    assert 'select_columns(["id", "question"])' in text and "gold_by_id" in text
    benchmark = datasets.load_dataset(str(release), split="validation")
    agent_inputs = benchmark.select_columns(["id", "question"])
    assert agent_inputs.column_names == ["id", "question"]
    assert len(benchmark) == len(release_layout(release).eval.read_bytes().splitlines())


def _edit_card_carefully(release: Path, work: Path, old: str, new: str) -> Path:
    """Edit the card, then update the manifest's hash of it and checksums.sha256, as a careful editor would."""
    copy = work / release.name
    shutil.copytree(release, copy)
    card = copy / "README.md"
    text = card.read_text(encoding="utf-8")
    assert old in text
    card.write_text(text.replace(old, new, 1), encoding="utf-8")
    layout = release_layout(copy)
    manifest = json.loads(layout.manifest.read_bytes())
    data = card.read_bytes()
    manifest["files"]["README.md"] = {"sha256": hashlib.sha256(data).hexdigest(), "rows": data.count(b"\n")}
    standalone = load_verifier(copy / "verify_release.py")
    layout.manifest.write_bytes(standalone.pretty_json(manifest))
    regenerate_checksums(copy)
    return copy


@pytest.mark.parametrize(("old", "new", "names"), [
    ("| Records with non-empty gold aliases | 140 |", "| Records with non-empty gold aliases | 141 |",
     "'Release at a glance' row 'Records with non-empty gold aliases': the card says"),
    ("| Internal / cross-dataset duplicates | 0 / 0 |\n", "", "'Release at a glance' row 'Internal / cross-dataset duplicates' is missing"),
    ("| nq | 22 |", "| nq | 23 |", "'Source composition' row 'nq': the card says nq | 23"),
    ("removed 5 exact training overlaps", "removed 4 exact training overlaps", "missing or edited sentence"),
])
def test_a_hand_edited_card_fails_both_verifiers(release: Path, tmp_path: Path, old: str, new: str,
                                                 names: str) -> None:
    edited = _edit_card_carefully(release, tmp_path, old, new)
    report = verify_release(edited)
    failed = [c for c in report.checks if not c.ok]
    assert {c.name for c in failed} == {"card figures"}, [c.line() for c in failed]
    assert names in failed[0].detail, failed[0].detail
    standalone = load_verifier(release / "verify_release.py")  # a pristine judge
    lines = [c.line() for c in standalone.run_checks(edited) if not c.ok]
    assert lines and all(line.startswith("FAIL card figures") for line in lines), lines


def test_the_untouched_release_passes_the_card_check(release: Path) -> None:
    checks = {c.name: c for c in verify_release(release).checks}
    assert checks["card figures"].ok, checks["card figures"].line()
