"""End-to-end builds of the embedded demo: composition, determinism, manifest, card, hooks, atomicity."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from aethersearch.curation.build import build_from_config
from aethersearch.curation.config import load_config
from aethersearch.errors import AetherError, ConfigError, IntegrityError, ShortageError
from aethersearch.jsonl import read_jsonl, sha256_file
from aethersearch.release.manifest import Manifest
from aethersearch.release_layout import release_layout
from aethersearch.selection.sampling import AuditDecision
from aethersearch.text import question_key
from tests.benchmark.conftest_helpers import build_demo

RELEASE_FILES = {"demo.jsonl", "demo_rollout_questions.jsonl", "demo_manifest.json", "demo_exclusion_audit.json",
                 "demo_diagnostics.jsonl", "independent_validation.json", "checksums.sha256", "verify_release.py",
                 "ATTRIBUTION.md", "README.md"}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("demo")
    config, result = build_demo(root)
    return config, result


def test_demo_release_has_every_file_and_the_redistributed_composition(demo) -> None:
    _, result = demo
    assert {p.name for p in result.release_dir.iterdir()} == RELEASE_FILES
    assert [(c["dataset"], c["selected"]) for c in result.manifest.composition] == [
        ("nq", 22), ("triviaqa", 22), ("popqa", 22), ("hotpotqa", 21), ("2wikimultihopqa", 21), ("musique", 21),
        ("bamboogle", 11)]
    rows = read_jsonl(release_layout(result.release_dir).eval)
    assert [r["id"] for r in rows] == [f"demo_{i:04d}" for i in range(1, 141)]
    assert set(rows[0]) == {"id", "question", "answers", "source_dataset", "source_split", "source_id",
                            "source_row_number", "source_file"}
    assert {r["source_id"] for r in rows if r["source_dataset"] in {"nq", "bamboogle"}} == {None}
    assert all(r["source_id"] for r in rows if r["source_dataset"] not in {"nq", "bamboogle"})
    rollout = read_jsonl(release_layout(result.release_dir).rollout)
    assert rollout == [{"id": r["id"], "question": r["question"]} for r in rows]
    assert result.verify.ok and set(result.timings) == {"read_sources", "exclusion_sets", "dedup", "select",
                                                        "write", "replay", "verify"}


def test_exclusion_really_removes_the_overlapping_training_questions(demo) -> None:
    config, result = demo
    iso = result.manifest.isolation
    assert iso["exact_overlaps_removed"] >= 5 and iso["template_equivalents_removed"] >= 1
    assert iso["exact_overlaps_by_stage"] == {"SFT": 2, "DPO": 2, "RL": 1}
    assert iso["internal_duplicates_removed"] == 1 and iso["cross_source_duplicates_removed"] == 1
    assert iso["final_exact_overlap_by_stage"] == {"SFT": 0, "DPO": 0, "RL": 0}
    registry = yaml.safe_load((config.parent / "train" / "registry.yaml").read_text())
    from aethersearch.sources import read_source

    training = set()
    for entry in registry["files"]:
        path = config.parent / "train" / entry["path"]
        training |= {c.key for c in read_source(entry["format"], path, dataset="t", split="train",
                                                source_file="x").candidates}
    selected = {question_key(r["question"]) for r in read_jsonl(release_layout(result.release_dir).eval)}
    assert not selected & training
    audit = json.loads((release_layout(result.release_dir).path("exclusion_audit")).read_text())
    assert {r["kind"] for r in audit["removed"]} == {"training_overlap", "training_equivalent", "duplicate"}
    assert all(r["reason"] for r in audit["removed"])


def test_demo_questions_are_answerable_from_the_demo_world_corpus(demo) -> None:
    from aethersearch.corpus.demo_world import generate_world

    text = "\n".join(d.title + "\n" + d.text for d in generate_world(0).documents).casefold()
    rows = read_jsonl(release_layout(demo[1].release_dir).eval)
    missing = [r["id"] for r in rows if not any(a.casefold() in text for a in r["answers"])
               and r["answers"] != ["yes"] and r["answers"] != ["no"]]
    assert not missing
    diagnostics = read_jsonl(release_layout(demo[1].release_dir).diagnostics)
    page_titles = {d.title for d in generate_world(0).documents}
    for row in diagnostics:
        assert set(row["supporting_pages"]) <= page_titles
    assert any(row["decomposition"] for row in diagnostics if row["source_dataset"] == "musique")


def test_manifest_records_what_an_independent_replay_needs(demo) -> None:
    config, result = demo
    manifest = Manifest.model_validate_json((release_layout(result.release_dir).manifest).read_bytes())
    assert manifest.seed == 42 and manifest.name == "demo" and manifest.software_version
    two_wiki = next(s for s in manifest.sources if s.dataset == "2wikimultihopqa")
    assert two_wiki.path == "2wikimultihopqa/dev.json" and two_wiki.format == "2wiki_json"
    assert two_wiki.sha256 == sha256_file(config.parent / two_wiki.path)
    assert two_wiki.option_files["aliases"].sha256 == sha256_file(config.parent / "2wikimultihopqa/id_aliases.json")
    assert (two_wiki.planned, two_wiki.quota) == (20, 21)
    assert manifest.training.registry_path == "train/registry.yaml"
    assert {f.stage for f in manifest.training.files} == {"SFT", "DPO", "RL"}
    assert all(len(f.sha256) == 64 for f in manifest.training.files)
    assert manifest.data_sha256 == sha256_file(release_layout(result.release_dir).eval)
    assert manifest.config["sources"][6]["cap"] == 11 and manifest.config["seed"] == 42
    assert len(manifest.row_sha256) == manifest.question_count == 140


def test_two_builds_are_byte_identical(tmp_path: Path, demo) -> None:
    config, first = demo
    second = build_from_config(config, tmp_path / "again")
    for name in RELEASE_FILES:
        assert (first.release_dir / name).read_bytes() == (second.release_dir / name).read_bytes(), name
    # and the demo sources themselves are deterministic
    _, third = build_demo(tmp_path / "fresh")
    assert (release_layout(third.release_dir).eval).read_bytes() == (release_layout(first.release_dir).eval).read_bytes()


def test_checksums_file_passes_sha256sum_and_the_standalone_verifier_runs_with_stdlib_only(demo) -> None:
    release = demo[1].release_dir
    if os.path.exists("/usr/bin/sha256sum"):
        subprocess.run(["sha256sum", "--quiet", "-c", "checksums.sha256"], cwd=release, check=True)
    done = subprocess.run([sys.executable, "-I", "-S", "verify_release.py"], cwd=release, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OK: " in done.stdout and "FAIL" not in done.stdout
    source = (release / "verify_release.py").read_text()
    imports = {line.split()[1].split(".")[0] for line in source.splitlines() if line.startswith(("import ", "from "))}
    # typing: annotations only, under TYPE_CHECKING (argparse is imported inside main())
    assert imports <= {"__future__", "hashlib", "json", "re", "sys", "unicodedata", "pathlib", "typing"}


def test_datasets_load_dataset_reads_the_validation_split_offline(demo, monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets", reason="the datasets package is not installed")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    loaded = datasets.load_dataset(str(demo[1].release_dir), cache_dir=str(tmp_path / "cache"))
    assert list(loaded) == ["validation"]
    split = loaded["validation"]
    assert split.num_rows == 140
    rows = read_jsonl(release_layout(demo[1].release_dir).eval)
    assert split[0]["id"] == rows[0]["id"] and split[0]["answers"] == rows[0]["answers"]
    assert split[0]["source_id"] is None  # NQ rows keep their null id


def test_a_shortage_fails_the_build_and_leaves_no_release(tmp_path: Path) -> None:
    from aethersearch.sources.demo import write_demo_sources

    config_path = write_demo_sources(tmp_path / "src")
    config = yaml.safe_load(config_path.read_text())
    config["sources"][2]["planned"] = 40  # PopQA: 30 rows in the file
    config_path.write_text(yaml.safe_dump(config))
    with pytest.raises(ShortageError, match=r"source 'popqa' is short: needed 42 eligible questions, available 29"):
        build_from_config(config_path, tmp_path / "release")
    assert not (tmp_path / "release").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["src"]  # no staging directory left behind


def test_the_shortage_messages_suggested_fix_builds(tmp_path: Path) -> None:
    """Following the fix the message suggests, literally, gives a release of the planned size."""
    import re

    from aethersearch.sources.demo import write_demo_sources

    config_path = write_demo_sources(tmp_path / "src")
    config = yaml.safe_load(config_path.read_text())
    config["sources"][2]["planned"] = 40  # PopQA: 30 rows in the file
    config_path.write_text(yaml.safe_dump(config))
    with pytest.raises(ShortageError) as info:
        build_from_config(config_path, tmp_path / "release")
    suggested = re.search(r"\(cap: (\d+) in its source entry\)", info.value.fix or "")
    assert suggested is not None, info.value.fix
    config["sources"][2]["cap"] = int(suggested.group(1))
    config_path.write_text(yaml.safe_dump(config))
    result = build_from_config(config_path, tmp_path / "release")
    planned = sum(s.get("planned", config["planned_per_source"]) for s in config["sources"])
    assert result.manifest.question_count == planned and result.verify.ok
    popqa = next(c for c in result.manifest.composition if c["dataset"] == "popqa")
    assert popqa["selected"] == int(suggested.group(1))


def test_config_errors_name_the_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "sources": [{"dataset": "nq", "format": "nq_open_jsonl",
                                                               "path": "a", "split": "dev", "planed": 3}]}))
    with pytest.raises(ConfigError, match=r"c.yaml: build config field 'sources.0.planed': Extra inputs"):
        load_config(path)


def test_refuses_to_replace_a_directory_that_is_not_a_release(tmp_path: Path, demo) -> None:
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="not a release directory"):
        build_from_config(demo[0], tmp_path / "precious")
    assert (tmp_path / "precious" / "notes.txt").read_text() == "keep me"


def test_reviewed_exclusion_list_reruns_the_same_selection(tmp_path: Path, demo) -> None:
    config_path, first = demo
    rows = read_jsonl(release_layout(first.release_dir).eval)
    victim = rows[5]
    data = yaml.safe_load(config_path.read_text())
    src = config_path.parent
    (src / "exclusions.yaml").write_text(yaml.safe_dump(
        {"exclusions": [{"question": victim["question"], "reason": "reviewed: ambiguous"}]}))
    data["exclusions"] = "exclusions.yaml"
    (src / "build_ex.yaml").write_text(yaml.safe_dump(data))
    second = build_from_config(src / "build_ex.yaml", tmp_path / "ex")
    after = read_jsonl(release_layout(second.release_dir).eval)
    same_source = [r["question"] for r in rows if r["source_dataset"] == victim["source_dataset"]]
    new_source = [r["question"] for r in after if r["source_dataset"] == victim["source_dataset"]]
    assert victim["question"] not in new_source
    assert [q for q in same_source if q != victim["question"]] == new_source[:-1]  # only the tail is new
    others = [(r["source_dataset"], r["question"]) for r in rows if r["source_dataset"] != victim["source_dataset"]]
    assert others == [(r["source_dataset"], r["question"]) for r in after
                      if r["source_dataset"] != victim["source_dataset"]]
    assert second.manifest.exclusions[0].reason == "reviewed: ambiguous"


def test_audit_hooks_loop_until_no_new_exclusions_and_are_recorded(tmp_path: Path, demo) -> None:
    config_path, first = demo
    first_keys = [question_key(r["question"]) for r in read_jsonl(release_layout(first.release_dir).eval)]
    calls: list[int] = []
    pool_sizes: list[int] = []

    def pool_filter(pool):
        pool_sizes.append(len(pool))
        return {first_keys[0]: "near-duplicate of a training question (0.97)"}

    def audit(selection):
        calls.append(len(selection))
        keys = [c.key for c in selection]
        exclude = {first_keys[1]: "flagged pair"} if first_keys[1] in keys else {}
        if len(calls) == 2:
            exclude = {keys[0]: "second-round flag"}
        return AuditDecision(exclude, [{"pair": ["a", "b"], "reason": "different entities"}], {"flagged": len(exclude)})

    result = build_from_config(config_path, tmp_path / "audited", pool_filter=pool_filter, selection_audit=audit)
    assert pool_sizes == [185] and calls == [140, 140, 140]
    keys = {question_key(r["question"]) for r in read_jsonl(release_layout(result.release_dir).eval)}
    assert first_keys[0] not in keys and first_keys[1] not in keys
    assert [e.origin for e in result.manifest.exclusions] == ["selection audit", "selection audit"]
    assert result.manifest.pool_filter_removals[0].reason.startswith("near-duplicate")
    assert [r["new_exclusions"] for r in result.manifest.audit["rounds"]] == [1, 1, 0]
    exclusion_audit = json.loads((release_layout(result.release_dir).path("exclusion_audit")).read_text())
    assert exclusion_audit["retained"] == [{"pair": ["a", "b"], "reason": "different entities"}]
    assert result.verify.ok


def test_an_audit_that_never_settles_is_capped_with_a_clear_error(tmp_path: Path, demo) -> None:
    def restless(selection):
        return AuditDecision({selection[0].key: "always something"}, [], {})

    data = yaml.safe_load(demo[0].read_text())
    data["max_audit_rounds"] = 3
    path = demo[0].parent / "build_capped.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(AetherError, match=r"still excluded 1 new question\(s\) after 3 rounds"):
        build_from_config(path, tmp_path / "never", selection_audit=restless)
    assert not (tmp_path / "never").exists()


def test_audit_section_wires_in_benchmark_audit_lazily(tmp_path: Path, demo, monkeypatch) -> None:
    import types

    seen = {}

    def make_audit_hooks(audit_config, training_keys, *, reviews_path, auto_review, **_):
        seen.update(config=audit_config, n=len(training_keys), reviews=reviews_path, auto=auto_review)
        return (lambda pool: {}), (lambda sel: AuditDecision({}, [], {"flagged": 0}))

    monkeypatch.setitem(sys.modules, "aethersearch.audit.near_duplicates",
                        types.SimpleNamespace(make_audit_hooks=make_audit_hooks))
    data = yaml.safe_load(demo[0].read_text())
    data["audit"] = {"threshold": 90, "reviews": "reviews.yaml"}
    path = demo[0].parent / "build_audit.yaml"
    path.write_text(yaml.safe_dump(data))
    result = build_from_config(path, tmp_path / "a", auto_review=True)
    assert seen["config"] == {"threshold": 90, "reviews": "reviews.yaml"}
    assert seen["reviews"] == demo[0].parent / "reviews.yaml" and seen["auto"] is True
    assert seen["n"] == result.manifest.training.union_size > 0 and result.manifest.audit["report"] == {"flagged": 0}


def test_cli_build_and_verify(tmp_path: Path, demo) -> None:
    from typer.testing import CliRunner

    from aethersearch.cli import app

    runner = CliRunner()
    done = runner.invoke(app, ["build", str(demo[0]), "--out", str(tmp_path / "cli")])
    assert done.exit_code == 0, done.output
    assert "demo: 140 questions" in done.output
    done = runner.invoke(app, ["verify", str(tmp_path / "cli")])
    assert done.exit_code == 0 and "FAIL" not in done.output
    (tmp_path / "cli" / "eval.jsonl").write_bytes(b"")
    done = runner.invoke(app, ["verify", str(tmp_path / "cli")])
    assert done.exit_code == 1 and "FAIL checksums: eval.jsonl" in done.output


def test_integrity_error_type_is_used_for_bad_pins(tmp_path: Path) -> None:
    from aethersearch.sources.demo import write_demo_sources

    config = write_demo_sources(tmp_path / "src")
    with (config.parent / "train" / "dpo_questions.json").open("a") as handle:
        handle.write("\n")
    with pytest.raises(IntegrityError, match="dpo_questions.json"):
        build_from_config(config, tmp_path / "r")


def test_a_pinned_source_whose_hash_changed_is_refused(tmp_path: Path) -> None:
    from aethersearch.sources.demo import write_demo_sources

    config_path = write_demo_sources(tmp_path / "src")
    data = yaml.safe_load(config_path.read_text())
    data["sources"][0]["sha256"] = "0" * 64
    config_path.write_text(yaml.safe_dump(data))
    with pytest.raises(IntegrityError, match=r"source 'nq' file nq_open/NQ-open.dev.jsonl has sha256 [0-9a-f]{64}, "
                                             r"but the config pins 0{64}"):
        build_from_config(config_path, tmp_path / "r")


def test_cli_demo_build_writes_sources_beside_the_release(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from aethersearch.cli import app

    done = CliRunner().invoke(app, ["build", "--demo", "--out", str(tmp_path / "rel")])
    assert done.exit_code == 0, done.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rel", "rel_sources"]
    assert (tmp_path / "rel_sources" / "build.yaml").is_file()


def test_cli_verify_replay_agrees_with_the_build(demo) -> None:
    pytest.importorskip("aethersearch.release.replay", reason="the issue-3 replay module is not present")
    from typer.testing import CliRunner

    from aethersearch.cli import app

    config, result = demo
    done = CliRunner().invoke(app, ["verify", str(result.release_dir), "--replay", "--base-dir", str(config.parent)])
    assert done.exit_code == 0, done.output
    assert "OK sampling_replay" in done.output


def test_json_config_and_json_registry_build_the_same_rows(tmp_path: Path, demo) -> None:
    config_path, first = demo
    src = config_path.parent
    data = yaml.safe_load(config_path.read_text())
    registry = yaml.safe_load((src / "train" / "registry.yaml").read_text())
    (src / "train" / "registry.json").write_text(json.dumps(registry))
    data["training_registry"] = "train/registry.json"
    (src / "build.json").write_text(json.dumps(data))
    second = build_from_config(src / "build.json", tmp_path / "json")
    assert (release_layout(second.release_dir).eval).read_bytes() == (release_layout(first.release_dir).eval).read_bytes()
    assert second.manifest.config_path == "build.json"


def test_load_manifest_reads_a_release_and_refuses_other_directories(tmp_path: Path, demo) -> None:
    from aethersearch.errors import DataError
    from aethersearch.release.manifest import load_manifest

    manifest = load_manifest(demo[1].release_dir)
    assert manifest.data_sha256 == demo[1].manifest.data_sha256
    (tmp_path / "manifest.json").write_text('{"kind": "x"}')
    with pytest.raises(DataError, match="not a release manifest"):
        load_manifest(tmp_path)
