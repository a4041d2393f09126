"""Exclusion entries: a space before "?" and an inline ``exclusions:`` list in the build config."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from aethersearch.curation.build import build_from_config
from aethersearch.errors import ConfigError
from aethersearch.isolation.training import check_exclusions_match, parse_exclusions, resolve_exclusions
from aethersearch.jsonl import read_jsonl
from aethersearch.release_layout import release_layout
from aethersearch.sources.base import Candidate
from aethersearch.text import question_key

from .conftest_helpers import build_demo


def _candidate(question: str, row: int = 1) -> Candidate:
    return Candidate("nq", "dev", None, row, "nq.jsonl", question, ["x"], question_key(question), {})


def test_a_question_published_with_a_space_before_the_question_mark_can_be_excluded_by_its_text() -> None:
    published = _candidate("who wrote the iliad ?")
    assert published.key == "who wrote the iliad "  # the key keeps the space the "?" left behind
    entries = parse_exclusions([{"question": "Who wrote the Iliad?", "reason": "in a training set"}], "cfg")
    resolved = resolve_exclusions(entries, {"nq": [published]})
    assert resolved[0].key == published.key
    check_exclusions_match("cfg", resolved, {"nq": [published]})  # matches: no error


def test_a_question_that_matches_nothing_is_not_told_to_use_question() -> None:
    entries = parse_exclusions([{"question": "Who painted the Mona Lisa?", "reason": "r"}], "cfg")
    with pytest.raises(ConfigError) as info:
        check_exclusions_match("cfg", resolve_exclusions(entries, {"nq": [_candidate("x")]}), {"nq": [_candidate("x")]})
    assert "write it under 'question'" not in info.value.message


def test_an_inline_exclusions_list_in_the_build_config_is_applied(tmp_path: Path) -> None:
    config, baseline = build_demo(tmp_path / "base")
    first = read_jsonl(release_layout(baseline.release_dir).eval)[0]
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    data["exclusions"] = [{"question": first["question"], "reason": "reviewed: duplicate of a training item"}]
    inline = config.with_name("inline.yaml")
    inline.write_text(yaml.safe_dump(data), encoding="utf-8")
    result = build_from_config(inline, tmp_path / "rel")
    questions = [r["question"] for r in read_jsonl(release_layout(result.release_dir).eval)]
    assert first["question"] not in questions and len(questions) == baseline.manifest.question_count
    assert [e.reason for e in result.manifest.exclusions] == ["reviewed: duplicate of a training item"]
    assert result.verify.ok
