"""Fixtures for search tests: the demo world indexed once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from aethersearch.corpus.demo_world import DemoWorld, generate_world
from aethersearch.corpus.store import build_store
from aethersearch.search.index_dir import OpenedIndex, build_index, open_index


@pytest.fixture(scope="session")
def demo_world() -> DemoWorld:
    return generate_world(seed=0)


@pytest.fixture(scope="session")
def demo_index_dir(demo_world: DemoWorld, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo_index")
    store = build_store(demo_world.documents, root / "store")
    build_index(store, "bm25", root / "bm25")
    return root / "bm25"


@pytest.fixture(scope="session")
def demo_index(demo_index_dir: Path) -> OpenedIndex:
    return open_index(demo_index_dir)
