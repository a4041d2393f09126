"""Streaming build of a BM25 impact index (CSR by term) with bounded memory.

Why streaming: at wiki-18 scale (21M passages, ~1.4 billion postings) holding every
document's token list in memory, as bm25s's ``index`` does, does not fit a shared
24 GiB machine. Here documents are tokenised once, in row order, into chunks of at
most ``chunk_tokens`` token ids; each chunk becomes sorted ``(term, row, tf)`` runs
spilled to disk. Once every document length is known (BM25 needs the corpus average),
the runs are merged term range by term range into the final arrays, each range
filled in memory and written sequentially, so peak memory is one chunk plus one
range buffer plus the vocabulary, whatever the corpus size.

Impacts follow bm25s's formulas (idf by ``method``, tf part ``tf / (tf + k1 (1 - b +
b |d| / avgdl))``), computed in float64, stored as float32 on the scoring contract's
fixed-point grid (``maxscore.snap``: the same fixed-point value, so the same scores).
"""

from __future__ import annotations

import shutil
from array import array
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from aethersearch.errors import ConfigError, DataError
from aethersearch.search.maxscore import Blocks, OffGridError, block_maxima, snap

__all__ = ["BLOCK_FILES", "BuildStats", "NpyFile", "bytes_per_posting", "idf", "impacts_of", "load_csr",
    "tokenise_into_runs", "write_blocks", "write_csr"]

INDPTR, DOCS, IMPACTS, MAX_IMPACT = "indptr.npy", "docs.npy", "impacts.npy", "max_impact.npy"
# the pruning bounds, one file per field of maxscore.Blocks, in its order
BLOCK_FILES = ("block_ptr.npy", "block_max.npy", "block_first.npy", "block_last.npy", "term_kth.npy",
               "term_lowest.npy")


class NpyFile:
    """A ``.npy`` array read and written in slices through file I/O, never memory-mapped.

    Why: pages of a memory-mapped file count in the process's resident set while it runs,
    so a build that maps its 10 GB output reports a peak RSS near the machine's memory
    although the kernel can drop those pages at will. Slices read into and written from
    ordinary buffers keep the build's resident set what it really needs (one range).
    """

    def __init__(self, path: Path, dtype: Any = None, shape: tuple[int, ...] | None = None) -> None:
        if shape is not None:  # create: the header, and the file at its full (sparse) length
            np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=shape).flush()
        view = np.load(path, mmap_mode="r")  # only to learn the header's length; no page is read
        self.path, self.dtype, self.offset = path, view.dtype, int(view.offset)
        del view

    def read(self, start: int, stop: int) -> npt.NDArray[Any]:
        return np.fromfile(self.path, dtype=self.dtype, count=stop - start,
                           offset=self.offset + start * self.dtype.itemsize)

    def write(self, start: int, values: npt.NDArray[Any]) -> None:
        with self.path.open("r+b") as handle:
            handle.seek(self.offset + start * self.dtype.itemsize)
            np.ascontiguousarray(values, dtype=self.dtype).tofile(handle)


class BuildStats(NamedTuple):
    """What the build measured: sizes for the manifest and the benchmark."""

    documents: int
    vocabulary: int
    postings: int
    avg_doc_len: float
    chunks: int


def idf(method: str, n_docs: int, df: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """Per-term idf in float64 for the non-negative bm25s methods (``lucene``, ``atire``)."""
    d = df.astype(np.float64)
    if method == "lucene":
        return np.log1p((n_docs - d + 0.5) / (d + 0.5))
    if method == "atire":
        return np.log(n_docs / np.maximum(d, 1.0))
    raise ConfigError(f"BM25 method {method!r} has no non-negative impacts", fix="use 'lucene' or 'atire'")


def impacts_of(tf: npt.NDArray[Any], doc_len: npt.NDArray[Any], term_idf: npt.NDArray[np.float64],
               k1: float, b: float, avg_doc_len: float) -> npt.NDArray[np.float32]:
    """float32 BM25 impact of each (tf, document length, term idf) triple, on the grid: the one scoring rule."""
    tf64 = tf.astype(np.float64)
    norm = k1 * (1.0 - b + b * doc_len.astype(np.float64) / avg_doc_len)
    return snap((term_idf * (tf64 / (tf64 + norm))).astype(np.float32))


class _Spill:
    """Sorted ``(term, row, tf)`` runs of consecutive row ranges, saved as .npy files."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.runs: list[Path] = []
        self.df = np.zeros(0, np.int64)

    def add(self, tokens: array[int], bounds: array[int], first_row: int, vocab_size: int) -> None:
        """Turn one chunk (token ids, per-document end offsets) into a sorted run."""
        ids = np.frombuffer(tokens, dtype=np.int32).astype(np.int64)
        ends = np.frombuffer(bounds, dtype=np.int64)
        n_docs = len(ends)
        local = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(ends, prepend=0))
        keys, tf = np.unique(ids * n_docs + local, return_counts=True)
        terms = (keys // n_docs).astype(np.int32)
        rows = (keys % n_docs + first_row).astype(np.int32)
        path = self.directory / f"run{len(self.runs):05d}"
        for name, values in (("terms", terms), ("rows", rows), ("tf", tf.astype(np.int32))):
            np.save(path.with_suffix(f".{name}.npy"), values)  # separate .npy files: the merge memory-maps them
        self.runs.append(path)
        counts = np.bincount(terms, minlength=vocab_size)
        if len(self.df) < vocab_size:
            self.df = np.concatenate([self.df, np.zeros(vocab_size - len(self.df), np.int64)])
        self.df[: len(counts)] += counts


def tokenise_into_runs(texts: Iterable[str], tokenize: Callable[[str], list[int]], spill_dir: Path,
                       vocab_size: Callable[[], int], chunk_tokens: int,
                       on_document: Callable[[int], None] | None) -> tuple[_Spill, npt.NDArray[np.int32]]:
    """Pass 1: token ids per document, spilled in chunks; returns the runs and document lengths."""
    spill = _Spill(spill_dir)
    lengths = array("i")
    tokens: array[int] = array("i")
    bounds: array[int] = array("q")
    first_row = 0
    row = 0
    for row, text in enumerate(texts, start=1):
        ids = tokenize(text)
        tokens.extend(ids)
        bounds.append(len(tokens))
        lengths.append(len(ids))
        if len(tokens) >= chunk_tokens:
            spill.add(tokens, bounds, first_row, vocab_size())
            first_row = row
            tokens, bounds = array("i"), array("q")
        if on_document is not None and (row % 1000 == 0):
            on_document(row)
    if bounds:
        spill.add(tokens, bounds, first_row, vocab_size())
    if on_document is not None:
        on_document(row)
    return spill, np.frombuffer(lengths, dtype=np.int32).copy()


def write_csr(spill: _Spill, doc_len: npt.NDArray[np.int32], vocab_size: int, out_dir: Path, *, k1: float,
              b: float, method: str, range_postings: int) -> BuildStats:
    """Pass 2: merge the runs into ``indptr``/``docs``/``impacts``/``max_impact`` under ``out_dir``."""
    n_docs = len(doc_len)
    if n_docs == 0:
        raise ConfigError("cannot build a BM25 index over an empty corpus", fix="import a corpus with documents")
    df = np.zeros(vocab_size, np.int64)
    df[: len(spill.df)] = spill.df[:vocab_size]
    avg = float(doc_len.mean()) or 1.0
    term_idf = idf(method, n_docs, df)
    indptr = np.zeros(vocab_size + 1, np.int64)
    np.cumsum(df, out=indptr[1:])
    total = int(indptr[-1])
    out_dir.mkdir(parents=True, exist_ok=True)
    np.save(out_dir / INDPTR, indptr)
    docs_out = NpyFile(out_dir / DOCS, np.int32, (total,))
    imp_out = NpyFile(out_dir / IMPACTS, np.float32, (total,))
    max_impact = np.zeros(vocab_size, np.float64)
    runs = [{name: NpyFile(p.with_suffix(f".{name}.npy")) for name in ("terms", "rows", "tf")} for p in spill.runs]
    # the term ids are also mapped, only to be bisected (a few pages per range)
    run_terms = [np.load(p.with_suffix(".terms.npy"), mmap_mode="r") for p in spill.runs]
    start_term = 0
    while start_term < vocab_size:
        # the largest term range whose postings fit one buffer (at least one term)
        limit = int(indptr[start_term]) + max(range_postings, 1)
        stop_term = max(int(np.searchsorted(indptr, limit, side="right")) - 1, start_term + 1)
        stop_term = min(stop_term, vocab_size)
        base, top = int(indptr[start_term]), int(indptr[stop_term])
        buf_docs = np.empty(top - base, np.int32)
        buf_imp = np.empty(top - base, np.float32)
        fill = indptr[start_term:stop_term].copy() - base
        for run, terms in zip(runs, run_terms, strict=True):
            lo, hi = np.searchsorted(terms, [start_term, stop_term])
            if lo == hi:
                continue
            t = run["terms"].read(lo, hi).astype(np.int64)
            rows = run["rows"].read(lo, hi)
            tf = run["tf"].read(lo, hi)
            uniq, first, counts = np.unique(t, return_index=True, return_counts=True)
            dest = np.repeat(fill[uniq - start_term] - first, counts) + np.arange(len(t))
            fill[uniq - start_term] += counts
            buf_docs[dest] = rows
            buf_imp[dest] = impacts_of(tf, doc_len[rows], term_idf[t], k1, b, avg)
        docs_out.write(base, buf_docs)
        imp_out.write(base, buf_imp)
        nonempty = np.flatnonzero(df[start_term:stop_term] > 0)
        if len(nonempty) and top > base:
            starts = indptr[start_term:stop_term][nonempty] - base
            max_impact[start_term + nonempty] = np.maximum.reduceat(buf_imp, starts).astype(np.float64)
        start_term = stop_term
    del runs, run_terms
    np.save(out_dir / MAX_IMPACT, max_impact)
    chunks = len(spill.runs)
    shutil.rmtree(spill.directory, ignore_errors=True)
    write_blocks(out_dir, range_postings)
    return BuildStats(n_docs, vocab_size, total, round(avg, 4), chunks)


def write_blocks(directory: Path, range_postings: int) -> int:
    """Write the pruning bounds (block maxima, per-term k-th impacts) of the CSR index in ``directory``.

    A pass of its own, term range by term range over the just-written arrays, so that one
    code path serves a fresh build and an index built before the bounds existed. Returns
    the block count.
    """
    indptr = np.load(directory / INDPTR)
    docs, impacts = NpyFile(directory / DOCS), NpyFile(directory / IMPACTS)
    vocab_size = len(indptr) - 1
    parts: list[Blocks] = []
    start_term = 0
    while start_term < vocab_size:
        limit = int(indptr[start_term]) + max(range_postings, 1)
        stop_term = min(max(int(np.searchsorted(indptr, limit, side="right")) - 1, start_term + 1), vocab_size)
        base, top = int(indptr[start_term]), int(indptr[stop_term])
        try:
            parts.append(block_maxima(np.diff(indptr[start_term:stop_term + 1]), docs.read(base, top),
                                      impacts.read(base, top)))
        except OffGridError as exc:  # an index built before impacts were snapped, with impacts below 2**-17
            raise DataError(impacts.path, f"{exc.count} impacts of terms {start_term}..{stop_term - 1} are off the "
                            "fixed-point grid (built by an earlier release)", fix="rebuild the index") from exc
        start_term = stop_term
    if not parts:  # an empty vocabulary (every word a stopword)
        parts.append(block_maxima(np.zeros(0, np.int64), np.empty(0, np.int32), np.empty(0, np.float32)))
    ptr = np.zeros(vocab_size + 1, np.int64)
    offset, at = 0, 0
    for part in parts:
        ptr[at + 1: at + len(part.ptr)] = part.ptr[1:] + offset
        at += len(part.ptr) - 1
        offset += int(part.ptr[-1])
    merged = [ptr, *(np.concatenate([getattr(x, field) for x in parts]) for field in ("max", "first", "last", "kth", "lowest"))]
    for name, values in zip(BLOCK_FILES, merged, strict=True):
        np.save(directory / name, values)
    return offset


def load_csr(directory: Path) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.float32],
                                        npt.NDArray[np.float64], Blocks]:
    """The CSR arrays, memory-mapped (a 21M-passage index opens without reading it), and the pruning bounds."""
    missing = [name for name in BLOCK_FILES if not (directory / name).is_file()]
    if missing:
        raise DataError(directory / missing[0], "the index has no pruning bounds of this kind (built by an earlier "
                        "release)", fix="rebuild the index, or add them with "
                        "aethersearch.search.impact_build.write_blocks (it refuses impacts an earlier release stored "
                        "off the fixed-point grid)")
    blocks = Blocks(*(np.load(directory / name) for name in BLOCK_FILES))
    return (np.load(directory / INDPTR), np.load(directory / DOCS, mmap_mode="r"),
            np.load(directory / IMPACTS, mmap_mode="r"), np.load(directory / MAX_IMPACT), blocks)


def bytes_per_posting(directory: Path) -> float:
    """Index size on disk divided by the number of postings (the memory-fit figure)."""
    postings = int(np.load(directory / INDPTR, mmap_mode="r")[-1])
    size = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
    return size / max(postings, 1)

