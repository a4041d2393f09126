"""Exhaustive character similarity between selected and training questions.

Why: a held-out question that is a light edit of a training question (a comma
moved, a typo fixed) is contaminated even though its normalised key differs.
The only way to *prove* no such pair exists is to score every pair, so this
module runs rapidfuzz ``process.cdist`` over (selected keys x training keys),
which visits every cell of the matrix by construction.

It never materialises a float matrix: each block of query rows is scored into a
``uint8`` matrix with ``score_cutoff`` (cells below the cutoff become 0), the
flagged cells are read back with ``numpy.nonzero`` and re-scored exactly in
float, so the recorded scores are exact and the pass/fail decision is made on
the exact score, not on its rounded ``uint8`` copy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
from rapidfuzz import process

from aethersearch.errors import ConfigError
from aethersearch.registry import resolve

__all__ = ["DEFAULT_BLOCK_BYTES", "PROGRESS_ROWS", "SCORERS", "SimilarityPairs", "check_threshold",
    "exhaustive_similarity", "rows_per_block", "scorer_function"]

# Scorers are named, never passed as bare callables, so the manifest records
# exactly which one ran (docs/design/conventions.md, code convention 2).
SCORERS: dict[str, str] = {
    "ratio": "rapidfuzz.fuzz:ratio",
    "QRatio": "rapidfuzz.fuzz:QRatio",
    "token_sort_ratio": "rapidfuzz.fuzz:token_sort_ratio",
    "token_set_ratio": "rapidfuzz.fuzz:token_set_ratio",
    "partial_ratio": "rapidfuzz.fuzz:partial_ratio",
    "WRatio": "rapidfuzz.fuzz:WRatio",
}

# Upper bound on the uint8 block cdist fills at once (bytes).
DEFAULT_BLOCK_BYTES = 128 << 20
# Query rows per block when progress is reported (64 x 186k training keys: about a second on 2 cores).
PROGRESS_ROWS = 64


class SimilarityPairs(NamedTuple):
    """Flagged pairs of one exhaustive pass, as parallel arrays, plus what was visited."""

    query_index: np.ndarray  # int64, index into the queries
    choice_index: np.ndarray  # int64, index into the choices
    score: np.ndarray  # float64, exact scorer value (0..100), >= threshold
    pairs_visited: int  # len(queries) * len(choices): every cell was scored
    scorer: str
    threshold: float
    blocks: int


def scorer_function(name: str) -> Callable[..., float]:
    """The rapidfuzz scorer registered under ``name`` (unknown names get a did-you-mean)."""
    scorer: Callable[..., float] = resolve("similarity scorer", name, SCORERS)
    return scorer


def check_threshold(threshold: float, *, what: str) -> float:
    """A similarity threshold must lie in (0, 100]: 0 would make every pair 'flagged'."""
    value = float(threshold)
    if not 0.0 < value <= 100.0:
        raise ConfigError(f"{what} threshold {threshold!r} is outside (0, 100]",
                          fix="use a rapidfuzz score such as 85")
    return value


def rows_per_block(n_choices: int, block_bytes: int = DEFAULT_BLOCK_BYTES) -> int:
    """How many query rows fit in one uint8 block of at most ``block_bytes``."""
    return max(1, block_bytes // max(1, n_choices))


def exhaustive_similarity(
    queries: Sequence[str],
    choices: Sequence[str],
    *,
    scorer: str = "ratio",
    threshold: float = 85.0,
    workers: int = -1,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    progress: Callable[[int, int], None] | None = None,
) -> SimilarityPairs:
    """Score every (query, choice) pair and return those scoring ``>= threshold``.

    Both sides should already be normalised keys (``aethersearch.text.question_key``);
    no processor is applied here, so what is compared is exactly what is recorded.
    ``progress(rows_done, rows_total)`` is called before the first block and after
    each; with it, blocks hold at most ``PROGRESS_ROWS`` query rows, so a display
    moves every second or so instead of once per 128 MiB block.
    """
    threshold = check_threshold(threshold, what="similarity")
    function = scorer_function(scorer)
    queries = list(queries)
    choices = list(choices)
    empty = np.zeros(0, dtype=np.int64)
    if not queries or not choices:
        return SimilarityPairs(empty, empty.copy(), np.zeros(0), 0, scorer, threshold, 0)
    step = rows_per_block(len(choices), block_bytes)
    if progress is not None:
        step = min(step, PROGRESS_ROWS)
        progress(0, len(queries))
    # The uint8 copy is rounded: an integer cutoff at floor(threshold) can never zero a
    # pair whose exact score reaches the threshold; the exact float re-score decides.
    cutoff = max(1, int(np.floor(threshold)))
    found_q: list[np.ndarray] = []
    found_c: list[np.ndarray] = []
    blocks = 0
    for start in range(0, len(queries), step):
        block = process.cdist(queries[start:start + step], choices, scorer=function,
                              processor=None, score_cutoff=cutoff, dtype=np.uint8,
                              workers=workers)
        blocks += 1
        rows, cols = np.nonzero(block)
        del block
        found_q.append(rows.astype(np.int64) + start)
        found_c.append(cols.astype(np.int64))
        if progress is not None:
            progress(min(start + step, len(queries)), len(queries))
    q_idx = np.concatenate(found_q)
    c_idx = np.concatenate(found_c)
    if len(q_idx):
        exact = process.cpdist([queries[i] for i in q_idx], [choices[j] for j in c_idx],
                               scorer=function, processor=None, dtype=np.float64,
                               workers=workers)
    else:
        exact = np.zeros(0)
    keep = exact >= threshold
    q_idx, c_idx, exact = q_idx[keep], c_idx[keep], exact[keep]
    order = np.lexsort((c_idx, q_idx))
    return SimilarityPairs(q_idx[order], c_idx[order], exact[order],
                           len(queries) * len(choices), scorer, threshold, blocks)
