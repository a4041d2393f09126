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
   spool ``[title, text, links]`` lines to a temporary file; an article keeps
   only its page id and that id's hash, a redirect its packed title and target;
2. put every article and redirect in one
   :class:`~aethersearch.corpus.title_table.TitleTable` (a title given twice is a
   ``DataError`` naming it), resolve every redirect to its article (double
   redirects followed, a loop is a ``DataError`` naming it), then replay the
   spool a chunk of pages at a time: each link title is found in the table (an
   article, or a redirect and so its article), links to pages outside the dump,
   to disambiguation pages or to the page itself are counted as dropped, and the
   page's sorted link rows are appended to one int32 array: the graph's CSR.

Disambiguation pages are left out by default (``keep_disambiguation=True``
keeps them as ordinary pages): a chain through "Mercury (disambiguation)" states
nothing. Memory beyond one batch: the graph (4 bytes per kept link plus 8 per
page for ``LinkGraph``'s CSR, and its page ids), never an edge list, filled in
1 MiB blocks that never move (:mod:`aethersearch.corpus.blocked_array`: one
growing array left its old copies as holes in the heap); 12 bytes per title for
the title table; and per redirect its packed title, hash and article row. The
page store it feeds holds nothing per page while it is written
(:mod:`aethersearch.corpus.id_index`). ``dict`` tables of titles held about 300
bytes per article on a generated dump with half a redirect per article; at 1M
articles peak RSS went from 666 to 370 MiB, and to about 334 with the blocks.
"""

from __future__ import annotations

import itertools
import multiprocessing
import tempfile
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from aethersearch.corpus.blocked_array import BlockedInt32
from aethersearch.corpus.graph import LinkGraph
from aethersearch.corpus.link_stats import LinkStats
from aethersearch.corpus.mediawiki import DumpReader
from aethersearch.corpus.title_table import NOT_FOUND, DuplicateKey, PackedStrings, TitleTable
from aethersearch.corpus.wikitext import ParsedPage, article_target, normalize_title, parse_wikitext
from aethersearch.errors import AetherError, DataError
from aethersearch.records import Document

#: pages per parse task handed to a worker process
BATCH = 64
_ARTICLE_NAMESPACE = 0
#: redirect targets looked up per ``TitleTable.find`` call
_RESOLVE_CHUNK = 1 << 14
#: spooled pages whose links are looked up together in pass 2 (about 20,000 links: sorted first, a batch that
#: size finds its keys in the title table at about half the cost per key of 256 pages' worth)
_REPLAY_PAGES = 1024
#: redirect hops followed in numpy before the remaining chains (loops, or longer than this) are walked one by one
_FOLLOWED_HOPS = 32


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


def page_title(page: str) -> str:
    """The title a page id was made from (a normalised title holds no ``_``, so this undoes :func:`page_id`)."""
    return page.replace("_", " ")


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


class RedirectAliases(Mapping[str, list[str]]):
    """Page id -> the titles of the redirects that lead to it (dump order), read from the import's packed
    tables: a full dump has about 11M redirects, which a ``dict`` of lists held at about 140 bytes each."""

    def __init__(self, ids: Sequence[str], redirect_ids: PackedStrings, final: np.ndarray,
                 find: Callable[[str], int]) -> None:
        resolved = np.flatnonzero(final >= 0)
        self._order = resolved[np.argsort(final[resolved], kind="stable")]
        rows = final[self._order]
        self._rows, self._starts = np.unique(rows, return_index=True)
        self._starts = np.append(self._starts, len(rows))
        self._ids, self._redirect_ids, self._find = ids, redirect_ids, find

    def __getitem__(self, page: str) -> list[str]:
        row = self._find(page)
        at = int(np.searchsorted(self._rows, row)) if row >= 0 else len(self._rows)
        if at >= len(self._rows) or self._rows[at] != row:
            raise KeyError(page)
        return [page_title(self._redirect_ids[k])
                for k in self._order[self._starts[at]:self._starts[at + 1]].tolist()]

    def __iter__(self) -> Iterator[str]:
        return (self._ids[row] for row in self._rows.tolist())

    def __len__(self) -> int:
        return len(self._rows)


class WikipediaDump:
    """One dump's import: iterate :meth:`documents` once, then read ``aliases``, ``stats`` and :meth:`graph`.

    Titles are looked up through one :class:`~aethersearch.corpus.title_table.TitleTable` over the
    articles' and the redirects' page ids (entries ``0 .. n-1`` are article rows, ``n + k`` is redirect
    ``k``), so beside the graph the import keeps about 12 bytes per title plus the redirect titles packed,
    not a ``dict`` per table (about 300 bytes per article on a generated dump with half a redirect each).
    """

    def __init__(self, path: str | Path, *, workers: int = 1, keep_disambiguation: bool = False,
                 spool_dir: str | Path | None = None) -> None:
        self.path = Path(path)
        self.workers = workers
        self.keep_disambiguation = keep_disambiguation
        self.spool_dir = spool_dir
        self.stats = WikipediaStats()
        self.aliases: Mapping[str, list[str]] = {}  # page id -> redirect titles leading to it
        self.base_url = ""
        self._ids: list[str] = []  # article row -> page id: the graph's node table
        self._id_hashes = array("q")  # hash of each article's page id, by row
        self._redirect_ids = PackedStrings()  # redirect k's page id, in dump order
        self._redirect_hashes = array("q")
        self._redirect_targets = PackedStrings()  # redirect k's target as written; dropped once resolved
        self._final = np.zeros(0, dtype=np.int64)  # redirect k -> the article row it leads to, or -1
        self._table: TitleTable | None = None
        self._row_lengths = BlockedInt32()  # links kept per page, in page order: the CSR row pointer
        self._targets = BlockedInt32()  # each page's link rows, sorted: the CSR column indices
        self._graph: LinkGraph | None = None
        self._done = False
        self._read_all = False  # documents() ran to its end: the CSR blocks are complete
        self._namespaces: frozenset[str] = frozenset()

    # ------------------------------------------------------------------ pass 1

    def _articles(self, reader: DumpReader) -> Iterator[tuple[str, str]]:
        """``(title, wikitext)`` of each article; redirects are packed and other namespaces tallied on the way."""
        for page in reader:
            self.stats.pages += 1
            if page.namespace != _ARTICLE_NAMESPACE:
                self.stats.other_namespaces += 1
                continue
            title = normalize_title(page.title)
            if page.redirect is not None:
                self.stats.redirects += 1
                redirect_id = page_id(title)
                self._redirect_ids.append(redirect_id)
                self._redirect_hashes.append(hash(redirect_id))
                self._redirect_targets.append(page.redirect)
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
                doc_id = page_id(title)
                self._ids.append(doc_id)
                self._id_hashes.append(hash(doc_id))
                handle.write(orjson.dumps([title, page.text, page.links]) + b"\n")
        self.stats.articles = len(self._ids)
        self.base_url = reader.site.base.rpartition("/")[0] + "/" if reader.site.base else ""
        self._namespaces = namespaces

    # ------------------------------------------------------------------ pass 2

    def _build_table(self) -> TitleTable:
        hashes = np.concatenate([np.frombuffer(self._id_hashes, dtype=np.int64),
                                 np.frombuffer(self._redirect_hashes, dtype=np.int64)])
        self._id_hashes, self._redirect_hashes = array("q"), array("q")  # the table holds them, sorted
        try:
            return TitleTable(hashes, self._ids, self._redirect_ids)
        except DuplicateKey as twice:
            kinds = " and ".join("an article" if entry < len(self._ids) else "a redirect"
                                 for entry in (twice.first, twice.second))
            raise DataError(self.path, f"page title {page_title(twice.key)!r} occurs twice ({kinds})",
                            fix="a dump holds each page once; check the export was not concatenated") from None

    def _resolve_redirects(self, table: TitleTable) -> np.ndarray:
        """Redirect ``k`` -> the article row it leads to (double redirects followed), ``-1`` where it leads
        nowhere in the dump; a loop is a DataError naming it. Targets are looked up a chunk at a time and
        the chains followed in numpy, one hop per step for every redirect at once."""
        articles, count = len(self._ids), len(self._redirect_ids)
        step = np.full(count, NOT_FOUND, dtype=np.int64)  # redirect k -> the entry its target names
        targets = iter(self._redirect_targets)
        for start in range(0, count, _RESOLVE_CHUNK):
            named = [article_target(target, self._namespaces)
                     for target in itertools.islice(targets, _RESOLVE_CHUNK)]
            where = [(i, page_id(title)) for i, title in enumerate(named) if title is not None]
            step[start + np.asarray([i for i, _ in where], dtype=np.int64)] = table.find([key for _, key in where])
        self._redirect_targets = PackedStrings()
        hop = step.copy()
        for _ in range(_FOLLOWED_HOPS):
            via = hop >= articles
            if not via.any():
                break
            hop[via] = step[hop[via] - articles]
        for k in np.flatnonzero(hop >= articles).tolist():  # longer chains, and loops (named here)
            hop[k] = self._walk(table, k, step, articles)
        self.stats.redirects_unresolved = int((hop < 0).sum())
        return hop

    def _walk(self, table: TitleTable, k: int, step: np.ndarray, articles: int) -> int:
        chain, seen = [articles + k], {articles + k}
        entry = int(step[k])
        while entry >= articles:
            if entry in seen:
                loop = [page_title(table.name(e)) for e in [*chain[chain.index(entry):], entry]]
                raise DataError(self.path, f"redirect loop: {' -> '.join(loop)}",
                                fix="these redirect pages point at each other; fix or remove one of them")
            chain.append(entry)
            seen.add(entry)
            entry = int(step[entry - articles])
        return entry

    def _find_article(self, page: str) -> int:
        entry = self._table.find([page])[0] if self._table is not None else NOT_FOUND
        return entry if entry < len(self._ids) else NOT_FOUND

    def _rows(self, table: TitleTable, link_ids: list[str]) -> list[int]:
        """The article row each link id leads to (through its redirect), ``-1`` for none."""
        entries = np.asarray(table.find(link_ids), dtype=np.int64)
        via = entries >= len(self._ids)
        entries[via] = self._final[entries[via] - len(self._ids)]
        rows: list[int] = entries.tolist()
        return rows

    def _kept(self, own: int, title: str, links: Sequence[str], rows: Sequence[int]) -> list[int]:
        """The page's link rows, first appearance order, repeats, self-links and unresolved links dropped."""
        stats = self.stats.links
        stats.read += len(links)
        valid = [row for row in rows if row >= 0 and row != own]
        if len(valid) < len(rows):
            for link, row in zip(links, rows, strict=True):
                if row < 0 or row == own:
                    stats.drop(title, link)
        kept = list(dict.fromkeys(valid))
        stats.kept += len(kept)
        return kept

    def documents(self) -> Iterator[Document]:
        """The dump's articles as Documents, in dump order (pass 1 runs before the first one is yielded)."""
        if self._done:
            raise AetherError("a WikipediaDump is read once", fix="create a new WikipediaDump to read it again")
        self._done = True
        with tempfile.TemporaryDirectory(prefix="aether-wikipedia-", dir=self.spool_dir) as spool_dir:
            spool = Path(spool_dir) / "pages.jsonl"
            with spool.open("wb") as handle:
                self._spool(handle)
            table = self._table = self._build_table()
            self._final = self._resolve_redirects(table)
            self.aliases = RedirectAliases(self._ids, self._redirect_ids, self._final, self._find_article)
            ids, base_url = self._ids, self.base_url
            own = 0
            with spool.open("rb") as handle:
                for lines in iter(lambda: list(itertools.islice(handle, _REPLAY_PAGES)), []):
                    pages = [orjson.loads(line) for line in lines]
                    rows = self._rows(table, [page_id(link) for _, _, links in pages for link in links])
                    at = 0
                    for title, text, links in pages:
                        kept = self._kept(own, title, links, rows[at:at + len(links)])
                        at += len(links)
                        self._row_lengths.append(len(kept))
                        self._targets.extend(sorted(kept))
                        doc_id = ids[own]
                        own += 1
                        # trusted: every field is a str (or a list of them) this import made; validating
                        # them again was about 2% of the import's CPU at 1M pages (py-spy)
                        yield Document.trusted(id=doc_id, title=title, text=text, links=[ids[r] for r in kept],
                                               url=f"{base_url}{doc_id}" if base_url else None,
                                               source_contents=None, source_id=None)
        self._read_all = True

    def graph(self) -> LinkGraph:
        """The link graph of the documents read (node order = document order), equal to
        ``LinkGraph.from_documents`` of them, built straight from the CSR arrays filled while reading:
        rows come in page order and each is de-duplicated and sorted already, so no edge list is sorted
        and the import never holds more than 4 bytes per link (8 per page) for the graph."""
        if not self._read_all:
            raise AetherError("read every document before asking for the graph (a graph of the pages read so far "
                              "would be missing links and pages)", fix="iterate documents() to its end first")
        if self._graph is None:  # the blocks are handed over once
            indptr = np.zeros(len(self._row_lengths) + 1, dtype=np.int64)
            np.cumsum(self._row_lengths.take(), out=indptr[1:])
            self._graph = LinkGraph(self._ids, indptr, self._targets.take())
        return self._graph


def iter_wikipedia(dump: str | Path, stats: LinkStats | None = None, *, workers: int = 1) -> Iterator[Document]:
    """Articles of a MediaWiki export as Documents (see :class:`WikipediaDump` for aliases and the graph)."""
    reader = WikipediaDump(dump, workers=workers)
    yield from reader.documents()
    if stats is not None:
        for name in ("read", "kept", "dropped"):
            setattr(stats, name, getattr(reader.stats.links, name))
        stats.dropped_examples[:] = reader.stats.links.dropped_examples


__all__ = ["BATCH", "RedirectAliases", "WikipediaDump", "WikipediaStats", "iter_wikipedia", "page_id", "page_title"]
