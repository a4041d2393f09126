"""Real Wikispeedia pages, imported once per session (skipped when ../shared/data is absent)."""

from __future__ import annotations

import pytest

from tests.conftest import SHARED_DATA, require_shared


@pytest.fixture(scope="session")
def wikispeedia_documents() -> list:
    require_shared("wikispeedia/plaintext_articles.tar.gz")
    require_shared("wikispeedia/wikispeedia_paths-and-graph/links.tsv")
    from aethersearch.corpus.importers import iter_wikispeedia, wikispeedia_paths

    return list(iter_wikispeedia(*wikispeedia_paths(SHARED_DATA / "wikispeedia")))
