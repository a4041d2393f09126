"""Hybrid retrieval: reciprocal-rank fusion (RRF), or AetherSearch's min-max score fusion, over one store.

Why RRF (Cormack, Clarke & Buettcher, SIGIR 2009): BM25 and dense scores live on
different scales, so fusing by rank, ``score(d) = sum_i w_i / (k_rrf + rank_i(d))``,
needs no score calibration and is robust. Each component contributes its top
``depth`` hits; ties are broken by the best single rank, then by id, so fusion is
deterministic. The component indexes' hashes are stored as an artefact, so the
hybrid ``index_hash`` changes whenever a component changes.

``fusion="aethersearch-minmax"`` is AetherSearch's own fusion (``hybrid_retrieval_server.py``
``_fuse_one``, github.com/Muradil-mamat-211/AetherSearch at d2a21bd), exactly: each
side's top ``depth`` (their ``--dense-topn``/``--bm25-topn``, 20) is min-max normalised
(all equal -> 1.0), a document missing from a side gets 0 there, the score is
``alpha * dense + (1 - alpha) * sparse`` (alpha 0.5), and ties keep first appearance,
dense hits first. It needs exactly one dense and one sparse component.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from aethersearch.corpus.store import JsonlStore
from aethersearch.errors import ConfigError, IntegrityError
from aethersearch.jsonl import atomic_write_json, loads
from aethersearch.records import Record
from aethersearch.search.base import IndexIdentity, IndexManifest, SearchIndex
from aethersearch.search.modes import DENSE_BACKENDS, SPARSE_BACKENDS

__all__ = ["HYBRID_DIR", "HybridConfig", "HybridIndex", "MINMAX_DEPTH", "minmax", "minmax_fuse", "rrf_fuse"]

HYBRID_DIR = "hybrid"
MINMAX_DEPTH = 20


class HybridConfig(Record):
    """Component index directories (absolute after build), RRF constant, depth and weights."""

    indexes: list[str] = Field(min_length=1)
    fusion: Literal["rrf", "aethersearch-minmax"] = "rrf"
    k_rrf: int = Field(default=60, ge=1)
    depth: int = Field(default=100, ge=1, description="hits taken from each component (aethersearch-minmax: 20)")
    weights: list[float] | None = None
    alpha: float = Field(default=0.5, ge=0.0, le=1.0, description="aethersearch-minmax: weight of the dense side")

    @model_validator(mode="after")
    def _weights_match(self) -> HybridConfig:
        if self.weights is not None and len(self.weights) != len(self.indexes):
            raise ConfigError(f"hybrid has {len(self.indexes)} indexes but {len(self.weights)} weights",
                              fix="give one weight per index, or none")
        return self

    @model_validator(mode="before")
    @classmethod
    def _minmax_depth(cls, data: Any) -> Any:
        """AetherSearch's fusion takes 20 hits per side (their --dense-topn / --bm25-topn) unless told otherwise."""
        if isinstance(data, dict) and data.get("fusion") == "aethersearch-minmax" and "depth" not in data:
            return {**data, "depth": MINMAX_DEPTH}
        return data


def rrf_fuse(rankings: Sequence[Sequence[tuple[str, float]]], k: int, k_rrf: int = 60,
             weights: Sequence[float] | None = None) -> list[tuple[str, float]]:
    """Fuse ranked lists of ``(doc_id, score)`` into the top ``k`` by reciprocal rank."""
    fused: dict[str, float] = {}
    best: dict[str, int] = {}
    for i, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[i]
        for rank, (doc_id, _) in enumerate(ranking, start=1):
            fused[doc_id] = fused.get(doc_id, 0.0) + weight / (k_rrf + rank)
            best[doc_id] = min(best.get(doc_id, rank), rank)
    order = sorted(fused, key=lambda d: (-fused[d], best[d], d))
    return [(d, fused[d]) for d in order[:k]]


def minmax(scores: Sequence[float]) -> list[float]:
    """AetherSearch's ``minmax``: scale to [0, 1]; a flat list (spread under 1e-12) becomes all 1.0."""
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi - lo < 1e-12:
        return [1.0 for _ in scores]
    return [(s - lo) / (hi - lo) for s in scores]


def minmax_fuse(dense: Sequence[tuple[str, float]], sparse: Sequence[tuple[str, float]], k: int,
                alpha: float = 0.5) -> list[tuple[str, float]]:
    """AetherSearch's hybrid fusion of one query's dense and sparse hits into the top ``k``."""
    combined: dict[str, list[float]] = {}
    for side, hits in ((0, dense), (1, sparse)):
        for (doc_id, _), score in zip(hits, minmax([s for _, s in hits]), strict=True):
            entry = combined.setdefault(doc_id, [0.0, 0.0])
            entry[side] = max(entry[side], score)
    ranked = [(doc_id, alpha * d + (1.0 - alpha) * s) for doc_id, (d, s) in combined.items()]
    ranked.sort(key=lambda pair: pair[1], reverse=True)  # stable: ties keep first appearance
    return ranked[:k]


class HybridIndex(IndexIdentity):
    """RRF over component indexes (satisfies ``search.base.SearchIndex``)."""

    backend = "hybrid"
    config_model = HybridConfig

    def __init__(self, components: list[SearchIndex], config: HybridConfig, corpus_hash: str, index_hash: str) -> None:
        self.components = components
        self.config = config
        self._corpus_hash = corpus_hash
        self._index_hash = index_hash

    @staticmethod
    def _open(config: HybridConfig, store: JsonlStore) -> list[Any]:
        from aethersearch.search.index_dir import open_index

        return [open_index(path, store=store) for path in config.indexes]

    @classmethod
    def prepare_config(cls, config: HybridConfig) -> HybridConfig:
        """Component paths made absolute, so the manifest still points at them after the build's rename."""
        return config.model_copy(update={"indexes": [str(Path(p).resolve()) for p in config.indexes]})

    @classmethod
    def build(cls, store: JsonlStore, config: HybridConfig, out_dir: Path,
              on_document: Callable[[int], None] | None = None) -> dict[str, Any]:
        """Check the components share ``store`` and record their hashes (nothing is re-indexed)."""
        opened = cls._open(config, store)
        atomic_write_json(out_dir / HYBRID_DIR / "components.json",
                          [{"path": p, "backend": o.manifest.backend, "index_hash": o.manifest.index_hash}
                           for p, o in zip(config.indexes, opened, strict=True)])
        if on_document is not None:
            on_document(len(store))
        return {"documents": len(store), "components": len(opened)}

    @classmethod
    def load(cls, index_dir: Path, manifest: IndexManifest, store: JsonlStore) -> HybridIndex:
        """Open every component against the shared store; refuse if one was rebuilt since."""
        config = HybridConfig.model_validate(manifest.config)
        opened = cls._open(config, store)
        recorded = loads((index_dir / HYBRID_DIR / "components.json").read_bytes())
        if len(recorded) != len(opened):
            raise IntegrityError(f"{index_dir}: the hybrid records {len(recorded)} components but its config names {len(opened)}",
                                 fix="rebuild the hybrid index")
        for entry, component in zip(recorded, opened, strict=True):
            if entry["index_hash"] != component.manifest.index_hash:
                raise IntegrityError(f"{index_dir}: component {entry['path']} changed since the hybrid was built",
                                     fix="rebuild the hybrid index")
        return cls([o.index for o in opened], config, manifest.corpus_hash, manifest.index_hash)

    def warm_up(self) -> None:
        """Warm every component that can be warmed (numba compile before serving)."""
        for component in self.components:
            component.warm_up()

    def _sides(self) -> tuple[SearchIndex, SearchIndex]:
        """The (dense, sparse) components, in that order, for the min-max fusion and for ``mode``."""
        kinds = [c.backend for c in self.components]
        dense = [c for c, b in zip(self.components, kinds, strict=True) if b in DENSE_BACKENDS]
        sparse = [c for c, b in zip(self.components, kinds, strict=True) if b in SPARSE_BACKENDS]
        if len(dense) != 1 or len(sparse) != 1 or len(self.components) != 2:
            raise ConfigError(f"this hybrid's components are {kinds}; AetherSearch's fusion and modes need one "
                              f"dense ({', '.join(sorted(DENSE_BACKENDS))}) and one sparse "
                              f"({', '.join(sorted(SPARSE_BACKENDS))})", fix="build the hybrid from a faiss and a bm25 index")
        return dense[0], sparse[0]

    def modes(self) -> dict[str, SearchIndex]:
        """AetherSearch's retrieval modes this index can serve: ``hybrid`` always, ``dense``/``sparse`` by component."""
        try:
            dense, sparse = self._sides()
        except ConfigError:
            return {"hybrid": self}
        return {"hybrid": self, "dense": dense, "sparse": sparse}

    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        """Top-``k`` fused ``(doc_id, score)`` per query (RRF score, or AetherSearch's fused min-max score)."""
        if k <= 0:
            return [[] for _ in queries]
        if self.config.fusion == "aethersearch-minmax":
            dense, sparse = (side.search(queries, self.config.depth) for side in self._sides())
            return [minmax_fuse(d, s, k, self.config.alpha) for d, s in zip(dense, sparse, strict=True)]
        depth = max(k, self.config.depth)
        per_component = [component.search(queries, depth) for component in self.components]
        return [rrf_fuse([results[q] for results in per_component], k, self.config.k_rrf, self.config.weights)
                for q in range(len(queries))]
