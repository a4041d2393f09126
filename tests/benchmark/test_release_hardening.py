"""Gaps closed by the issue-2 audit: loud unmatched exclusions, verifiers that never crash, and
determinism across processes (hash seeds) and between the two question-key implementations."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from aethersearch.curation.build import build_from_config
from aethersearch.errors import ConfigError
from aethersearch.release import verify_release_template as standalone
from aethersearch.release.verify import verify_release
from aethersearch.release_layout import release_layout
from aethersearch.sources.demo import write_demo_sources
from aethersearch.text import question_key
from tests.benchmark.conftest_helpers import build_demo


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    config, result = build_demo(tmp_path_factory.mktemp("hardening"))
    return config, result.release_dir


def _with_exclusions(config: Path, entries: list[dict], name: str) -> Path:
    (config.parent / f"{name}.yaml").write_text(yaml.safe_dump({"exclusions": entries}))
    data = yaml.safe_load(config.read_text())
    data["exclusions"] = f"{name}.yaml"
    path = config.parent / f"build_{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(("entry", "message"), [
    ({"key": "a question that is in no source", "reason": "typo"},
     r"exclusion #2 \(key 'a question that is in no source'\) matches no question of the configured sources"),
    ({"dataset": "nq", "source_id": "17", "reason": "NQ-Open has no ids"},
     r"exclusion #2 matches nothing: source 'nq' has no question with source_id '17'"),
    ({"dataset": "squad", "source_id": "5", "reason": "not configured"},
     r"exclusion #2 matches nothing: no source named 'squad'"),
])
def test_a_reviewed_exclusion_that_matches_nothing_fails_the_build(demo, tmp_path: Path, entry: dict,
                                                                   message: str) -> None:
    config, release = demo
    first = json.loads((release_layout(release).eval).read_text().splitlines()[0])
    good = {"question": first["question"], "reason": "reviewed: ambiguous"}
    path = _with_exclusions(config, [good, entry], f"ex_{entry.get('dataset', 'key')}")
    with pytest.raises(ConfigError, match=message) as info:
        build_from_config(path, tmp_path / "release")
    assert f"ex_{entry.get('dataset', 'key')}.yaml" in str(info.value)
    assert not (tmp_path / "release").exists()


def test_an_exclusion_of_a_question_also_removed_as_a_training_overlap_is_accepted(demo, tmp_path: Path) -> None:
    """Matching is against every question read, so an entry that another rule also removes is not an error."""
    config, _ = demo
    audit = json.loads(release_layout(build_demo(tmp_path / "probe")[1].release_dir).path("exclusion_audit").read_text())
    overlap = next(r for r in audit["removed"] if r["kind"] == "training_overlap")
    path = _with_exclusions(config, [{"key": overlap["key"], "reason": "also in training"}], "ex_overlap")
    assert build_from_config(path, tmp_path / "release").verify.ok


def test_the_cli_reports_an_unmatched_exclusion_in_one_message_without_a_traceback(demo, tmp_path: Path) -> None:
    config, _ = demo
    path = _with_exclusions(config, [{"key": "nothing like this", "reason": "typo"}], "ex_cli")
    done = subprocess.run([sys.executable, "-m", "aethersearch.cli", "build", str(path), "--out",
                           str(tmp_path / "rel")], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert "Traceback" not in output and "exclusion #1" in output and "ex_cli.yaml" in output
    assert not (tmp_path / "rel").exists()


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("row_sha256", 5, "field 'row_sha256' must be a list of strings"),
    ("composition", [1], "field 'composition' must be a list of objects with 'dataset' and 'selected'"),
    ("exclusions", "none", "field 'exclusions' must be a list of objects"),
    ("question_count", "140", "field 'question_count' must be an integer"),
])
def test_a_manifest_with_a_wrongly_typed_field_is_reported_by_both_verifiers(demo, tmp_path: Path, field: str,
                                                                             value: object, expected: str) -> None:
    release = tmp_path / "release"
    shutil.copytree(demo[1], release)
    manifest = json.loads((release_layout(release).manifest).read_text())
    manifest[field] = value
    (release_layout(release).manifest).write_text(json.dumps(manifest))
    report = verify_release(release)  # must report, not raise
    assert not report.ok
    name = release_layout(release).manifest.name
    assert any(c.name == "manifest" and c.file == name and expected in c.detail for c in report.failures)
    done = subprocess.run([sys.executable, "-I", str(release / "verify_release.py"), str(release)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"FAIL manifest: {name}: {expected}" in done.stdout


def test_a_manifest_that_is_not_an_object_is_reported(demo, tmp_path: Path) -> None:
    release = tmp_path / "release"
    shutil.copytree(demo[1], release)
    (release_layout(release).manifest).write_text("7")
    checks = standalone.run_checks(release)
    assert any(not c.ok and c.name == "manifest" and "must be a JSON object, got int" in c.detail for c in checks)


def test_an_unanticipated_malformation_is_a_fail_line_not_a_traceback(demo, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    release = tmp_path / "release"
    shutil.copytree(demo[1], release)

    def broken(self, manifest, rows):
        raise KeyError("split")

    monkeypatch.setattr(standalone._Checks, "provenance", broken)
    checks = standalone.run_checks(release)
    assert [c.name for c in checks if not c.ok] == ["verifier"]
    assert "stopped by KeyError" in checks[-1].detail


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60))
def test_the_standalone_verifier_normalises_questions_exactly_like_the_builder(text: str) -> None:
    # The shipped verifier checks uniqueness and exclusions with its own copy of the key.
    assert standalone.question_key(text) == question_key(text)


def test_builds_in_processes_with_different_hash_seeds_are_byte_identical(tmp_path: Path) -> None:
    """Set iteration order varies with PYTHONHASHSEED; no release byte may depend on it."""
    config = write_demo_sources(tmp_path / "src")
    outputs = []
    for seed in ("0", "4242"):
        out = tmp_path / f"release_{seed}"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-m", "aethersearch.cli", "build", str(config), "--out", str(out)],
                              capture_output=True, text=True, timeout=120, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        outputs.append({p.name: p.read_bytes() for p in sorted(out.iterdir())})
    assert outputs[0] == outputs[1]
    assert len(outputs[0]) == 10


def test_flashrag_metadata_with_malformed_supporting_facts_is_kept_verbatim_not_a_crash(tmp_path: Path) -> None:
    from aethersearch.sources import read_source

    path = tmp_path / "hotpotqa.jsonl"
    rows = [{"id": "a", "question": "q1?", "golden_answers": ["x"],
             "metadata": {"type": "bridge", "supporting_facts": {"title": ["T", "U"], "sent_id": [0, 2]}}},
            {"id": "b", "question": "q2?", "golden_answers": ["y"],
             "metadata": {"supporting_facts": {"title": ["T"], "sent_id": ["zero"]}}}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    good, odd = read_source("flashrag_jsonl", path, dataset="d", split="dev", source_file=path.name).candidates
    assert good.diagnostics["supporting_facts"] == [("T", 0), ("U", 2)]
    assert good.diagnostics["supporting_pages"] == ["T", "U"]
    assert "supporting_facts" not in good.diagnostics["extra"]["metadata"]
    assert "supporting_facts" not in odd.diagnostics
    assert odd.diagnostics["extra"]["metadata"]["supporting_facts"] == {"title": ["T"], "sent_id": ["zero"]}


def test_an_exclusion_key_is_used_verbatim_so_a_key_copied_from_the_audit_file_matches(tmp_path: Path) -> None:
    from aethersearch.isolation.training import (
        check_exclusions_match,
        empty_exclusion_sets,
        isolate,
        load_exclusion_list,
    )
    from aethersearch.sources.base import Candidate

    question = "Which river flows through Rome ?"  # its key keeps the space before the removed mark
    key = question_key(question)
    assert key.endswith(" ") and question_key(key) != key
    pool = {"hotpotqa": [Candidate("hotpotqa", "dev", None, 1, "f", question, ["Tiber"], key, {}),
                         Candidate("hotpotqa", "dev", None, 2, "f", "Other?", ["x"], "other", {})]}
    path = tmp_path / "ex.yaml"
    path.write_text(yaml.safe_dump({"exclusions": [{"key": key, "reason": "reviewed"}]}))
    entries = load_exclusion_list(path)
    check_exclusions_match(path, entries, pool)
    removed = isolate(pool, empty_exclusion_sets(), entries).removals
    assert [(r.candidate.source_row_number, r.kind) for r in removed] == [(1, "reviewed_exclusion")]
    path.write_text(yaml.safe_dump({"exclusions": [{"key": "Which river flows through Rome?", "reason": "r"}]}))
    with pytest.raises(ConfigError, match="it is not a normalised key .* write it under 'question'"):
        check_exclusions_match(path, load_exclusion_list(path), pool)
    path.write_text(yaml.safe_dump({"exclusions": [{"question": "which river flows through rome ?", "reason": "r"}]}))
    check_exclusions_match(path, load_exclusion_list(path), pool)
