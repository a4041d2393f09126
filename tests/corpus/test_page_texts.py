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
