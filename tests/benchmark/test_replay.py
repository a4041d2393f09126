"""Review loop through the real builder, and the independent replay that checks it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from aethersearch.curation.build import build_from_config
from aethersearch.errors import ReviewRequired
from aethersearch.jsonl import read_jsonl, sha256_file
from aethersearch.release.replay import default_output, replay_release
from aethersearch.release_layout import release_layout
from aethersearch.sources.demo import write_demo_sources
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
    first = read_jsonl(release_layout(baseline.release_dir).eval)[0]
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
    for name in ("demo.jsonl", "demo_manifest.json", "demo_exclusion_audit.json", "independent_validation.json"):
        assert (one.release_dir / name).read_bytes() == (two.release_dir / name).read_bytes(), name
    rows = read_jsonl(release_layout(one.release_dir).eval)
    baseline = read_jsonl(release_layout(demo[0] / "baseline").eval)
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
    assert replay.output == default_output(one.release_dir)
    written = json.loads(replay.output.read_text(encoding="utf-8"))
    assert {c["name"]: c["status"] for c in written["checks"]} == {
        "training_hashes": "OK", "source_hashes": "OK", "exclusion_sets": "OK",
        "rows_match_originals": "OK", "sampling_replay": "OK"}


def test_retain_keeps_the_question_with_its_reason(demo: tuple[Path, dict], tmp_path: Path) -> None:
    src, first = _copy(demo, tmp_path)
    reason = "same template, different entity: a distinct factual question"
    _review(src, first, "retain", reason)
    result = build_from_config(src / "build.yaml", tmp_path / "rel")
    assert read_jsonl(release_layout(result.release_dir).eval)[0]["question"] == first["question"]
    audit = json.loads((release_layout(result.release_dir).path("exclusion_audit")).read_text(encoding="utf-8"))
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
    written = json.loads(report.output.read_text(encoding="utf-8"))
    assert written["ok"] is False and written["checks"][0]["status"] == "FAIL"


def test_replay_catches_a_changed_alias_and_a_reordered_release(demo: tuple[Path, dict], tmp_path: Path) -> None:
    src, first = _copy(demo, tmp_path)
    _review(src, first, "exclude", "reworded copy")
    result = build_from_config(src / "build.yaml", tmp_path / "rel")
    path = release_layout(result.release_dir).eval
    rows = read_jsonl(path)
    rows[3]["answers"] = [*rows[3]["answers"], "an alias the original never had"]
    rows[5], rows[6] = {**rows[6], "id": rows[5]["id"]}, {**rows[5], "id": rows[6]["id"]}
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    failed = {c.name: c for c in replay_release(result.release_dir, base_dir=src).failures}
    assert rows[3]["id"] in failed["rows_match_originals"].detail
    assert "position 6" in failed["sampling_replay"].detail


def test_pool_filter_removes_a_near_copy_before_sampling_and_replay_agrees(
        demo: tuple[Path, dict], tmp_path: Path) -> None:
    src, first = _copy(demo, tmp_path)
    _review(src, first, "exclude", "reworded copy")
    baseline = read_jsonl(release_layout(demo[0] / "baseline").eval)
    target = next(r for r in baseline if r["source_dataset"] == "hotpotqa")
    typo = target["question"][:-3] + target["question"][-2:]  # one character dropped: ratio >= 97
    registry_path = src / "train" / "registry.yaml"
    registry = yaml.safe_load(registry_path.read_text(encoding="utf-8"))
    extra = src / "train" / "typo.jsonl"
    extra.write_text(json.dumps({"id": "typo_1", "question": typo, "golden_answers": ["x"]}) + "\n",
                     encoding="utf-8")
    registry["files"].append({"stage": "RL", "release": "demo-rl", "role": "historical", "path": "typo.jsonl",
                              "format": "flashrag_jsonl", "sha256": sha256_file(extra)})
    registry_path.write_text(yaml.safe_dump(registry, sort_keys=False), encoding="utf-8")
    result = build_from_config(src / "build.yaml", tmp_path / "rel")
    removed = [(r.dataset, r.source_row_number) for r in result.manifest.pool_filter_removals]
    assert removed == [("hotpotqa", target["source_row_number"])]
    assert result.manifest.pool_filter_removals[0].reason.startswith("pool audit: ratio")
    assert target["question"] not in [r["question"] for r in read_jsonl(release_layout(result.release_dir).eval)]
    assert replay_release(result.release_dir, base_dir=src).ok


def test_cli_audit_prints_the_flagged_pair_and_replay_prints_ok(demo: tuple[Path, dict], tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from aethersearch.cli import app

    src, first = _copy(demo, tmp_path)
    _review(src, first, "retain", "distinct question")
    result = build_from_config(src / "build.yaml", tmp_path / "rel")
    runner = CliRunner()
    audit = runner.invoke(app, ["audit", str(result.release_dir), "--training", str(src / "train" / "registry.yaml"),
                                "--threshold", "92", "--rare-threshold", "0.85", "--reviews", str(src / "reviews.json"),
                                "--json", str(tmp_path / "audit.json")], env={"COLUMNS": "200"})
    assert audit.exit_code == 0, audit.output
    assert "pairs flagged 1," in audit.output and "retained with reason 1," in audit.output
    written = json.loads((tmp_path / "audit.json").read_text(encoding="utf-8"))
    assert written["pairs"][0]["selected_id"] == "demo_0001"
    replay = runner.invoke(app, ["replay", str(result.release_dir), "--base-dir", str(src)], env={"COLUMNS": "200"})
    assert replay.exit_code == 0, replay.output
    assert replay.output.count("OK ") == 5
    (src / "train" / "stage_2.jsonl").write_text("", encoding="utf-8")
    tampered = runner.invoke(app, ["replay", str(result.release_dir), "--base-dir", str(src)], env={"COLUMNS": "200"})
    assert tampered.exit_code == 1 and "FAIL training_hashes" in tampered.output


CARD_COUNTS = ("pairs_flagged", "questions_involved", "questions_retained_with_reason", "questions_excluded")


@pytest.mark.parametrize("decision,expected", [("retain", (1, 1, 1, 0)), ("exclude", (1, 1, 0, 1))])
def test_card_counts_land_in_the_manifest_and_exclusion_audit(demo: tuple[Path, dict], tmp_path: Path,
                                                             decision: str, expected: tuple[int, ...]) -> None:
    """Pairs flagged, questions involved, retained with reasons, excluded: in both release files."""
    src, first = _copy(demo, tmp_path)
    _review(src, first, decision, "checked by hand")
    result = build_from_config(src / "build.yaml", tmp_path / "rel")
    manifest = json.loads((release_layout(result.release_dir).manifest).read_text(encoding="utf-8"))
    audit = json.loads((release_layout(result.release_dir).path("exclusion_audit")).read_text(encoding="utf-8"))
    for where, report in (("manifest.json", manifest["audit"]["report"]),
                          ("exclusion_audit.json", audit["audit"]["report"])):
        assert tuple(report["counts"][k] for k in CARD_COUNTS) == expected, where
        assert report["settings"]["similarity"] == {"scorer": "ratio", "threshold": 92.0}, where
        assert report["methods"]["similarity"]["pairs_visited"] >= report["training_union_size"], where
        assert [(p["decision"], p["reason"]) for p in report["flagged_pairs"]] == [(decision, "checked by hand")]
    assert len(audit["retained"]) == expected[2]
    if decision == "exclude":
        assert [e["origin"] for e in manifest["exclusions"]] == ["selection audit"]
