"""bm25-maxscore: results identical to exhaustive BM25 on random corpora; streaming build; wiring."""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aethersearch.corpus.store import build_store
from aethersearch.records import Document
from aethersearch.search import maxscore
from aethersearch.search.impact_build import idf, impacts_of
from aethersearch.search.index_dir import build_index, open_index

PLAIN = {"stemmer": None, "stopwords": None}
WORDS = [f"w{i}" for i in range(40)]
# Zipf-like word choice: a few very common words (long posting lists), many rare ones
word = st.integers(0, 39).map(lambda i: WORDS[min(i, int(i * i / 39))])
doc_words = st.lists(word, min_size=0, max_size=25)


def _tokens(text: str) -> list[str]:
    return re.findall(r"\b\w\w+\b", text.lower())


def _brute_force(texts: list[str], query: str, k: int, k1: float = 1.5, b: float = 0.75) -> list[tuple[int, float]]:
    """Score every document against every query token (no postings, no pruning), rank, cut.

    Counting is independent of the index; the per-(term, document) float32 value uses the
    one scoring rule (``impacts_of``), summed in fixed point as the contract says.
    """
    docs = [_tokens(t) for t in texts]
    n = len(docs)
    lengths = np.array([len(d) for d in docs], dtype=np.int32)
    avg = float(lengths.mean()) or 1.0
    df = Counter(term for d in docs for term in set(d))
    q = [t for t in _tokens(query) if t in df]
    scored = []
    for row, terms in enumerate(docs):
        tf = Counter(terms)
        total = 0
        for term in q:
            if tf[term]:
                term_idf = idf("lucene", n, np.array([df[term]], dtype=np.int64))
                impact = impacts_of(np.array([tf[term]]), np.array([len(terms)]), term_idf, k1, b, avg)
                total += math.floor(float(impact[0]) * 2.0**40 + 0.5)  # the contract's fixed point
        if total > 0:
            scored.append((row, total / 2.0**40))
    scored.sort(key=lambda p: (-p[1], p[0]))
    return scored[:k]


def _build(root: Path, texts: list[str], **config: object):  # type: ignore[no-untyped-def]
    store = build_store([Document(id=f"d{i}", title="", text=t) for i, t in enumerate(texts)], root / "store")
    return build_index(store, "bm25-maxscore", root / "idx", config={**PLAIN, **config}, overwrite=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corpus=st.lists(doc_words, min_size=1, max_size=60),
       queries=st.lists(st.lists(word, min_size=1, max_size=6), min_size=1, max_size=5),
       k=st.sampled_from([1, 2, 3, 10, 1000]), chunk=st.integers(1, 200))
def test_results_identical_to_exhaustive_scoring(tmp_path_factory: pytest.TempPathFactory, corpus: list[list[str]],
                                                 queries: list[list[str]], k: int, chunk: int) -> None:
    texts = [" ".join(words) for words in corpus]
    opened = _build(tmp_path_factory.mktemp("h"), texts, chunk_tokens=chunk, range_postings=max(chunk // 3, 1))
    index = opened.index
    for words in [*queries, ["zz_unknown", *queries[0]], queries[0] + queries[0]]:
        query = " ".join(words)
        expected = _brute_force(texts, query, k)
        got = index.topk_rows(index.query_token_ids(query), k)
        assert got == expected, (query, k)  # same rows, same order, bit-identical scores
        assert index.search([query], k)[0] == [(f"d{r}", s) for r, s in expected]


def _csr(corpus: list[list[int]], vocab_size: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A CSR index over ``corpus`` (term ids per row) whose impacts are drawn from a few values (many exact ties)."""
    rows_by_term: dict[int, list[int]] = {}
    for row, terms in enumerate(corpus):
        for t in sorted(set(terms)):
            rows_by_term.setdefault(t, []).append(row)
    indptr = np.zeros(vocab_size + 1, np.int64)
    for t in range(vocab_size):
        indptr[t + 1] = indptr[t] + len(rows_by_term.get(t, []))
    docs = np.array([r for t in range(vocab_size) for r in rows_by_term.get(t, [])], dtype=np.int32)
    rng = np.random.default_rng(seed)
    impacts = rng.choice(np.array([0.25, 0.5, 1.0, 1.5, 3.75], np.float32), size=len(docs))
    return indptr, docs, impacts


term = st.integers(0, 29).map(lambda i: int(i * i / 29))  # Zipf-like: term 0 is in most rows


@settings(max_examples=150, deadline=None)
@given(corpus=st.lists(st.lists(term, max_size=12), min_size=1, max_size=400),
       query=st.lists(term, min_size=1, max_size=8), k=st.sampled_from([1, 2, 3, 7, 50, 1000]),
       block=st.sampled_from([1, 2, 3, 8, 128]), width=st.sampled_from([1, 2, 5, 16, 64, 8192, 65536]),
       seed=st.integers(0, 3))
def test_block_max_kernel_equals_numpy_accumulator(corpus: list[list[int]], query: list[int], k: int, block: int,
                                                   width: int, seed: int) -> None:
    """The pruned kernel and the no-numba fallback return the same arrays, whatever the block and window sizes.

    Tiny blocks and windows make every path run on a small corpus: windows skipped on
    their block bounds, terms essential in one window and probed in the next, cursors
    jumping whole blocks.
    """
    pytest.importorskip("numba")
    indptr, docs, impacts = _csr(corpus, 30, seed)
    max_impact = np.array([impacts[indptr[t]:indptr[t + 1]].max(initial=0.0) for t in range(30)], dtype=np.float64)
    blocks = maxscore.block_maxima(np.diff(indptr), docs, impacts, block)
    tokens = np.array(query, dtype=np.int64)
    slow = maxscore.exhaustive_topk(indptr, docs, impacts, tokens, k)
    fast = maxscore.maxscore_topk(indptr, docs, impacts, max_impact, blocks, tokens, k, width)
    assert fast[0].tolist() == slow[0].tolist()
    assert fast[1].tolist() == slow[1].tolist()


def test_a_tie_touched_late_in_a_window_still_goes_to_the_earlier_row() -> None:
    """Rows of a window are scored in first-touch order, not row order: a tie must still keep the earlier row.

    Row 1 holds only the first term read, row 0 only the second, with equal impacts: the
    kernel meets row 1 first, and row 0 must then displace it as the single hit.
    """
    pytest.importorskip("numba")
    indptr = np.array([0, 1, 2], np.int64)
    docs = np.array([1, 0], np.int32)
    impacts = np.array([1.5, 1.5], np.float32)
    max_impact = np.array([1.5, 1.5], np.float64)
    blocks = maxscore.block_maxima(np.diff(indptr), docs, impacts)
    for query in ([0, 1], [1, 0]):
        tokens = np.array(query, np.int64)
        for k in (1, 2):
            fast = maxscore.maxscore_topk(indptr, docs, impacts, max_impact, blocks, tokens, k)
            assert fast[0].tolist() == [0, 1][:k], (query, k)
            assert fast[1].tolist() == maxscore.exhaustive_topk(indptr, docs, impacts, tokens, k)[1].tolist()


def _index(rows: dict[int, list[int]], impacts: list[float]) -> tuple[np.ndarray, ...]:
    """A CSR index from term -> rows (impacts in posting order) and its pruning bounds."""
    indptr = np.cumsum([0] + [len(rows[t]) for t in range(len(rows))]).astype(np.int64)
    docs = np.array([r for t in range(len(rows)) for r in rows[t]], np.int32)
    values = np.array(impacts, np.float32)
    max_impact = np.array([values[indptr[t]:indptr[t + 1]].max(initial=0.0) for t in range(len(rows))], np.float64)
    return indptr, docs, values, max_impact, maxscore.block_maxima(np.diff(indptr), docs, values)


def test_the_kth_score_floor_keeps_rows_equal_to_it() -> None:
    """Three rows of term a score exactly its 3rd-largest impact: the top-3 floor; all three must be found.

    (Starting the threshold *at* the floor instead of just below it would return nothing.)
    """
    pytest.importorskip("numba")
    indptr, docs, impacts, max_impact, blocks = _index({0: [0, 5, 9]}, [1.5, 1.5, 1.5])
    assert blocks.kth[0, maxscore.LADDER.index(3)] == np.float32(1.5)
    fast = maxscore.maxscore_topk(indptr, docs, impacts, max_impact, blocks, np.array([0]), 3)
    assert fast[0].tolist() == [0, 5, 9]
    assert fast[1].tolist() == [1.5, 1.5, 1.5]


def test_the_floor_for_top_k_comes_from_a_rank_of_at_least_k() -> None:
    """Term a's 3rd-largest impact (3.75) bounds a top-3 list, not a top-7 one, whose 7th row scores 0.25.

    A floor from a rank below k would drop rows 3-6 (term b) from the top-7.
    """
    pytest.importorskip("numba")
    rows = {0: [0, 1, 2], 1: [3, 4, 5, 6]}
    indptr, docs, impacts, max_impact, blocks = _index(rows, [3.75] * 3 + [0.25] * 4)
    for k in (3, 7):
        tokens = np.array([0, 1], np.int64)
        fast = maxscore.maxscore_topk(indptr, docs, impacts, max_impact, blocks, tokens, k)
        slow = maxscore.exhaustive_topk(indptr, docs, impacts, tokens, k)
        assert fast[0].tolist() == slow[0].tolist() == list(range(k)), k
        assert fast[1].tolist() == slow[1].tolist()


def test_rows_touched_out_of_order_are_probed_in_row_order() -> None:
    """A probed term's cursor only moves forward, so a window's live rows must be probed in row order.

    Row 0 (term a) sets the k-th score 3.75; in the next window a and b are essential and
    the low term c is probed: a reaches row 100 before b reaches row 70, and both rows
    need c to beat the k-th. Probing row 100 first would skip row 70's c.
    """
    pytest.importorskip("numba")
    rows = {0: [0, 100], 1: [70], 2: list(range(64, 128))}  # terms a, b, c
    indptr = np.cumsum([0] + [len(rows[t]) for t in range(3)]).astype(np.int64)
    docs = np.array([r for t in range(3) for r in rows[t]], np.int32)
    impacts = np.array([3.75] * 3 + [0.25] * 64, np.float32)
    max_impact = np.array([3.75, 3.75, 0.25], np.float64)
    blocks = maxscore.block_maxima(np.diff(indptr), docs, impacts, 1)
    for query in ([0, 1, 2], [1, 0, 2]):
        tokens = np.array(query, np.int64)
        fast = maxscore.maxscore_topk(indptr, docs, impacts, max_impact, blocks, tokens, 1, 64)
        assert fast[0].tolist() == [70], query
        assert fast[1].tolist() == maxscore.exhaustive_topk(indptr, docs, impacts, tokens, 1)[1].tolist()


@pytest.mark.parametrize("per_term", [30, 70])  # 60 live rows (sorted by insertion), 140 (numba's sort)
def test_many_live_rows_from_two_runs_are_probed_in_row_order(per_term: int) -> None:
    """Live rows arrive as one increasing run per essential term; both sorts must order them before probing.

    Terms a (rows from 3000) and b (rows from 1000) are essential (top-3 floor 3.75); the
    low term c holds every row up to 12,000, too many to read for the live rows, so each is
    probed. The top 3 are b's first rows with c (3.85); probing a's run first would move
    c's cursor past b's rows and rank a's rows first.
    """
    pytest.importorskip("numba")
    rows = {0: list(range(3000, 3000 + 2 * per_term, 2)), 1: list(range(1000, 1000 + per_term)),
            2: list(range(12000))}
    indptr, docs, impacts, max_impact, blocks = _index(rows, [3.75] * (2 * per_term) + [0.1] * 12000)
    for query in ([0, 1, 2], [1, 0, 2]):
        tokens = np.array(query, np.int64)
        fast = maxscore.maxscore_topk(indptr, docs, impacts, max_impact, blocks, tokens, 3, 1 << 16)
        slow = maxscore.exhaustive_topk(indptr, docs, impacts, tokens, 3)
        assert fast[0].tolist() == slow[0].tolist() == [1000, 1001, 1002], query
        assert fast[1].tolist() == slow[1].tolist()
        assert maxscore._buffers.stats[3] > 0, "term c was read, not probed: the test no longer covers probing"


@settings(max_examples=300, deadline=None)
@given(value=st.floats(0, 63.75, width=32))
def test_snap_moves_an_impact_onto_the_grid_keeping_its_fixed_point_value(value: float) -> None:
    """The kernel sums stored impacts in float64; that is exact only because each is a multiple of 2**-40."""
    impact = np.array([value], np.float32)
    snapped = maxscore.snap(impact)
    assert maxscore.off_grid(snapped) == 0
    assert maxscore.quantise(snapped)[0] == maxscore.quantise(impact)[0]
    if value >= 2.0**-17:  # float32 values this large are already on the grid
        assert snapped[0] == impact[0]


def test_block_maxima_refuses_impacts_off_the_grid_or_negative() -> None:
    indptr = np.array([0, 2], np.int64)
    docs = np.array([0, 1], np.int32)
    for impacts in ([1e-7, 0.5], [-0.25, 0.5]):
        with pytest.raises(ValueError, match="off the fixed-point grid"):
            maxscore.block_maxima(np.diff(indptr), docs, np.array(impacts, np.float32))
    maxscore.block_maxima(np.diff(indptr), docs, maxscore.snap(np.array([1e-7, 0.5], np.float32)))


def test_tiny_and_zero_impacts_score_exactly() -> None:
    """Impacts below 2**-17 (snapped) and postings worth 0 (a whole term, as ``atire`` gives a term in
    every document, or single postings) rank exactly as exhaustive scoring, each row once.

    A zero posting adds nothing, so the accumulator still reads 0 after it: were its row listed,
    a later posting would list it again and the row would be scored (and probed) twice.
    """
    pytest.importorskip("numba")
    rng = np.random.default_rng(5)
    for case in range(300):
        n_docs, n_terms = int(rng.integers(10, 300)), int(rng.integers(2, 8))
        corpus = [[t for t in range(n_terms) if rng.random() < 0.5] for _ in range(n_docs)]
        indptr, docs, _ = _csr(corpus, n_terms, case)
        draw = rng.random(len(docs))
        impacts = np.where(draw < 0.2, 0.0, np.where(draw < 0.5, rng.uniform(1e-9, 1e-5, len(docs)),
                                                     rng.uniform(1e-5, 1e-3, len(docs))))
        dead = int(rng.integers(0, n_terms))
        impacts[indptr[dead]:indptr[dead + 1]] = 0.0
        impacts = maxscore.snap(impacts.astype(np.float32))
        max_impact = np.array([impacts[indptr[t]:indptr[t + 1]].max(initial=0.0) for t in range(n_terms)])
        blocks = maxscore.block_maxima(np.diff(indptr), docs, impacts, int(rng.choice([1, 2, 8, 128])))
        tokens = rng.integers(0, n_terms, size=rng.integers(1, 6)).astype(np.int64)
        k, width = int(rng.choice([1, 3, 10, 1000])), int(rng.choice([1, 8, 64, 65536]))
        slow = maxscore.exhaustive_topk(indptr, docs, impacts, tokens, k)
        fast = maxscore.maxscore_topk(indptr, docs, impacts, max_impact, blocks, tokens, k, width)
        assert fast[0].tolist() == slow[0].tolist(), (case, tokens.tolist(), k, width)
        assert fast[1].tolist() == slow[1].tolist(), (case, tokens.tolist(), k, width)


def test_a_zero_posting_does_not_list_its_row_twice() -> None:
    """Row 5 holds term a with impact 0, then b (both essential), then the probed term c.

    Were row 5 listed on a's zero posting, b would list it again (its cell still reads 0),
    and c would be probed into it twice: 2.5 instead of 2.25.
    """
    pytest.importorskip("numba")
    rows = {0: [5, 10, 11, 12], 1: [5], 2: list(range(1000))}
    indptr, docs, impacts, max_impact, blocks = _index(rows, [0.0, 1.0, 1.0, 1.0, 2.0] + [0.25] * 1000)
    assert blocks.lowest.tolist() == [0.0, 2.0, 0.25]
    tokens = np.array([0, 1, 2], np.int64)
    for k in (1, 3):
        fast = maxscore.maxscore_topk(indptr, docs, impacts, max_impact, blocks, tokens, k)
        slow = maxscore.exhaustive_topk(indptr, docs, impacts, tokens, k)
        assert fast[1].tolist() == slow[1].tolist() and fast[1][0] == 2.25, k
        assert fast[0].tolist() == slow[0].tolist(), k
        assert maxscore._buffers.stats[3] > 0, "term c was read, not probed: the test no longer covers probing"


def test_an_index_built_before_impacts_were_snapped_must_be_rebuilt(tmp_path: Path) -> None:
    """Old impacts below 2**-17 are off the grid: adding the bounds refuses, naming the file and the fix."""
    from aethersearch.errors import DataError
    from aethersearch.search.impact_build import BLOCK_FILES, IMPACTS, write_blocks

    _build(tmp_path, ["red fox jumps", "lazy dog sleeps", "red dog runs"])
    directory = tmp_path / "idx" / "bm25-maxscore"
    impacts = np.load(directory / IMPACTS)
    impacts[0] = np.float32(3e-7)  # as an earlier release stored it
    np.save(directory / IMPACTS, impacts)
    (directory / BLOCK_FILES[5]).unlink()
    with pytest.raises(DataError, match="off the fixed-point grid") as error:
        write_blocks(directory, 2)
    assert "rebuild the index" in str(error.value) and IMPACTS in str(error.value)


def test_block_maxima_bound_every_block() -> None:
    rng = np.random.default_rng(0)
    corpus = [rng.integers(0, 5, size=rng.integers(0, 6)).tolist() for _ in range(700)]
    indptr, docs, impacts = _csr(corpus, 5, 1)
    blocks = maxscore.block_maxima(np.diff(indptr), docs, impacts, 16)
    for t in range(5):
        spans = range(int(indptr[t]), int(indptr[t + 1]), 16)
        assert blocks.ptr[t + 1] - blocks.ptr[t] == len(spans)
        for b, start in zip(range(int(blocks.ptr[t]), int(blocks.ptr[t + 1])), spans, strict=True):
            stop = min(start + 16, int(indptr[t + 1]))
            assert blocks.max[b] == impacts[start:stop].max()
            assert (blocks.first[b], blocks.last[b]) == (docs[start], docs[stop - 1])


def test_ties_go_to_the_earliest_store_row(tmp_path: Path) -> None:
    texts = ["alpha beta"] * 7 + ["gamma"] + ["alpha beta"] * 3
    index = _build(tmp_path, texts).index
    assert [r for r, _ in index.topk_rows(index.query_token_ids("beta alpha"), 3)] == [0, 1, 2]
    hits = index.topk_rows(index.query_token_ids("alpha"), 1000)
    assert [r for r, _ in hits] == [0, 1, 2, 3, 4, 5, 6, 8, 9, 10]  # never the non-matching row 7


def test_streaming_chunks_give_the_same_index_as_one_chunk(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    texts = [" ".join(rng.choice(WORDS, size=rng.integers(1, 30))) for _ in range(300)]
    one = _build(tmp_path / "one", texts, chunk_tokens=10**9, range_postings=10**9).index
    many = _build(tmp_path / "many", texts, chunk_tokens=37, range_postings=11)
    assert many.manifest.build_stats["chunks"] > 50
    for name in ("indptr", "docs", "impacts", "max_impact"):
        assert np.array_equal(getattr(one, name), getattr(many.index, name)), name
    for field, a, b in zip(maxscore.Blocks._fields, one.blocks, many.index.blocks, strict=True):
        assert np.array_equal(a, b), field  # block maxima written range by range equal one pass's
    assert not list((tmp_path / "many" / "idx").glob("spill.*"))  # spilled runs are removed


def test_impacts_match_the_written_out_lucene_formula(tmp_path: Path) -> None:
    texts = ["the cat sat on the mat with another cat", "dogs chase cats in the park", "a mat is flat"]
    index = _build(tmp_path, texts).index
    docs = [_tokens(t) for t in texts]
    avg = sum(map(len, docs)) / len(docs)
    for row, s in index.topk_rows(index.query_token_ids("cat mat"), 10):
        want = 0.0
        for q in ("cat", "mat"):
            tf, df = docs[row].count(q), sum(q in d for d in docs)
            if tf:
                want += math.log(1 + (3 - df + 0.5) / (df + 0.5)) * tf / (tf + 1.5 * (0.25 + 0.75 * len(docs[row]) / avg))
        assert s == pytest.approx(want, rel=1e-6)


def test_same_ranking_as_the_bm25s_backend_on_the_demo_world(demo_world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store = build_store(demo_world.documents, tmp_path / "store")
    ours = build_index(store, "bm25-maxscore", tmp_path / "ours").index
    ref = build_index(store, "bm25", tmp_path / "ref", config={"dtype": "float64", "sparse_max_fraction": 1.0}).index
    for fact in demo_world.facts[:25]:
        a, b = ours.search([fact.question], 10)[0], ref.search([fact.question], 10)[0]
        assert [s for _, s in a] == pytest.approx([s for _, s in b], rel=1e-5)
        assert [d for d, _ in a][:3] == [d for d, _ in b][:3] or a[2][1] == pytest.approx(a[3][1], rel=1e-5)


def test_reopened_index_has_the_same_hash_and_results(tmp_path: Path) -> None:
    texts = ["red fox jumps", "lazy dog sleeps", "red dog runs"]
    built = _build(tmp_path, texts)
    again = open_index(tmp_path / "idx", verify=True)
    assert again.manifest.index_hash == built.manifest.index_hash
    assert again.index.search(["red dog"], 3) == built.index.search(["red dog"], 3)
    assert built.manifest.build_stats["postings"] == 9


def test_without_numba_the_fallback_gives_the_same_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    texts = [" ".join(rng.choice(WORDS[:12], size=rng.integers(1, 20))) for _ in range(200)]
    index = _build(tmp_path, texts).index
    queries = ["w0 w1 w5", "w11 w11 w3", "w2"]
    pruned = [index.topk_rows(index.query_token_ids(q), 5) for q in queries]
    monkeypatch.setattr(maxscore, "_compiled", False)
    assert [index.topk_rows(index.query_token_ids(q), 5) for q in queries] == pruned


def test_cli_builds_it_and_the_server_serves_it(tmp_path: Path) -> None:
    import asyncio

    import httpx
    from typer.testing import CliRunner

    from aethersearch.cli import app
    from aethersearch.search.server import _open_app

    runner = CliRunner()
    assert runner.invoke(app, ["corpus", "demo", "--out", str(tmp_path / "demo")]).exit_code == 0
    built = runner.invoke(app, ["index", "build", str(tmp_path / "demo" / "corpus.jsonl"), "--backend",
                                "bm25-maxscore", "--out", str(tmp_path / "idx"), "--set", "k1=1.2"])
    assert built.exit_code == 0, built.output
    opened = open_index(tmp_path / "idx")
    assert opened.manifest.backend == "bm25-maxscore" and opened.manifest.config["k1"] == 1.2
    title = opened.store.doc_at(7).title
    server = _open_app(str(tmp_path / "idx"), None, None)

    async def ask() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=server), base_url="http://t") as client:
            return await client.post("/retrieve", json={"queries": [title], "topk": 3, "return_scores": True})

    response = asyncio.run(ask())
    assert response.status_code == 200
    hits = response.json()["result"][0]
    assert [h["document"]["id"] for h in hits] == [d for d, _ in opened.index.search([title], 3)[0]]
    assert opened.store.doc_at(7).id in [h["document"]["id"] for h in hits]


@pytest.mark.parametrize("missing", [1, 4, 5])  # block maxima; k-th impacts; lowest impacts (earlier releases)
def test_an_index_without_pruning_bounds_says_how_to_add_them(tmp_path: Path, missing: int) -> None:
    from aethersearch.errors import DataError
    from aethersearch.search.impact_build import BLOCK_FILES, load_csr, write_blocks

    _build(tmp_path, ["red fox jumps", "lazy dog sleeps", "red dog runs"])
    directory = tmp_path / "idx" / "bm25-maxscore"
    expected = load_csr(directory)[4]
    (directory / BLOCK_FILES[missing]).unlink()
    with pytest.raises(DataError, match="no pruning bounds") as error:
        load_csr(directory)
    assert "write_blocks" in str(error.value)
    write_blocks(directory, 2)
    for field, a, b in zip(maxscore.Blocks._fields, expected, load_csr(directory)[4], strict=True):
        assert np.array_equal(a, b), field


def test_block_max_kernel_on_many_skewed_random_indexes() -> None:
    """Hundreds of random indexes whose block maxima differ (rare high impacts): pruned == exhaustive.

    Hypothesis explores shapes; this sweep makes sure the bounds that only block maxima
    give (a later block in a window holding the high impact) are exercised many times.
    """
    pytest.importorskip("numba")
    rng = np.random.default_rng(11)
    for case in range(400):
        n_docs, n_terms = int(rng.integers(20, 600)), int(rng.integers(2, 12))
        density = rng.uniform(0.05, 0.9, size=n_terms)
        corpus = [[t for t in range(n_terms) if rng.random() < density[t]] for _ in range(n_docs)]
        indptr, docs, _ = _csr(corpus, n_terms, case)
        impacts = np.where(rng.random(len(docs)) < 0.03, rng.uniform(2, 4, len(docs)),
                           rng.uniform(0.1, 0.6, len(docs))).astype(np.float32)
        max_impact = np.array([impacts[indptr[t]:indptr[t + 1]].max(initial=0.0) for t in range(n_terms)])
        blocks = maxscore.block_maxima(np.diff(indptr), docs, impacts, int(rng.choice([1, 2, 4, 8, 16])))
        tokens = rng.integers(0, n_terms, size=rng.integers(1, 7)).astype(np.int64)
        k, width = int(rng.choice([1, 2, 3, 10, 100])), int(rng.choice([1, 3, 8, 32, 128]))
        slow = maxscore.exhaustive_topk(indptr, docs, impacts, tokens, k)
        fast = maxscore.maxscore_topk(indptr, docs, impacts, max_impact, blocks, tokens, k, width)
        assert fast[0].tolist() == slow[0].tolist(), (case, tokens.tolist(), k, width)
        assert fast[1].tolist() == slow[1].tolist(), (case, tokens.tolist(), k, width)
