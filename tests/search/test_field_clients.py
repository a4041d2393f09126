"""The default server under Search-R1's and ASearcher's own client calls, over real loopback HTTP.

Must show (issue 15): Search-R1's ``train_grpo.sh`` turn (2,560 queries in one request)
and verl's default validation turn (1,312) through Search-R1's client against the
*default* limits; ASearcher's search-then-access round trip; full URLs with ``/`` in
the title; passage ids on a chunked corpus; contents and ids passed through byte for
byte; a small request that would produce a huge reply refused with 413.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from aethersearch.corpus.chunking import ChunkConfig
from aethersearch.corpus.importers import import_corpus
from aethersearch.search.index_dir import build_index
from aethersearch.search.server import ServerLimits, create_app
from tests.search.field_clients import (
    asearcher_access,
    asearcher_query,
    searchr1_batch_search,
    searchr1_passages2string,
)
from tests.serving import serving_app as serving


def _turn(demo_world: Any, n: int) -> list[str]:
    """``n`` distinct queries like a training turn's (questions, some reworded)."""
    base = [f.question for f in demo_world.facts]
    return [base[i % len(base)] + ("" if i < len(base) else f" {i}") for i in range(n)]


@pytest.mark.parametrize("batch", [2560, 1312], ids=["train_grpo.sh", "verl-validation"])
def test_searchr1_training_turn_through_its_client_on_the_default_server(demo_index, demo_world, batch) -> None:  # type: ignore[no-untyped-def]
    queries = _turn(demo_world, batch)
    app = create_app(demo_index.index, demo_index.store)  # the defaults, unmodified
    with serving(app) as url:
        rendered = searchr1_batch_search(f"{url}/retrieve", queries, topk=3)
    assert len(rendered) == batch
    expected = []
    for hits in demo_index.index.search(queries, 3):
        docs = [{"document": {"contents": demo_index.store.get(d).contents}} for d, _ in hits]
        expected.append(searchr1_passages2string(docs))
    assert rendered == expected
    assert sum(r.count("Doc ") for r in rendered) >= batch  # real hits, not empty strings


def test_asearcher_search_then_access_round_trip(demo_index, demo_world) -> None:  # type: ignore[no-untyped-def]
    app = create_app(demo_index.index, demo_index.store)
    queries = [f.question for f in demo_world.facts[:5]]

    async def main(url: str) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
        found = await asearcher_query(url, {"queries": queries, "topk": 3, "return_scores": False})
        pages = [await asearcher_access(url, hit["urls"]) for hit in found]
        return found, pages

    with serving(app) as url:
        found, pages = asyncio.run(main(url))
    assert len(found) == len(queries)
    for hit, opened in zip(found, pages, strict=True):
        assert len(hit["urls"]) == 3 and all(u.startswith("https://en.wikipedia.org/wiki/") for u in hit["urls"])
        assert [p["page"] for p in opened] == hit["documents"]  # every url opens the page it came from


def _jsonl_corpus(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return path


@pytest.fixture(scope="module")
def odd_corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, list[dict[str, Any]]]:
    rows = [
        {"id": 0, "contents": "Bare Title\nno quotes around the title of zebra"},
        {"id": 1, "contents": '"Carriage"\r\nwindows line ending zebra\r\nsecond line'},
        {"id": 2, "contents": "a row without any newline about zebra"},
        {"id": "AC/DC", "contents": '"AC/DC"\nAustralian rock band zebra'},
        {"id": "DC", "contents": '"DC"\nDistrict of Columbia zebra'},
        {"id": "quoted", "contents": '"Quoted"\nan ordinary row about zebra'},
    ]
    root = tmp_path_factory.mktemp("odd")
    result = import_corpus("jsonl", _jsonl_corpus(root / "c.jsonl", rows), root / "store")
    opened = build_index(result.store, "bm25", root / "idx")
    return opened, rows


def test_contents_and_ids_pass_through_byte_for_byte(odd_corpus) -> None:  # type: ignore[no-untyped-def]
    opened, rows = odd_corpus
    app = create_app(opened.index, opened.store)
    with serving(app) as url:
        import requests

        body = requests.post(f"{url}/retrieve", json={"queries": ["zebra"], "topk": 10}, timeout=30).content
        pages = requests.post(f"{url}/access", json={"urls": ["0", "2"]}, timeout=30).json()["result"]
    hits = orjson.loads(body)["result"][0]
    by_id = {orjson.dumps(h["id"]): h for h in hits}
    assert len(hits) == len(rows)
    for row in rows:
        hit = by_id[orjson.dumps(row["id"])]  # 0 stays the integer 0, never "0"
        assert hit["contents"] == row["contents"]
    assert orjson.dumps(rows[1]["contents"]) in body  # the \r\n bytes on the wire, unchanged
    assert [p["contents"] for p in pages] == [rows[0]["contents"], rows[2]["contents"]]
    assert [p["id"] for p in pages] == [0, 2]
    # the rows that needed nothing kept their canonical store line (so corpus hashes did not move)
    assert "source_contents" not in opened.store.raw_at(5) and "source_id" not in opened.store.raw_at(5)


def test_access_takes_full_urls_whose_title_has_a_slash(odd_corpus) -> None:  # type: ignore[no-untyped-def]
    opened, _ = odd_corpus
    app = create_app(opened.index, opened.store)

    async def main(url: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        found = await asearcher_query(url, {"queries": ["Australian rock band"], "topk": 1, "return_scores": False})
        by_url = await asearcher_access(url, [
            "https://en.wikipedia.org/wiki/AC/DC", "https://en.wikipedia.org/wiki/AC%2FDC",
            "https://en.wikipedia.org/w/index.php?title=AC/DC", "https://en.wikipedia.org/wiki/DC",
            found[0]["urls"][0], "https://en.wikipedia.org/wiki/No_such_page"])
        return found, by_url

    with serving(app) as url:
        found, pages = asyncio.run(main(url))
    assert found[0]["urls"] == ["https://en.wikipedia.org/wiki/AC/DC"]
    acdc, dc = '"AC/DC"\nAustralian rock band zebra', '"DC"\nDistrict of Columbia zebra'
    assert [p["page"] for p in pages] == [acdc, acdc, acdc, dc, acdc, ""]


def test_passage_ids_and_their_urls_open_pages_on_a_chunked_corpus(tmp_path: Path) -> None:
    result = import_corpus("demo", "-", tmp_path / "passages", chunk=ChunkConfig(mode="words", size=15, overlap=5),
                           pages_out=tmp_path / "pages")
    assert result.pages is not None
    opened = build_index(result.store, "bm25", tmp_path / "idx")
    page = result.pages.doc_at(0)
    app = create_app(opened.index, opened.store, pages=result.pages)

    async def main(url: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        found = await asearcher_query(url, {"queries": [page.title], "topk": 3, "return_scores": False})
        by_passage = await asearcher_access(url, [f"{page.id}#1", f"https://en.wikipedia.org/wiki/{page.id}#1"])
        return found, await asearcher_access(url, found[0]["urls"]), by_passage

    with serving(app) as url:
        found, via_urls, by_passage = asyncio.run(main(url))
    assert [p["page"] for p in by_passage] == [page.contents, page.contents]
    assert all(p["page"].startswith('"') for p in via_urls)  # every hit's url opens its whole page
    assert any(p["page"] == page.contents for p in via_urls)
    assert all("#" not in u for u in found[0]["urls"])


def test_a_small_request_cannot_produce_a_huge_reply(tmp_path: Path) -> None:
    words = [f"w{i}" for i in range(40)]
    rows = [{"id": str(i), "contents": f'"Doc {i}"\n' + " ".join(words) + " " + ("filler " * 8000)} for i in range(120)]
    result = import_corpus("jsonl", _jsonl_corpus(tmp_path / "big.jsonl", rows), tmp_path / "store")
    opened = build_index(result.store, "bm25", tmp_path / "idx")
    queries = [" ".join(words[i % 40:i % 40 + 3]) for i in range(130)]
    payload = orjson.dumps({"queries": queries, "topk": 100, "return_scores": True})
    assert len(payload) < 13_000  # about the 13 KB request that once produced a 722 MB reply
    app = create_app(opened.index, opened.store)  # default limits: 64 MB per reply

    with serving(app) as url:
        import requests

        refused = requests.post(f"{url}/retrieve", data=payload, headers={"content-type": "application/json"},
                                timeout=120)
        small = requests.post(f"{url}/retrieve", json={"queries": queries[:2], "topk": 3}, timeout=60)
    assert refused.status_code == 413, refused.status_code
    assert len(refused.content) < 1000
    detail = refused.json()["detail"]
    assert "response limit of 67,108,864 bytes" in detail and "--max-response-mb" in detail
    assert small.status_code == 200 and len(small.json()["result"][0]) == 3


def test_response_limit_refuses_only_the_request_that_passes_it(demo_index) -> None:  # type: ignore[no-untyped-def]
    app = create_app(demo_index.index, demo_index.store, ServerLimits(max_response_bytes=4000))

    async def main(url: str) -> list[int]:
        import aiohttp

        async with aiohttp.ClientSession() as session:
            async def post(body: dict[str, Any]) -> int:
                async with session.post(f"{url}/retrieve", json=body) as response:
                    return response.status
            return list(await asyncio.gather(post({"queries": ["born in"] * 50, "topk": 10}),
                                             post({"queries": ["born in"], "topk": 1}),
                                             post({"queries": ["born in"] * 50, "topk": 10})))

    with serving(app) as url:
        statuses = asyncio.run(main(url))
    assert statuses == [413, 200, 413]
