"""Training registry pinning, exclusion sets per stage, and the isolation pass."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from aethersearch.errors import ConfigError, IntegrityError
from aethersearch.isolation.training import (
    Exclusion,
    build_exclusion_sets,
    final_overlap,
    isolate,
    load_exclusion_list,
    load_registry,
)
from aethersearch.jsonl import sha256_file
from aethersearch.sources.base import Candidate
from aethersearch.text import question_key


def _registry(tmp_path: Path, files: dict[str, tuple[str, str, str]]) -> Path:
    entries = []
    for name, (stage, fmt, content) in files.items():
        (tmp_path / name).write_text(content, encoding="utf-8")
        entries.append({"stage": stage, "release": f"r-{stage}", "path": name, "format": fmt,
                        "sha256": sha256_file(tmp_path / name)})
    path = tmp_path / "registry.yaml"
    path.write_text(yaml.safe_dump({"files": entries}), encoding="utf-8")
    return path


def _cand(dataset: str, row: int, question: str, source_id: str | None = None) -> Candidate:
    return Candidate(dataset, "dev", source_id, row, "f", question, ["a"], question_key(question), {})


def test_exclusion_sets_per_stage_and_union_by_normalised_key(tmp_path: Path) -> None:
    path = _registry(tmp_path, {
        "sft.tsv": ("SFT", "dpr_tsv", "Who wrote Hamlet?\t['Shakespeare']\nwho  wrote hamlet\t['x']\n"),
        "rl.jsonl": ("RL", "r1searcher_jsonl", '{"idx": 1, "question": "Who wrote Hamlet", "answer": "S"}\n'
                                                '{"idx": 2, "question": "Capital of France?", "answer": "Paris"}\n'),
    })
    sets = build_exclusion_sets(load_registry(path), tmp_path)
    assert sets.keys["SFT"] == {"who wrote hamlet"}
    assert sets.keys["RL"] == {"who wrote hamlet", "capital of france"}
    assert sets.union == {"who wrote hamlet", "capital of france"}
    assert [row["unique_keys"] for row in sets.file_rows] == [1, 2]


def test_builder_refuses_a_training_file_whose_hash_changed(tmp_path: Path) -> None:
    path = _registry(tmp_path, {"sft.tsv": ("SFT", "dpr_tsv", "q1\t['a']\n")})
    (tmp_path / "sft.tsv").write_text("q1\t['a']\nq2\t['b']\n", encoding="utf-8")
    with pytest.raises(IntegrityError, match=r"training file sft.tsv \(SFT, r-SFT\) has sha256 [0-9a-f]{64}, but the "
                                             r"registry pins") as info:
        build_exclusion_sets(load_registry(path), tmp_path)
    assert "update its sha256" in str(info.value)


def test_registry_rejects_unknown_stage_and_missing_hash(tmp_path: Path) -> None:
    bad = tmp_path / "r.yaml"
    bad.write_text(yaml.safe_dump({"files": [{"stage": "PPO", "release": "x", "path": "a", "format": "dpr_tsv",
                                              "sha256": "0" * 64}]}))
    with pytest.raises(ConfigError, match=r"r.yaml: training registry field 'files.0.stage'"):
        load_registry(bad)
    bad.write_text(yaml.safe_dump({"files": [{"stage": "SFT", "release": "x", "path": "a", "format": "dpr_tsv"}]}))
    with pytest.raises(ConfigError, match="files.0.sha256"):
        load_registry(bad)


def test_isolation_removes_overlaps_equivalents_reviewed_and_duplicates_keeping_the_first(tmp_path: Path) -> None:
    path = _registry(tmp_path, {"sft.tsv": ("SFT", "dpr_tsv", "Who wrote Hamlet?\t['S']\nwhat is 'xyz', really\t['b']\n")})
    sets = build_exclusion_sets(load_registry(path), tmp_path)
    sources = {
        "nq": [_cand("nq", 1, "who wrote hamlet"), _cand("nq", 2, "What is XYZ really?"),
               _cand("nq", 3, "Where is Rome?"), _cand("nq", 4, "where is rome"), _cand("nq", 5, "Drop me")],
        "tqa": [_cand("tqa", 1, "Where is  Rome", "t1"), _cand("tqa", 2, "Why?", "t2"), _cand("tqa", 3, "Keep", "t3")],
    }
    reviewed = [Exclusion(question_key("drop me"), None, None, "reviewed near-duplicate", "exclusion list"),
                Exclusion(None, "tqa", "t2", "ambiguous answer", "exclusion list")]
    result = isolate(sources, sets, reviewed)
    kinds = {(r.candidate.source_dataset, r.candidate.source_row_number): r.kind for r in result.removals}
    assert kinds == {("nq", 1): "training_overlap", ("nq", 2): "training_equivalent",
                     ("nq", 4): "duplicate", ("nq", 5): "reviewed_exclusion",
                     ("tqa", 1): "duplicate", ("tqa", 2): "reviewed_exclusion"}
    # "Where is Rome?" (row 3) sorts before "where is rome" (row 4) by (null id, key, row): row 3 is kept
    assert [c.source_row_number for c in result.eligible["nq"]] == [3]
    assert [c.source_row_number for c in result.eligible["tqa"]] == [3]
    duplicate = next(r for r in result.removals if r.candidate.source_dataset == "tqa" and r.kind == "duplicate")
    assert duplicate.duplicate_of == ("nq", 3) and "cross-source" in duplicate.reason
    counts = result.counts
    assert (counts["input_rows"], counts["exact_overlaps_removed"], counts["template_equivalents_removed"],
            counts["reviewed_exclusions_removed"], counts["internal_duplicates_removed"],
            counts["cross_source_duplicates_removed"]) == (8, 1, 1, 2, 1, 1)
    assert counts["exact_overlaps_by_stage"] == {"SFT": 1}
    assert final_overlap([c for v in result.eligible.values() for c in v], sets) == {"SFT": 0}
    assert final_overlap(sources["nq"][:1], sets) == {"SFT": 1}


def test_exclusion_list_needs_a_reason_and_a_target(tmp_path: Path) -> None:
    path = tmp_path / "ex.yaml"
    path.write_text(yaml.safe_dump({"exclusions": [{"question": "Who Wrote Hamlet?", "reason": "r"},
                                                   {"dataset": "hotpotqa", "source_id": 5, "reason": "r2"}]}))
    entries = load_exclusion_list(path)
    assert entries[0].key == "who wrote hamlet" and entries[1].source_id == "5"
    path.write_text(yaml.safe_dump({"exclusions": [{"key": "x"}]}))
    with pytest.raises(ConfigError, match="exclusion #1 needs a non-empty 'reason'"):
        load_exclusion_list(path)


def test_candidate_template_equals_template_key_of_the_question() -> None:
    from hypothesis import given
    from hypothesis import strategies as st

    from aethersearch.isolation.training import candidate_template
    from aethersearch.text import template_key

    @given(st.text(max_size=40))
    def check(question: str) -> None:
        assert candidate_template(_cand("x", 1, question)) == template_key(question)

    check()
