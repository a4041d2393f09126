"""Review loop through the real builder, and the independent replay that checks it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from aethersearch.benchmark.build import build_from_config
from aethersearch.benchmark.demo_sources import write_demo_sources
from aethersearch.benchmark.replay import OUTPUT, replay_release
from aethersearch.errors import ReviewRequired
from aethersearch.jsonl import read_jsonl, sha256_file
from aethersearch.text import question_key

# Strict enough that the demo world's template-heavy questions do not flag each other,
# loose enough to flag the planted one-word edit; the pool pass must not remove it.
AUDIT = {"similarity": {"threshold": 92}, "rare_tokens": {"threshold": 0.85},
         "pool": {"similarity_threshold": 97, "rare_token_threshold": 0.99}, "reviews": "reviews.json"}


def _planted(question: str) -> str:
    words = question.split()
    return " ".join(["what" if words[0].lower() == "which" else "which", *words[1:]])


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """Demo sources plus a planted near-duplicate training file; the baseline release's first row."""
    root = tmp_path_factory.mktemp("demo")
    config = write_demo_sources(root / "src")
    baseline = build_from_config(config, root / "baseline")
    first = read_jsonl(baseline.release_dir / "eval.jsonl")[0]
    planted = root / "src" / "train" / "planted.jsonl"
    planted.write_text(json.dumps({"id": "planted_1", "question": _planted(first["question"]),
                                   "golden_answers": ["x"]}) + "\n", encoding="utf-8")
    registry_path = root / "src" / "train" / "registry.yaml"
    registry = yaml.safe_load(registry_path.read_text(encoding="utf-8"))
    registry["files"].append({"stage": "SFT", "release": "demo-sft", "role": "historical",
                              "path": "planted.jsonl", "format": "flashrag_jsonl",
                              "sha256": sha256_file(planted)})
    registry_path.write_text(yaml.safe_dump(registry, sort_keys=False), encoding="utf-8")
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    data["audit"] = AUDIT
    config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return root, first


def _copy(demo: tuple[Path, dict], tmp_path: Path) -> tuple[Path, dict]:
    root, first = demo
    shutil.copytree(root / "src", tmp_path / "src")
    return tmp_path / "src", first


def _review(src: Path, first: dict, decision: str, reason: str) -> None:
    (src / "reviews.json").write_text(json.dumps([
        {"pair": [first["question"], _planted(first["question"])], "decision": decision, "reason": reason}]),
        encoding="utf-8")


def test_unreviewed_flag_stops_the_build_with_a_template(demo: tuple[Path, dict], tmp_path: Path) -> None:
    src, first = _copy(demo, tmp_path)
    with pytest.raises(ReviewRequired, match="1 flagged near-duplicate pair"):
        build_from_config(src / "build.yaml", tmp_path / "rel")
    template = json.loads((src / "reviews.todo.json").read_text(encoding="utf-8"))
    assert template[0]["pair"] == [question_key(first["question"]), question_key(_planted(first["question"]))]
    assert not (tmp_path / "rel").exists(), "a stopped build leaves no release behind"


def test_reviewed_exclusion_reselects_deterministically_and_replay_agrees(
        demo: tuple[Path, dict], tmp_path: Path) -> None:
    src, first = _copy(demo, tmp_path)
    _review(src, first, "exclude", "reworded copy of a training question")
    one = build_from_config(src / "build.yaml", tmp_path / "one")
    two = build_from_config(src / "build.yaml", tmp_path / "two")
    assert (one.release_dir / "eval.jsonl").read_bytes() == (two.release_dir / "eval.jsonl").read_bytes()
    rows = read_jsonl(one.release_dir / "eval.jsonl")
    baseline = read_jsonl(demo[0] / "baseline" / "eval.jsonl")
    assert first["question"] not in [r["question"] for r in rows]
    assert len(rows) == len(baseline)
    changed = [(a["source_row_number"], b["source_row_number"]) for a, b in zip(baseline, rows, strict=True)
               if a["source_row_number"] != b["source_row_number"] or a["source_dataset"] != b["source_dataset"]]
    # Only the nq source moved: the excluded question gave way to the next in its fixed draw order.
    assert changed and all(a["source_dataset"] == "nq" for a, b in zip(baseline, rows, strict=True)
                           if a["source_row_number"] != b["source_row_number"])
    report = one.manifest.audit["report"]
    assert report["counts"]["pairs_flagged"] == 1 and report["counts"]["questions_excluded"] == 1
    replay = replay_release(one.release_dir, base_dir=src)
    assert replay.ok, [c.line() for c in replay.failures]
    written = json.loads((one.release_dir / OUTPUT).read_text(encoding="utf-8"))
    assert {c["name"]: c["status"] for c in written["checks"]} == {
        "training_hashes": "OK", "source_hashes": "OK", "exclusion_sets": "OK",
        "rows_match_originals": "OK", "sampling_replay": "OK"}


def test_retain_keeps_the_question_with_its_reason(demo: tuple[Path, dict], tmp_path: Path) -> None:
    src, first = _copy(demo, tmp_path)
    reason = "same template, different entity: a distinct factual question"
    _review(src, first, "retain", reason)
    result = build_from_config(src / "build.yaml", tmp_path / "rel")
    assert read_jsonl(result.release_dir / "eval.jsonl")[0]["question"] == first["question"]
    audit = json.loads((result.release_dir / "exclusion_audit.json").read_text(encoding="utf-8"))
    assert [r["reason"] for r in audit["retained"]] == [reason]
    assert replay_release(result.release_dir, base_dir=src).ok


def test_tampered_training_file_is_reported(demo: tuple[Path, dict], tmp_path: Path) -> None:
    src, first = _copy(demo, tmp_path)
    _review(src, first, "exclude", "reworded copy")
    result = build_from_config(src / "build.yaml", tmp_path / "rel")
    with (src / "train" / "stage_2.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"idx": 999, "question": "Who tampered with this file?", "answer": "x"}) + "\n")
    report = replay_release(result.release_dir, base_dir=src)
    failed = {c.name: c for c in report.failures}
    assert "training_hashes" in failed and "stage_2.jsonl" in failed["training_hashes"].detail
    assert "exclusion_sets" in failed  # the rebuilt key counts no longer match the manifest
    written = json.loads((result.release_dir / OUTPUT).read_text(encoding="utf-8"))
    assert written["ok"] is False


def test_replay_catches_a_changed_alias_and_a_reordered_release(demo: tuple[Path, dict], tmp_path: Path) -> None:
    src, first = _copy(demo, tmp_path)
    _review(src, first, "exclude", "reworded copy")
    result = build_from_config(src / "build.yaml", tmp_path / "rel")
    path = result.release_dir / "eval.jsonl"
    rows = read_jsonl(path)
    rows[3]["answers"] = [*rows[3]["answers"], "an alias the original never had"]
    rows[5], rows[6] = {**rows[6], "id": rows[5]["id"]}, {**rows[5], "id": rows[6]["id"]}
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    failed = {c.name: c for c in replay_release(result.release_dir, base_dir=src).failures}
    assert rows[3]["id"] in failed["rows_match_originals"].detail
    assert "position 6" in failed["sampling_replay"].detail
