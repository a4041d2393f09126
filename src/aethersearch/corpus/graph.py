"""The hyperlink graph: a CSR adjacency over integer page indices, with vectorised BFS.

Why CSR and numpy frontiers: hint-free construction asks, for every candidate
question, "what is the shortest path v0 -> vn once the direct link v0 -> vn is
removed?". On a Wikipedia-sized graph (millions of pages, tens of millions of
links) a per-node Python object or a per-edge Python loop is far too slow and
too big, so the graph is two int32 arrays (``indptr``, ``indices``, rows sorted
and de-duplicated, self-links dropped) plus an ``ids`` array mapping index ->
page id. Every traversal expands a whole BFS level at once with numpy gathers
over ``indptr``/``indices``; Python only loops over levels.

Removing an edge never copies or mutates the arrays: the one position of the
removed link in its source row is skipped while that row is expanded, so many
queries can share one graph (and threads can share it safely).

Builders: :meth:`LinkGraph.from_documents` (pages with ``Document.links``: the
demo world, imported Wikispeedia), :meth:`LinkGraph.from_link_rows` (any
``{source, target}`` list), :meth:`LinkGraph.from_wikispeedia` (the SNAP
``links.tsv`` / ``articles.tsv`` files directly) and
:meth:`LinkGraph.from_arrays` (integer edge arrays, e.g. a generated graph).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote

import numpy as np
import scipy.sparse as sp

from aethersearch.errors import AetherError, DataError
from aethersearch.records import Document

__all__ = ["BFSResult", "Edge", "LinkGraph", "UnknownPageError"]

Edge = tuple[int, int]

# Below this fraction of the node count a new frontier is de-duplicated by
# sorting it; above it a scan of the distance array is cheaper than a sort.
_SORT_FRACTION = 1 / 32


class UnknownPageError(AetherError, LookupError):
    """A page id that is not a node of the graph."""


class BFSResult(NamedTuple):
    """Hop distances from the source(s) (``-1`` = not reached) and the deepest level expanded."""

    dist: np.ndarray
    depth: int


class LinkGraph:
    """Directed hyperlink graph over page ids, stored as CSR arrays (no per-node objects)."""

    __slots__ = ("ids", "indptr", "indices", "_index", "_reverse")

    def __init__(self, ids: Sequence[str] | np.ndarray, indptr: np.ndarray, indices: np.ndarray,
                 *, _reverse: LinkGraph | None = None) -> None:
        self.ids = np.asarray(ids, dtype=object)
        self.indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        self.indices = np.ascontiguousarray(indices, dtype=np.int32)
        if self.indptr.shape != (len(self.ids) + 1,) or self.indptr[-1] != len(self.indices):
            raise ValueError("indptr must have len(ids)+1 entries ending at len(indices)")
        self._index: dict[str, int] | None = None
        self._reverse = _reverse

    # ------------------------------------------------------------------ builders

    @classmethod
    def from_arrays(cls, n_nodes: int, sources: np.ndarray, targets: np.ndarray,
                    ids: Sequence[str] | None = None) -> LinkGraph:
        """Build from integer edge arrays: sorts, de-duplicates and drops self-links, all in numpy."""
        src = np.asarray(sources, dtype=np.int64)
        dst = np.asarray(targets, dtype=np.int64)
        if src.shape != dst.shape:
            raise ValueError("sources and targets must have the same length")
        if len(src) and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n_nodes):
            raise ValueError(f"edge endpoints must lie in [0, {n_nodes})")
        keep = src != dst
        keys = np.unique(src[keep] * np.int64(n_nodes) + dst[keep])
        rows = keys // n_nodes
        indices = (keys - rows * n_nodes).astype(np.int32)
        indptr = np.zeros(n_nodes + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=n_nodes), out=indptr[1:])
        names = [str(i) for i in range(n_nodes)] if ids is None else list(ids)
        if len(names) != n_nodes:
            raise ValueError("ids must have one entry per node")
        return cls(names, indptr, indices)

    @classmethod
    def from_pairs(cls, ids: Sequence[str], pairs: Iterable[tuple[str, str]], *,
                   origin: str = "<pairs>") -> LinkGraph:
        """Build over the node list ``ids`` from ``(source, target)`` page-id pairs.

        A pair naming a page outside ``ids`` is a DataError naming ``origin``
        and the pair's one-based position, because a dangling link silently
        dropped would change every shortest path computed from the graph.
        """
        index = {page: i for i, page in enumerate(ids)}
        if len(index) != len(ids):
            raise DataError(origin, "duplicate page ids in the node list", fix="give each page once")
        src: list[int] = []
        dst: list[int] = []
        for number, (source, target) in enumerate(pairs, start=1):
            try:
                src.append(index[source])
                dst.append(index[target])
            except KeyError as exc:
                raise DataError(origin, f"link {source!r} -> {target!r} names unknown page {exc.args[0]!r}",
                                line=number, fix="add the page to the node list or drop the link") from None
        return cls.from_arrays(len(ids), np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), ids)

    @classmethod
    def from_documents(cls, documents: Iterable[Document], *, drop_dangling: bool = False) -> LinkGraph:
        """Build from pages and their ``links`` (node order = document order).

        ``drop_dangling=True`` ignores links to ids that are not documents
        (e.g. a chunked corpus); by default they are a DataError.
        """
        docs = list(documents)
        ids = [doc.id for doc in docs]
        known = set(ids)
        pairs = ((doc.id, target) for doc in docs for target in doc.links
                 if not drop_dangling or target in known)
        return cls.from_pairs(ids, pairs, origin="<documents>")

    @classmethod
    def from_link_rows(cls, rows: Iterable[Mapping[str, Any]], ids: Sequence[str] | None = None, *,
                       origin: str = "<links>") -> LinkGraph:
        """Build from ``{"source": ..., "target": ...}`` rows; nodes = ``ids`` or first appearance order."""
        pairs: list[tuple[str, str]] = []
        for number, row in enumerate(rows, start=1):
            try:
                pairs.append((str(row["source"]), str(row["target"])))
            except (KeyError, TypeError):
                raise DataError(origin, "expected an object with 'source' and 'target'", line=number,
                                fix='write each link as {"source": "<page>", "target": "<page>"}') from None
        if ids is None:
            ids = list(dict.fromkeys(page for pair in pairs for page in pair))
        return cls.from_pairs(ids, pairs, origin=origin)

    @classmethod
    def from_wikispeedia(cls, links_tsv: str | Path, articles_tsv: str | Path | None = None) -> LinkGraph:
        """Read SNAP Wikispeedia ``links.tsv`` (and ``articles.tsv`` for the node list).

        Page ids are the URL-decoded article names (``%C3%85land`` -> ``Åland``),
        underscores kept, matching the plaintext file names. Comment lines
        (``#``) and blank lines are skipped; any other malformed line is a
        DataError with its line number.
        """
        def rows(path: Path, width: int) -> list[tuple[int, list[str]]]:
            out = []
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise DataError(path, f"cannot read: {exc.strerror}", fix="check the path") from None
            for number, line in enumerate(text.splitlines(), start=1):
                if not line.strip() or line.startswith("#"):
                    continue
                parts = line.split("\t")
                if len(parts) != width or not all(parts):
                    raise DataError(path, f"expected {width} tab-separated field(s), got {len(parts)}",
                                    line=number, fix="this must be the SNAP Wikispeedia file")
                out.append((number, [unquote(p) for p in parts]))
            return out

        links_path = Path(links_tsv)
        link_rows = rows(links_path, 2)
        if articles_tsv is not None:
            ids = [parts[0] for _, parts in rows(Path(articles_tsv), 1)]
        else:
            ids = list(dict.fromkeys(p for _, parts in link_rows for p in parts))
        index = {page: i for i, page in enumerate(ids)}
        src, dst = [], []
        for number, (source, target) in link_rows:
            if source not in index or target not in index:
                raise DataError(links_path, f"link {source!r} -> {target!r} names a page missing from "
                                f"articles.tsv", line=number, fix="use the matching articles.tsv")
            src.append(index[source])
            dst.append(index[target])
        return cls.from_arrays(len(ids), np.array(src), np.array(dst), ids)

    # ------------------------------------------------------------------ basics

    @property
    def n_nodes(self) -> int:
        """Number of pages."""
        return len(self.ids)

    @property
    def n_edges(self) -> int:
        """Number of distinct links (self-links excluded)."""
        return len(self.indices)

    def index_of(self, page: str) -> int:
        """Integer index of a page id; unknown ids raise UnknownPageError naming the id."""
        if self._index is None:
            self._index = {str(page_id): i for i, page_id in enumerate(self.ids)}
        try:
            return self._index[page]
        except KeyError:
            raise UnknownPageError(f"page {page!r} is not in the link graph ({self.n_nodes} pages)",
                                   fix="use a page id from the corpus the graph was built from") from None

    def __contains__(self, page: object) -> bool:
        try:
            self.index_of(str(page))
        except UnknownPageError:
            return False
        return True

    def successors(self, node: int) -> np.ndarray:
        """Sorted out-neighbour indices of ``node`` (a view, do not modify)."""
        return self.indices[self.indptr[node]:self.indptr[node + 1]]

    def edge_position(self, source: int, target: int) -> int:
        """Position of link ``source -> target`` in ``indices``, or ``-1`` if there is no such link."""
        start, end = int(self.indptr[source]), int(self.indptr[source + 1])
        pos = start + int(np.searchsorted(self.indices[start:end], target))
        return pos if pos < end and self.indices[pos] == target else -1

    def has_edge(self, source: int, target: int) -> bool:
        """Whether page ``source`` links to page ``target``."""
        return self.edge_position(source, target) >= 0

    def reverse(self) -> LinkGraph:
        """The transposed graph (in-links), built once and cached; its reverse is this graph."""
        if self._reverse is None:
            counts = np.bincount(self.indices, minlength=self.n_nodes)
            indptr = np.zeros(self.n_nodes + 1, dtype=np.int64)
            np.cumsum(counts, out=indptr[1:])
            rows = np.repeat(np.arange(self.n_nodes, dtype=np.int32), np.diff(self.indptr))
            order = np.argsort(self.indices, kind="stable")  # stable: rows stay sorted per column
            self._reverse = LinkGraph(self.ids, indptr, rows[order], _reverse=self)
        return self._reverse

    def to_csr(self) -> sp.csr_array:
        """A scipy ``csr_array`` (float64 ones) over the same arrays, for ``scipy.sparse.csgraph``."""
        data = np.ones(self.n_edges, dtype=np.float64)
        return sp.csr_array((data, self.indices, self.indptr.astype(np.int32)
                             if self.n_edges < 2**31 else self.indptr),
                            shape=(self.n_nodes, self.n_nodes))

    # ------------------------------------------------------------------ traversal

    def _removed_position(self, removed_edge: Edge | None) -> tuple[int, int]:
        if removed_edge is None:
            return -1, -1
        source, target = removed_edge
        self._check_nodes(np.array([source, target]), "removed edge")
        return int(source), self.edge_position(int(source), int(target))

    def _search(self, removed_edge: Edge | None, *, bottom_up: bool = True) -> _Search:
        rev_edge = None if removed_edge is None else (removed_edge[1], removed_edge[0])
        rev = self._reverse if not bottom_up else self.reverse()
        return _Search(self, rev, self._removed_position(removed_edge),
                       rev._removed_position(rev_edge) if rev is not None else (-1, -1), self.n_edges)

    def bfs(self, sources: int | Sequence[int] | np.ndarray, *, removed_edge: Edge | None = None,
            max_depth: int | None = None, stop_at: int | None = None) -> BFSResult:
        """Level-synchronous, direction-optimising BFS from one or more sources.

        ``removed_edge`` ``(u, v)`` is treated as absent; ``max_depth`` stops
        after that many levels; ``stop_at`` stops after the level that reaches
        that node (distances beyond it are left ``-1``). Large levels switch to
        bottom-up (each unvisited page checks its in-links against the
        frontier), which builds and caches :meth:`reverse` on first use.
        """
        dist = np.full(self.n_nodes, -1, dtype=np.int32)
        frontier = np.unique(np.atleast_1d(np.asarray(sources, dtype=np.int64)))
        self._check_nodes(frontier, "source")
        frontier = frontier.astype(np.int32)
        dist[frontier] = 0
        search = self._search(removed_edge)
        search.visit(frontier)
        depth = 0
        while len(frontier) and (max_depth is None or depth < max_depth):
            if stop_at is not None and dist[stop_at] >= 0:
                break
            frontier = search.step(frontier, dist, depth)
            depth += 1
        return BFSResult(dist, depth)

    def distance(self, source: int, target: int, *, removed_edge: Edge | None = None,
                 max_depth: int | None = None) -> int:
        """Hop distance ``source -> target`` (``-1`` if unreachable), by bidirectional BFS.

        Expands the smaller of the forward frontier (out-links) and the
        backward frontier (in-links) one level at a time and stops at the
        first level where they meet, so a point-to-point query touches a small
        part of a large graph instead of all of it.
        """
        return self._bidirectional(source, target, removed_edge, max_depth)[0]

    def _check_nodes(self, nodes: np.ndarray | int, what: str) -> None:
        """Node indices must lie in ``[0, n_nodes)``: numpy would silently wrap a negative one."""
        arr = np.atleast_1d(np.asarray(nodes))
        if len(arr) and (arr.min() < 0 or arr.max() >= self.n_nodes):
            bad = int(arr[(arr < 0) | (arr >= self.n_nodes)][0])
            raise UnknownPageError(f"{what} node index {bad} is outside the graph's {self.n_nodes} pages",
                                   fix="map page ids to indices with LinkGraph.index_of")

    def _bidirectional(self, source: int, target: int, removed_edge: Edge | None,
                       max_depth: int | None) -> tuple[int, np.ndarray, np.ndarray]:
        self._check_nodes(source, "source")
        self._check_nodes(target, "target")
        fwd = np.full(self.n_nodes, -1, dtype=np.int32)
        bwd = np.full(self.n_nodes, -1, dtype=np.int32)
        fwd[source] = 0
        bwd[target] = 0
        if source == target:
            return 0, fwd, bwd
        rev = self.reverse()
        sf = self._search(removed_edge)
        sb = rev._search(None if removed_edge is None else (removed_edge[1], removed_edge[0]))
        ff = np.array([source], dtype=np.int32)
        fb = np.array([target], dtype=np.int32)
        sf.visit(ff)
        sb.visit(fb)
        df = db = 0
        while len(ff) and len(fb) and (max_depth is None or df + db < max_depth):
            if _frontier_cost(self, ff) <= _frontier_cost(rev, fb):
                ff = sf.step(ff, fwd, df)
                df += 1
                meet = ff[bwd[ff] >= 0]
                if len(meet):
                    return int(df + bwd[meet].min()), fwd, bwd
            else:
                fb = sb.step(fb, bwd, db)
                db += 1
                meet = fb[fwd[fb] >= 0]
                if len(meet):
                    return int(db + fwd[meet].min()), fwd, bwd
        return -1, fwd, bwd

    def shortest_path(self, source: int, target: int, *, removed_edge: Edge | None = None,
                      max_depth: int | None = None) -> list[int] | None:
        """One shortest path ``[source, ..., target]`` (``None`` if unreachable), bidirectionally.

        Deterministic: the path through the smallest-index meeting page, each
        half built by taking the smallest-index parent/child one level closer
        to its end. Use :meth:`shortest_paths` for all of them.
        """
        length, fwd, bwd = self._bidirectional(source, target, removed_edge, max_depth)
        if length < 0:
            return None
        if length == 0:
            return [source]
        both = np.flatnonzero((fwd >= 0) & (bwd >= 0))
        meet = int(both[fwd[both] + bwd[both] == length].min())
        rem_u, rem_v = removed_edge if removed_edge is not None else (-1, -1)
        rev = self.reverse()
        head = [meet]
        while fwd[head[-1]] > 0:
            x = head[-1]
            parents = rev.successors(x)
            parents = parents[fwd[parents] == fwd[x] - 1]
            if x == rem_v:
                parents = parents[parents != rem_u]
            head.append(int(parents.min()))
        path = head[::-1]
        while bwd[path[-1]] > 0:
            y = path[-1]
            children = self.successors(y)
            children = children[bwd[children] == bwd[y] - 1]
            if y == rem_u:
                children = children[children != rem_v]
            path.append(int(children.min()))
        return path

    def shortest_paths(self, source: int, target: int, *, removed_edge: Edge | None = None,
                       limit: int = 16, max_depth: int | None = None) -> list[list[int]]:
        """Up to ``limit`` shortest paths ``source -> target``, in lexicographic index order.

        The distance comes from a bidirectional BFS; then depth-bounded BFS
        from both ends gives, for each node, its distance from ``source`` and
        to ``target``; a node ``x`` is on a shortest path iff the two sum to the
        distance, and paths are enumerated through such nodes only.
        """
        length = self.distance(source, target, removed_edge=removed_edge, max_depth=max_depth)
        if length < 0:
            return []
        if length == 0:
            return [[source]]
        ds = self.bfs(source, removed_edge=removed_edge, max_depth=length).dist
        rev = self.reverse()
        dt = rev.bfs(target, removed_edge=None if removed_edge is None else (removed_edge[1], removed_edge[0]),
                     max_depth=length).dist
        on_path = (ds >= 0) & (dt >= 0) & (ds + dt == length)
        rem_src, rem_pos = self._removed_position(removed_edge)
        paths: list[list[int]] = []
        stack: list[int] = [source]

        def walk(node: int) -> None:
            if len(paths) >= limit:
                return
            if node == target:
                paths.append(list(stack))
                return
            start = int(self.indptr[node])
            row = self.successors(node)
            level = ds[node] + 1
            for offset in np.flatnonzero(on_path[row] & (ds[row] == level)):
                if node == rem_src and start + int(offset) == rem_pos:
                    continue
                stack.append(int(row[offset]))
                walk(int(row[offset]))
                stack.pop()
                if len(paths) >= limit:
                    return

        walk(source)
        return paths

    def k_hop(self, source: int, k: int, *, removed_edge: Edge | None = None) -> np.ndarray:
        """Sorted indices of pages within ``k`` links of ``source`` (``source`` included)."""
        if k < 0:
            raise ValueError("k must be >= 0")
        return np.flatnonzero(self.bfs(source, removed_edge=removed_edge, max_depth=k).dist >= 0)

    def page_path(self, nodes: Sequence[int]) -> list[str]:
        """Page ids of a path of node indices."""
        return [str(self.ids[n]) for n in nodes]


def _frontier_cost(graph: LinkGraph, frontier: np.ndarray) -> int:
    """Edges a frontier would expand: the cheaper direction goes next."""
    return int((graph.indptr[frontier + 1] - graph.indptr[frontier]).sum())


def _segment_positions(indptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated ``indices`` positions of ``rows`` (in row order) and each row's length."""
    starts = indptr[rows]
    lengths = indptr[rows + 1] - starts
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64), lengths
    shift = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    shift += np.arange(total, dtype=np.int64)
    return shift, lengths


class _Search:
    """Per-query BFS state over one graph: the removed link and the unvisited in-edge count.

    ``step`` expands one level top-down (gather the frontier's out-links) or,
    when the frontier's out-links outnumber the in-links of all unvisited
    pages, bottom-up (gather the unvisited pages' in-links and keep the pages
    with a parent in the frontier): the direction-optimising BFS of Beamer et
    al. (SC 2012), vectorised per level.
    """

    __slots__ = ("graph", "rev", "removed", "removed_rev", "unvisited_in")

    def __init__(self, graph: LinkGraph, rev: LinkGraph | None, removed: tuple[int, int],
                 removed_rev: tuple[int, int], n_edges: int) -> None:
        self.graph = graph
        self.rev = rev
        self.removed = removed
        self.removed_rev = removed_rev
        self.unvisited_in = n_edges

    def visit(self, nodes: np.ndarray) -> None:
        """Account for newly visited pages (their in-links leave the bottom-up work)."""
        if self.rev is not None and len(nodes):
            self.unvisited_in -= int((self.rev.indptr[nodes + 1] - self.rev.indptr[nodes]).sum())

    def step(self, frontier: np.ndarray, dist: np.ndarray, depth: int) -> np.ndarray:
        """Mark and return (sorted) the pages first reached at ``depth + 1``."""
        graph = self.graph
        if self.rev is not None and _frontier_cost(graph, frontier) > self.unvisited_in + graph.n_nodes // 8:
            new = self._bottom_up(dist, depth)
        else:
            new = self._top_down(frontier, dist, depth)
        self.visit(new)
        return new

    def _top_down(self, frontier: np.ndarray, dist: np.ndarray, depth: int) -> np.ndarray:
        graph = self.graph
        positions, _ = _segment_positions(graph.indptr, frontier)
        source, pos = self.removed
        if pos >= 0 and dist[source] == depth:
            positions = positions[positions != pos]
        candidates = graph.indices[positions]
        candidates = candidates[dist[candidates] < 0]
        if len(candidates) < graph.n_nodes * _SORT_FRACTION:
            new = np.unique(candidates)
            dist[new] = depth + 1
            return new
        dist[candidates] = depth + 1
        return np.flatnonzero(dist == depth + 1).astype(np.int32)

    def _bottom_up(self, dist: np.ndarray, depth: int) -> np.ndarray:
        rev = self.rev
        assert rev is not None
        unvisited = np.flatnonzero(dist < 0)
        unvisited = unvisited[rev.indptr[unvisited + 1] > rev.indptr[unvisited]]
        positions, lengths = _segment_positions(rev.indptr, unvisited)
        if len(positions) == 0:
            return np.empty(0, dtype=np.int32)
        hit = dist[rev.indices[positions]] == depth
        target, pos = self.removed_rev  # the removed link, seen from its target's in-links
        if pos >= 0 and dist[target] < 0:
            at = int(np.searchsorted(positions, pos))  # positions ascend: rows sorted, rows contiguous
            if at < len(positions) and positions[at] == pos:
                hit[at] = False
        starts = np.cumsum(lengths) - lengths
        new = unvisited[np.logical_or.reduceat(hit, starts)].astype(np.int32)
        dist[new] = depth + 1
        return new
