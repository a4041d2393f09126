"""The parse of the real enwiki excerpts is pinned: speed work must not change a byte of its text or links.

The hashes were computed on main at ``69485c3`` (before issue 48's speed work on :mod:`corpus.wikitext`),
over each article's ``[title, text, links, disambiguation]`` as one JSON line, in dump order, with the
excerpt's own namespaces. A change of the parse that is meant (a new rule) updates the hash in the same
commit and says why.
"""

from __future__ import annotations

import hashlib

import orjson
import pytest

from aethersearch.corpus.mediawiki import DumpReader
from aethersearch.corpus.wikitext import parse_wikitext
from tests.conftest import require_shared

PINNED = {
    "wikipedia/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2":
        (106, "7bef2ca3d459e07c4945cf138087238ec78b574144c72457b4e7f025c513428d"),
    "wikipedia/enwiki-table-markup.xml.bz2": (5, "f0e4616013b50cf3f53275a75bddfddc84fd5057fbf5847b55b99de38ea407ce"),
}


@pytest.mark.realdata
@pytest.mark.parametrize("excerpt", sorted(PINNED))
def test_parse_of_the_real_excerpt_is_unchanged(excerpt: str) -> None:
    reader = DumpReader(require_shared(excerpt))
    pages = [(p.title, p.text) for p in reader if p.namespace == 0 and p.redirect is None]
    namespaces = frozenset(n.lower() for k, n in reader.site.namespaces.items() if n and k != 0)
    digest = hashlib.sha256()
    for title, text in pages:
        parsed = parse_wikitext(text, namespaces)
        digest.update(orjson.dumps([title, parsed.text, parsed.links, parsed.disambiguation]) + b"\n")
    assert (len(pages), digest.hexdigest()) == PINNED[excerpt]
