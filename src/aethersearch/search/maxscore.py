"""Exact top-k BM25 over an impact-ordered CSR posting index: MaxScore with numba, or an exhaustive accumulator.

Why: at wiki-18 scale (21M passages) bm25s spends most of a query allocating and
scanning an N-sized score array. MaxScore (Turtle & Flood 1995) visits documents in
row order, only through the posting lists of the query's *essential* terms (those
whose upper bounds together can still beat the current k-th score), and probes the
rest only while the document can still enter the top-k. It is exact: a document is
skipped only when an upper bound proves it cannot enter.

Exactness contract, shared by every path here and by the tests' brute force: a
document's score is ``0.0 + c(t1) + c(t2) + ...`` in float64 over the query's tokens
*in query order* (a repeated token counts again), where ``c(t)`` is the stored
float32 impact of token ``t`` in the document (0 when absent). Hits with score 0 are
dropped; ties rank by store row, earliest first.

Index layout (the bm25s CSC convention, so bm25s can score the same arrays):
``indptr`` (int64, vocabulary + 1), ``docs`` (int32 rows, increasing within a
term), ``impacts`` (float32), and ``max_impact`` (float64 per term, the bound).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import numpy.typing as npt

# Relative slack on every pruning bound: partial sums are added in a different order than
# the exact score, so they may differ in the last bits; the slack makes pruning conservative.
_SLACK = 1e-9

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def numba_available() -> bool:
    """True when numba imports (the optional ``fast`` extra)."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def exhaustive_topk(indptr: npt.NDArray[Any], docs: npt.NDArray[Any], impacts: npt.NDArray[Any],
                    tokens: npt.NDArray[Any], k: int) -> tuple[IntArray, FloatArray]:
    """Top-``k`` (rows, scores) scoring every document that holds a query token (no pruning).

    The numpy reference path, and the fallback without numba: ``np.bincount`` adds the
    concatenated postings in input order, i.e. per document in query-token order, which is
    the exactness contract above.
    """
    spans = [(int(indptr[t]), int(indptr[t + 1])) for t in tokens.tolist()]
    if k <= 0 or not spans:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    rows = np.concatenate([docs[a:b] for a, b in spans])
    if not len(rows):
        return np.empty(0, np.int64), np.empty(0, np.float64)
    values = np.concatenate([impacts[a:b] for a, b in spans]).astype(np.float64)
    found, inverse = np.unique(rows, return_inverse=True)
    totals = np.bincount(inverse.ravel(), weights=values, minlength=len(found))
    keep = totals > 0
    found, totals = found[keep], totals[keep]
    if len(found) > k:
        kth = np.partition(totals, len(totals) - k)[len(totals) - k]
        chosen = totals >= kth  # keep every tie of the k-th so store order decides below
        found, totals = found[chosen], totals[chosen]
    order = np.lexsort((found, -totals))[:k]
    best_rows: IntArray = found[order].astype(np.int64)
    best_scores: FloatArray = totals[order].astype(np.float64)
    return best_rows, best_scores


def _maxscore_py(indptr: Any, docs: Any, impacts: Any, max_impact: Any, tokens: Any,
                 k: int) -> tuple[Any, Any]:  # pragma: no cover - compiled by numba
    """MaxScore document-at-a-time top-k; see the module docstring for the contract.

    Written in the numba subset (plain loops, preallocated arrays). Terms are sorted by
    upper bound ascending; terms ``[0, first)`` are non-essential: their bounds summed stay
    at or below the k-th score, so a document holding only them cannot enter.
    """
    n_tok = tokens.shape[0]
    # unique terms with multiplicity, and each query token's slot
    slot_of = np.empty(n_tok, np.int64)
    uniq = np.empty(n_tok, np.int64)
    weight = np.zeros(n_tok, np.float64)
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
        weight[found] += 1.0
        slot_of[i] = found
    bound = np.empty(m, np.float64)
    for j in range(m):
        bound[j] = weight[j] * max_impact[uniq[j]]
    order = np.argsort(bound, kind="mergesort")
    rank = np.empty(m, np.int64)
    for r in range(m):
        rank[order[r]] = r
    term = np.empty(m, np.int64)
    w = np.empty(m, np.float64)
    ub = np.empty(m, np.float64)
    for r in range(m):
        term[r] = uniq[order[r]]
        w[r] = weight[order[r]]
        ub[r] = bound[order[r]]
    for i in range(n_tok):
        slot_of[i] = rank[slot_of[i]]
    prefix = np.empty(m, np.float64)
    acc = 0.0
    for r in range(m):
        acc += ub[r]
        prefix[r] = acc
    pos = np.empty(m, np.int64)
    end = np.empty(m, np.int64)
    for r in range(m):
        pos[r] = indptr[term[r]]
        end[r] = indptr[term[r] + 1]
    contrib = np.zeros(m, np.float64)
    heap_s = np.empty(k, np.float64)
    heap_d = np.empty(k, np.int64)
    size = 0
    threshold = 0.0  # a hit must score above 0, and above the k-th once the heap is full
    first = 0
    while first < m and prefix[first] * (1.0 + _SLACK) <= threshold:
        first += 1
    big = np.int64(1) << 62
    while first < m:
        d = big
        for r in range(first, m):
            if pos[r] < end[r]:
                x = np.int64(docs[pos[r]])
                d = min(d, x)
        if d == big:
            break
        partial = 0.0
        for r in range(m):
            contrib[r] = 0.0
        for r in range(first, m):
            p = pos[r]
            if p < end[r] and docs[p] == d:
                s = np.float64(impacts[p])
                contrib[r] = s
                partial += w[r] * s
                pos[r] = p + 1
        pruned = False
        for r in range(first - 1, -1, -1):
            if (partial + prefix[r]) * (1.0 + _SLACK) <= threshold:
                pruned = True
                break
            p = pos[r]
            e = end[r]
            if p < e and docs[p] < d:
                # galloping search for the first posting >= d
                step = 1
                lo = p
                hi = p + 1
                while hi < e and docs[hi] < d:
                    lo = hi
                    step *= 2
                    hi = p + step
                hi = min(hi, e)
                while lo < hi:
                    mid = (lo + hi) // 2
                    if docs[mid] < d:
                        lo = mid + 1
                    else:
                        hi = mid
                p = lo
                pos[r] = p
            if p < e and docs[p] == d:
                s = np.float64(impacts[p])
                contrib[r] = s
                partial += w[r] * s
        if pruned:
            continue
        exact = 0.0
        for i in range(n_tok):
            exact += contrib[slot_of[i]]
        if exact <= threshold:
            continue
        if size < k:
            # sift up; the root is the worst hit (lowest score, then latest row)
            i = size
            size += 1
            while i > 0:
                parent = (i - 1) // 2
                if heap_s[parent] < exact or (heap_s[parent] == exact and heap_d[parent] > d):
                    break
                heap_s[i] = heap_s[parent]
                heap_d[i] = heap_d[parent]
                i = parent
            heap_s[i] = exact
            heap_d[i] = d
            if size < k:
                continue
        else:
            # replace the root and sift down
            i = 0
            while True:
                child = 2 * i + 1
                if child >= size:
                    break
                right = child + 1
                if right < size and (heap_s[right] < heap_s[child] or (
                        heap_s[right] == heap_s[child] and heap_d[right] > heap_d[child])):
                    child = right
                if exact < heap_s[child] or (exact == heap_s[child] and d > heap_d[child]):
                    break
                heap_s[i] = heap_s[child]
                heap_d[i] = heap_d[child]
                i = child
            heap_s[i] = exact
            heap_d[i] = d
        threshold = heap_s[0]
        while first < m and prefix[first] * (1.0 + _SLACK) <= threshold:
            first += 1
    # best first: score descending, then row ascending
    out_s = heap_s[:size].copy()
    out_d = heap_d[:size].copy()
    idx = np.argsort(out_d, kind="mergesort")
    out_s = out_s[idx]
    out_d = out_d[idx]
    idx = np.argsort(-out_s, kind="mergesort")
    return out_d[idx], out_s[idx]


def _find(docs: Any, lo: int, hi: int, d: int) -> int:  # pragma: no cover - compiled by numba
    """Index of row ``d`` in ``docs[lo:hi]`` (sorted), or -1."""
    end = hi
    while lo < hi:
        mid = (lo + hi) // 2
        if docs[mid] < d:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < end and docs[lo] == d else -1


def _kth_largest(acc: Any, rows: Any, count: int, k: int) -> float:  # pragma: no cover - compiled by numba
    """The ``k``-th largest ``acc[rows[:count]]`` (``count >= k``)."""
    values = np.empty(count, np.float64)
    for i in range(count):
        values[i] = acc[rows[i]]
    return float(np.partition(values, count - k)[count - k])


def _heap_push(heap: Any, size: int, k: int, value: float) -> int:  # pragma: no cover - compiled by numba
    """Keep the ``k`` largest values pushed into min-heap ``heap``; returns the new size."""
    if size < k:
        i = size
        size += 1
        while i > 0:
            parent = (i - 1) // 2
            if heap[parent] <= value:
                break
            heap[i] = heap[parent]
            i = parent
        heap[i] = value
    elif value > heap[0]:
        i = 0
        while True:
            child = 2 * i + 1
            if child >= size:
                break
            if child + 1 < size and heap[child + 1] < heap[child]:
                child += 1
            if value <= heap[child]:
                break
            heap[i] = heap[child]
            i = child
        heap[i] = value
    return size


def _pruned_py(indptr: Any, docs: Any, impacts: Any, max_impact: Any, tokens: Any, k: int,
               acc: Any, touched: Any) -> tuple[Any, Any]:  # pragma: no cover - compiled by numba
    """Exact top-k by MaxScore bounds in term-at-a-time form (Moffat & Zobel's quit/continue).

    1. Terms go rarest first (highest upper bound) into a dense accumulator ``acc`` (one
       per thread, reused; only touched rows are reset). After each, if the bounds of all
       remaining terms together fall strictly below a proven lower bound of the k-th score
       (the k-th largest partial sum), no untouched row can enter: stop adding rows.
    2. The remaining (common) terms only update the surviving candidates, found by
       galloping search in their posting lists, never by scanning them; candidates whose
       partial sum plus the remaining bounds cannot reach the k-th are dropped as it rises.
    3. The best candidates (the k-th and every near-tie) are rescored exactly: per query
       token in query order, so scores and ties follow the module's contract.
    """
    n_tok = tokens.shape[0]
    slot_of = np.empty(n_tok, np.int64)
    uniq = np.empty(n_tok, np.int64)
    weight = np.zeros(n_tok, np.float64)
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
        weight[found] += 1.0
        slot_of[i] = found
    bound = np.empty(m, np.float64)
    for j in range(m):
        bound[j] = weight[j] * max_impact[uniq[j]]
    order = np.argsort(-bound, kind="mergesort")  # highest bound (rarest) first
    suffix = np.zeros(m + 1, np.float64)  # suffix[j]: bounds of terms order[j:], together
    for r in range(m - 1, -1, -1):
        suffix[r] = suffix[r + 1] + bound[order[r]]
    count = 0
    theta = 0.0  # proven: the final k-th score is >= theta
    heap = np.empty(k, np.float64)
    r = 0
    while r < m:
        j = order[r]
        w = weight[j]
        size = 0  # the k largest partial sums of this term's rows: distinct rows, so a valid bound
        for p in range(indptr[uniq[j]], indptr[uniq[j] + 1]):
            s = np.float64(impacts[p])
            if s > 0.0:
                d = docs[p]
                if acc[d] == 0.0:
                    touched[count] = d
                    count += 1
                value = acc[d] + w * s
                acc[d] = value
                size = _heap_push(heap, size, k, value)
        if size == k:
            theta = max(theta, heap[0] * (1.0 - _SLACK))
        r += 1
        if suffix[r] * (1.0 + _SLACK) < theta:
            break
    # candidates that can still reach theta, in row order for the galloping searches
    cand = np.empty(count, np.int64)
    c = 0
    for i in range(count):
        d = touched[i]
        if (acc[d] + suffix[r]) * (1.0 + _SLACK) >= theta:
            cand[c] = d
            c += 1
    cand = np.sort(cand[:c])
    while r < m:
        j = order[r]
        w = weight[j]
        lo = indptr[uniq[j]]
        e = indptr[uniq[j] + 1]
        for i in range(c):
            d = cand[i]
            if lo >= e:
                break
            if docs[lo] < d:  # gallop forward to the first posting >= d
                step = 1
                base = lo
                hi = lo + 1
                while hi < e and docs[hi] < d:
                    base = hi
                    step *= 2
                    hi = lo + step
                hi = min(hi, e)
                while base < hi:
                    mid = (base + hi) // 2
                    if docs[mid] < d:
                        base = mid + 1
                    else:
                        hi = mid
                lo = base
            if lo < e and docs[lo] == d:
                acc[d] += w * np.float64(impacts[lo])
        r += 1
        size = 0
        for i in range(c):
            size = _heap_push(heap, size, k, acc[cand[i]])
        if size == k:
            theta = max(theta, heap[0] * (1.0 - _SLACK))
        kept = 0
        for i in range(c):
            d = cand[i]
            if (acc[d] + suffix[r]) * (1.0 + _SLACK) >= theta:
                cand[kept] = d
                kept += 1
        c = kept
    # every candidate now holds its full score (up to summation order); rescore the best exactly
    cut = _kth_largest(acc, cand, c, k) if c > k else 0.0
    final_d = np.empty(c, np.int64)
    final_s = np.empty(c, np.float64)
    contrib = np.zeros(m, np.float64)
    f = 0
    for i in range(c):
        d = cand[i]
        if acc[d] * (1.0 + _SLACK) < cut * (1.0 - _SLACK):
            continue
        for j in range(m):
            at = _find(docs, indptr[uniq[j]], indptr[uniq[j] + 1], d)
            contrib[j] = np.float64(impacts[at]) if at >= 0 else 0.0
        exact = 0.0
        for t in range(n_tok):
            exact += contrib[slot_of[t]]
        if exact > 0.0:
            final_d[f] = d
            final_s[f] = exact
            f += 1
    for i in range(count):  # leave the accumulator clean for the next query
        acc[touched[i]] = 0.0
    idx = np.argsort(final_d[:f], kind="mergesort")
    out_d = final_d[:f][idx]
    out_s = final_s[:f][idx]
    idx = np.argsort(-out_s, kind="mergesort")[:k]
    return out_d[idx], out_s[idx]


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
            for name in ("_find", "_kth_largest", "_heap_push"):
                glb[name] = jit(glb[name])
            _compiled = {"daat": jit(_maxscore_py), "taat": jit(_pruned_py)}
        else:
            _compiled = False
    return _compiled


def maxscore_topk(indptr: npt.NDArray[Any], docs: npt.NDArray[Any], impacts: npt.NDArray[Any],
                  max_impact: npt.NDArray[Any], tokens: npt.NDArray[Any], k: int, n_docs: int,
                  kernel: str = "taat") -> tuple[IntArray, FloatArray]:
    """Exact top-``k`` (rows, scores), best first; numba kernels, else :func:`exhaustive_topk`.

    The compiled kernels release the GIL (``nogil``), so server threads search in parallel;
    each thread keeps its own accumulator (``n_docs`` float64 + int32 rows).
    """
    if k <= 0 or len(tokens) == 0:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    kernels = _compile()
    if kernels is False:
        return exhaustive_topk(indptr, docs, impacts, tokens, k)
    tokens = np.ascontiguousarray(tokens, dtype=np.int64)
    if kernel == "daat":
        rows, scores = kernels["daat"](indptr, docs, impacts, max_impact, tokens, int(k))
        return rows, scores
    acc = getattr(_buffers, "acc", None)
    if acc is None or len(acc) < n_docs:
        acc = _buffers.acc = np.zeros(n_docs, np.float64)
        _buffers.touched = np.empty(n_docs, np.int32)
    rows, scores = kernels["taat"](indptr, docs, impacts, max_impact, tokens, int(k), acc, _buffers.touched)
    return rows, scores
