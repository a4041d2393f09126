"""Hybrid (reciprocal-rank fusion) over two BM25 variants; dense when sentence-transformers is installed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from aethersearch.corpus.store import build_store
from aethersearch.errors import ConfigError, IntegrityError
from aethersearch.records import Document
from aethersearch.search.hybrid import rrf_fuse
from aethersearch.search.index_dir import build_index, open_index

DOCS = [Document(id=f"d{i}", title=t, text=x) for i, (t, x) in enumerate([
    ("Running", "runners were running a race"), ("Runs", "she runs daily"),
    ("Race", "the race of the year"), ("Swim", "swimming in the lake"),
])]


def test_rrf_formula_and_tie_breaks() -> None:
    a = [("x", 9.0), ("y", 5.0), ("z", 1.0)]
    b = [("y", 0.9), ("w", 0.5)]
    fused = rrf_fuse([a, b], k=4, k_rrf=60)
    expected = {"x": 1 / 61, "y": 1 / 62 + 1 / 61, "z": 1 / 63, "w": 1 / 62}
    assert [d for d, _ in fused] == ["y", "x", "w", "z"]
    assert all(score == pytest.approx(expected[d]) for d, score in fused)
    assert rrf_fuse([a, b], k=2, weights=[0.0, 1.0])[0][0] == "y"


def test_hybrid_index_fuses_components_and_tracks_them(tmp_path: Path) -> None:
    store = build_store(DOCS, tmp_path / "store")
    stem = build_index(store, "bm25", tmp_path / "stem")
    raw = build_index(store, "bm25", tmp_path / "raw", config={"stemmer": None, "stopwords": None})
    hybrid = build_index(store, "hybrid", tmp_path / "hybrid",
                         config={"indexes": [str(tmp_path / "stem"), str(tmp_path / "raw")], "k_rrf": 60})
    queries = ["running race", "lake"]
    got = hybrid.index.search(queries, 3)
    for q, hits in zip(queries, got):
        assert hits == rrf_fuse([stem.index.search([q], 100)[0], raw.index.search([q], 100)[0]], 3, 60)
    assert hybrid.manifest["index_hash"] != stem.manifest["index_hash"]
    assert open_index(tmp_path / "hybrid").index.search(queries, 3) == got
    build_index(store, "bm25", tmp_path / "stem", config={"k1": 0.9}, overwrite=True)
    with pytest.raises(IntegrityError, match="rebuild the hybrid"):
        open_index(tmp_path / "hybrid")
    with pytest.raises(ConfigError, match="2 indexes but 1 weights"):
        build_index(store, "hybrid", tmp_path / "h2", config={"indexes": ["a", "b"], "weights": [1.0]})


@pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None,
                    reason="sentence-transformers not installed (optional 'dense' extra)")
def test_dense_index_ranks_by_meaning(tmp_path: Path) -> None:
    store = build_store(DOCS, tmp_path / "store")
    try:
        dense = build_index(store, "dense", tmp_path / "dense")
    except OSError as exc:  # the model is not available offline
        pytest.skip(f"embedding model unavailable: {exc}")
    hits = dense.index.search(["jogging competition", ""], 2)
    assert hits[1] == [] and len(hits[0]) == 2
    assert open_index(tmp_path / "dense").index.search(["jogging competition"], 2)[0] == hits[0]


def test_dense_without_extra_says_how_to_install(tmp_path: Path) -> None:
    if importlib.util.find_spec("sentence_transformers") is not None:
        pytest.skip("sentence-transformers is installed")
    store = build_store(DOCS, tmp_path / "store")
    with pytest.raises(ConfigError, match="aethersearch\\[dense\\]"):
        build_index(store, "dense", tmp_path / "dense")
    assert not (tmp_path / "dense").exists()
