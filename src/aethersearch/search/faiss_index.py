"""Dense retrieval on faiss: exact Flat, approximate HNSW and IVF-PQ, and Search-R1's own index files.

Why faiss: it is the index format of the field. Search-R1 serves ``e5_Flat.index``
(an ``IndexFlatIP`` over e5-base-v2 embeddings of wiki-18) and row ``i`` of the index
is line ``i`` of ``wiki-18.jsonl``; our store keeps file order, so the same row maps to
the same passage. Building encodes every passage the way Search-R1's ``index_builder.py``
does (``search.encoders``: the ``contents`` string ``"Title"\\nText`` with the
``passage: `` prefix for e5) into ``faiss.index_factory(d, factory, METRIC_INNER_PRODUCT)``.

Approximate kinds (``HNSW32``, ``IVF4096,PQ64``, any factory string) record their
**recall@10 against exact search** in the build stats (``recall_at_10_vs_flat``): a
sample of stored vectors is searched in both and the overlap of the top 10 is averaged.
That number is part of the index's identity (manifest), so a run on an approximate index
says how approximate it was. ``efSearch`` / ``nprobe`` are config, hence in ``index_hash``.

``source_index`` serves an existing index file as is (``aether index import searchr1``):
it is linked, never copied or re-encoded, and its ``ntotal`` and dimension must match the
store and the encoder. Flat files are memory-mapped (``IO_FLAG_MMAP``) where faiss can.
With faiss-gpu and a GPU the index is cloned to all GPUs as Search-R1 does (fp16 storage,
sharded); otherwise it stays on CPU and a warning says so. ``describe()`` reports what
actually happened, for ``/health``.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from aethersearch.corpus.importers import row_contents
from aethersearch.corpus.store import JsonlStore
from aethersearch.errors import ConfigError, IntegrityError
from aethersearch.records import Record
from aethersearch.search.base import IndexManifest, StoreRowsIndex
from aethersearch.search.encoders import EncoderConfig, TransformerEncoder
from aethersearch.search.wire import WireRows, write_wire_rows

__all__ = ["FAISS_DIR", "FaissConfig", "FaissIndex", "INDEX_FILE", "LOG", "apply_search_knobs", "faiss_module",
    "import_searchr1", "measure_recall", "read_faiss_file", "recall_at_k", "served_type"]

FAISS_DIR = "faiss"
INDEX_FILE = "index.faiss"
LOG = logging.getLogger(__name__)


class FaissConfig(Record):
    """Index kind, search-time knobs, the encoder, and an optional existing index file."""

    factory: str = Field(default="Flat", description="faiss index_factory string: Flat, HNSW32, IVF4096,PQ64, ...")
    encoder: EncoderConfig = EncoderConfig()
    source_index: str | None = Field(default=None, description="serve this faiss file as is (absolute path)")
    gpu: Literal["auto", "off", "require"] = "auto"
    ef_search: int = Field(default=128, ge=1, description="HNSW efSearch")
    nprobe: int = Field(default=64, ge=1, description="IVF lists visited per query")
    train_size: int = Field(default=262_144, ge=1, description="vectors sampled to train IVF/PQ")
    recall_queries: int = Field(default=1000, ge=1, description="stored vectors used to measure recall@10")
    seed: int = 0
    wire_rows_url_prefix: str | None = Field(
        default=None, min_length=1,
        description="pre-encode every row's /retrieve hit for this url prefix (search.wire: about twice the "
                    "corpus text on disk; hits then cost a slice each)")


def faiss_module() -> Any:
    """The faiss module; a ConfigError naming the extra when it is not installed."""
    try:
        import faiss
    except ImportError:
        raise ConfigError("the faiss backend needs faiss", fix="pip install 'aethersearch[faiss]' "
                                                                "(or faiss-gpu on a CUDA machine)") from None
    return faiss


def _new_index(faiss: Any, dimension: int, factory: str) -> Any:
    try:
        return faiss.index_factory(dimension, factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as exc:
        raise ConfigError(f"faiss cannot build index kind {factory!r} at dimension {dimension}: "
                          f"{str(exc).strip().splitlines()[-1]}",
                          fix="use Flat, HNSW32 or IVF<lists>,PQ<m> with m dividing the dimension") from None


def _train(faiss: Any, index: Any, vectors: np.ndarray, config: FaissConfig) -> None:
    if index.is_trained:
        return
    ivf = faiss.try_extract_index_ivf(index)
    lists = int(ivf.nlist) if ivf is not None else 0
    if len(vectors) < max(lists, 1):
        raise ConfigError(f"index kind {config.factory!r} needs at least {lists} training vectors; the corpus "
                          f"has {len(vectors)}", fix="use fewer IVF lists (about sqrt(documents)), or Flat/HNSW32")
    rng = np.random.default_rng(config.seed)
    take = np.sort(rng.choice(len(vectors), min(config.train_size, len(vectors)), replace=False))
    index.train(np.ascontiguousarray(vectors[take]))


def apply_search_knobs(faiss: Any, index: Any, config: FaissConfig) -> None:
    """Set efSearch / nprobe on whichever layer has them (no-op for Flat)."""
    # dynamic by nature: only the HNSW index types carry an ``hnsw`` layer, and faiss has several of them
    hnsw = getattr(faiss.downcast_index(index), "hnsw", None)
    if hnsw is not None:
        hnsw.efSearch = config.ef_search
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is not None:
        ivf.nprobe = config.nprobe


def recall_at_k(exact: np.ndarray, approx: np.ndarray) -> float:
    """Mean fraction of each row of ``exact`` ids found in the same row of ``approx`` (-1 = no hit)."""
    found = [len(set(e[e >= 0].tolist()) & set(a[a >= 0].tolist())) / max(1, int((e >= 0).sum()))
             for e, a in zip(exact, approx, strict=True)]
    return float(np.mean(found)) if found else 1.0


def measure_recall(faiss: Any, index: Any, vectors: np.ndarray, config: FaissConfig, k: int = 10) -> float:
    """recall@k of ``index`` against exact inner-product search, on a seeded sample of stored vectors."""
    rng = np.random.default_rng(config.seed + 1)
    sample = np.ascontiguousarray(vectors[np.sort(rng.choice(len(vectors), min(config.recall_queries, len(vectors)),
                                                             replace=False))])
    _, exact = faiss.knn(sample, np.ascontiguousarray(vectors), min(k, len(vectors)), metric=faiss.METRIC_INNER_PRODUCT)
    _, approx = index.search(sample, min(k, len(vectors)))
    return round(recall_at_k(exact, approx), 4)


def served_type(faiss: Any, index: Any) -> str:
    """The index's class as a reader of its file sees it (``index_factory``'s ``IndexFlat`` reads back as ``IndexFlatIP``)."""
    name = type(faiss.downcast_index(index)).__name__
    if name == "IndexFlat":
        return "IndexFlatIP" if index.metric_type == faiss.METRIC_INNER_PRODUCT else "IndexFlatL2"
    return name


def _to_device(faiss: Any, index: Any, mode: str) -> tuple[Any, bool]:
    """The index on all GPUs when wanted and possible (Search-R1's cloner options), else on CPU."""
    if mode == "off":
        return index, False
    if faiss.get_num_gpus() > 0:  # faiss-cpu answers 0
        options = faiss.GpuMultipleClonerOptions()
        options.useFloat16 = True
        options.shard = True
        return faiss.index_cpu_to_all_gpus(index, co=options), True
    if mode == "require":
        raise ConfigError("gpu=require but faiss sees no GPU (or this faiss has no GPU support)",
                          fix="install faiss-gpu on a CUDA machine, or use gpu=auto")
    LOG.warning("faiss: no GPU faiss available (faiss-cpu, or no CUDA device); searching on CPU")
    return index, False


def read_faiss_file(faiss: Any, path: Path) -> Any:
    """Read an index file, memory-mapped when faiss supports it for this kind (Flat), else into memory."""
    try:
        return faiss.read_index(str(path), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
    except RuntimeError:
        try:
            return faiss.read_index(str(path))
        except RuntimeError as exc:
            raise IntegrityError(f"{path}: not a readable faiss index ({str(exc).strip().splitlines()[-1]})",
                                 fix="pass the .index file written by faiss.write_index") from None


class FaissIndex(StoreRowsIndex):
    """Dense retrieval over a faiss index (satisfies ``search.base.SearchIndex``)."""

    backend = "faiss"
    config_model = FaissConfig

    def __init__(self, index: Any, encoder: Any, store: JsonlStore, config: FaissConfig, corpus_hash: str,
                 index_hash: str, *, gpu_enabled: bool, cpu_type: str, wire_rows: WireRows | None = None) -> None:
        self.index = index
        self.wire_rows = wire_rows  # pre-encoded hits, read by the server (see search.wire)
        self.encoder = encoder
        self._store = store
        self.config = config
        self._corpus_hash = corpus_hash
        self._index_hash = index_hash
        self.gpu_enabled = gpu_enabled
        self.cpu_type = cpu_type
        self._size = len(store)
        self._dimension = int(index.d)
        self._search_c = index.search_c
        self._swig_ptr = faiss_module().swig_ptr

    @classmethod
    def prepare_config(cls, config: FaissConfig) -> FaissConfig:
        """An imported index path made absolute, so the manifest still finds it after the build's rename."""
        if config.source_index is None:
            return config
        return config.model_copy(update={"source_index": str(Path(config.source_index).resolve())})

    @classmethod
    def build(cls, store: JsonlStore, config: FaissConfig, out_dir: Path,
              on_document: Callable[[int], None] | None = None) -> dict[str, Any]:
        """Encode the store into a new index, or link and check an existing one (``source_index``)."""
        faiss = faiss_module()
        (out_dir / FAISS_DIR).mkdir(parents=True, exist_ok=True)
        target = out_dir / FAISS_DIR / INDEX_FILE
        encoder = TransformerEncoder(config.encoder)
        if config.source_index is not None:
            stats = cls._link(faiss, store, config, encoder, target, on_document)
        else:
            stats = cls._encode(faiss, store, config, encoder, out_dir, on_document)
        if config.wire_rows_url_prefix is not None:
            stats["wire_rows"] = write_wire_rows(store, out_dir / FAISS_DIR, config.wire_rows_url_prefix)
        return stats

    @classmethod
    def _encode(cls, faiss: Any, store: JsonlStore, config: FaissConfig, encoder: TransformerEncoder, out_dir: Path,
                on_document: Callable[[int], None] | None) -> dict[str, Any]:
        target = out_dir / FAISS_DIR / INDEX_FILE
        vectors_file = tempfile.NamedTemporaryFile(prefix="aether-faiss-", suffix=".f32", dir=out_dir, delete=False)
        vectors_file.close()
        try:
            vectors = np.memmap(vectors_file.name, dtype=np.float32, mode="w+", shape=(len(store), encoder.dimension))
            step = config.encoder.batch_size
            for start in range(0, len(store), step):
                rows = [store.raw_at(r) for r in range(start, min(start + step, len(store)))]
                vectors[start:start + len(rows)] = encoder.encode([row_contents(r) for r in rows], is_query=False)
                if on_document is not None:
                    on_document(start + len(rows))
            index = _new_index(faiss, encoder.dimension, config.factory)
            _train(faiss, index, vectors, config)
            for start in range(0, len(store), 65_536):
                index.add(np.ascontiguousarray(vectors[start:start + 65_536]))
            apply_search_knobs(faiss, index, config)
            exact = served_type(faiss, index).startswith("IndexFlat")
            recall = 1.0 if exact else measure_recall(faiss, index, vectors, config)
            faiss.write_index(index, str(target))
            del vectors
        finally:
            os.unlink(vectors_file.name)
        return {"documents": len(store), "dimension": encoder.dimension, "index_type": served_type(faiss, index),
                "recall_at_10_vs_flat": recall, "index_bytes": target.stat().st_size}

    @classmethod
    def _link(cls, faiss: Any, store: JsonlStore, config: FaissConfig, encoder: TransformerEncoder, target: Path,
              on_document: Callable[[int], None] | None) -> dict[str, Any]:
        source = Path(str(config.source_index))
        if not source.is_file():
            raise ConfigError(f"faiss index {source} does not exist", fix="pass the path of e5_Flat.index")
        index = read_faiss_file(faiss, source)
        if int(index.ntotal) != len(store):
            raise IntegrityError(f"{source} holds {index.ntotal:,} vectors but the corpus has {len(store):,} passages",
                                 fix="pass the corpus file the index was built from (row i = line i)")
        if int(index.d) != encoder.dimension:
            raise IntegrityError(f"{source} has dimension {index.d} but encoder {config.encoder.model!r} gives "
                                 f"{encoder.dimension}", fix="pass the encoder the index was built with (--encoder)")
        os.symlink(source, target)
        if on_document is not None:
            on_document(len(store))
        return {"documents": len(store), "dimension": int(index.d), "index_type": served_type(faiss, index),
                "imported_from": str(source), "index_bytes": source.stat().st_size}

    @classmethod
    def load(cls, index_dir: Path, manifest: IndexManifest, store: JsonlStore) -> FaissIndex:
        """Read (memory-mapped where possible) the index file, move it to GPU when possible, load the encoder."""
        faiss = faiss_module()
        config = FaissConfig.model_validate(manifest.config)
        cpu_index = read_faiss_file(faiss, index_dir / FAISS_DIR / INDEX_FILE)
        apply_search_knobs(faiss, cpu_index, config)
        cpu_type = served_type(faiss, cpu_index)
        index, on_gpu = _to_device(faiss, cpu_index, config.gpu)
        wire_rows = (WireRows(index_dir / FAISS_DIR, config.wire_rows_url_prefix, len(store))
                     if config.wire_rows_url_prefix is not None else None)
        return cls(index, TransformerEncoder(config.encoder), store, config, manifest.corpus_hash,
                   manifest.index_hash, gpu_enabled=on_gpu, cpu_type=cpu_type, wire_rows=wire_rows)

    def _row_hits(self, vectors: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
        x = np.ascontiguousarray(vectors, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != self._dimension:  # faiss's C++ would read past the array
            raise IntegrityError(f"the encoder gave vectors of shape {x.shape}; the index has dimension "
                                 f"{self._dimension}", fix="serve the index with the encoder it was built with")
        k = min(int(k), self._size)
        scores = np.empty((len(x), k), dtype=np.float32)
        rows = np.empty((len(x), k), dtype=np.int64)
        # faiss's own C++ call, not its Python ``search`` wrapper (argument checks and allocations done here
        # once): through the wrapper one query per call is 0.76 of bare faiss on HNSW32 at 1M, all of it Python
        self._search_c(len(x), self._swig_ptr(x), k, self._swig_ptr(scores), self._swig_ptr(rows))
        # one tolist per array, not per row: iterating numpy rows cost twice the rest of this method
        return [[(r, s) for r, s in zip(row, score, strict=True) if r >= 0]
                for row, score in zip(rows.tolist(), scores.tolist(), strict=True)]

    def search_rows(self, queries: Sequence[str], k: int) -> list[list[tuple[int, float]]]:
        """Top-``k`` ``(store row, inner product)`` per query, best first; empty queries return no hits."""
        results: list[list[tuple[int, float]]] = [[] for _ in queries]
        live = [i for i, q in enumerate(queries) if q.strip()]
        if k <= 0 or not live or len(self._store) == 0:
            return results
        hits = self._row_hits(self.encoder.encode([queries[i] for i in live], is_query=True), k)
        for i, found in zip(live, hits, strict=True):
            results[i] = found
        return results

    def describe(self) -> dict[str, Any]:
        """AetherSearch's ``/health`` facts, as they are: the served index's class and whether it is on GPU."""
        return {"index_ntotal": int(self.index.ntotal), "embedding_dimension": int(self.index.d),
                "index_type": type(self.index).__name__ if self.gpu_enabled else self.cpu_type,
                "faiss_gpu_enabled": self.gpu_enabled}


def import_searchr1(faiss_file: str | Path, corpus: str | Path, encoder: str, out_dir: str | Path, *,
                    retriever_name: str = "e5", overwrite: bool = False,
                    on_document: Callable[[str, int, int], None] | None = None,
                    wire_rows_url_prefix: str | None = None) -> Any:
    """Serve Search-R1's ``e5_Flat.index`` + ``wiki-18.jsonl`` as an index directory, without re-encoding.

    The corpus is imported into a memory-mapped store in file order (row i = index row i);
    the index file is linked; the encoder follows Search-R1's conventions for ``retriever_name``.
    """
    from aethersearch.search.encoders import searchr1_conventions
    from aethersearch.search.index_dir import build_index

    config = FaissConfig(encoder=searchr1_conventions(retriever_name, encoder), source_index=str(faiss_file),
                         wire_rows_url_prefix=wire_rows_url_prefix)
    return build_index(corpus, "faiss", out_dir, config=config.model_dump(), corpus_format="jsonl",
                       overwrite=overwrite, on_document=on_document)
