"""PageTexts: a page store read back on demand behaves as the dict of its pages, in the same order."""

from __future__ import annotations

from pathlib import Path

import pytest

from aethersearch.corpus.hashing import corpus_hash
from aethersearch.corpus.page_texts import LruCache, PageTexts, page_titles, pages_hash
from aethersearch.records import Document

DOCS = [Document(id=f"P{i}", title=f"Page {i}", text=f"Text of page {i}.", links=[f"P{(i + 1) % 5}"])
        for i in (3, 1, 4, 0, 2)]


def test_a_page_store_reads_back_as_the_mapping_of_its_pages(tmp_path: Path) -> None:
    pages = PageTexts.write(iter(DOCS), tmp_path / "pages", source="test")
    by_id = {doc.id: doc for doc in DOCS}
    assert list(pages) == list(by_id) and len(pages) == 5  # store order = the order written
    assert list(pages.values()) == DOCS
    assert pages["P4"] == by_id["P4"] and pages["P4"] is pages["P4"]  # the second read is the cached page
    assert "P2" in pages and "P9" not in pages and 7 not in pages
    with pytest.raises(KeyError):
        pages["P9"]
    assert dict(page_titles(pages)) == page_titles(by_id) == {doc.id: doc.title for doc in DOCS}
    assert pages_hash(pages) == pages_hash(by_id) == corpus_hash(DOCS)


def test_the_cache_keeps_its_budget_and_the_most_recent_entries() -> None:
    cache = LruCache(10)
    cache.put("a", "A", 4)
    cache.put("b", "B", 4)
    assert cache.get("a") == "A"  # a is now the most recent
    cache.put("c", "C", 4)  # over budget: b, the least recent, goes
    assert cache.get("b") is None and cache.get("a") == "A" and cache.get("c") == "C" and cache.used == 8
    cache.put("big", "X", 50)  # one entry always stays, even over budget
    assert cache.get("big") == "X" and cache.get("a") is None and cache.used == 50


def test_a_streamed_pass_that_hands_mapped_pages_back_still_reads_every_line(tmp_path: Path) -> None:
    big = [Document(id=f"B{i}", title=f"Big {i}", text="word " * 2000, links=[]) for i in range(12)]
    pages = PageTexts.write(iter(big), tmp_path / "pages", source="test")
    lines = list(pages.store.stream_raw(release_every=1))  # a release after every line (10 KB each, > a page)
    assert lines == [pages.store.raw_line(row) for row in range(12)] and list(pages.values()) == big
    assert pages["B3"] == big[3]  # the map still reads after its pages were handed back


def _file_pages_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("RssFile:"))


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads Linux's /proc/self/status")
def test_pages_read_at_random_do_not_stay_resident(tmp_path: Path) -> None:
    # a common answer word sends the validator to most pages of a corpus, by id; each read's mapped file
    # pages stayed resident, so the construction's RSS grew with the whole store (700 MiB at 400k articles)
    import random

    from aethersearch.corpus import page_texts

    count = 3 * page_texts.RELEASE_EVERY
    docs = (Document(id=f"P{i}", title=f"Page {i}", text=f"w{i} " + "x" * 8000, links=[]) for i in range(count))
    pages = PageTexts.write(docs, tmp_path / "pages", source="test", overwrite=True)
    order = [f"P{i}" for i in range(count)]
    random.Random(0).shuffle(order)
    before = _file_pages_mib()
    for page in order:
        assert pages[page].text.startswith(f"w{page[1:]} ")
    grown = _file_pages_mib() - before
    store_mib = (tmp_path / "pages" / "documents.jsonl").stat().st_size / 2**20
    # at most the reads since the last hand-back (4,096 pages of 8 KB: 32 MiB) stay mapped, of a 96 MiB store
    assert grown < store_mib / 2, f"{grown:.0f} MiB of the {store_mib:.0f} MiB store stayed resident"


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads Linux's /proc/self/status")
def test_a_pass_over_the_store_does_not_stay_resident(tmp_path: Path) -> None:
    # the streamed passes (titles, facts, token index) hand the map back behind their read position
    docs = (Document(id=f"P{i}", title=f"Page {i}", text="x" * 8000, links=[]) for i in range(12_000))
    pages = PageTexts.write(docs, tmp_path / "pages", source="test")
    before = _file_pages_mib()
    assert sum(1 for _ in pages.store.stream_raw()) == 12_000
    grown = _file_pages_mib() - before
    store_mib = (tmp_path / "pages" / "documents.jsonl").stat().st_size / 2**20
    assert grown < store_mib / 2, f"{grown:.0f} MiB of the {store_mib:.0f} MiB store stayed resident"
