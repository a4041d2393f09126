"""Pages read back from the on-disk page store on demand: construction without every page's text in memory.

A full dump's article text is tens of GB; the construction needs each page's
text only when it reads that page (a seed's subject, a chain's pages, one
streamed pass for the typed facts). :class:`PageTexts` is a read-only
``Mapping[str, Document]`` over a :class:`~aethersearch.corpus.store.JsonlStore`
(memory-mapped lines, an offset per row, an on-disk id index): ``pages[id]``
reads one line, ``values()`` streams the store in its order, and only the
titles (names stay in memory by design: seeds and facts are matched by them)
and a small cache of recently read pages are held. Iteration order is store
order, which is the order the pages were written in, so a construction over
``PageTexts`` sees the pages exactly as it would see the ``dict`` of them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, ValuesView
from pathlib import Path

import orjson

from aethersearch.corpus.hashing import corpus_hash
from aethersearch.corpus.store import JsonlStore, build_store
from aethersearch.records import Document

#: pages kept decoded after a read (a chain search reads the same few pages many times)
CACHE_PAGES = 256
#: pages read by id between two hand-backs of the store's mapped file pages: the validator reads most pages
#: of a corpus at random for a common answer word, and without a hand-back each read's map pages stay resident
#: (at 400k generated articles, 700 MiB of the construction's 1.1 GiB resident memory)
RELEASE_EVERY = 4096


class LruCache:
    """A bounded least-recently-used cache, its size counted in whatever ``weight`` the caller gives each
    entry (pages, or characters of text): what construction caches per page stays constant in the corpus size."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.used = 0
        self._items: OrderedDict[object, tuple[object, int]] = OrderedDict()

    def get(self, key: object) -> object | None:
        """The cached value, or None; a hit becomes the most recent entry."""
        item = self._items.get(key)
        if item is None:
            return None
        self._items.move_to_end(key)
        return item[0]

    def put(self, key: object, value: object, weight: int = 1) -> None:
        """Cache ``value``; the least recently used entries go until the budget holds (one entry always stays)."""
        old = self._items.pop(key, None)
        if old is not None:
            self.used -= old[1]
        self._items[key] = (value, weight)
        self.used += weight
        while self.used > self.budget and len(self._items) > 1:
            _, (_, dropped) = self._items.popitem(last=False)
            self.used -= dropped


class _StreamedValues(ValuesView[Document]):
    """``values()`` of a :class:`PageTexts`: the store read once, in order, one page at a time."""

    _mapping: PageTexts

    def __iter__(self) -> Iterator[Document]:
        return self._mapping.store.stream()


class PageTexts(Mapping[str, Document]):
    """The pages of a store as a read-only mapping id -> Document, read on demand (module docstring)."""

    def __init__(self, store: JsonlStore, *, cache_pages: int = CACHE_PAGES) -> None:
        self.store = store
        self._cache = LruCache(cache_pages)
        self._reads = 0  # pages read from the store by id (the map is handed back every RELEASE_EVERY)
        self._titles: dict[str, str] | None = None

    @classmethod
    def write(cls, documents: Iterable[Document], directory: str | Path, *, source: str,
              overwrite: bool = False) -> PageTexts:
        """Stream ``documents`` into a page store at ``directory`` and open it (a non-empty ``directory`` is a
        ConfigError unless ``overwrite``: ``build_store``'s rule, so a mistyped path never loses a folder)."""
        return cls(build_store(documents, directory, source=source, overwrite=overwrite))

    def __getitem__(self, page_id: str) -> Document:
        cached = self._cache.get(page_id)
        if cached is not None:
            return cached  # type: ignore[return-value]
        row = self.store.row_of(page_id)
        if row is None:
            raise KeyError(page_id)
        doc = self.store.doc_at(row)
        self._cache.put(page_id, doc)
        self._reads += 1
        if self._reads % RELEASE_EVERY == 0:
            self.store.release_mapped()
        return doc

    def __contains__(self, page_id: object) -> bool:
        return page_id in self.store

    def __iter__(self) -> Iterator[str]:
        return self.store.ids()

    def __len__(self) -> int:
        return len(self.store)

    def values(self) -> ValuesView[Document]:
        """Every page, streamed from the store in its order (no page stays in memory)."""
        return _StreamedValues(self)

    @property
    def titles(self) -> dict[str, str]:
        """Page id -> title, read once from the store (the names stay in memory; the texts do not)."""
        if self._titles is None:
            titles: dict[str, str] = {}
            for row, line in enumerate(self.store.stream_raw()):
                titles[self.store.id_at(row)] = orjson.loads(line)["title"]
            self._titles = titles
        return self._titles

    @property
    def content_hash(self) -> str:
        """The corpus hash of the pages, recorded by the store when it was written (= ``corpus_hash``)."""
        return self.store.content_hash


def page_titles(pages: Mapping[str, Document]) -> Mapping[str, str]:
    """Page id -> title of any page mapping, without reading texts again when it is a :class:`PageTexts`."""
    if isinstance(pages, PageTexts):
        return pages.titles
    return {page_id: doc.title for page_id, doc in pages.items()}


def pages_hash(pages: Mapping[str, Document]) -> str:
    """The corpus hash of the pages in their order: the store's recorded one for :class:`PageTexts`."""
    if isinstance(pages, PageTexts):
        return pages.content_hash
    return corpus_hash(pages.values())


__all__ = ["CACHE_PAGES", "RELEASE_EVERY", "LruCache", "PageTexts", "page_titles", "pages_hash"]
