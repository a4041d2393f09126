"""BM25 index on bm25s: PyStemmer stemming, configurable stopwords, numba when installed.

Why bm25s: it stores the BM25 score of every (term, document) pair as a sparse
CSC matrix, so a query is a sum of a few memory-mapped columns; it is ~1,700x
faster than rank-bm25 and its arrays load with ``mmap=True``, so a 21M-passage
index opens without reading it into memory.

Scoring is bm25s's ``method`` (default ``lucene``: idf = ln(1 + (N - df + 0.5) /
(df + 0.5)), tf part = tf / (tf + k1 (1 - b + b |d| / avgdl))), summed over the
query's tokens (a repeated query token counts again). Tokenisation is bm25s's
default: lower-case, regex ``\\b\\w\\w+\\b``, stopword removal, then the stemmer.

Selective queries (postings <= ``sparse_max_fraction`` of the corpus, the common case
for questions) skip bm25s's N-sized score array and rank only the matched documents:
same per-(term, document) scores, summed in float64; measured ~6x faster at 1M
passages (benchmarks/search.py). Ties at the k-th place go to the earliest store
row there; bm25s's own top-k may pick any of the tied documents.

Never a phantom document: hits with score 0 (documents sharing no token with the
query, which bm25s's top-k would otherwise pad with) are dropped, ``k`` larger than
the corpus returns at most the corpus, and a query with no indexable token
returns no hits.
"""

from __future__ import annotations

import re
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import Field

from aethersearch.corpus.store import JsonlStore
from aethersearch.errors import ConfigError
from aethersearch.records import Record
from aethersearch.search.base import IndexManifest, StoreRowsIndex

__all__ = ["BM25Config", "BM25Index", "BM25_DIR", "Tokenizer", "TokenizerSettings", "document_text"]

BM25_DIR = "bm25"


class BM25Config(Record):
    """Everything that changes BM25 scores or speed (recorded in the index manifest)."""

    k1: float = Field(default=1.5, gt=0)
    b: float = Field(default=0.75, ge=0, le=1)
    method: Literal["lucene", "robertson", "atire"] = "lucene"
    stemmer: str | None = Field(default="english", description="PyStemmer language, or null for none")
    stopwords: str | list[str] | None = Field(default="en", description="'en', a list, or null for none")
    dtype: Literal["float32", "float64"] = "float32"
    numba: bool | None = Field(default=None, description="null = use numba when it is installed")
    n_threads: int = Field(default=0, ge=0, description="bm25s retrieval threads (0 = the calling thread)")
    sparse_max_fraction: float = Field(
        default=0.05, ge=0, le=1,
        description="rank only the matched documents when a query's postings are at most this fraction of the "
                    "corpus (0 = always use bm25s's dense score array)")


def _numba_available() -> bool:
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


class TokenizerSettings(Protocol):
    """The two settings tokenisation reads (both BM25 backends' configs have them)."""

    @property
    def stemmer(self) -> str | None: ...

    @property
    def stopwords(self) -> str | list[str] | None: ...


class Tokenizer:
    """bm25s's default tokenisation with PyStemmer: one object shared by build and query."""

    _SPLIT = re.compile(r"(?u)\b\w\w+\b")

    def __init__(self, config: TokenizerSettings) -> None:
        from bm25s.tokenization import _infer_stopwords

        words = config.stopwords
        self.stopwords = frozenset(_infer_stopwords(words) if isinstance(words, str) else (words or ()))
        self._language = config.stemmer
        self._local = threading.local()
        if config.stemmer:
            import Stemmer

            if config.stemmer not in Stemmer.algorithms():
                raise ConfigError(f"unknown stemmer language {config.stemmer!r}",
                                  fix=f"use one of {Stemmer.algorithms()} or null")

    @property
    def _stem(self) -> Callable[[list[str]], list[str]] | None:
        """This thread's stemmer: PyStemmer objects must not be shared between threads.

        Its word cache is switched off (``maxCacheSize = 0``). PyStemmer keeps up
        to 10,000 words per stemmer by default (~235 bytes each, measured), and
        there is one stemmer per thread that ever searched: a server's worker
        pool (40 threads under anyio) could grow to ~90 MB of cache, filling one
        distinct query word at a time, which is what made a long-running sandbox's
        memory creep with every finished episode (issue 36). Index builds do not
        need it either: they stem each distinct word once through their own map.
        Stemming uncached costs ~1.5 us more per three-word query.
        """
        if not self._language:
            return None
        stem = getattr(self._local, "stem", None)  # thread-local: each thread builds its own stemmer once
        if stem is None:
            import Stemmer

            stemmer = Stemmer.Stemmer(self._language)
            stemmer.maxCacheSize = 0
            stem = self._local.stem = stemmer.stemWords
        return stem  # type: ignore[no-any-return]

    def words(self, text: str) -> list[str]:
        """Lower-cased regex words of ``text``, before stopwords and stemming."""
        return self._SPLIT.findall(text.lower())

    def normalise(self, word: str) -> str | None:
        """The index token of one word (its stem), or None for a stopword."""
        if word in self.stopwords:
            return None
        stem = self._stem
        return stem([word])[0] if stem is not None else word

    def __call__(self, text: str) -> list[str]:
        tokens = [t for t in self.words(text) if t not in self.stopwords]
        stem = self._stem
        return stem(tokens) if stem is not None and tokens else tokens


def document_text(raw: dict[str, Any]) -> str:
    """What BM25 indexes for a document: its title and text (Search-R1's ``contents``)."""
    return f"{raw.get('title', '')}\n{raw.get('text', '')}"


class BM25Index(StoreRowsIndex):
    """A loaded BM25 index over a document store (satisfies ``search.base.SearchIndex``)."""

    backend = "bm25"
    config_model = BM25Config

    def __init__(self, retriever: Any, store: JsonlStore, config: BM25Config, corpus_hash: str,
                 index_hash: str) -> None:
        self._retriever = retriever
        self._store = store
        self.config = config
        self._corpus_hash = corpus_hash
        self._index_hash = index_hash
        self._tokenize = Tokenizer(config)
        self._vocab: dict[str, int] = retriever.vocab_dict
        self._n_docs = int(retriever.scores["num_docs"])

    def __len__(self) -> int:
        return self._n_docs

    # ------------------------------------------------------------------ build / load
    @classmethod
    def build(cls, store: JsonlStore, config: BM25Config, out_dir: Path,
              on_document: Callable[[int], None] | None = None) -> dict[str, Any]:
        """Tokenise every document of ``store`` and save the bm25s index under ``out_dir/bm25``.

        Token ids are kept as compact ``array('i')`` per document (4 bytes a token)
        rather than Python lists, which is what bounds peak memory at 1M+ passages.
        """
        import bm25s

        tokenize = Tokenizer(config)
        vocab: dict[str, int] = {}
        # raw word -> token id (-1 = stopword): each distinct word is stemmed once, which is
        # ~4x faster than stemming every occurrence (PyStemmer's own cache thrashes on big vocabularies).
        word_ids: dict[str, int] = {}

        def word_id(word: str) -> int:
            token = tokenize.normalise(word)
            found = -1 if token is None else vocab.setdefault(token, len(vocab))
            word_ids[word] = found
            return found

        corpus_ids: list[array[int]] = []
        started = time.perf_counter()
        for row in range(len(store)):
            ids = [word_ids[w] if w in word_ids else word_id(w) for w in tokenize.words(document_text(store.raw_at(row)))]
            corpus_ids.append(array("i", [i for i in ids if i >= 0]))
            if on_document is not None:
                on_document(row + 1)
        word_ids.clear()  # free it before the merge (the closure keeps the name)
        if not corpus_ids:
            raise ConfigError("cannot build a BM25 index over an empty corpus", fix="import a corpus with documents")
        tokenized_s = time.perf_counter() - started
        use_numba = _numba_available() if config.numba is None else config.numba
        retriever = bm25s.BM25(k1=config.k1, b=config.b, method=config.method, dtype=config.dtype,
                               backend="numba" if use_numba else "numpy")
        retriever.index((corpus_ids, vocab), show_progress=False)
        del corpus_ids
        retriever.save(str(out_dir / BM25_DIR))
        return {"documents": len(store), "vocabulary": len(vocab), "tokenize_s": round(tokenized_s, 3),
                "numba": use_numba}

    @classmethod
    def load(cls, index_dir: Path, manifest: IndexManifest, store: JsonlStore) -> BM25Index:
        """Open a saved index memory-mapped (``bm25s.BM25.load(..., mmap=True)``)."""
        import bm25s

        config = BM25Config.model_validate(manifest.config)
        use_numba = bool(manifest.build_stats.get("numba")) and (
            _numba_available() if config.numba is None else config.numba)
        retriever = bm25s.BM25.load(str(index_dir / BM25_DIR), mmap=True, show_progress=False,
                                    backend="numba" if use_numba else "numpy")
        return cls(retriever, store, config, manifest.corpus_hash, manifest.index_hash)

    # ------------------------------------------------------------------ search
    def warm_up(self) -> None:
        """Run both retrieval paths once, so numba compiles before a client waits on it.

        Selective queries take the sparse path and never touch bm25s's jitted code; without
        this the first common-word query after start-up stalls every queued request for the
        compile (measured ~8 s on this machine).
        """
        if self._n_docs and self._vocab:
            self._retriever.retrieve([[0]], k=1, show_progress=False, n_threads=self.config.n_threads)
            self._search_sparse([0], 1)

    def query_token_ids(self, query: str) -> list[int]:
        """The query's token ids in the index vocabulary (unknown tokens dropped)."""
        vocab = self._vocab
        return [vocab[t] for t in self._tokenize(query) if t in vocab]

    def search_rows(self, queries: Sequence[str], k: int) -> list[list[tuple[int, float]]]:
        """Top-``k`` ``(store row, score)`` per query, best first (ties: store order)."""
        results: list[list[tuple[int, float]]] = [[] for _ in queries]
        k_eff = min(int(k), self._n_docs)
        if k_eff <= 0 or not queries:
            return results
        token_ids = [self.query_token_ids(q) for q in queries]
        dense: list[int] = []
        for qi, ids in enumerate(token_ids):
            if not ids:
                continue
            if self._postings(ids) <= self._sparse_limit:
                results[qi] = self._search_sparse(ids, k_eff)
            else:
                dense.append(qi)
        if not dense:
            return results
        docs, scores = self._retriever.retrieve(
            [token_ids[i] for i in dense], k=k_eff, show_progress=False, n_threads=self.config.n_threads,
            return_as="tuple",
        )
        docs, scores = np.asarray(docs), np.asarray(scores)
        for row, qi in enumerate(dense):
            pairs = sorted(((float(s), int(d)) for d, s in zip(docs[row], scores[row], strict=True) if s > 0),
                           key=lambda p: (-p[0], p[1]))
            results[qi] = [(d, s) for s, d in pairs]
        return results

    # ------------------------------------------------------------------ selective queries
    @property
    def _sparse_limit(self) -> float:
        return self.config.sparse_max_fraction * self._n_docs

    def _postings(self, token_ids: list[int]) -> int:
        indptr = self._retriever.scores["indptr"]
        return int(sum(int(indptr[t + 1]) - int(indptr[t]) for t in token_ids))

    def _search_sparse(self, token_ids: list[int], k: int) -> list[tuple[int, float]]:
        """Top-``k`` ``(row, score)`` scoring only documents that contain a query token.

        bm25s allocates and scans an N-sized score array per query, which dominates at
        millions of passages; a selective query touches only its postings (the CSC
        columns of its tokens), so summing those with ``np.unique`` + ``np.bincount`` is
        much cheaper. The BM25 arithmetic is the same sum of the same stored per-(term,
        document) scores (a repeated query token counts again), accumulated in float64.
        """
        scores_csc = self._retriever.scores
        data, indices, indptr = scores_csc["data"], scores_csc["indices"], scores_csc["indptr"]
        spans = [(int(indptr[t]), int(indptr[t + 1])) for t in token_ids]
        rows = np.concatenate([indices[a:b] for a, b in spans])
        values = np.concatenate([data[a:b] for a, b in spans]).astype(np.float64)
        if not len(rows):
            return []
        docs, inverse = np.unique(rows, return_inverse=True)
        totals = np.bincount(inverse.ravel(), weights=values, minlength=len(docs))
        keep = totals > 0
        docs, totals = docs[keep], totals[keep]
        if len(docs) > k:
            kth = np.partition(totals, len(totals) - k)[len(totals) - k]
            chosen = totals >= kth  # every document tied with the k-th, so ties resolve by store order below
            docs, totals = docs[chosen], totals[chosen]
        order = np.lexsort((docs, -totals))[:k]
        return [(int(docs[i]), float(totals[i])) for i in order]
