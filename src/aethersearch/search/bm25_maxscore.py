"""BM25 at wiki-18 scale: a streaming-built impact index searched exactly with MaxScore.

Why a second BM25 backend: bm25s scores a query by allocating and scanning an
N-sized array, 65-100 ms a query at 21M passages; its build also keeps every
document's tokens in memory. This backend builds its CSR posting index in a
streaming pass (``impact_build``) and answers with MaxScore dynamic pruning
(``maxscore``), which touches only the documents that can still enter the top-k.
Its results are exactly those of exhaustive BM25 over the same impacts (same
scores, ties by store row), which the tests check against brute force.

Tokenisation is the ``bm25`` backend's (bm25s's regex, stopwords, PyStemmer), and
impacts follow bm25s's ``lucene``/``atire`` formulas, so both backends rank alike;
the default stopwords (``en``) are Lucene's 33-word English list, the one pyserini's
default analyzer (Search-R1's wiki-18 retriever) and PISA's ``lucene`` list use.
Question words ("who", "when", "which") stay tokens, as there: they are common, so
their bounds are low and MaxScore only looks them up, and dropping them would rank
differently from the retrievers the field's numbers come from.
the arrays use bm25s's CSC layout, so ``benchmarks/search_scale.py`` runs bm25s's
own scorer on this very index for the side-by-side figure.

Without numba (the ``fast`` extra) the same exact results come from a numpy
accumulator over the query's postings (slower on common words).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import orjson
from pydantic import Field

from aethersearch.corpus.store import JsonlStore
from aethersearch.errors import DataError
from aethersearch.jsonl import atomic_write_bytes
from aethersearch.records import Record
from aethersearch.search.base import IndexManifest, StoreRowsIndex
from aethersearch.search.bm25 import Tokenizer, document_text
from aethersearch.search.impact_build import (
    bytes_per_posting,
    load_csr,
    tokenise_into_runs,
    write_csr,
)
from aethersearch.search.maxscore import maxscore_topk, numba_available

__all__ = ["BM25MaxScoreConfig", "BM25MaxScoreIndex", "INDEX_DIR", "VOCAB"]

INDEX_DIR = "bm25-maxscore"
VOCAB = "vocab.json"


class BM25MaxScoreConfig(Record):
    """Everything that changes this backend's scores or build memory (recorded in the manifest)."""

    k1: float = Field(default=1.5, gt=0)
    b: float = Field(default=0.75, ge=0, le=1)
    method: Literal["lucene", "atire"] = Field(
        default="lucene", description="bm25s idf variants whose impacts are never negative (pruning needs that)")
    stemmer: str | None = Field(default="english", description="PyStemmer language, or null for none")
    stopwords: str | list[str] | None = Field(default="en", description="'en', a list, or null for none")
    chunk_tokens: int = Field(default=20_000_000, ge=1, description="build: token ids held before a spill")
    range_postings: int = Field(default=32_000_000, ge=1, description="build: postings merged per write")


class BM25MaxScoreIndex(StoreRowsIndex):
    """A loaded impact index over a document store (satisfies ``search.base.SearchIndex``)."""

    backend = "bm25-maxscore"
    config_model = BM25MaxScoreConfig

    def __init__(self, directory: Path, store: JsonlStore, config: BM25MaxScoreConfig, corpus_hash: str,
                 index_hash: str) -> None:
        self._store = store
        self.config = config
        self._corpus_hash = corpus_hash
        self._index_hash = index_hash
        self._tokenize = Tokenizer(config)
        tokens: list[str] = orjson.loads((directory / VOCAB).read_bytes())
        self._vocab = {t: i for i, t in enumerate(tokens)}
        self.indptr, self.docs, self.impacts, self.max_impact, self.blocks = load_csr(directory)
        if len(self.indptr) != len(tokens) + 1:
            raise DataError(directory / VOCAB, f"{len(tokens)} tokens but indptr has {len(self.indptr)} entries",
                            fix="rebuild the index")
        self._n_docs = len(store)

    def __len__(self) -> int:
        return self._n_docs

    # ------------------------------------------------------------------ build / load
    @classmethod
    def build(cls, store: JsonlStore, config: BM25MaxScoreConfig, out_dir: Path,
              on_document: Callable[[int], None] | None = None) -> dict[str, Any]:
        """Stream ``store`` once into spilled runs, then merge them into ``out_dir/bm25-maxscore``."""
        tokenize = Tokenizer(config)
        vocab: dict[str, int] = {}
        # raw word -> token id (-1 = stopword): each distinct word is stemmed once
        word_ids: dict[str, int] = {}

        def word_id(word: str) -> int:
            token = tokenize.normalise(word)
            found = -1 if token is None else vocab.setdefault(token, len(vocab))
            word_ids[word] = found
            return found

        def token_ids(text: str) -> list[int]:
            ids = [word_ids[w] if w in word_ids else word_id(w) for w in tokenize.words(text)]
            return [i for i in ids if i >= 0]

        target = out_dir / INDEX_DIR
        target.mkdir(parents=True, exist_ok=True)
        texts = (document_text(store.raw_at(row)) for row in range(len(store)))
        spill_dir = Path(tempfile.mkdtemp(prefix="spill.", dir=out_dir))
        spill, doc_len = tokenise_into_runs(texts, token_ids, spill_dir, lambda: len(vocab),
                                            config.chunk_tokens, on_document)
        word_ids.clear()  # free it before the merge (the closure keeps the name)
        stats = write_csr(spill, doc_len, len(vocab), target, k1=config.k1, b=config.b, method=config.method,
                          range_postings=config.range_postings)
        ordered = sorted(vocab, key=vocab.__getitem__)
        atomic_write_bytes(target / VOCAB, orjson.dumps(ordered))
        return {**stats._asdict(), "bytes_per_posting": round(bytes_per_posting(target), 3),
                "numba": numba_available()}

    @classmethod
    def load(cls, index_dir: Path, manifest: IndexManifest, store: JsonlStore) -> BM25MaxScoreIndex:
        """Open a saved index; the posting arrays are memory-mapped."""
        config = BM25MaxScoreConfig.model_validate(manifest.config)
        return cls(index_dir / INDEX_DIR, store, config, manifest.corpus_hash, manifest.index_hash)

    # ------------------------------------------------------------------ search
    def warm_up(self) -> None:
        """Compile the MaxScore kernel (numba) before a client waits on it."""
        if self._vocab:
            self.topk_rows([0], 1)

    def query_token_ids(self, query: str) -> list[int]:
        """The query's token ids in order, repeats kept, unknown tokens dropped."""
        vocab = self._vocab
        return [vocab[t] for t in self._tokenize(query) if t in vocab]

    def topk_rows(self, token_ids: Sequence[int], k: int) -> list[tuple[int, float]]:
        """Exact top-``k`` ``(store row, score)`` for one tokenised query, best first (the MaxScore kernel)."""
        rows, scores = maxscore_topk(self.indptr, self.docs, self.impacts, self.max_impact, self.blocks,
                                     np.asarray(token_ids, dtype=np.int64), min(int(k), self._n_docs))
        return list(zip(rows.tolist(), scores.tolist(), strict=True))

    def search_rows(self, queries: Sequence[str], k: int) -> list[list[tuple[int, float]]]:
        """Top-``k`` ``(store row, score)`` per query, best first (ties: store order)."""
        return [self.topk_rows(self.query_token_ids(q), k) for q in queries]

