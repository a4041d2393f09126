"""BM25: scores equal an independent Okapi/Lucene formula; no phantom documents; stable hashes."""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

import pytest

from aethersearch.corpus.store import build_store
from aethersearch.errors import ConfigError, IntegrityError
from aethersearch.records import Document
from aethersearch.search.index_dir import build_index, open_index

CORPUS = [
    ("d1", "Cats", "the cat sat on the mat with another cat"),
    ("d2", "Dogs", "dogs chase cats in the park every morning"),
    ("d3", "Mats", "a mat is a flat piece of fabric"),
    ("d4", "Parks", "the park has trees and a pond and dogs"),
    ("d5", "Ponds", "frogs live in the pond near the trees"),
    ("d6", "Fabric", "fabric is woven from thread on a loom loom loom"),
]
QUERIES = ["cat mat", "dogs park", "pond trees frogs", "loom fabric thread", "cat cat dogs", "fabric"]


def _reference(query: str, k1: float = 1.5, b: float = 0.75) -> dict[str, float]:
    """Lucene BM25 written out directly (no bm25s): idf = ln(1 + (N - df + .5)/(df + .5))."""
    tok = lambda s: re.findall(r"\b\w\w+\b", s.lower())  # noqa: E731
    docs = {i: tok(f"{t}\n{x}") for i, t, x in CORPUS}
    n = len(docs)
    avgdl = sum(len(d) for d in docs.values()) / n
    df = Counter(term for d in docs.values() for term in set(d))
    scores: dict[str, float] = {}
    for doc_id, terms in docs.items():
        tf = Counter(terms)
        score = 0.0
        for q in tok(query):
            if tf[q]:
                idf = math.log(1 + (n - df[q] + 0.5) / (df[q] + 0.5))
                score += idf * tf[q] / (tf[q] + k1 * (1 - b + b * len(terms) / avgdl))
        if score > 0:
            scores[doc_id] = score
    return scores


@pytest.fixture(scope="module")
def plain_index(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("bm25")
    store = build_store([Document(id=i, title=t, text=x) for i, t, x in CORPUS], root / "store")
    return build_index(store, "bm25", root / "idx", config={"stemmer": None, "stopwords": None, "dtype": "float64"})


@pytest.mark.parametrize("query", QUERIES)
def test_scores_match_independent_formula(plain_index, query: str) -> None:  # type: ignore[no-untyped-def]
    expected = _reference(query)
    hits = plain_index.index.search([query], k=len(CORPUS))[0]
    assert {d for d, _ in hits} == set(expected)
    for doc_id, score in hits:
        assert score == pytest.approx(expected[doc_id], abs=1e-6)
    ranked = sorted(expected, key=lambda d: (-expected[d], d))
    assert [d for d, _ in hits] == ranked


def test_float32_default_agrees_to_1e6(tmp_path: Path) -> None:
    store = build_store([Document(id=i, title=t, text=x) for i, t, x in CORPUS], tmp_path / "s")
    index = build_index(store, "bm25", tmp_path / "i", config={"stemmer": None, "stopwords": None}).index
    for query in QUERIES:
        expected = _reference(query)
        for doc_id, score in index.search([query], 6)[0]:
            assert score == pytest.approx(expected[doc_id], rel=1e-6, abs=1e-6)


def test_batched_equals_one_by_one(plain_index) -> None:  # type: ignore[no-untyped-def]
    batched = plain_index.index.search(QUERIES, 3)
    assert batched == [plain_index.index.search([q], 3)[0] for q in QUERIES]


def test_no_phantom_documents(plain_index) -> None:  # type: ignore[no-untyped-def]
    index = plain_index.index
    assert index.search(["", "   ", "zzzz unknownword"], 3) == [[], [], []]
    # k far larger than the corpus: only matching documents, never padding.
    assert [d for d, _ in index.search(["frogs"], 1000)[0]] == ["d5"]
    assert len(index.search(["the"], 1000)[0]) <= len(CORPUS)
    assert index.search(["cat"], 0) == [[]]
    assert index.search([], 3) == []


def test_stemming_and_stopwords_are_configurable(tmp_path: Path) -> None:
    docs = [Document(id="a", title="Running", text="she was running races"),
            Document(id="b", title="Other", text="the the the of of")]
    store = build_store(docs, tmp_path / "s")
    stemmed = build_index(store, "bm25", tmp_path / "stem").index
    assert [d for d, _ in stemmed.search(["runs"], 2)[0]] == ["a"]
    assert stemmed.search(["the of"], 2) == [[]]  # English stopwords removed by default
    raw = build_index(store, "bm25", tmp_path / "raw", config={"stemmer": None, "stopwords": None}).index
    assert raw.search(["runs"], 2) == [[]]
    assert [d for d, _ in raw.search(["the"], 2)[0]] == ["b"]
    custom = build_index(store, "bm25", tmp_path / "custom", config={"stopwords": ["races"]}).index
    assert custom.search(["races"], 2) == [[]]


def test_manifest_hashes_and_reload(tmp_path: Path, plain_index) -> None:  # type: ignore[no-untyped-def]
    manifest = plain_index.manifest
    assert manifest.corpus_hash == plain_index.store.content_hash
    assert manifest.index_hash.startswith("sha256:")
    assert manifest.config["k1"] == 1.5 and manifest.build_stats["documents"] == len(CORPUS)
    store = build_store([Document(id=i, title=t, text=x) for i, t, x in CORPUS], tmp_path / "s2")
    again = build_index(store, "bm25", tmp_path / "again", config={"stemmer": None, "stopwords": None,
                                                                    "dtype": "float64"})
    assert again.index.index_hash == plain_index.index.index_hash  # same corpus + settings -> same hash
    reopened = open_index(tmp_path / "again", verify=True)
    assert reopened.index.search(QUERIES, 3) == plain_index.index.search(QUERIES, 3)


def test_index_refuses_a_different_corpus(tmp_path: Path, plain_index) -> None:  # type: ignore[no-untyped-def]
    other = build_store([Document(id="x", title="X", text="other corpus")], tmp_path / "other")
    with pytest.raises(IntegrityError, match="rebuild the index"):
        open_index(Path(plain_index.store.directory).parent / "idx", store=other)


def test_unknown_backend_suggests_the_name(tmp_path: Path) -> None:
    store = build_store([Document(id="x", title="X", text="y")], tmp_path / "s")
    with pytest.raises(ConfigError, match="Did you mean 'bm25'"):
        build_index(store, "bm52", tmp_path / "i")


def test_demo_world_facts_are_answerable_by_search(demo_world, demo_index) -> None:  # type: ignore[no-untyped-def]
    facts = demo_world.facts[:400]
    hits = demo_index.index.search([f.question for f in facts], 3)
    found = sum(f.subject_id in [d for d, _ in h] for f, h in zip(facts, hits, strict=True))
    assert found / len(facts) > 0.9


def test_concurrent_searches_from_many_threads_agree(demo_index, demo_world) -> None:  # type: ignore[no-untyped-def]
    """Episodes search from many threads at once (asyncio.to_thread); results must not change."""
    from concurrent.futures import ThreadPoolExecutor

    queries = [f.question for f in demo_world.facts[:200]]
    expected = [demo_index.index.search([q], 3)[0] for q in queries]
    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(lambda q: demo_index.index.search([q], 3)[0], queries))
    assert got == expected


def test_unknown_stemmer_language(tmp_path: Path) -> None:
    store = build_store([Document(id="x", title="X", text="y")], tmp_path / "s")
    with pytest.raises(ConfigError, match="unknown stemmer language 'klingon'"):
        build_index(store, "bm25", tmp_path / "i", config={"stemmer": "klingon"})


def test_sparse_path_for_selective_queries_equals_dense_path(tmp_path: Path) -> None:
    """Ranking only matched documents gives bm25s's scores; ties at the k-th place go to store order."""
    import random

    rng = random.Random(5)
    words = [f"w{i}" for i in range(400)]
    docs = [Document(id=f"p{i}", title=rng.choice(words), text=" ".join(rng.choices(words, k=rng.randint(5, 40))))
            for i in range(3000)]
    store = build_store(docs, tmp_path / "s")
    always_sparse = build_index(store, "bm25", tmp_path / "sparse", config={"sparse_max_fraction": 1.0}).index
    never_sparse = build_index(store, "bm25", tmp_path / "dense", config={"sparse_max_fraction": 0.0}).index
    queries = [" ".join(rng.choices(words, k=rng.randint(1, 4))) for _ in range(300)] + ["w1 w1", "", "qqq"]
    for k in (1, 3, 10):
        for hits_a, hits_b in zip(always_sparse.search(queries, k), never_sparse.search(queries, k), strict=True):
            assert [s for _, s in hits_a] == pytest.approx([s for _, s in hits_b], abs=1e-5)
            if hits_b:  # above the k-th score the documents are the same; at it, sparse keeps store order
                kth = hits_b[-1][1]
                assert [d for d, s in hits_a if s > kth + 1e-5] == [d for d, s in hits_b if s > kth + 1e-5]
                tied = [int(d[1:]) for d, s in hits_a if abs(s - kth) <= 1e-5]
                assert tied == sorted(tied)
