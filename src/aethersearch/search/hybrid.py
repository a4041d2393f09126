"""Hybrid retrieval: reciprocal-rank fusion (RRF) of several indexes over the same store.

Why RRF (Cormack, Clarke & Buettcher, SIGIR 2009): BM25 and dense scores live on
different scales, so fusing by rank, ``score(d) = sum_i w_i / (k_rrf + rank_i(d))``,
needs no score calibration and is robust. Each component contributes its top
``depth`` hits; ties are broken by the best single rank, then by id, so fusion is
deterministic. The component indexes' hashes are stored as an artefact, so the
hybrid ``index_hash`` changes whenever a component changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from aethersearch.corpus.store import JsonlStore
from aethersearch.errors import ConfigError, IntegrityError
from aethersearch.jsonl import atomic_write_json, loads
from aethersearch.records import Record
from aethersearch.search.base import IndexIdentity, SearchIndex

HYBRID_DIR = "hybrid"


class HybridConfig(Record):
    """Component index directories (absolute after build), RRF constant, depth and weights."""

    indexes: list[str] = Field(min_length=1)
    k_rrf: int = Field(default=60, ge=1)
    depth: int = Field(default=100, ge=1, description="hits taken from each component")
    weights: list[float] | None = None

    @model_validator(mode="after")
    def _weights_match(self) -> HybridConfig:
        if self.weights is not None and len(self.weights) != len(self.indexes):
            raise ConfigError(f"hybrid has {len(self.indexes)} indexes but {len(self.weights)} weights",
                              fix="give one weight per index, or none")
        return self


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
                          [{"path": p, "backend": o.manifest["backend"], "index_hash": o.manifest["index_hash"]}
                           for p, o in zip(config.indexes, opened, strict=True)])
        if on_document is not None:
            on_document(len(store))
        return {"documents": len(store), "components": len(opened)}

    @classmethod
    def load(cls, index_dir: Path, manifest: dict[str, Any], store: JsonlStore) -> HybridIndex:
        """Open every component against the shared store; refuse if one was rebuilt since."""
        config = HybridConfig.model_validate(manifest["config"])
        opened = cls._open(config, store)
        recorded = loads((index_dir / HYBRID_DIR / "components.json").read_bytes())
        if len(recorded) != len(opened):
            raise IntegrityError(f"{index_dir}: the hybrid records {len(recorded)} components but its config names {len(opened)}",
                                 fix="rebuild the hybrid index")
        for entry, component in zip(recorded, opened, strict=True):
            if entry["index_hash"] != component.manifest["index_hash"]:
                raise IntegrityError(f"{index_dir}: component {entry['path']} changed since the hybrid was built",
                                     fix="rebuild the hybrid index")
        return cls([o.index for o in opened], config, manifest["corpus_hash"], manifest["index_hash"])

    def warm_up(self) -> None:
        """Warm every component that can be warmed (numba compile before serving)."""
        for component in self.components:
            warm = getattr(component, "warm_up", None)
            if callable(warm):
                warm()

    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        """Top-``k`` fused ``(doc_id, rrf score)`` per query."""
        if k <= 0:
            return [[] for _ in queries]
        depth = max(k, self.config.depth)
        per_component = [component.search(queries, depth) for component in self.components]
        return [rrf_fuse([results[q] for results in per_component], k, self.config.k_rrf, self.config.weights)
                for q in range(len(queries))]
