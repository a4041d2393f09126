"""Rare-token retrieval: paraphrases that character similarity misses.

Why: "Who wrote The Old Man and the Sea?" and "The Old Man and the Sea was
written by whom?" score low on character similarity, yet they share the rare
tokens that carry the question's information. This module builds an IDF over the
training union and a ``scipy.sparse`` inverted index (CSR question x token);
for each query it takes its ``k`` rarest tokens, retrieves the training rows
sharing any of them with one sparse matrix product (never a Python loop over
pairs) and scores each candidate by IDF-weighted Dice overlap:

    score(q, t) = 2 * sum(idf(shared tokens)) / (sum(idf(q tokens)) + sum(idf(t tokens)))

Tokens are ``\\w+`` runs of the normalised key, Snowball-stemmed (PyStemmer), each
counted once per question. A query token absent from the training union gets
the largest possible IDF, so unseen rare words lower the overlap as they should.
"""

from __future__ import annotations

import math
import re
from array import array
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import Stemmer
from scipy import sparse

from aethersearch.errors import ConfigError

__all__ = ["SCORE_FORMULA", "TokenIndex", "TokenPairs", "build_token_index", "rare_token_pairs", "tokenize",
    "tokenize_many"]

_TOKEN = re.compile(r"\w+", re.UNICODE)
_STEMMER = Stemmer.Stemmer("english")

SCORE_FORMULA = "2*idf(shared)/(idf(query)+idf(training)); idf=ln((N+1)/(df+0.5)); stemmed \\w+ tokens"


def tokenize(key: str) -> list[str]:
    """Distinct stemmed word tokens of a normalised key, in first-seen order."""
    return tokenize_many([key])[0]


def tokenize_many(keys: Sequence[str]) -> list[list[str]]:
    """``tokenize`` for many keys, stemming each distinct word once (one PyStemmer call)."""
    words = [_TOKEN.findall(key) for key in keys]
    distinct = list({w for ws in words for w in ws})
    stem = dict(zip(distinct, _STEMMER.stemWords(distinct), strict=True))
    return [list(dict.fromkeys(stem[w] for w in ws)) for ws in words]


class TokenIndex(NamedTuple):
    """Inverted index over the training union."""

    vocabulary: dict[str, int]
    df: np.ndarray  # int64 per token
    idf: np.ndarray  # float64 per token
    unseen_idf: float  # idf given to a query token the training union never uses
    matrix: sparse.csr_matrix  # training question x token, binary (float32)
    row_weight: np.ndarray  # sum of idf over each training question's tokens
    n_questions: int


def build_token_index(training_keys: Sequence[str]) -> TokenIndex:
    """Build the CSR inverted index and IDF table over ``training_keys``."""
    vocabulary: dict[str, int] = {}
    indptr = array("q", [0])
    indices = array("q")
    # Tokenise in slices and keep ids in typed arrays: peak memory stays near the CSR's own size.
    for start in range(0, len(training_keys), 16384):
        for tokens in tokenize_many(training_keys[start:start + 16384]):
            indices.extend(vocabulary.setdefault(token, len(vocabulary)) for token in tokens)
            indptr.append(len(indices))
    n = len(training_keys)
    cols = np.frombuffer(indices, dtype=np.int64) if len(indices) else np.zeros(0, dtype=np.int64)
    data = np.ones(len(cols), dtype=np.float32)
    matrix = sparse.csr_matrix((data, cols, np.frombuffer(indptr, dtype=np.int64)),
                               shape=(n, max(1, len(vocabulary))))
    df = np.bincount(cols, minlength=matrix.shape[1]).astype(np.int64)
    idf = np.log((n + 1) / (df + 0.5))
    row_weight = np.asarray(matrix @ idf, dtype=np.float64).ravel()
    return TokenIndex(vocabulary, df, idf, math.log((n + 1) / 0.5), matrix, row_weight, n)


class TokenPairs(NamedTuple):
    """Flagged pairs of the rare-token pass, as parallel arrays, plus its counters."""

    query_index: np.ndarray
    choice_index: np.ndarray
    score: np.ndarray
    candidates_scored: int  # pairs retrieved through shared rare tokens and scored
    queries_without_rare_token: int  # every token too common (df > max_df) or unseen
    k: int
    max_df: int
    threshold: float


def _query_matrices(index: TokenIndex, query_keys: Sequence[str], k: int,
                    max_df: int) -> tuple[sparse.csr_matrix, sparse.csr_matrix, np.ndarray, int]:
    """(rare-token selector, idf-weighted query matrix, query weights, queries with no rare token)."""
    sel_ptr: list[int] = [0]
    sel_idx: list[int] = []
    sel_val: list[float] = []
    w_ptr: list[int] = [0]
    w_idx: list[int] = []
    w_val: list[float] = []
    weights = np.zeros(len(query_keys), dtype=np.float64)
    without = 0
    for row, tokens in enumerate(tokenize_many(query_keys)):
        known: list[int] = []
        total = 0.0
        for token in tokens:
            col = index.vocabulary.get(token)
            if col is None:
                total += index.unseen_idf
                continue
            known.append(col)
            total += float(index.idf[col])
        weights[row] = total
        w_idx.extend(known)
        w_val.extend(float(index.idf[c]) for c in known)
        w_ptr.append(len(w_idx))
        eligible = [c for c in known if index.df[c] <= max_df]
        eligible.sort(key=lambda c: (index.df[c], c))
        if not eligible:
            without += 1
        chosen = sorted(eligible[:k])
        sel_idx.extend(chosen)
        sel_val.extend(float(index.idf[c]) for c in chosen)
        sel_ptr.append(len(sel_idx))
    shape = (len(query_keys), index.matrix.shape[1])
    selector = sparse.csr_matrix((np.asarray(sel_val, dtype=np.float64),
                                  np.asarray(sel_idx, dtype=np.int64),
                                  np.asarray(sel_ptr, dtype=np.int64)), shape=shape)
    weighted = sparse.csr_matrix((np.asarray(w_val, dtype=np.float64),
                                  np.asarray(w_idx, dtype=np.int64),
                                  np.asarray(w_ptr, dtype=np.int64)), shape=shape)
    return selector, weighted, weights, without


def rare_token_pairs(
    index: TokenIndex,
    query_keys: Sequence[str],
    *,
    k: int = 3,
    max_df: int | None = None,
    threshold: float = 0.6,
) -> TokenPairs:
    """Flag training questions sharing a query's rarest tokens with overlap ``>= threshold``.

    ``max_df`` caps how common a "rare" token may be (default: 0.5% of the
    training union, at least 20), which bounds the candidates per query.
    """
    if k < 1:
        raise ConfigError(f"rare-token k={k} must be >= 1", fix="use k: 3")
    if not 0.0 < threshold <= 1.0:
        raise ConfigError(f"rare-token threshold {threshold!r} is outside (0, 1]",
                          fix="use a Dice overlap such as 0.6")
    if max_df is None:
        max_df = max(20, index.n_questions // 200)
    empty = np.zeros(0, dtype=np.int64)
    if not query_keys or index.n_questions == 0:
        return TokenPairs(empty, empty.copy(), np.zeros(0), 0, len(query_keys), k, max_df, threshold)
    selector, weighted, weights, without = _query_matrices(index, query_keys, k, max_df)
    candidates = (selector @ index.matrix.T).tocoo()
    q_idx = candidates.row.astype(np.int64)
    t_idx = candidates.col.astype(np.int64)
    retrieved = len(q_idx)
    if len(q_idx):
        # Sound upper bound before the costly gather: the shared weight is at most the
        # query's weight minus its chosen rare tokens that the candidate lacks, and at
        # most the candidate's weight. Pairs that cannot reach the threshold are dropped.
        chosen_weight = np.asarray(selector.sum(axis=1)).ravel()
        shared_rare = candidates.data.astype(np.float64)
        bound = np.minimum(weights[q_idx] - chosen_weight[q_idx] + shared_rare, index.row_weight[t_idx])
        possible = 2.0 * bound >= threshold * (weights[q_idx] + index.row_weight[t_idx]) - 1e-9
        q_idx, t_idx = q_idx[possible], t_idx[possible]
    if len(q_idx):
        shared = np.asarray(weighted[q_idx].multiply(index.matrix[t_idx]).sum(axis=1)).ravel()
        denominator = weights[q_idx] + index.row_weight[t_idx]
        score = np.divide(2.0 * shared, denominator, out=np.zeros_like(shared),
                          where=denominator > 0)
    else:
        score = np.zeros(0)
    keep = score >= threshold
    order = np.lexsort((t_idx[keep], q_idx[keep]))
    return TokenPairs(q_idx[keep][order], t_idx[keep][order], np.round(score[keep][order], 6),
                      retrieved, without, k, max_df, threshold)
