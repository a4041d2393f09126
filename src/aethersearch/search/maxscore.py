"""Exact top-k BM25 over a CSR posting index: windowed MaxScore with numba, or an exhaustive accumulator.

Why: at wiki-18 scale (21M passages) bm25s spends most of a query allocating and
scanning an N-sized score array. MaxScore (Turtle & Flood 1995) splits the query's
terms by upper bound: the *essential* ones (whose bounds together can still beat the
current k-th score) are read in full, the others only probed, by galloping search,
for rows that can still enter the top-k. It is exact: a row is skipped only when a
bound proves it cannot enter. Rows are scored in windows (as Lucene's
MaxScoreBulkScorer), so the accumulator stays small and in cache.

Exactness contract, shared by every path here and by the tests' brute force: a
document's score is ``sum(round(c(t) * SCALE) for t in query tokens) / SCALE``, where
``c(t)`` is the stored float32 impact of token ``t`` in the document (0 when absent)
and a repeated token counts again: an integer sum, so it does not depend on the order
in which pruning adds the terms (it differs from the float sum by < 1e-11). Hits with
score 0 are dropped; ties rank by store row, earliest first.

Index layout (the bm25s CSC convention, so bm25s can score the same arrays):
``indptr`` (int64, vocabulary + 1), ``docs`` (int32 rows, increasing within a
term), ``impacts`` (float32), and ``max_impact`` (float64 per term, the bound).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import numpy.typing as npt

# Scores are fixed point: each float32 impact counts as the integer round(impact * SCALE), so a
# sum is exact whatever the order of its terms, and pruned and exhaustive scoring agree bit for bit.
# With impacts below 2**6 and queries under 2**7 tokens, sums stay below 2**53 (exact in float64 too).
SCALE = float(2**40)
# Rows per MaxScore window: its float64 accumulator (512 KiB) stays in cache.
WINDOW = 1 << 16

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def numba_available() -> bool:
    """True when numba imports (the optional ``fast`` extra)."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def quantise(impacts: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    """The fixed-point value of each float32 impact (the contract's ``round(c * SCALE)``)."""
    return (impacts.astype(np.float64) * SCALE + 0.5).astype(np.int64)


def exhaustive_topk(indptr: npt.NDArray[Any], docs: npt.NDArray[Any], impacts: npt.NDArray[Any],
                    tokens: npt.NDArray[Any], k: int) -> tuple[IntArray, FloatArray]:
    """Top-``k`` (rows, scores) scoring every document that holds a query token (no pruning).

    The numpy reference path, and the fallback without numba: ``np.bincount`` adds each
    document's fixed-point impacts, which is the exactness contract above.
    """
    spans = [(int(indptr[t]), int(indptr[t + 1])) for t in tokens.tolist()]
    if k <= 0 or not spans:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    rows = np.concatenate([docs[a:b] for a, b in spans])
    if not len(rows):
        return np.empty(0, np.int64), np.empty(0, np.float64)
    values = quantise(np.concatenate([impacts[a:b] for a, b in spans])).astype(np.float64)
    found, inverse = np.unique(rows, return_inverse=True)
    totals = np.bincount(inverse.ravel(), weights=values, minlength=len(found))  # integers < 2**53: exact
    keep = totals > 0
    found, totals = found[keep], totals[keep]
    if len(found) > k:
        kth = np.partition(totals, len(totals) - k)[len(totals) - k]
        chosen = totals >= kth  # keep every tie of the k-th so store order decides below
        found, totals = found[chosen], totals[chosen]
    order = np.lexsort((found, -totals))[:k]
    best_rows: IntArray = found[order].astype(np.int64)
    best_scores: FloatArray = totals[order].astype(np.float64) / SCALE
    return best_rows, best_scores


def _window_py(indptr: Any, docs: Any, impacts: Any, max_impact: Any, tokens: Any, k: int,
               acc: Any, touched: Any) -> tuple[Any, Any]:  # pragma: no cover - compiled by numba
    """MaxScore over windows of rows (as Lucene's MaxScoreBulkScorer): exact top-k, best first.

    Terms sorted by upper bound ascending; terms ``[0, first)`` are non-essential (their
    bounds together cannot beat the k-th score). For each window of ``len(acc)`` rows the
    essential terms' postings are added term by term into the window's small accumulator
    (cache-resident, unlike an N-sized array); then the window's rows, in row order, probe
    the non-essential terms by galloping forward, largest bound first, only while the row
    can still beat the k-th score. Scores are integers (fixed point), so every bound and
    comparison is exact. Rows arrive in increasing order, so a row tied with the k-th
    never displaces it: ties go to the earlier row.
    """
    n_tok = tokens.shape[0]
    uniq = np.empty(n_tok, np.int64)
    weight = np.zeros(n_tok, np.int64)
    m = 0
    for i in range(n_tok):
        t = tokens[i]
        found = -1
        for j in range(m):
            if uniq[j] == t:
                found = j
                break
        if found < 0:
            uniq[m] = t
            found = m
            m += 1
        weight[found] += 1
    bound = np.empty(m, np.int64)
    for j in range(m):
        bound[j] = weight[j] * np.int64(max_impact[uniq[j]] * SCALE + 0.5)
    order = np.argsort(bound, kind="mergesort")
    term = np.empty(m, np.int64)
    w = np.empty(m, np.int64)
    prefix = np.empty(m, np.int64)
    total = 0
    for r in range(m):
        term[r] = uniq[order[r]]
        w[r] = weight[order[r]]
        total += bound[order[r]]
        prefix[r] = total
    pos = np.empty(m, np.int64)
    end = np.empty(m, np.int64)
    for r in range(m):
        pos[r] = indptr[term[r]]
        end[r] = indptr[term[r] + 1]
    heap_s = np.empty(k, np.int64)
    heap_d = np.empty(k, np.int64)
    size = 0
    threshold = 0  # a hit must score above 0, and above the k-th once k are held
    first = 0
    while first < m and prefix[first] <= threshold:
        first += 1
    width = acc.shape[0]
    none = np.int64(1) << 62
    while first < m:
        lo = none
        for r in range(first, m):  # the window starts at the next essential posting
            if pos[r] < end[r]:
                lo = min(lo, np.int64(docs[pos[r]]))
        if lo == none:
            break
        hi = lo + width
        count = 0
        for r in range(first, m):
            p = pos[r]
            e = end[r]
            wr = w[r]
            while p < e and docs[p] < hi:
                s = np.int64(impacts[p] * SCALE + 0.5)
                if s > 0:  # (a zero adds nothing, and acc == 0 must mean "not yet touched")
                    x = docs[p] - lo
                    if acc[x] == 0:
                        touched[count] = x
                        count += 1
                    acc[x] += wr * s
                p += 1
            pos[r] = p
        if count * 16 > width:  # dense window: one pass over it beats sorting the touched rows
            count = 0
            for x in range(width):
                if acc[x] != 0:
                    touched[count] = x
                    count += 1
        else:
            touched[:count].sort()
        for i in range(count):
            x = touched[i]
            score = acc[x]
            acc[x] = 0
            d = lo + x
            alive = True
            for r in range(first - 1, -1, -1):
                if score + prefix[r] <= threshold:
                    alive = False
                    break
                p = pos[r]
                e = end[r]
                if p < e and docs[p] < d:  # gallop forward to the first posting >= d
                    step = 1
                    base = p
                    top = p + 1
                    while top < e and docs[top] < d:
                        base = top
                        step *= 2
                        top = p + step
                    top = min(top, e)
                    while base < top:
                        mid = (base + top) // 2
                        if docs[mid] < d:
                            base = mid + 1
                        else:
                            top = mid
                    p = base
                    pos[r] = p
                if p < e and docs[p] == d:
                    score += w[r] * np.int64(impacts[p] * SCALE + 0.5)
            if not alive or score <= threshold:
                continue
            size = _heap_insert(heap_s, heap_d, size, k, score, d)
            if size == k:
                threshold = heap_s[0]
        while first < m and prefix[first] <= threshold:
            first += 1
    out_s = heap_s[:size].copy()
    out_d = heap_d[:size].copy()
    idx = np.argsort(out_d, kind="mergesort")
    out_s = out_s[idx]
    out_d = out_d[idx]
    idx = np.argsort(-out_s, kind="mergesort")
    return out_d[idx], out_s[idx]


def _heap_insert(heap_s: Any, heap_d: Any, size: int, k: int, score: int,
                 row: int) -> int:  # pragma: no cover - compiled by numba
    """Add (score, row) to the top-k heap whose root is the worst hit (lowest score, then latest row)."""
    if size < k:
        i = size
        size += 1
        while i > 0:
            parent = (i - 1) // 2
            if heap_s[parent] < score or (heap_s[parent] == score and heap_d[parent] > row):
                break
            heap_s[i] = heap_s[parent]
            heap_d[i] = heap_d[parent]
            i = parent
        heap_s[i] = score
        heap_d[i] = row
        return size
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        right = child + 1
        if right < size and (heap_s[right] < heap_s[child] or (
                heap_s[right] == heap_s[child] and heap_d[right] > heap_d[child])):
            child = right
        if score < heap_s[child] or (score == heap_s[child] and row > heap_d[child]):
            break
        heap_s[i] = heap_s[child]
        heap_d[i] = heap_d[child]
        i = child
    heap_s[i] = score
    heap_d[i] = row
    return size


_compiled: Any = None
_buffers = threading.local()


def _compile() -> Any:
    """The numba kernels, compiled once (False without numba)."""
    global _compiled
    if _compiled is None:
        if numba_available():
            import numba

            jit = numba.njit(nogil=True, cache=True)
            glb = globals()
            glb["_heap_insert"] = jit(glb["_heap_insert"])
            _compiled = jit(_window_py)
        else:
            _compiled = False
    return _compiled


def maxscore_topk(indptr: npt.NDArray[Any], docs: npt.NDArray[Any], impacts: npt.NDArray[Any],
                  max_impact: npt.NDArray[Any], tokens: npt.NDArray[Any], k: int) -> tuple[IntArray, FloatArray]:
    """Exact top-``k`` (rows, scores), best first; numba kernels, else :func:`exhaustive_topk`.

    The compiled kernels release the GIL (``nogil``), so server threads search in parallel;
    each thread keeps its own window accumulator (``WINDOW`` float64 and row offsets).
    """
    if k <= 0 or len(tokens) == 0:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    kernels = _compile()
    if kernels is False:
        return exhaustive_topk(indptr, docs, impacts, tokens, k)
    tokens = np.ascontiguousarray(tokens, dtype=np.int64)
    acc = getattr(_buffers, "acc", None)
    if acc is None:
        acc = _buffers.acc = np.zeros(WINDOW, np.int64)
        _buffers.touched = np.empty(WINDOW, np.int64)
    rows, fixed = kernels(indptr, docs, impacts, max_impact, tokens, int(k), acc, _buffers.touched)
    return rows, fixed / SCALE
