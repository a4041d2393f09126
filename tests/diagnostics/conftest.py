"""A demo-world sandbox shared by the diagnostics tests (built once per session, ~1 s)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import pytest

from aethersearch.jsonl import read_jsonl


class DemoSandbox(NamedTuple):
    release: Path
    store: Any
    index: Any
    sandbox: Any
    diagnostics: dict[str, dict[str, Any]]
    gold: dict[str, list[str]]
    questions: dict[str, str]


@pytest.fixture(scope="session")
def demo_sandbox(tmp_path_factory: pytest.TempPathFactory) -> DemoSandbox:
    from aethersearch.construct.build import build_demo_sandbox_release
    from aethersearch.corpus.importers import import_corpus
    from aethersearch.sandbox.episode import open_sandbox
    from aethersearch.search.index_dir import build_index

    root = tmp_path_factory.mktemp("demo_sandbox")
    release = build_demo_sandbox_release(root / "release", seed=0)
    store = import_corpus("demo", "demo", root / "corpus", seed=0).store
    index = build_index(store, "bm25", root / "index", config={"numba": False}).index  # 1,072 pages: no JIT
    sandbox = open_sandbox(release, index, store)
    diagnostics = {row["id"]: row for row in read_jsonl(release / "diagnostics.jsonl")}
    gold = {row["id"]: row["answers"] for row in read_jsonl(release / "eval.jsonl")}
    questions = {row["id"]: row["question"] for row in read_jsonl(release / "rollout_questions.jsonl")}
    return DemoSandbox(release, store, index, sandbox, diagnostics, gold, questions)
