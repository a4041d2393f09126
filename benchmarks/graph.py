"""BFS-with-edge-removal throughput of ``LinkGraph`` vs ``scipy.sparse.csgraph`` on the same queries.

A query is what hint-free construction asks: remove the direct link v0 -> vn
and find the shortest remaining path v0 -> vn. The graph is generated: N nodes,
M random directed links (default 1M / 20M, int32 CSR). The queries are
(v0, vn) pairs where vn is a random out-neighbour of v0.

Measured side by side in one run, same graph, same queries:

* ``point-to-point``: ``LinkGraph.shortest_path(v0, vn, removed_edge=...)``
  (bidirectional BFS + path) vs scipy ``breadth_first_order`` from v0 (scipy
  has no early exit, so it answers the query with a full BFS and reads the
  path from its predecessor array). The edge is removed for scipy by pointing
  its slot at v0 itself (a self-loop, which BFS ignores) and restoring it after
  the call, so scipy pays no copy either.
* ``full single-source``: ``LinkGraph.bfs(v0, removed_edge=...)`` (all
  distances) vs the same scipy call, for the k-hop/neighbourhood use.

Prints medians and the ratio ours/scipy per query type (target <= 1.5).
Run: ``.venv/bin/python benchmarks/graph.py`` (or ``--quick`` for 100K/2M).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from scipy.sparse.csgraph import breadth_first_order

from aethersearch.corpus.graph import LinkGraph


def _generate(n_nodes: int, n_edges: int, seed: int) -> LinkGraph:
    rng = np.random.default_rng(seed)
    # Over-draw a little so ~n_edges remain after removing duplicates and self-links.
    draw = int(n_edges * 1.0001) + 16
    src = rng.integers(0, n_nodes, draw, dtype=np.int64)
    dst = rng.integers(0, n_nodes, draw, dtype=np.int64)
    return LinkGraph.from_arrays(n_nodes, src, dst)


def _queries(graph: LinkGraph, count: int, seed: int) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed + 1)
    out: list[tuple[int, int]] = []
    while len(out) < count:
        v0 = int(rng.integers(graph.n_nodes))
        row = graph.successors(v0)
        if len(row):
            out.append((v0, int(row[rng.integers(len(row))])))
    return out


def _scipy_path(csr, v0: int, vn: int, pos: int) -> tuple[list[int] | None, float]:
    indices = csr.indices
    saved = indices[pos]
    indices[pos] = v0  # neutralise v0 -> vn as a self-loop
    try:
        t0 = time.perf_counter()
        _, pred = breadth_first_order(csr, v0, directed=True, return_predecessors=True)
        path: list[int] | None = None
        if pred[vn] >= 0:
            path = [vn]
            while path[-1] != v0:
                path.append(int(pred[path[-1]]))
            path.reverse()
        elapsed = time.perf_counter() - t0
    finally:
        indices[pos] = saved
    return path, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100K nodes / 2M edges, 10 queries")
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--edges", type=int, default=20_000_000)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.edges, args.queries = 100_000, 2_000_000, 10

    t0 = time.perf_counter()
    graph = _generate(args.nodes, args.edges, args.seed)
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    graph.reverse()
    csr = graph.to_csr()
    prep_s = time.perf_counter() - t0
    queries = _queries(graph, args.queries, args.seed)
    print(f"graph: {graph.n_nodes:,} nodes, {graph.n_edges:,} edges; built in {build_s:.2f} s, "
          f"reverse + scipy csr in {prep_s:.2f} s; {len(queries)} queries")

    ours_p2p, ref_p2p, ours_full, ref_full = [], [], [], []
    for v0, vn in queries:
        removed = (v0, vn)
        t0 = time.perf_counter()
        path = graph.shortest_path(v0, vn, removed_edge=removed)
        ours_p2p.append(time.perf_counter() - t0)
        ref_path, elapsed = _scipy_path(csr, v0, vn, graph.edge_position(v0, vn))
        ref_p2p.append(elapsed)
        if (path is None) != (ref_path is None) or (path and len(path) != len(ref_path)):
            raise SystemExit(f"MISMATCH on query {v0}->{vn}: ours {path} scipy {ref_path}")

        t0 = time.perf_counter()
        dist = graph.bfs(v0, removed_edge=removed).dist
        ours_full.append(time.perf_counter() - t0)
        pos = graph.edge_position(v0, vn)
        saved = csr.indices[pos]
        csr.indices[pos] = v0
        t0 = time.perf_counter()
        order = breadth_first_order(csr, v0, directed=True, return_predecessors=False)
        ref_full.append(time.perf_counter() - t0)
        csr.indices[pos] = saved
        if int((dist >= 0).sum()) != len(order):
            raise SystemExit(f"MISMATCH reach count from {v0}: ours {(dist >= 0).sum()} scipy {len(order)}")

    def report(name: str, ours: list[float], ref: list[float]) -> None:
        mo, mr = statistics.median(ours), statistics.median(ref)
        print(f"{name:<22} ours median {mo * 1e3:9.2f} ms ({1 / mo:8.1f} q/s)   "
              f"scipy median {mr * 1e3:9.2f} ms ({1 / mr:8.1f} q/s)   ratio ours/scipy {mo / mr:6.3f} "
              f"({'meets' if mo / mr <= 1.5 else 'MISSES'} target <= 1.5)")

    print("all answers agree with scipy (path lengths, reach counts)")
    report("point-to-point path", ours_p2p, ref_p2p)
    report("full single-source", ours_full, ref_full)


if __name__ == "__main__":
    main()
