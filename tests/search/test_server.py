"""The retrieval server over httpx.ASGITransport: Search-R1 shapes, equality with search(), limits."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from aethersearch.search.base import IndexIdentity
from aethersearch.search.client import SearchClient
from aethersearch.search.server import ServerLimits, create_app
from aethersearch.search.wire import url_for
from tests.search.field_clients import searchr1_passages2string

WIKI = ServerLimits().url_prefix

QUERIES = ["Who directed the film?", "born in", "orchestra headquarters", "", "zzzz qqqq"]


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _post(app: Any, path: str, **kwargs: Any) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        return await client.post(path, **kwargs)


async def _get(app: Any, path: str) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        return await client.get(path)


def _expected(demo_index, queries: list[str], k: int) -> list[list[dict[str, Any]]]:  # type: ignore[no-untyped-def]
    out = []
    for hits in demo_index.index.search(queries, k):
        rows = []
        for doc_id, score in hits:
            doc = demo_index.store.get(doc_id)
            rows.append({"document": {"id": doc_id, "contents": f'"{doc.title}"\n{doc.text}',
                                      "url": url_for(doc_id, WIKI), "title": doc.title, "text": doc.text},
                         "score": score})
        out.append(rows)
    return out


@pytest.fixture(scope="module")
def app(demo_index):  # type: ignore[no-untyped-def]
    return create_app(demo_index.index, demo_index.store)


def test_batched_results_equal_in_process_search(app, demo_index, demo_world) -> None:  # type: ignore[no-untyped-def]
    queries = QUERIES + [f.question for f in demo_world.facts[:40]]
    response = _run(_post(app, "/retrieve", json={"queries": queries, "topk": 5, "return_scores": True}))
    assert response.status_code == 200
    assert response.json() == {"result": _expected(demo_index, queries, 5)}


def test_one_by_one_and_concurrent_equal_in_process(app, demo_index, demo_world) -> None:  # type: ignore[no-untyped-def]
    queries = [f.question for f in demo_world.facts[100:160]]

    async def main() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            return list(await asyncio.gather(*(client.post("/retrieve", json={
                "queries": [q], "topk": 3, "return_scores": True}) for q in queries)))

    before = app.state.batcher.calls
    responses = _run(main())
    expected = _expected(demo_index, queries, 3)
    assert [r.json()["result"][0] for r in responses] == expected
    # 60 concurrent requests were coalesced into fewer index calls (micro-batching).
    assert app.state.batcher.calls - before < len(queries)


def test_both_response_shapes(app, demo_index) -> None:  # type: ignore[no-untyped-def]
    with_scores = _run(_post(app, "/retrieve", json={"queries": ["born in"], "topk": 2, "return_scores": True}))
    without = _run(_post(app, "/retrieve", json={"queries": ["born in"], "topk": 2, "return_scores": False}))
    hits = with_scores.json()["result"][0]
    assert set(hits[0]) == {"document", "score"} and set(hits[0]["document"]) == {"id", "contents", "url", "title", "text"}
    assert isinstance(hits[0]["score"], float)
    assert without.json() == {"result": [[h["document"] for h in hits]]}
    default = _run(_post(app, "/retrieve", json={"queries": ["born in"]}))  # return_scores defaults to false
    default_hits = default.json()["result"][0]
    assert len(default_hits) == 3 and all(set(h) == {"id", "contents", "url", "title", "text"} for h in default_hits)
    assert default_hits[:2] == without.json()["result"][0]


@pytest.mark.parametrize("topk", [None, 0])
def test_null_or_zero_topk_means_default_three(app, topk) -> None:  # type: ignore[no-untyped-def]
    response = _run(_post(app, "/retrieve", json={"queries": ["born in"], "topk": topk}))
    assert len(response.json()["result"][0]) == 3


def test_empty_inputs_never_invent_documents(app) -> None:  # type: ignore[no-untyped-def]
    assert _run(_post(app, "/retrieve", json={"queries": []})).json() == {"result": []}
    body = _run(_post(app, "/retrieve", json={"queries": ["", "qqqq zzzz"], "topk": 3})).json()
    assert body == {"result": [[], []]}
    small = create_app(*_tiny_index())
    big_k = _run(_post(small, "/retrieve", json={"queries": ["alpha"], "topk": 50, "return_scores": True})).json()
    assert [h["document"]["id"] for h in big_k["result"][0]] == ["a"]


def _tiny_index():  # type: ignore[no-untyped-def]
    import tempfile
    from pathlib import Path

    from aethersearch.corpus.store import build_store
    from aethersearch.records import Document
    from aethersearch.search.index_dir import build_index

    root = Path(tempfile.mkdtemp())
    store = build_store([Document(id="a", title="A", text="alpha beta"), Document(id="b", title="B", text="gamma")],
                        root / "s")
    opened = build_index(store, "bm25", root / "i")
    return opened.index, opened.store


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"queries": ["x"], "topk": 101}, 422, "topk 101 exceeds the limit of 100"),
    ({"queries": ["x"], "topk": -2}, 422, "topk must be >= 0"),
    ({"queries": ["x"] * 16385}, 422, "batch of 16385 queries exceeds the limit of 16384"),
    ({"queries": ["x" * 4097]}, 422, "exceeding the limit of 4096 characters"),
    ({"queries": "not a list"}, 422, "invalid request: queries"),
    ({"topk": 3}, 422, "invalid request: queries"),
])
def test_limits_return_their_status_and_say_the_limit(app, body, status, message) -> None:  # type: ignore[no-untyped-def]
    response = _run(_post(app, "/retrieve", json=body))
    assert response.status_code == status
    assert message in response.json()["detail"]


def test_body_size_limit_is_413(demo_index) -> None:  # type: ignore[no-untyped-def]
    app = create_app(demo_index.index, demo_index.store, ServerLimits(max_body_bytes=1000))
    response = _run(_post(app, "/retrieve", json={"queries": ["word " * 300]}))
    assert response.status_code == 413
    assert "exceeds the limit of 1000 bytes" in response.json()["detail"]

    async def chunked() -> httpx.Response:  # no Content-Length header: the stream is counted
        async def body():  # type: ignore[no-untyped-def]
            for _ in range(20):
                yield b'{"queries": ["' + b"a" * 100
        return await _post(app, "/retrieve", content=body())

    assert _run(chunked()).status_code == 413


def test_invalid_json_is_422(app) -> None:  # type: ignore[no-untyped-def]
    response = _run(_post(app, "/retrieve", content=b"{not json"))
    assert response.status_code == 422 and "invalid request" in response.json()["detail"]


def test_access_returns_pages_by_id_or_url(app, demo_world) -> None:  # type: ignore[no-untyped-def]
    page = demo_world.documents[3]
    urls = [page.id, f"https://en.wikipedia.org/wiki/{page.id}", "no_such_page"]
    body = _run(_post(app, "/access", json={"urls": urls})).json()
    assert body["result"][0] == {"url": page.id, "id": page.id, "title": page.title, "contents": page.contents}
    assert body["result"][1]["id"] == page.id
    assert body["result"][2] is None
    too_many = _run(_post(app, "/access", json={"urls": ["x"] * 65}))
    assert too_many.status_code == 422 and "limit of 64 urls" in too_many.json()["detail"]


def test_health_reports_hashes_and_sizes(app, demo_index) -> None:  # type: ignore[no-untyped-def]
    async def get() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            return await client.get("/health")

    body = _run(get()).json()
    assert body["index_hash"] == demo_index.index.index_hash
    assert body["corpus_hash"] == demo_index.store.content_hash
    assert body["documents"] == len(demo_index.store) and body["backend"] == "bm25"
    assert body["limits"]["max_topk"] == 100


def test_searchr1_request_response_round_trip(app, demo_index) -> None:  # type: ignore[no-untyped-def]
    """The exact payload Search-R1's generation code sends, and how it renders the reply."""
    payload = {"queries": ["Where was Tinli Pratavli born?"], "topk": 3, "return_scores": True}
    result = _run(_post(app, "/retrieve", json=payload)).json()["result"]

    rendered = searchr1_passages2string(result[0])
    top = demo_index.store.get(result[0][0]["document"]["id"])
    assert rendered.startswith(f'Doc 1(Title: "{top.title}") {top.text}\n')
    assert rendered.count("Doc ") == 3

    async def via_client() -> Any:
        async with SearchClient("http://t", transport=httpx.ASGITransport(app=app)) as client:
            return await client.retrieve_raw(payload["queries"], 3, True), await client.retrieve(payload["queries"], 3)

    raw, parsed = _run(via_client())
    assert raw == {"result": result}
    assert parsed[0][0].document.title == top.title and parsed[0][0].document.text == top.text


class _BlockedIndex(IndexIdentity):
    """The real demo index, held inside its search() until released, to show the event loop stays free."""

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        import threading

        self.inner, self.entered, self.release = inner, threading.Event(), threading.Event()
        self._corpus_hash, self._index_hash = inner.corpus_hash, inner.index_hash

    def search(self, queries, k):  # type: ignore[no-untyped-def]
        self.entered.set()
        assert self.release.wait(timeout=60)
        return self.inner.search(queries, k)


def test_index_call_never_blocks_the_event_loop(demo_index) -> None:  # type: ignore[no-untyped-def]
    blocked = _BlockedIndex(demo_index.index)
    app = create_app(blocked, demo_index.store)

    async def main() -> None:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            slow = asyncio.create_task(client.post("/retrieve", json={"queries": ["born in"]}))
            while not blocked.entered.is_set():
                await asyncio.sleep(0.01)
            health = await client.get("/health")  # answered while the index call is still running
            assert health.status_code == 200 and not slow.done()
            blocked.release.set()
            response = await slow
            assert response.status_code == 200 and len(response.json()["result"][0]) == 3

    _run(main())


def test_access_reads_whole_pages_when_the_index_holds_passages(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from aethersearch.corpus.chunking import ChunkConfig
    from aethersearch.corpus.importers import import_corpus
    from aethersearch.search.index_dir import build_index

    result = import_corpus("demo", "-", tmp_path / "passages", chunk=ChunkConfig(mode="words", size=15, overlap=5),
                           pages_out=tmp_path / "pages")
    opened = build_index(result.store, "bm25", tmp_path / "idx")
    assert result.pages is not None
    app = create_app(opened.index, opened.store, pages=result.pages)
    page = result.pages.doc_at(0)
    body = _run(_post(app, "/access", json={"urls": [page.id]})).json()
    assert body["result"][0]["contents"] == page.contents
    hits = _run(_post(app, "/retrieve", json={"queries": [page.title]})).json()["result"][0]
    assert all("#" in h["id"] for h in hits)  # passages, each pointing at its page


class _Float32Index(IndexIdentity):
    """An index that hands back numpy float32 scores (as bm25s and dense matrices produce them)."""

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self.inner = inner
        self._corpus_hash, self._index_hash = inner.corpus_hash, inner.index_hash

    def search(self, queries, k):  # type: ignore[no-untyped-def]
        import numpy as np

        return [[(d, np.float32(s) + np.float32(1e-3)) for d, s in hits] for hits in self.inner.search(queries, k)]


def test_float32_scores_come_back_exactly_as_in_process(demo_index) -> None:  # type: ignore[no-untyped-def]
    index = _Float32Index(demo_index.index)
    response = _run(_post(create_app(index, demo_index.store), "/retrieve",
                          json={"queries": QUERIES[:3], "topk": 3, "return_scores": True}))
    assert response.status_code == 200
    got = [[(h["document"]["id"], h["score"]) for h in hits] for hits in response.json()["result"]]
    assert got == [[(d, float(s)) for d, s in hits] for hits in index.search(QUERIES[:3], 3)]  # bit-exact
    assert any(hits for hits in got)


class _FailingIndex(_Float32Index):
    def search(self, queries, k):  # type: ignore[no-untyped-def]
        raise RuntimeError("index file vanished")


def test_index_failure_is_a_500_and_the_server_keeps_serving(demo_index) -> None:  # type: ignore[no-untyped-def]
    app = create_app(_FailingIndex(demo_index.index), demo_index.store)

    async def main() -> tuple[httpx.Response, httpx.Response, httpx.Response]:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            failed = await client.post("/retrieve", json={"queries": ["born in"]})
            wrong_method = await client.get("/retrieve")
            return failed, wrong_method, await client.get("/health")

    failed, wrong_method, health = _run(main())
    assert failed.status_code == 500 and wrong_method.status_code == 405 and health.status_code == 200


class _RowVectors:
    """Query ``"q<i>"`` encodes to a fixed vector (the encoder is not what this test is about)."""

    def __init__(self, table: Any) -> None:
        self.table = table

    def encode(self, texts: list[str], *, is_query: bool) -> Any:
        return self.table[[int(t[1:]) for t in texts]]


def _tricky_documents() -> list[Any]:
    """Demo pages plus rows every part of the hit rule treats specially."""
    from aethersearch.corpus.demo_world import generate_world
    from aethersearch.records import Document

    return [*generate_world(seed=0).documents[:200],
            Document(id="AC/DC", title='"Quoted" band', text='They said "hi".\nSecond line'),
            Document(id="Zürich 100%", title="Zürich", text="a city; ünïcode and a tab\there"),
            Document(id="own_url", title="Own", text="t", url="https://example.org/own"),
            Document(id="7", title="Search-R1 row", text="x", source_contents='"Search-R1 row"\nx  ', source_id=7),
            Document(id="empty", title="", text="")]


def _faiss_over(store: Any, count: int) -> Any:
    """A Flat faiss index whose query ``"q<i>"`` is row i's own unit vector (its own best match)."""
    faiss = pytest.importorskip("faiss", reason="needs the faiss extra (pip install 'aethersearch[faiss]')")
    import numpy as np

    from aethersearch.search.faiss_index import FaissConfig, FaissIndex

    vectors = np.random.default_rng(0).standard_normal((count, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    flat = faiss.IndexFlatIP(16)
    flat.add(vectors)
    return FaissIndex(flat, _RowVectors(vectors), store, FaissConfig(), "c", "i", gpu_enabled=False, cpu_type="x")


def test_hits_read_by_store_row_equal_hits_read_by_id(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A faiss index over the server's own store is read by row (no id round trip); the reply is the same."""
    from aethersearch.corpus.store import build_store, open_store
    from aethersearch.search.server import Retriever

    documents = _tricky_documents()
    store = build_store(documents, tmp_path / "store")
    index = _faiss_over(store, len(documents))
    queries = [[f"q{i}", ""] for i in range(0, len(documents), 3)]
    by_row = Retriever(index, store)
    by_id = Retriever(index, open_store(tmp_path / "store"))  # another store object: rows are not shared
    assert by_row.rows_of(index) is not None and by_id.rows_of(index) is None
    got, expected = by_row(queries, 5), by_id(queries, 5)
    assert got == expected
    assert [doc["id"] for doc, _ in got[0][0]][0] == store.id_at(0)  # q0's own vector is its best hit
    assert all(hits[1] == [] for hits in got)  # an empty query finds nothing either way


def test_pre_encoded_wire_rows_give_the_same_reply_bytes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``--wire-rows`` hits, spliced in unparsed, are byte for byte the hits built per request; written for
    another url prefix they are left unused (and /health says so), never served with the wrong urls."""
    from aethersearch.corpus.store import build_store
    from aethersearch.search.wire import WireRows, write_wire_rows

    documents = _tricky_documents()
    store = build_store(documents, tmp_path / "store")
    plain = _faiss_over(store, len(documents))
    encoded = _faiss_over(store, len(documents))
    stats = write_wire_rows(store, tmp_path, "https://en.wikipedia.org/wiki/")
    assert stats["rows"] == len(documents) and stats["bytes"] > 0
    encoded.wire_rows = WireRows(tmp_path, stats["url_prefix"], len(store))
    body = {"queries": [f"q{i}" for i in range(len(documents) - 6, len(documents))] + ["q0", ""], "topk": 4}
    for scores in (True, False):
        request = {**body, "return_scores": scores}
        expected = _run(_post(create_app(plain, store), "/retrieve", json=request))
        got = _run(_post(create_app(encoded, store), "/retrieve", json=request))
        assert got.status_code == expected.status_code == 200
        assert got.content == expected.content
    assert _run(_get(create_app(encoded, store), "/health")).json()["wire_rows"] == "used"
    other = ServerLimits(url_prefix="http://localhost/wiki/")
    app = create_app(encoded, store, other)
    assert _run(_get(app, "/health")).json()["wire_rows"].startswith("unused: written for url prefix")
    reply = _run(_post(app, "/retrieve", json={**body, "return_scores": False})).json()["result"]
    assert reply[0][0]["url"].startswith("http://localhost/wiki/")
    assert _run(_post(create_app(plain, store, other), "/retrieve", json={**body, "return_scores": False})).json()["result"] == reply


def test_one_query_calls_faiss_below_its_python_wrapper(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Issue 49, point 8: one query per call on HNSW32 at 1M was 0.76 of bare faiss, the gap all Python after
    the search. The server path now calls faiss's C++ ``search_c`` with its own checks and buffers, never the
    Python ``search`` wrapper; the hits are the wrapper's, and a vector of the wrong dimension is an error
    naming the fix, never a read past the array."""
    from aethersearch.corpus.store import build_store
    from aethersearch.errors import IntegrityError
    from aethersearch.search.server import Retriever

    documents = _tricky_documents()
    store = build_store(documents, tmp_path / "store")
    index = _faiss_over(store, len(documents))
    retriever = Retriever(index, store)
    expected = retriever([["q0"], ["q5", "q9"]], 4)
    scores, rows = index.index.search(index.encoder.encode(["q5"], is_query=True), 4)

    def wrapper_called(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("the server path went through faiss's Python search wrapper")

    monkeypatch.setattr(type(index.index), "search", wrapper_called)
    assert retriever([["q0"], ["q5", "q9"]], 4) == expected
    assert index.search_rows(["q5"], 4) == [list(zip(rows[0].tolist(), scores[0].tolist(), strict=True))]
    index.encoder = _RowVectors(index.encoder.table[:, :8])  # an encoder of another dimension
    with pytest.raises(IntegrityError, match="dimension 16"):
        index.search_rows(["q1"], 3)
