"""The index backend name map (docs/design/conventions.md, code convention 2): name -> lazily imported class.

Each class offers ``config_model`` (a pydantic model of its settings),
``build(store, config, out_dir, on_document) -> stats`` and
``load(index_dir, manifest, store) -> SearchIndex``. ``dense`` needs the optional
``dense`` extra (sentence-transformers); importing its module does not.
"""

from __future__ import annotations

from typing import Any

from aethersearch.registry import resolve

__all__ = ["INDEX_BACKENDS", "backend_class"]

INDEX_BACKENDS: dict[str, str] = {
    "bm25": "aethersearch.search.bm25:BM25Index",
    "bm25-maxscore": "aethersearch.search.bm25_maxscore:BM25MaxScoreIndex",
    "dense": "aethersearch.search.dense:DenseIndex",
    "faiss": "aethersearch.search.faiss_index:FaissIndex",
    "hybrid": "aethersearch.search.hybrid:HybridIndex",
}


def backend_class(name: str) -> Any:
    """The index class registered as ``name``; ConfigError with the valid names otherwise."""
    return resolve("index backend", name, INDEX_BACKENDS)
