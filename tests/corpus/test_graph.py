"""LinkGraph: CSR builders, BFS with an edge removed, shortest paths, k-hop -- checked against scipy.csgraph."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import breadth_first_order, shortest_path

from aethersearch.corpus.graph import LinkGraph, UnknownPageError
from aethersearch.errors import DataError
from aethersearch.records import Document
from tests.conftest import require_shared


def _reference(graph: LinkGraph, removed: tuple[int, int] | None) -> sp.csr_array:
    """An independent scipy matrix of the graph with ``removed`` really deleted."""
    dense = np.zeros((graph.n_nodes, graph.n_nodes))
    for u in range(graph.n_nodes):
        dense[u, graph.successors(u)] = 1
    if removed is not None:
        dense[removed] = 0
    return sp.csr_array(dense)


@st.composite
def graphs(draw: st.DrawFn) -> tuple[LinkGraph, int, int, tuple[int, int] | None]:
    n = draw(st.integers(2, 30))
    edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=n * 5))
    src = np.array([e[0] for e in edges], dtype=np.int64)
    dst = np.array([e[1] for e in edges], dtype=np.int64)
    graph = LinkGraph.from_arrays(n, src, dst)
    s = draw(st.integers(0, n - 1))
    t = draw(st.integers(0, n - 1))
    row = graph.successors(s)
    removed = (s, int(row[draw(st.integers(0, len(row) - 1))])) if len(row) and draw(st.booleans()) else None
    return graph, s, t, removed


@settings(max_examples=150, deadline=None)
@given(graphs())
def test_distances_and_paths_match_scipy_with_an_edge_removed(case: tuple) -> None:
    graph, s, t, removed = case
    ref = shortest_path(_reference(graph, removed), unweighted=True, indices=s)
    expected = np.where(np.isinf(ref), -1, ref).astype(int)
    assert np.array_equal(graph.bfs(s, removed_edge=removed).dist, expected)
    assert graph.distance(s, t, removed_edge=removed) == expected[t]
    one = graph.shortest_path(s, t, removed_edge=removed)
    many = graph.shortest_paths(s, t, removed_edge=removed, limit=1000)
    if expected[t] < 0:
        assert one is None and many == []
        return
    assert one is not None and one in many
    assert many == sorted(many) and len({tuple(p) for p in many}) == len(many)
    ref_matrix = _reference(graph, removed)
    for path in many:
        assert path[0] == s and path[-1] == t and len(path) - 1 == expected[t]
        assert all(ref_matrix[a, b] for a, b in pairwise(path))  # the removed link is never used


def test_all_shortest_paths_are_enumerated_and_bounded() -> None:
    # 0 -> {1, 2, 3} -> 4, plus the direct link 0 -> 4 that gets removed.
    graph = LinkGraph.from_arrays(5, np.array([0, 0, 0, 1, 2, 3, 0]), np.array([1, 2, 3, 4, 4, 4, 4]))
    assert graph.distance(0, 4) == 1
    assert graph.shortest_paths(0, 4, removed_edge=(0, 4)) == [[0, 1, 4], [0, 2, 4], [0, 3, 4]]
    assert graph.shortest_paths(0, 4, removed_edge=(0, 4), limit=2) == [[0, 1, 4], [0, 2, 4]]
    assert graph.has_edge(0, 4)  # removal never mutates the graph


def test_k_hop_neighbourhood_matches_scipy_breadth_first_order() -> None:
    rng = np.random.default_rng(3)
    graph = LinkGraph.from_arrays(200, rng.integers(0, 200, 600), rng.integers(0, 200, 600))
    order = breadth_first_order(graph.to_csr(), 7, directed=True, return_predecessors=False)
    assert set(graph.k_hop(7, 10_000).tolist()) == set(order.tolist())
    dist = shortest_path(graph.to_csr(), unweighted=True, indices=7)
    assert graph.k_hop(7, 2).tolist() == np.flatnonzero(dist <= 2).tolist()
    assert graph.k_hop(7, 0).tolist() == [7]


def test_large_frontiers_use_bottom_up_and_agree_with_scipy() -> None:
    rng = np.random.default_rng(5)
    n = 20_000
    graph = LinkGraph.from_arrays(n, rng.integers(0, n, 300_000), rng.integers(0, n, 300_000))
    for source in (0, 17, 999):
        target = int(graph.successors(source)[0])
        got = graph.bfs(source, removed_edge=(source, target)).dist
        matrix = graph.to_csr().tolil()
        matrix[source, target] = 0
        ref = shortest_path(sp.csr_array(matrix), unweighted=True, indices=source)
        assert np.array_equal(got, np.where(np.isinf(ref), -1, ref).astype(int))


def test_builders_from_documents_and_link_rows_agree() -> None:
    docs = [Document(id="a", title="A", text="", links=["b", "c"]), Document(id="b", title="B", text="", links=["c"]),
            Document(id="c", title="C", text="", links=["a", "c"])]  # self-link dropped
    from_docs = LinkGraph.from_documents(docs)
    rows = [{"source": "a", "target": "b"}, {"source": "a", "target": "c"}, {"source": "b", "target": "c"},
            {"source": "c", "target": "a"}, {"source": "a", "target": "b"}]  # duplicate de-duplicated
    from_rows = LinkGraph.from_link_rows(rows, ids=["a", "b", "c"])
    assert from_docs.n_edges == from_rows.n_edges == 4
    assert np.array_equal(from_docs.indptr, from_rows.indptr) and np.array_equal(from_docs.indices, from_rows.indices)
    assert from_docs.page_path(from_docs.shortest_path(1, 0)) == ["b", "c", "a"]
    rev = from_docs.reverse()
    assert sorted(rev.successors(from_docs.index_of("c")).tolist()) == [0, 1]


def test_bad_input_names_the_problem() -> None:
    with pytest.raises(DataError, match=r"<links>:2: .*unknown page 'zz'"):
        LinkGraph.from_link_rows([{"source": "a", "target": "b"}, {"source": "a", "target": "zz"}], ids=["a", "b"])
    with pytest.raises(DataError, match="'source' and 'target'"):
        LinkGraph.from_link_rows([{"from": "a"}])
    with pytest.raises(UnknownPageError, match="'nope'"):
        LinkGraph.from_link_rows([{"source": "a", "target": "b"}]).index_of("nope")


@pytest.mark.realdata
def test_wikispeedia_graph_from_snap_files() -> None:
    links = require_shared("wikispeedia/wikispeedia_paths-and-graph/links.tsv")
    articles = require_shared("wikispeedia/wikispeedia_paths-and-graph/articles.tsv")
    graph = LinkGraph.from_wikispeedia(links, articles)
    rows = [line.split("\t") for line in links.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]
    self_links = sum(a == b for a, b in rows)
    assert len(rows) == 119_882 and self_links == 110
    assert graph.n_nodes == 4604 and graph.n_edges == 119_882 - self_links  # self-links are not paths
    assert "Åland" in graph  # URL-decoded ids
    paris, france = graph.index_of("Paris"), graph.index_of("France")
    assert graph.has_edge(paris, france)
    matrix = graph.to_csr().tolil()
    matrix[paris, france] = 0
    ref = shortest_path(sp.csr_array(matrix), unweighted=True, indices=paris)
    assert graph.distance(paris, france, removed_edge=(paris, france)) == int(ref[france]) == 2


def test_out_of_range_node_indices_are_refused_not_wrapped() -> None:
    graph = LinkGraph.from_arrays(4, np.array([0, 1, 2]), np.array([1, 2, 3]))
    assert graph.distance(0, 3) == 3
    # numpy would read index -1 as the last page and answer a question nobody asked
    for call in (lambda: graph.bfs(-1), lambda: graph.distance(0, -1), lambda: graph.shortest_path(4, 0),
                 lambda: graph.k_hop(-2, 1), lambda: graph.distance(0, 3, removed_edge=(0, 9))):
        with pytest.raises(UnknownPageError, match="outside the graph's 4 pages"):
            call()
