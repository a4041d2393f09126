"""Exact top-k BM25 over a CSR posting index: windowed MaxScore with numba, or an exhaustive accumulator.

Why: at wiki-18 scale (21M passages) bm25s spends most of a query allocating and
scanning an N-sized score array. MaxScore (Turtle & Flood 1995) splits the query's
terms by upper bound: the *essential* ones (whose bounds together can still beat the
current k-th score) are read in full, the others only looked up for rows that can
still enter the top-k. It is exact: a row is skipped only when a bound proves it
cannot enter. Rows are scored in windows (as Lucene's MaxScoreBulkScorer), so the
accumulator stays small and in cache, and each window re-splits the terms by the
block maxima overlapping it (block-max MaxScore): a window whose bounds cannot beat
the k-th score is skipped unread.

Exactness contract, shared by every path here and by the tests' brute force: a
document's score is ``sum(round(c(t) * SCALE) for t in query tokens) / SCALE``, where
``c(t)`` is the stored float32 impact of token ``t`` in the document (0 when absent)
and a repeated token counts again: an integer sum, so it does not depend on the order
in which pruning adds the terms (it differs from the float sum by < 1e-11). Hits with
score 0 are dropped; ties rank by store row, earliest first.

Indexes store their impacts already on that grid (:func:`snap`: each is a multiple of
``1 / SCALE``, which changes only impacts below 2**-17, and never their fixed-point
value), so the kernel adds them as float64 as they are: every partial sum is a multiple
of ``1 / SCALE`` below 2**13, which float64 holds exactly, and it equals the contract's
integer sum divided by ``SCALE``. That spares the multiply-round-convert per posting
(measured: ~10% of a top-1000 query at 21M passages). :func:`block_maxima` refuses
impacts off the grid, so an index whose bounds exist has grid impacts.

Index layout (the bm25s CSC convention, so bm25s can score the same arrays):
``indptr`` (int64, vocabulary + 1), ``docs`` (int32 rows, increasing within a
term), ``impacts`` (float32), and ``max_impact`` (float64 per term, the bound);
plus block maxima (:class:`Blocks`): each term's postings cut into ``BLOCK``-posting
blocks from its start, with the block's largest impact and its first and last row,
which bound a window's scores far more tightly than the term's global maximum (the
block-max idea of Ding & Suel 2011, as in PISA and Lucene); and per term the 3rd, 10th,
100th and 1,000th largest impact (:data:`LADDER`), which give the search a true lower
bound of the k-th score before it reads a posting.

Why that floor: the k-th score starts at 0 and rises as hits come in, and until it is
high the pruning bounds prune little. But a term with at least ``L >= k`` postings holds
``L`` distinct documents each scoring at least its ``L``-th largest impact (impacts are
never negative), so the final k-th score is at least the largest such value over the
query's terms. Starting the threshold just below it (rows *equal* to it still count) is
exact and skips the warm-up (the "k-th term score" estimate of Petri, Moffat and
Culpepper, used safely).
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

__all__ = ["BLOCK", "Blocks", "FloatArray", "GRID", "IntArray", "LADDER", "MERGE_RATIO", "OffGridError", "SCALE",
    "WINDOW", "block_maxima", "exhaustive_topk", "kth_impacts", "maxscore_topk", "numba_available", "off_grid",
    "quantise", "snap"]

# Scores are fixed point: each float32 impact counts as the integer round(impact * SCALE), so a
# sum is exact whatever the order of its terms, and pruned and exhaustive scoring agree bit for bit.
# With impacts below 2**6 and queries under 2**7 tokens, sums stay below 2**53 (exact in float64 too).
SCALE = float(2**40)
# The grid step: stored impacts are multiples of it (snap), so are all sums, and a score is
# above ``floor - GRID`` exactly when it is at least ``floor``.
GRID = 1.0 / SCALE
# Rows per MaxScore window: small enough that block maxima bound it tightly and its
# float64 accumulator (256 KiB) stays in L2, large enough that per-window bookkeeping is
# amortised. Measured on the generated wiki-18 corpus (benchmarks/search_scale.py) at 1M,
# 5M and 21M passages: 32,768 rows beat 8,192 and 16,384 by 8-20%, 65,536 is no better.
WINDOW = 1 << 15
# Postings per block: each block records its maximum impact and first/last row (PISA's and
# Lucene's block-max size), 12 bytes per 128 postings.
BLOCK = 128
# A window's live rows take a term by reading its postings there when those are at most
# this many per live row, else by seeking each row: a seek (block skip, then the row's rank
# counted in its block: a cache miss or two, ~250 cycles at 21M passages) costs about as much
# as 60-90 sequential posting reads (~3 cycles each once sums are plain float64 adds).
# Measured on the generated wiki-18 corpus (benchmarks/search_scale.py), top-1000 / top-3:
# 64 beats 32 by 4% / 2% at 1M, 5% / 1% at 5M, 5% / 1% at 21M passages; 128 is no better.
MERGE_RATIO = 64
# Per-term ranks whose impacts are kept as floors for the k-th score: a query for top-k uses
# the smallest rung >= k (a rung below k would overstate it; none above 1,000: no floor).
LADDER = (3, 10, 100, 1000)

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


def snap(impacts: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
    """float32 impacts moved onto the fixed-point grid: ``quantise(c) / SCALE``, with the same fixed-point value.

    Exact in float32: an impact of at least 2**-17 already is a multiple of 2**-40 (its
    last mantissa bit is worth at least that), so it is unchanged; a smaller one becomes
    an integer below 2**23 times 2**-40, which float32 holds exactly.
    """
    return (quantise(np.asarray(impacts)).astype(np.float64) / SCALE).astype(np.float32)


def off_grid(impacts: npt.NDArray[Any]) -> int:
    """How many impacts are negative or not multiples of ``1 / SCALE`` (0 for a valid index)."""
    values = np.asarray(impacts, dtype=np.float32)
    return int(np.count_nonzero((values < 0) | (snap(values) != values)))


class OffGridError(ValueError):
    """Impacts the kernel cannot sum exactly: negative, or not :func:`snap`-ped (``count`` of them)."""

    def __init__(self, count: int) -> None:
        super().__init__(f"{count} impacts are negative or off the fixed-point grid; store snap(impacts)")
        self.count = count


class Blocks(NamedTuple):
    """Pruning bounds of a CSR index: block maxima (``ptr``, int64, vocabulary + 1, indexes the
    per-block arrays); ``kth``: per term (rows) the impact of rank ``LADDER[j]`` (columns),
    0 where the term has fewer postings; ``lowest``: per term its smallest impact (0 when it
    has none), which tells the kernel whether a posting can add 0 (e.g. ``atire``'s idf of a
    term in every document)."""

    ptr: npt.NDArray[np.int64]
    max: npt.NDArray[np.float32]
    first: npt.NDArray[np.int32]
    last: npt.NDArray[np.int32]
    kth: npt.NDArray[np.float32]
    lowest: npt.NDArray[np.float32]
    size: int = BLOCK


def kth_impacts(counts: npt.NDArray[Any], impacts: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
    """Per term (``counts`` postings each, back to back) its ``LADDER`` ranks' impacts, 0 where too few."""
    out = np.zeros((len(counts), len(LADDER)), np.float32)
    ends = np.cumsum(np.asarray(counts, dtype=np.int64))
    ladder = np.array(LADDER)
    for t in np.flatnonzero(np.asarray(counts) >= LADDER[0]).tolist():
        stop = int(ends[t])
        n = int(counts[t])
        ranks = ladder[ladder <= n]
        values = np.partition(np.asarray(impacts[stop - n:stop]), (n - ranks).tolist())
        out[t, : len(ranks)] = values[n - ranks]
    return out


def block_maxima(counts: npt.NDArray[Any], docs: npt.NDArray[Any], impacts: npt.NDArray[Any],
                 size: int = BLOCK) -> Blocks:
    """Blocks of whole terms laid out back to back (``counts`` postings each): one index, or one build range.

    ``ptr`` starts at 0; a range's arrays are concatenated by offsetting ``ptr``. Raises
    :class:`OffGridError` when an impact is negative or off the fixed-point grid (not
    :func:`snap`-ped): the kernel's float64 sums are exact only on the grid.
    """
    bad = off_grid(impacts)
    if bad:
        raise OffGridError(bad)
    counts = np.asarray(counts, dtype=np.int64)
    n_blocks = (counts + size - 1) // size
    ptr = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(n_blocks, out=ptr[1:])
    term_start = np.cumsum(counts) - counts
    owner = np.repeat(np.arange(len(counts)), n_blocks)
    start = term_start[owner] + (np.arange(int(ptr[-1])) - ptr[:-1][owner]) * size
    stop = np.minimum(start + size, (term_start + counts)[owner])
    kth = kth_impacts(counts, impacts)
    values = np.asarray(impacts, dtype=np.float32)
    lowest = np.zeros(len(counts), np.float32)
    held = np.flatnonzero(counts > 0)
    if len(held):
        lowest[held] = np.minimum.reduceat(values, (np.cumsum(counts) - counts)[held])
    if not len(start):
        return Blocks(ptr, np.empty(0, np.float32), np.empty(0, np.int32), np.empty(0, np.int32), kth, lowest, size)
    # blocks tile the postings contiguously, so reduceat's segments are exactly the blocks
    return Blocks(ptr, np.maximum.reduceat(values, start), np.asarray(docs[start], dtype=np.int32),
                  np.asarray(docs[stop - 1], dtype=np.int32), kth, lowest, size)


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


def _below(docs: Any, start: Any, stop: Any, target: Any) -> Any:  # pragma: no cover - compiled by numba
    """How many of the sorted ``docs[start:stop]`` (one block) are below ``target``: its rank there.

    Counted, not bisected: the count has no branch on the data, so it compiles to vector
    compares over the block's few cache lines, which the CPU fetches in parallel, where a
    bisection waits on one line after another (at 21M passages a probe's block is rarely
    cached: counting made probes ~1.3x faster). Unsigned indices spare numba's
    negative-index check on every read (about a third of a tight loop's time).
    """
    below = 0
    for q in range(np.uint64(start), np.uint64(stop)):
        below += docs[q] < target
    return below


def _sort_rows(rows: Any, n: Any) -> None:  # pragma: no cover - compiled by numba
    """Sort ``rows[:n]`` in place: insertion sort for the few rows left to probe, numba's sort above 64.

    The rows come as a few increasing runs (one per essential term, first touches only), so
    insertion moves little; numba's general sort costs more than that below a few dozen rows.
    """
    if n > 64:
        rows[:n].sort()
        return
    for j in range(1, n):
        x = rows[j]
        i = j
        while i > 0 and rows[i - 1] > x:
            rows[i] = rows[i - 1]
            i -= 1
        rows[i] = x


def _seek(docs: Any, block_last: Any, p: Any, e: Any, b: Any, be: Any, origin: Any, bsize: Any,
          target: Any) -> tuple[Any, Any]:  # pragma: no cover - compiled by numba
    """A term's cursor moved to its first posting with row >= ``target``: (posting, block), ``e`` if none.

    ``p`` is the cursor, ``b`` a block at or before the target's, block ``x`` starts at
    posting ``origin + x * bsize``. Whole blocks are skipped by their last row (the
    postings jumped over are never read), then the target's rank in its block is counted.
    """
    if p >= e or docs[p] >= target:
        return p, b
    while b < be and block_last[b] < target:
        b += 1
    if b == be:
        return e, b
    start = origin + b * bsize  # the first block whose last row is >= target
    return start + _below(docs, start, min(start + bsize, e), target), b


def _block_max_py(indptr: Any, docs: Any, impacts: Any, max_impact: Any, block_ptr: Any, block_max: Any,
                  block_first: Any, block_last: Any, bsize: int, kth: Any, lowest: Any, rung: int, tokens: Any, k: int,
                  width: int, acc: Any, touched: Any, stats: Any) -> tuple[Any, Any]:  # pragma: no cover - compiled by numba
    """Block-max MaxScore over windows of rows: exact top-k, best first.

    As Lucene's MaxScoreBulkScorer: terms whose global upper bounds together cannot beat
    the k-th score never start a window (a document holding only them cannot enter).
    Each window of ``width`` rows, from the next row of a remaining term, gets per-term
    bounds from the maxima of the posting blocks (``bsize`` postings) overlapping it;
    a window whose bounds sum to at most the k-th score is skipped without reading a
    posting, else its terms split again by those tighter bounds: the essential ones are
    added posting by posting into a small cache-resident accumulator, the others only
    probed (block skip + a count in the block) for rows that can still beat the k-th score,
    largest bound first. Scores are sums of grid impacts in float64 (see the module
    docstring), so every bound and comparison is exact; windows go in increasing row
    order, so a row tied with the k-th of an earlier window never displaces it, and within
    a window a tied row enters only when its row is earlier than the k-th's: ties go to
    the earlier row. Before any hit, the
    threshold starts just below the floor from ``kth[:, rung]`` (``rung`` < 0: none).
    """
    n_tok = tokens.shape[0]
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
        weight[found] += 1
    bound = np.empty(m, np.float64)
    for j in range(m):
        bound[j] = weight[j] * max_impact[uniq[j]]
    order = np.argsort(bound, kind="mergesort")
    w = np.empty(m, np.float64)
    prefix = np.empty(m, np.float64)
    pos = np.empty(m, np.int64)
    end = np.empty(m, np.int64)
    blk = np.empty(m, np.int64)
    bend = np.empty(m, np.int64)
    origin = np.empty(m, np.int64)  # block x of term r starts at posting origin[r] + x * bsize
    checked = np.empty(m, np.bool_)  # the term has zero impacts: a posting lists its row only if > 0
    total = 0.0
    for r in range(m):
        t = uniq[order[r]]
        w[r] = weight[order[r]]
        total += bound[order[r]]
        prefix[r] = total
        pos[r] = indptr[t]
        end[r] = indptr[t + 1]
        blk[r] = block_ptr[t]
        bend[r] = block_ptr[t + 1]
        origin[r] = indptr[t] - block_ptr[t] * bsize
        checked[r] = not lowest[t] > 0
    heap_s = np.empty(k, np.float64)
    heap_d = np.empty(k, np.int64)
    size = 0
    # a hit must score above 0, and above the k-th once k are held; and never below the floor: k
    # documents of one term score at least its rung's impact (a row equal to the floor still counts)
    threshold = 0.0
    if rung >= 0:
        for j in range(m):
            floor = weight[j] * np.float64(kth[uniq[j], rung])
            if floor - GRID > threshold:
                threshold = floor - GRID
    first = 0
    while first < m and prefix[first] <= threshold:
        first += 1
    wb = np.empty(m, np.float64)  # per-term bound in this window
    lorder = np.empty(m, np.int64)  # terms by window bound, ascending
    lpre = np.empty(m, np.float64)
    nb = np.empty(m, np.int64)  # per-term blocks overlapping this window
    none = np.int64(1) << 62
    while first < m:
        lo = none
        for r in range(first, m):  # the window starts at the next row of a term that can still matter
            if pos[r] < end[r]:
                lo = min(lo, np.int64(docs[pos[r]]))
        if lo == none:
            break
        hi = lo + width
        stats[0] += 1
        total = 0.0
        for r in range(m):
            b = blk[r]
            be = bend[r]
            while b < be and block_last[b] < lo:
                b += 1
            blk[r] = b
            top = 0.0
            overlap = 0
            while b < be and block_first[b] < hi:
                v = np.float64(block_max[b])
                if v > top:
                    top = v
                overlap += 1
                if block_last[b] >= hi:
                    break
                b += 1
            wb[r] = w[r] * top
            nb[r] = overlap
            total += wb[r]
        if total > threshold:
            for r in range(m):  # insertion sort by window bound (a query has few terms)
                i = r
                while i > 0 and wb[lorder[i - 1]] > wb[r]:
                    lorder[i] = lorder[i - 1]
                    i -= 1
                lorder[i] = r
            running = 0.0
            for i in range(m):
                running += wb[lorder[i]]
                lpre[i] = running
            lfirst = 0
            while lpre[lfirst] <= threshold:
                lfirst += 1
            count = 0
            stats[1] += 1
            # The essential term with the most postings here goes first: the accumulator is all
            # zero then, so its postings are stored without reading it, and their rows listed by a
            # copy of their own (it vectorises: +5% over listing inside the scatter loop).
            big = lfirst
            for i in range(lfirst + 1, m):
                if nb[lorder[i]] > nb[lorder[big]]:
                    big = i
            r = lorder[big]
            lorder[big] = lorder[lfirst]
            lorder[lfirst] = r
            for i in range(lfirst, m):
                r = lorder[i]
                e = end[r]
                p = pos[r]
                if p < e and docs[p] < lo:
                    p, blk[r] = _seek(docs, block_last, p, e, blk[r], bend[r], origin[r], bsize, lo)
                wr = w[r]
                check = checked[r]
                stop = p
                if stop < e and docs[stop] < hi:
                    stop, blk[r] = _seek(docs, block_last, stop, e, blk[r], bend[r], origin[r], bsize, hi)
                # A row is listed on its first posting; a posting of 0 (only in a term with zero
                # impacts) adds nothing and must not list it, or a later posting would list it twice.
                # The check is loop-invariant, so the compiler keeps two loops and the usual
                # all-positive term pays nothing for it (measured: the per-posting compare cost ~10%).
                if i == lfirst and not check:
                    for q in range(np.uint64(p), np.uint64(stop)):  # (unsigned indices: see _below)
                        acc[np.uint32(docs[q] - lo)] = wr * np.float64(impacts[q])
                    for q in range(np.uint64(p), np.uint64(stop)):
                        touched[q - np.uint64(p)] = np.uint32(docs[q] - lo)
                    count = stop - p
                else:  # (a first term with zero impacts: the accumulator reads 0 everywhere, as it should)
                    for q in range(np.uint64(p), np.uint64(stop)):  # branch-free: a row's first posting lists it
                        s = np.float64(impacts[q])
                        x = np.uint32(docs[q] - lo)
                        touched[count] = x
                        if check:
                            count += (acc[x] == 0) & (s > 0)  # acc == 0 means untouched
                        else:
                            count += acc[x] == 0
                        acc[x] += wr * s
                stats[2] += stop - p
                pos[r] = stop
            # The touched rows stay in first-touch order: no O(window) pass to list or sort them
            # (that pass cost about a third of a query on the generated 1M corpus); they are sorted
            # only before a term is probed, whose seeks must move forward, and after the filters
            # below have thinned them.
            ordered = False
            # The other terms, largest bound first: drop the rows that cannot beat the k-th even
            # with every term still to come (their accumulator cell goes back to 0, so a cell
            # != 0 marks a live row), then add the term into the live rows: by reading its
            # postings in the window when they are few next to the live rows (sequential, cheap
            # per posting), else by seeking each live row in it (block skip, count).
            alive = count
            for i in range(lfirst - 1, -1, -1):
                rest = lpre[i]
                kept = 0
                for j in range(np.uint64(alive)):  # branch-free: whether a row survives is unpredictable
                    x = touched[j]
                    a = acc[x]
                    live = a + rest > threshold
                    touched[kept] = x
                    kept += live
                    acc[x] = a * live
                alive = kept
                if alive == 0:
                    break
                r = lorder[i]
                wr = w[r]
                e = end[r]
                p = pos[r]
                if nb[r] * bsize <= MERGE_RATIO * alive:
                    if p < e and docs[p] < lo:
                        p, blk[r] = _seek(docs, block_last, p, e, blk[r], bend[r], origin[r], bsize, lo)
                    stop = p
                    if stop < e and docs[stop] < hi:
                        stop, blk[r] = _seek(docs, block_last, stop, e, blk[r], bend[r], origin[r], bsize, hi)
                    for q in range(np.uint64(p), np.uint64(stop)):  # branch-free: only live rows take it
                        x = np.uint32(docs[q] - lo)
                        acc[x] += (acc[x] != 0) * (wr * np.float64(impacts[q]))
                    stats[2] += stop - p
                    pos[r] = stop
                    continue
                if not ordered:
                    _sort_rows(touched, alive)
                    ordered = True
                b = blk[r]
                be = bend[r]
                for j in range(alive):
                    x = touched[j]
                    d = lo + x
                    stats[3] += 1
                    p, b = _seek(docs, block_last, p, e, b, be, origin[r], bsize, d)
                    if p == e:  # no posting at or past this row: none for the later ones either
                        break
                    if docs[p] == d:
                        acc[x] += wr * np.float64(impacts[p])
                pos[r] = p
                blk[r] = b
            for j in range(alive):  # any row order: a row tied with the k-th enters only if earlier
                x = touched[j]
                score = acc[x]
                acc[x] = 0.0
                if score > threshold or (size == k and score == threshold and lo + x < heap_d[0]):
                    stats[4] += 1
                    size = _heap_insert(heap_s, heap_d, size, k, score, lo + x)
                    if size == k:
                        threshold = heap_s[0]
        for r in range(first, m):  # the next window starts past this one
            if pos[r] < end[r] and docs[pos[r]] < hi:
                pos[r], blk[r] = _seek(docs, block_last, pos[r], end[r], blk[r], bend[r], origin[r], bsize, hi)
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
    """The numba kernel, compiled once (cached on disk by numba) (False without numba)."""
    global _compiled
    if _compiled is None:
        if numba_available():
            import numba

            jit = numba.njit(nogil=True, cache=True)
            glb = globals()
            glb["_heap_insert"] = jit(glb["_heap_insert"])
            glb["_below"] = jit(glb["_below"])
            glb["_sort_rows"] = jit(glb["_sort_rows"])
            glb["_seek"] = jit(glb["_seek"])
            _compiled = jit(_block_max_py)
        else:
            _compiled = False
    return _compiled


def maxscore_topk(indptr: npt.NDArray[Any], docs: npt.NDArray[Any], impacts: npt.NDArray[Any],
                  max_impact: npt.NDArray[Any], blocks: Blocks, tokens: npt.NDArray[Any],
                  k: int, width: int = WINDOW) -> tuple[IntArray, FloatArray]:
    """Exact top-``k`` (rows, scores), best first; the numba kernel, else :func:`exhaustive_topk`.

    The compiled kernel releases the GIL (``nogil``), so server threads search in parallel;
    each thread keeps its own window accumulator (``width`` <= 65,536 rows).
    """
    if k <= 0 or len(tokens) == 0:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    kernel = _compile()
    if kernel is False:
        return exhaustive_topk(indptr, docs, impacts, tokens, k)
    if not 1 <= width <= 1 << 16:
        raise ValueError(f"window width {width} is outside 1..65536")
    tokens = np.ascontiguousarray(tokens, dtype=np.int64)
    acc = getattr(_buffers, "acc", None)  # thread-local: each thread allocates its buffers once
    if acc is None:
        acc = _buffers.acc = np.zeros(1 << 16, np.float64)
        _buffers.touched = np.empty(1 << 16, np.uint32)  # window offsets
    # per query, for profiling: windows, windows scored, postings read in full, seeks, heap insertions
    stats = _buffers.stats = np.zeros(5, np.int64)
    rung = next((j for j, rank in enumerate(LADDER) if rank >= k), -1)
    rows, scores = kernel(indptr, docs, impacts, max_impact, blocks.ptr, blocks.max, blocks.first, blocks.last,
                         int(blocks.size), blocks.kth, blocks.lowest, rung, tokens, int(k), int(width), acc, _buffers.touched,
                         stats)
    return rows, scores
