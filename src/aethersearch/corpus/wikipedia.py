"""Import a real Wikipedia dump: pages with resolved links, redirects as aliases, the CSR link graph.

Output is what the Wikispeedia importer gives (``Document`` per article: id =
title with underscores, title with spaces, plain text, ``links`` = ids of other
pages of the dump), so the store, :class:`~aethersearch.corpus.graph.LinkGraph`,
the hint-free construction and the sandbox take it unchanged. The work runs in
two streamed passes and never holds page text for more than one batch:

1. read the export (:mod:`aethersearch.corpus.mediawiki`), keep namespace-0
   pages, turn each article's wikitext into text and link titles
   (:mod:`aethersearch.corpus.wikitext`; with ``workers > 1`` batches are parsed
   in a process pool, in order, at most ``4 x workers`` batches in flight) and
   spool ``[title, text, links]`` lines to a temporary file; redirects and
   disambiguation pages are only remembered by title;
2. resolve every redirect to its article (following double redirects; a loop is
   a ``DataError`` naming it), then replay the spool: each link title goes to
   its article through the redirects, links to pages outside the dump, to
   disambiguation pages or to the page itself are counted as dropped, and the
   page's sorted link rows are appended to one int32 array: the graph's CSR.

Disambiguation pages are left out by default (``keep_disambiguation=True``
keeps them as ordinary pages): a chain through "Mercury (disambiguation)" states
nothing. Memory beyond one batch: the title tables (articles and redirects) and
the graph itself, 4 bytes per kept link plus 8 per page (``LinkGraph``'s CSR),
never an edge list.
"""

from __future__ import annotations

import itertools
import multiprocessing
import tempfile
from array import array
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from aethersearch.corpus.graph import LinkGraph
from aethersearch.corpus.link_stats import LinkStats
from aethersearch.corpus.mediawiki import DumpReader
from aethersearch.corpus.wikitext import ParsedPage, article_target, normalize_title, parse_wikitext
from aethersearch.errors import AetherError, DataError
from aethersearch.records import Document

#: pages per parse task handed to a worker process
BATCH = 64
_ARTICLE_NAMESPACE = 0


@dataclass
class WikipediaStats:
    """What the import read and kept, by kind; every page of the export is counted once."""

    pages: int = 0
    articles: int = 0
    redirects: int = 0
    redirects_unresolved: int = 0
    disambiguation: int = 0
    other_namespaces: int = 0
    links: LinkStats = field(default_factory=LinkStats)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready summary (for manifests and the CLI)."""
        out = asdict(self)
        out["links"] = {"read": self.links.read, "kept": self.links.kept, "dropped": self.links.dropped}
        return out


def page_id(title: str) -> str:
    """The page id of a title, as Wikispeedia ids are written (``Ancient Egypt`` -> ``Ancient_Egypt``)."""
    return title.replace(" ", "_")


def _parse_batch(namespaces: frozenset[str], batch: list[tuple[str, str]]) -> list[ParsedPage]:
    return [parse_wikitext(text, namespaces) for _, text in batch]


def _parsed(batches: Iterable[list[tuple[str, str]]], namespaces: frozenset[str],
            workers: int) -> Iterator[tuple[list[tuple[str, str]], list[ParsedPage]]]:
    """``(batch, parsed pages)`` in input order, parsed here or by ``workers`` processes (bounded in flight)."""
    if workers <= 1:
        for batch in batches:
            yield batch, _parse_batch(namespaces, batch)
        return
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        pending: deque[tuple[list[tuple[str, str]], Any]] = deque()
        for batch in batches:
            pending.append((batch, pool.apply_async(_parse_batch, (namespaces, batch))))
            if len(pending) >= 4 * workers:
                done, result = pending.popleft()
                yield done, result.get()
        while pending:
            done, result = pending.popleft()
            yield done, result.get()


class WikipediaDump:
    """One dump's import: iterate :meth:`documents` once, then read ``aliases``, ``stats`` and :meth:`graph`."""

    def __init__(self, path: str | Path, *, workers: int = 1, keep_disambiguation: bool = False,
                 spool_dir: str | Path | None = None) -> None:
        self.path = Path(path)
        self.workers = workers
        self.keep_disambiguation = keep_disambiguation
        self.spool_dir = spool_dir
        self.stats = WikipediaStats()
        self.aliases: dict[str, list[str]] = {}  # page id -> redirect titles leading to it
        self.base_url = ""
        self._titles: dict[str, int] = {}  # article title -> row
        self._redirects: dict[str, str] = {}  # redirect title -> target title
        self._row_lengths = array("i")  # links kept per page, in page order: the CSR row pointer
        self._targets = array("i")  # each page's link rows, sorted: the CSR column indices
        self._ids: list[str] = []
        self._done = False
        self._namespaces: frozenset[str] = frozenset()

    # ------------------------------------------------------------------ pass 1

    def _articles(self, reader: DumpReader) -> Iterator[tuple[str, str]]:
        """``(title, wikitext)`` of each article; redirects and other namespaces are tallied on the way."""
        for page in reader:
            self.stats.pages += 1
            if page.namespace != _ARTICLE_NAMESPACE:
                self.stats.other_namespaces += 1
                continue
            title = normalize_title(page.title)
            if page.redirect is not None:
                self.stats.redirects += 1
                self._redirects[title] = page.redirect
                continue
            if not page.text.strip():
                raise DataError(self.path, f"article {page.title!r} (page id {page.page_id}) has empty text",
                                fix="a pages-articles export has the text of every article; re-download it or "
                                    "remove the page")
            yield title, page.text

    def _spool(self, handle: Any) -> None:
        reader = DumpReader(self.path)
        articles = self._articles(reader)
        batches = iter(lambda: list(itertools.islice(articles, BATCH)), [])
        first = next(batches, None)  # reading the first batch reads <siteinfo>: the namespaces are known after it
        namespaces = frozenset(name.lower() for key, name in reader.site.namespaces.items() if name and key != 0)
        for done, parsed in _parsed(itertools.chain([first] if first else [], batches), namespaces, self.workers):
            for (title, _), page in zip(done, parsed, strict=True):
                if page.disambiguation and not self.keep_disambiguation:
                    self.stats.disambiguation += 1  # not a title of the dump: links to it drop as unresolved
                    continue
                if title in self._titles:
                    raise DataError(self.path, f"article title {title!r} occurs twice",
                                    fix="a dump holds each page once; check the export was not concatenated")
                self._titles[title] = len(self._titles)
                handle.write(orjson.dumps([title, page.text, page.links]) + b"\n")
        self.stats.articles = len(self._titles)
        self.base_url = reader.site.base.rpartition("/")[0] + "/" if reader.site.base else ""
        self._namespaces = namespaces

    # ------------------------------------------------------------------ pass 2

    def _resolve_redirects(self) -> dict[str, str]:
        """Redirect title -> article title, double redirects followed; a loop is a DataError naming it."""
        resolved: dict[str, str] = {}
        for start in self._redirects:
            chain = [start]
            title: str | None = start
            while title is not None and title not in self._titles and title not in resolved:
                target = self._redirects.get(title)
                if target is None:
                    title = None
                    break
                title = article_target(target, self._namespaces)
                if title in chain:
                    loop = " -> ".join([*chain[chain.index(title):], title])
                    raise DataError(self.path, f"redirect loop: {loop}",
                                    fix="these redirect pages point at each other; fix or remove one of them")
                if title is not None:
                    chain.append(title)
            final = resolved.get(title) if title in resolved else title
            if final is None or final not in self._titles:
                self.stats.redirects_unresolved += 1
                continue
            for step in chain:
                if step not in self._titles:
                    resolved[step] = final
        return resolved

    def _link_ids(self, source: str, links: Sequence[str], redirects: dict[str, str]) -> list[int]:
        rows: dict[int, None] = {}
        own = self._titles[source]
        stats = self.stats.links
        for link in links:
            stats.read += 1
            row = self._titles.get(redirects.get(link, link))
            if row is None or row == own:
                stats.drop(source, link)
            elif row not in rows:
                rows[row] = None
        stats.kept += len(rows)
        return list(rows)

    def documents(self) -> Iterator[Document]:
        """The dump's articles as Documents, in dump order (pass 1 runs before the first one is yielded)."""
        if self._done:
            raise AetherError("a WikipediaDump is read once", fix="create a new WikipediaDump to read it again")
        self._done = True
        with tempfile.TemporaryDirectory(prefix="aether-wikipedia-", dir=self.spool_dir) as spool_dir:
            spool = Path(spool_dir) / "pages.jsonl"
            with spool.open("wb") as handle:
                self._spool(handle)
            redirects = self._resolve_redirects()
            self._ids = [page_id(title) for title in self._titles]
            for title, target in redirects.items():
                self.aliases.setdefault(page_id(target), []).append(title)
            with spool.open("rb") as handle:
                for line in handle:
                    title, text, links = orjson.loads(line)
                    rows = self._link_ids(title, links, redirects)
                    self._row_lengths.append(len(rows))
                    self._targets.extend(sorted(rows))
                    doc_id = self._ids[self._titles[title]]
                    yield Document(id=doc_id, title=title, text=text, links=[self._ids[r] for r in rows],
                                   url=f"{self.base_url}{doc_id}" if self.base_url else None)

    def graph(self) -> LinkGraph:
        """The link graph of the documents read (node order = document order), equal to
        ``LinkGraph.from_documents`` of them, built straight from the CSR arrays filled while reading:
        rows come in page order and each is de-duplicated and sorted already, so no edge list is sorted
        and the import never holds more than 4 bytes per link (8 per page) for the graph."""
        if not self._done:
            raise AetherError("read the documents before asking for the graph", fix="iterate documents() first")
        indptr = np.zeros(len(self._row_lengths) + 1, dtype=np.int64)
        np.cumsum(np.frombuffer(self._row_lengths, dtype=np.int32), out=indptr[1:])
        return LinkGraph(self._ids, indptr, np.frombuffer(self._targets, dtype=np.int32))


def iter_wikipedia(dump: str | Path, stats: LinkStats | None = None, *, workers: int = 1) -> Iterator[Document]:
    """Articles of a MediaWiki export as Documents (see :class:`WikipediaDump` for aliases and the graph)."""
    reader = WikipediaDump(dump, workers=workers)
    yield from reader.documents()
    if stats is not None:
        for name in ("read", "kept", "dropped"):
            setattr(stats, name, getattr(reader.stats.links, name))
        stats.dropped_examples[:] = reader.stats.links.dropped_examples


__all__ = ["BATCH", "WikipediaDump", "WikipediaStats", "iter_wikipedia", "page_id"]
