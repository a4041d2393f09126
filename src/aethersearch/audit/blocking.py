"""Blocked character similarity for the candidate-pool audit (before sampling).

Why: the pool holds tens of thousands of candidates, and scoring all of them
against the whole training union (≈ 2e9 pairs) would cost a minute or more on
two cores. Before sampling we only need to drop *near-certain* duplicates at a
strict threshold, so candidate generation by blocking is allowed there — as
long as it is stated and its recall is measured against the exhaustive method
(``tests/benchmark/test_audit_blocking.py`` does that on real questions).

Blocking rule (recorded in the manifest as ``BLOCKING_RULE``): every string is
cut into character ``n``-grams (default 4) of its normalised key; for each query
the ``k`` rarest n-grams that also occur in the training union (by document
frequency) select the candidate training questions sharing at least one of them
(one sparse matrix product); only those candidates are scored with the exact
rapidfuzz scorer. A pair at ratio >= 95 differs in a few characters, so it
shares almost every n-gram, and in particular the query's rarest ones.

The n-gram tables are built with numpy on concatenated code points (hashes of
each window, masked at string boundaries), not with a Python loop per n-gram.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from rapidfuzz import process
from scipy import sparse

from aethersearch.audit.similarity import check_threshold, scorer_function

__all__ = ["BLOCKING_RULE", "BlockedPairs", "GramIndex", "blocked_similarity", "build_gram_index"]

BLOCKING_RULE = "char {n}-gram blocking: candidates share >= 1 of the query's {k} rarest n-grams"

_BASE = np.uint64(0x100000001B3)
_MASK40 = np.uint64((1 << 40) - 1)


def _gram_hashes(keys: Sequence[str], n: int) -> tuple[np.ndarray, np.ndarray]:
    """(row id, hash) of every character n-gram of every key, duplicates within a row removed."""
    if not keys:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint64)
    # Pad each key with n-1 sentinel code points so windows never straddle two keys,
    # and short keys still yield one (padded) gram.
    sep = "\x00" * (n - 1)
    joined = sep + sep.join(keys) + sep
    codes = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    lengths = np.fromiter((len(k) for k in keys), dtype=np.int64, count=len(keys))
    windows = len(codes) - n + 1
    hashes = np.zeros(windows, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for offset in range(n):
            hashes = hashes * _BASE + codes[offset:offset + windows] + np.uint64(1)
    # Window w starts at position w; key r occupies [start_r, start_r + len_r) in `codes`.
    starts = (n - 1) + np.concatenate(([0], np.cumsum(lengths + (n - 1))[:-1]))
    # Windows of key r start in [start_r - (n-1), start_r + len_r): each holds at least one
    # character of key r and none of its neighbours. An empty key has none.
    last = starts + lengths  # exclusive
    first = np.where(lengths > 0, starts - (n - 1), last)
    counts = last - first
    rows = np.repeat(np.arange(len(keys), dtype=np.int64), counts)
    offsets = np.arange(counts.sum(), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    positions = np.repeat(first, counts) + offsets
    # Pack (row, 40-bit hash) into one uint64 so one 1-D sort de-duplicates grams per row
    # (a 2-D np.unique(axis=0) is ~20x slower). A 40-bit collision can only add a candidate.
    if len(keys) >= 1 << 24:
        raise ValueError("n-gram blocking supports at most 16,777,215 strings per side")
    packed = np.sort((rows.astype(np.uint64) << np.uint64(40)) | (hashes[positions] & _MASK40))
    if len(packed):
        # Sort + neighbour compare: numpy 2's hash-based np.unique is far slower here.
        packed = packed[np.concatenate(([True], packed[1:] != packed[:-1]))]
    return (packed >> np.uint64(40)).astype(np.int64), packed & _MASK40


class GramIndex(NamedTuple):
    """Training union as a CSR (question x n-gram) matrix plus the sorted gram vocabulary."""

    grams: np.ndarray  # sorted unique uint64 hashes
    df: np.ndarray
    matrix: sparse.csr_matrix
    n: int


def build_gram_index(choices: Sequence[str], n: int = 4) -> GramIndex:
    """Index the character n-grams of every training key."""
    rows, hashes = _gram_hashes(choices, n)
    grams, cols = np.unique(hashes, return_inverse=True)
    matrix = sparse.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)),
                               shape=(len(choices), max(1, len(grams))))
    df = np.bincount(cols, minlength=len(grams)).astype(np.int64)
    return GramIndex(grams, df, matrix, n)


class BlockedPairs(NamedTuple):
    """Flagged pairs of a blocked pass and how many candidates the blocking produced."""

    query_index: np.ndarray
    choice_index: np.ndarray
    score: np.ndarray
    candidates_scored: int
    rule: str
    scorer: str
    threshold: float


def blocked_similarity(
    queries: Sequence[str],
    index: GramIndex,
    choices: Sequence[str],
    *,
    scorer: str = "ratio",
    threshold: float = 95.0,
    k: int = 8,
    workers: int = -1,
) -> BlockedPairs:
    """Score only blocked candidates and return the pairs at ``>= threshold``."""
    threshold = check_threshold(threshold, what="pool similarity")
    function = scorer_function(scorer)
    rule = BLOCKING_RULE.format(n=index.n, k=k)
    empty = np.zeros(0, dtype=np.int64)
    rows, hashes = _gram_hashes(list(queries), index.n)
    position = np.searchsorted(index.grams, hashes)
    position = np.minimum(position, max(0, len(index.grams) - 1))
    known = (len(index.grams) > 0) & (index.grams[position] == hashes) if len(hashes) else np.zeros(0, bool)
    rows, cols = rows[known], position[known]
    # k rarest known grams per query: sort by (row, df, gram) and keep the first k of each row.
    order = np.lexsort((cols, index.df[cols], rows))
    rows, cols = rows[order], cols[order]
    group_start = np.searchsorted(rows, rows, side="left")
    rank = np.arange(len(rows)) - group_start
    chosen = rank < k
    selector = sparse.csr_matrix((np.ones(int(chosen.sum()), dtype=np.float32),
                                  (rows[chosen], cols[chosen])),
                                 shape=(len(queries), index.matrix.shape[1]))
    candidates = (selector @ index.matrix.T).tocoo()
    q_idx = candidates.row.astype(np.int64)
    c_idx = candidates.col.astype(np.int64)
    if scorer == "ratio" and len(q_idx):
        # Sound length bound for fuzz.ratio: 100 * 2 * min(la, lb) / (la + lb) >= score.
        q_len = np.fromiter((len(q) for q in queries), dtype=np.int64, count=len(queries))[q_idx]
        c_len = np.fromiter((len(c) for c in choices), dtype=np.int64, count=len(choices))[c_idx]
        possible = 200.0 * np.minimum(q_len, c_len) >= threshold * (q_len + c_len)
        q_idx, c_idx = q_idx[possible], c_idx[possible]
    if not len(q_idx):
        return BlockedPairs(empty, empty.copy(), np.zeros(0), len(candidates.row), rule, scorer, threshold)
    score = process.cpdist([queries[i] for i in q_idx], [choices[j] for j in c_idx],
                           scorer=function, processor=None, dtype=np.float64, workers=workers)
    keep = score >= threshold
    order = np.lexsort((c_idx[keep], q_idx[keep]))
    return BlockedPairs(q_idx[keep][order], c_idx[keep][order], score[keep][order],
                        len(q_idx), rule, scorer, threshold)
