"""Real data: Wikispeedia imported (4,604 pages, 119,882 links), indexed and searched."""

from __future__ import annotations

from pathlib import Path

import pytest

from aethersearch.corpus.importers import import_corpus
from aethersearch.search.index_dir import build_index
from tests.conftest import require_shared


@pytest.mark.realdata
def test_wikispeedia_import_index_search(tmp_path: Path) -> None:
    root = require_shared("wikispeedia").parent / "wikispeedia"
    require_shared("wikispeedia/plaintext_articles.tar.gz")
    require_shared("wikispeedia/wikispeedia_paths-and-graph/links.tsv")
    result = import_corpus("wikispeedia", root, tmp_path / "pages")
    store = result.store
    assert len(store) == 4604
    assert sum(len(d.links) for d in store) == 119882
    assert (result.links.read, result.links.kept, result.links.dropped) == (119882, 119882, 0)
    egypt = store.get("Ancient_Egypt")  # URL-decoded ids, titles with spaces
    assert egypt.title == "Ancient Egypt" and "Nile" in egypt.text and "Nile" in egypt.links
    assert store.get("\u00c5land").title == "\u00c5land"
    assert not egypt.text.startswith("#copyright") and "2007 Schools Wikipedia Selection" not in egypt.text[:200]

    index = build_index(store, "bm25", tmp_path / "index").index
    hits = index.search(["pharaoh pyramids nile", "zulu warriors kwazulu natal", "photosynthesis chlorophyll"], 5)
    assert "Ancient_Egypt" in [d for d, _ in hits[0]]
    assert [d for d, _ in hits[1]][0] == "Zulu"
    assert "Photosynthesis" in [d for d, _ in hits[2]]
