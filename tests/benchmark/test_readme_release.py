"""The README's release commands, verbatim from the README text, build the card's release on the real data.

The block is read from the README's pages (``tests/doc_pages.py``: the fenced ``bash`` block that starts with
``aether eval1400-config``) and every command runs exactly as written, from a
working directory whose ``../shared/data`` is the public data. The first
``aether build`` must stop for review (exit 2, template written); every other
command must succeed. The result must be what the Eval-1400 card promises: the
audit on with 0 unreviewed pairs, 1,400 rows, the card's file names, and
``verify --replay`` OK.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from aethersearch.release_layout import release_layout
from tests.doc_pages import fenced_blocks

from .test_card import assert_card_structure

pytestmark = [pytest.mark.realdata, pytest.mark.slow, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("AETHER_SHARED_DATA", ROOT.parent / "shared" / "data"))
CARD_FILES = {"eval_1400.jsonl", "eval_1400_rollout_questions.jsonl", "eval_1400_manifest.json",
              "eval_1400_exclusion_audit.json", "eval_1400_diagnostics.jsonl", "independent_validation.json",
              "verify_release.py", "checksums.sha256", "ATTRIBUTION.md", "README.md"}


def readme_release_commands() -> list[str]:
    """The README's release block (now on docs/guides/build-a-release.md), one command per line, comments dropped."""
    (block,) = [b for b in fenced_blocks("bash") if b.lstrip().startswith("aether eval1400-config")]
    return [shlex.join(words) for line in block.replace("\\\n", " ").splitlines()
            if (words := shlex.split(line, comments=True))]


def test_the_readme_release_commands_build_the_cards_release(tmp_path: Path) -> None:
    if not (SHARED / "SOURCES.json").is_file():
        pytest.skip(f"public data not found at {SHARED} (set AETHER_SHARED_DATA)")
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "data").symlink_to(SHARED.resolve())
    work = tmp_path / "work"
    work.mkdir()
    aether = [sys.executable, "-m", "aethersearch.cli"]
    commands = readme_release_commands()
    assert [c.split()[1] for c in commands] == ["eval1400-config", "build", "review", "build", "verify", "replay",
                                                "audit"]
    outputs = []
    for index, command in enumerate(commands):
        words = shlex.split(command)
        assert words[0] == "aether"
        done = subprocess.run([*aether, *words[1:]], cwd=work, capture_output=True, text=True, timeout=900,
                              env={**os.environ, "COLUMNS": "200"})
        outputs.append(done.stdout + done.stderr)
        if index == 1:  # the first build stops for review and writes the template
            assert done.returncode == 2, outputs[-1][-3000:]
            assert "have no review decision" in outputs[-1] and (work / "cfg" / "audit_reviews.todo.json").is_file()
            continue
        assert done.returncode == 0, f"`{command}` failed:\n{outputs[-1][-3000:]}"
    release = work / "eval1400"
    assert {p.name for p in release.iterdir()} == CARD_FILES
    layout = release_layout(release)
    manifest = json.loads(layout.manifest.read_bytes())
    assert manifest["audit"] is not None and manifest["config"]["audit"] is not None
    counts = manifest["audit"]["report"]["counts"]
    assert counts["pairs_flagged"] > 0
    decided = manifest["audit"]["report"]["flagged_pairs"]
    assert len(decided) == counts["pairs_flagged"] and all(p["decision"] in ("exclude", "retain") for p in decided)
    assert manifest["question_count"] == 1400 == len(layout.eval.read_bytes().splitlines())
    assert [c["quota"] for c in manifest["composition"]] == [215, 215, 200, 215, 215, 215, 125]
    assert manifest["deviations"] and "PopQA" in manifest["deviations"][0]
    card = (release / "README.md").read_text(encoding="utf-8")
    assert "### Deviations from the plan" in card
    assert_card_structure(card)  # every section and glance row of the Eval-1400 card, each figure verified
    assert "| popqa | 200 (Eval-1400 card: 213) |" in card and "| Exact SFT / DPO / RL question overlap | 0 / not " \
        "registered / 0 (no DPO training stage is registered here" in card
    verify, audit = outputs[4], outputs[6]
    assert "OK sampling_replay: 1400 ids replayed" in verify and "FAIL" not in verify
    assert "unreviewed 0" in audit and "OK: every flagged pair has a recorded decision" in audit
    assert (work / "reports" / "independent_validation.json").read_bytes() == \
        layout.path("independent_validation").read_bytes()
    for path in release.iterdir():  # sources are recorded by their place in the data set, never the builder's paths
        text = path.read_text(encoding="utf-8")
        assert "../" not in text and str(tmp_path) not in text and "data_root" not in text, path.name
    assert {s["path"] for s in manifest["sources"]} >= {"qa/nq_open/NQ-open.dev.jsonl",
                                                        "qa/bamboogle/r1searcher_bamboogle.jsonl"}
