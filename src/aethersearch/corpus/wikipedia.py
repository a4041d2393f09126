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
   spool ``[title, text]``, the link titles and the typed infobox rows
   (:mod:`aethersearch.corpus.infobox`; their plain statements are written into
   the text after the lead paragraph) to three temporary files; an article
   keeps only its page id in memory; a redirect goes to disk whole (its title,
   its target, its title's hash);
2. between the passes, put every article and redirect in one
   :class:`~aethersearch.corpus.title_table.TitleTable` (a title given twice is a
   ``DataError`` naming it), resolve every redirect to its article (double
   redirects followed, a loop is a ``DataError`` naming it), and read the link
   spool a chunk of pages at a time: each link title is found in the table (an
   article, or a redirect and so its article), links to pages outside the dump,
   to disambiguation pages or to the page itself are counted as dropped, and the
   kept rows go to a spool of their own; each infobox row's target is resolved
   with the page's links (:meth:`WikipediaDump.infobox_hops`). The table is
   then let go;
3. replay the text spool with the kept rows as Documents, appending each page's
   sorted link rows to the graph's CSR.

Disambiguation pages are left out by default (``keep_disambiguation=True``
keeps them as ordinary pages): a chain through "Mercury (disambiguation)" states
nothing.

Memory. While the graph is filled (where the import is largest) it holds the
graph (4 bytes per kept link plus 8 per page for ``LinkGraph``'s CSR, and its
page ids), filled in 1 MiB blocks that never move
(:mod:`aethersearch.corpus.blocked_array`: a growing array would leave its old
copies as holes in the heap), and nothing else per page: the title table (12
bytes per title) and the redirects' resolution live only between the passes,
before the graph exists, and the redirects' titles stay on disk
(:mod:`aethersearch.corpus.string_spool`) for :class:`RedirectAliases`. The
page store it feeds holds nothing per page while it is written
(:mod:`aethersearch.corpus.id_index`). With a real dump's 1.6 redirects an
article the step between the passes holds the most titles (2.6 an article), so
its arrays are narrow (``int32`` order and chains) and built without joined
copies: it stays below pass 2, and beyond the graph peak RSS is flat in the
number of articles (``docs/wikipedia-dump.md`` has the figures and the command).
"""

from __future__ import annotations

import itertools
import multiprocessing
import shutil
import tempfile
import weakref
from array import array
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from aethersearch.corpus.blocked_array import BlockedInt32
from aethersearch.corpus.graph import LinkGraph
from aethersearch.corpus.infobox import with_rows
from aethersearch.corpus.link_stats import LinkStats
from aethersearch.corpus.malloc_threshold import fix_mmap_threshold
from aethersearch.corpus.mediawiki import MAX_PAGE_BYTES, DumpReader
from aethersearch.corpus.npy_stream import NpyAppender
from aethersearch.corpus.string_spool import MappedStrings, StringSpool
from aethersearch.corpus.title_table import NOT_FOUND, DuplicateKey, TitleTable
from aethersearch.corpus.wikitext import ParsedPage, article_target, normalize_title, parse_wikitext
from aethersearch.errors import AetherError, DataError
from aethersearch.jsonl import iter_jsonl, validate_row, write_jsonl
from aethersearch.records import SCHEMA_VERSION, Document, InfoboxHop

#: pages per parse task handed to a worker process
BATCH = 64
_ARTICLE_NAMESPACE = 0
#: redirect targets looked up per ``TitleTable.find`` call
_RESOLVE_CHUNK = 1 << 14
#: spooled pages whose links are looked up together between the passes (about 20,000 links: sorted first, a batch that
#: size finds its keys in the title table at about half the cost per key of 256 pages' worth)
_REPLAY_PAGES = 1024
#: spool lines (one a parse batch) read together: about :data:`_REPLAY_PAGES` pages
_REPLAY_LINES = _REPLAY_PAGES // BATCH
#: pass 1's spools, a JSON line per parse batch: ``[title, text]`` of each article, and the link titles of
#: each; between the passes, each article's kept link rows (int32, appearance order) and their count per article
_TEXTS, _LINKS, _KEPT, _COUNTS = "texts.jsonl", "links.jsonl", "kept_rows.i32", "kept_counts.i32"
#: pass 1's spool of each article's typed infobox rows (a JSON line per parse batch, beside the link titles'),
#: and the hops they give once their targets are resolved (kept with the aliases: they outlive the passes)
_ROWS, _HOPS = "infobox_rows.jsonl", "infobox_hops.jsonl"
#: the typed infobox hops of an imported store (:class:`~aethersearch.records.InfoboxHop`, one per line)
INFOBOX_FILE = "infobox_rows.jsonl"
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


class _Redirects:
    """Pass 1's record of the redirects, on disk: each one's page id (kept for the aliases, beside them in
    ``keep``), its target as written, and its page id's hash (for the title table)."""

    def __init__(self, keep: Path, work: Path) -> None:
        self.ids = StringSpool(keep / "redirect_ids")
        self.targets = StringSpool(work / "redirect_targets")
        self.hashes = NpyAppender(work / "redirect_hashes.npy", "int64")

    def append(self, redirect_id: str, target: str) -> None:
        self.ids.append(redirect_id)
        self.targets.append(target)
        self.hashes.append(hash(redirect_id))

    def close(self) -> None:
        for spool in (self.ids, self.targets, self.hashes):
            spool.close()


def _write_alias_index(folder: Path, ids: Sequence[str], final: np.ndarray) -> None:
    """The redirects grouped by the article they lead to, as ``.npy`` files :class:`RedirectAliases` maps:
    ``order`` (redirect numbers, grouped by article row), ``rows`` (each group's row, ascending) and
    ``starts``; ``keys`` (each group's page id hash, ascending) and ``key_groups`` (the group of each key)."""
    resolved = np.flatnonzero(final >= 0)
    order = resolved[np.argsort(final[resolved], kind="stable")]
    rows, starts = np.unique(final[order], return_index=True)
    keys = np.fromiter((hash(ids[row]) for row in rows.tolist()), dtype=np.int64, count=len(rows))
    key_groups = np.argsort(keys, kind="stable")
    for name, values in (("order", order), ("rows", rows), ("starts", np.append(starts, len(order))),
                         ("keys", keys[key_groups]), ("key_groups", key_groups)):
        np.save(folder / f"alias_{name}.npy", values)


class RedirectAliases(Mapping[str, list[str]]):
    """Page id -> the titles of the redirects that lead to it (dump order), read from the files the import
    left (a full dump has about 11M redirects, which a ``dict`` of lists held at about 140 bytes each, and
    which in memory were about 23 bytes an article of the import's peak). Pages are found by their page
    id's hash (the import's process hashed them; Python's ``str`` hash is salted per process) and checked
    against the page id itself."""

    def __init__(self, ids: Sequence[str], folder: Path) -> None:
        self._ids = ids
        self._names = MappedStrings(folder / "redirect_ids")
        self._order, self._rows, self._starts, self._keys, self._key_groups = (  # ndarrays over the maps
            np.asarray(np.load(folder / f"alias_{name}.npy", mmap_mode="r"))
            for name in ("order", "rows", "starts", "keys", "key_groups"))

    def _group(self, page: str) -> int | None:
        """The page's group of redirects, or None: one search, and no exception for a page without any (the
        construction's facts pass asks this for the pages its links name, most of them such pages)."""
        key, keys = hash(page), self._keys
        at = int(keys.searchsorted(key))
        while at < len(keys) and keys[at] == key:  # more than one only when two page ids share a hash
            group = int(self._key_groups[at])
            if self._ids[int(self._rows[group])] == page:
                return group
            at += 1
        return None

    def _titles(self, group: int) -> list[str]:
        return [page_title(self._names[k])
                for k in self._order[self._starts[group]:self._starts[group + 1]].tolist()]

    def __getitem__(self, page: str) -> list[str]:
        group = self._group(page)
        if group is None:
            raise KeyError(page)
        return self._titles(group)

    def get(self, page: str, default: Any = None) -> Any:  # without the KeyError Mapping.get would catch
        """The titles of the redirects to ``page``, or ``default`` when there are none."""
        group = self._group(page)
        return default if group is None else self._titles(group)

    def __contains__(self, page: object) -> bool:
        return isinstance(page, str) and self._group(page) is not None

    def __iter__(self) -> Iterator[str]:
        return (self._ids[row] for row in self._rows.tolist())

    def __len__(self) -> int:
        return len(self._rows)


class ImportPhase(IntEnum):
    """Where a :class:`WikipediaDump` is, in order: what each of its methods may be asked depends on it.

    ``NEW`` until ``documents()`` starts; ``READING`` while pass 1 spools and the titles are resolved;
    ``RESOLVED`` once redirects, links and infobox targets are (``aliases`` and ``infobox_hops`` answer);
    ``READ_ALL`` once every document was given (the CSR blocks are complete: ``graph`` answers).
    """

    NEW = 0
    READING = 1
    RESOLVED = 2
    READ_ALL = 3


class WikipediaDump:
    """One dump's import: iterate :meth:`documents` once, then read ``aliases``, ``stats`` and :meth:`graph`.

    Titles are looked up through one :class:`~aethersearch.corpus.title_table.TitleTable` over the
    articles' and the redirects' page ids (entries ``0 .. n-1`` are article rows, ``n + k`` is redirect
    ``k``), held only while the links are resolved, before the graph is filled; the redirects' titles stay on
    disk (:mod:`aethersearch.corpus.string_spool`). What the import holds per article while the graph is
    filled is the graph itself and its page ids.
    """

    def __init__(self, path: str | Path, *, workers: int = 1, keep_disambiguation: bool = False,
                 spool_dir: str | Path | None = None, max_page_bytes: int = MAX_PAGE_BYTES) -> None:
        self.path = Path(path)
        self.max_page_bytes = max_page_bytes
        self.workers = workers
        self.keep_disambiguation = keep_disambiguation
        self.spool_dir = spool_dir
        self.stats = WikipediaStats()
        self.base_url = ""
        self._ids: list[str] = []  # article row -> page id: the graph's node table
        # the redirects' titles and the alias index: they outlive documents(), and go with this object
        self._keep = Path(tempfile.mkdtemp(prefix="aether-wikipedia-aliases-", dir=spool_dir))
        weakref.finalize(self, shutil.rmtree, self._keep, True)
        self._aliases: RedirectAliases | None = None
        self._phase = ImportPhase.NEW
        self._row_lengths = BlockedInt32()  # links kept per page, in page order: the CSR row pointer
        self._targets = BlockedInt32()  # each page's link rows, sorted: the CSR column indices
        self._graph: LinkGraph | None = None
        self._namespaces: frozenset[str] = frozenset()

    @property
    def aliases(self) -> Mapping[str, list[str]]:
        """Page id -> the titles of the redirects that lead to it (known once the first document is read)."""
        if self._phase < ImportPhase.RESOLVED:
            raise AetherError("the redirects are resolved before the first document is given; read documents() "
                              "first", fix="iterate documents() before asking for the aliases")
        if self._aliases is None:
            self._aliases = RedirectAliases(self._ids, self._keep)
        return self._aliases

    # ------------------------------------------------------------------ pass 1

    def _articles(self, reader: DumpReader, redirects: _Redirects) -> Iterator[tuple[str, str]]:
        """``(title, wikitext)`` of each article; redirects are spooled and other namespaces tallied on the way."""
        for page in reader:
            self.stats.pages += 1
            if page.namespace != _ARTICLE_NAMESPACE:
                self.stats.other_namespaces += 1
                continue
            title = normalize_title(page.title)
            if page.redirect is not None:
                self.stats.redirects += 1
                redirects.append(page_id(title), page.redirect)
                continue
            if not page.text.strip():
                raise DataError(self.path, f"article {page.title!r} (page id {page.page_id}) has empty text",
                                fix="a pages-articles export has the text of every article; re-download it or "
                                    "remove the page")
            yield title, page.text

    def _spool(self, work: Path) -> None:
        """Pass 1: ``[title, text]`` and the link titles of each article to two spools, the redirects to
        their files; in memory only the page ids."""
        reader = DumpReader(self.path, max_page_bytes=self.max_page_bytes)
        redirects = _Redirects(self._keep, work)
        try:
            with (work / _TEXTS).open("wb") as texts, (work / _LINKS).open("wb") as links, \
                    (work / _ROWS).open("wb") as rows:
                articles = self._articles(reader, redirects)
                batches = iter(lambda: list(itertools.islice(articles, BATCH)), [])
                first = next(batches, None)  # reading the first batch reads <siteinfo>: the namespaces are known
                namespaces = frozenset(name.lower() for key, name in reader.site.namespaces.items()
                                       if name and key != 0)
                for done, parsed in _parsed(itertools.chain([first] if first else [], batches), namespaces,
                                            self.workers):
                    kept = [(title, page) for (title, _), page in zip(done, parsed, strict=True)
                            if not page.disambiguation or self.keep_disambiguation]
                    self.stats.disambiguation += len(done) - len(kept)  # no title of the dump: links to it drop
                    if kept:  # one line a batch in each spool: a write and a dumps a page cost 2% of the import
                        self._ids.extend(page_id(title) for title, _ in kept)
                        # the typed rows' statements are served on the page: the hop is read where it is stated
                        texts.write(orjson.dumps([[title, with_rows(page.text, [r.statement for r in page.infobox])]
                                                  for title, page in kept]) + b"\n")
                        links.write(orjson.dumps([page.links for _, page in kept]) + b"\n")
                        rows.write(orjson.dumps([[list(row) for row in page.infobox] for _, page in kept]) + b"\n")
        finally:
            redirects.close()
        self.stats.articles = len(self._ids)
        self.base_url = reader.site.base.rpartition("/")[0] + "/" if reader.site.base else ""
        self._namespaces = namespaces

    # ------------------------------------------------------------------ between the passes

    def _resolve(self, work: Path) -> None:
        """Every title in one table, every redirect to its article, every link to its row (written, in page
        order, to a spool of kept rows); then the table is let go, before the graph grows."""
        names = MappedStrings(self._keep / "redirect_ids", offsets_in_memory=True)
        try:
            table = self._build_table(self._title_hashes(work), names)
            targets = MappedStrings(work / "redirect_targets")
            try:
                final = self._resolve_redirects(table, targets)
            finally:
                targets.close()
            self._resolve_links(work, table, final)
            del table  # before the alias index's sorts: the two are never held together
        finally:
            names.close()
        _write_alias_index(self._keep, self._ids, final)
        self._phase = ImportPhase.RESOLVED

    def _title_hashes(self, work: Path) -> np.ndarray:
        """Every title's hash in entry order (the articles', then the redirects' spooled ones), filled into one
        array: built by joining two, the articles' hashes were held twice."""
        articles = len(self._ids)
        spooled = np.load(work / "redirect_hashes.npy", mmap_mode="r")
        hashes = np.empty(articles + len(spooled), dtype=np.int64)
        for start in range(0, articles, _RESOLVE_CHUNK):
            chunk = self._ids[start:start + _RESOLVE_CHUNK]
            hashes[start:start + len(chunk)] = np.fromiter(map(hash, chunk), dtype=np.int64, count=len(chunk))
        hashes[articles:] = spooled
        del spooled
        return hashes

    def _build_table(self, hashes: np.ndarray, redirect_ids: Sequence[str]) -> TitleTable:
        try:
            return TitleTable(hashes, self._ids, redirect_ids)
        except DuplicateKey as twice:
            kinds = " and ".join("an article" if entry < len(self._ids) else "a redirect"
                                 for entry in (twice.first, twice.second))
            raise DataError(self.path, f"page title {page_title(twice.key)!r} occurs twice ({kinds})",
                            fix="a dump holds each page once; check the export was not concatenated") from None

    def _resolve_redirects(self, table: TitleTable, redirect_targets: Sequence[str]) -> np.ndarray:
        """Redirect ``k`` -> the article row it leads to (double redirects followed), ``-1`` where it leads
        nowhere in the dump; a loop is a DataError naming it. Targets are looked up a chunk at a time and
        the chains followed in numpy, one hop per step for every redirect at once."""
        articles, count = len(self._ids), len(redirect_targets)
        # redirect k -> the entry its target names; int32 while the entries fit, as the table's own are
        entry_type: type[np.signedinteger[Any]] = np.int32 if articles + count < 2**31 else np.int64
        step: np.ndarray[tuple[int], np.dtype[np.signedinteger[Any]]] = np.full(count, NOT_FOUND, dtype=entry_type)
        targets = iter(redirect_targets)
        for start in range(0, count, _RESOLVE_CHUNK):
            named = [article_target(target, self._namespaces)
                     for target in itertools.islice(targets, _RESOLVE_CHUNK)]
            where = [(i, page_id(title)) for i, title in enumerate(named) if title is not None]
            step[start + np.asarray([i for i, _ in where], dtype=np.int64)] = table.find([key for _, key in where])
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

    def _rows(self, table: TitleTable, final: np.ndarray, link_ids: list[str]) -> list[int]:
        """The article row each link id leads to (through its redirect), ``-1`` for none."""
        entries = np.asarray(table.find(link_ids), dtype=np.int64)
        via = entries >= len(self._ids)
        entries[via] = final[entries[via] - len(self._ids)]
        rows: list[int] = entries.tolist()
        return rows

    def _kept(self, own: int, links: Sequence[str], rows: Sequence[int]) -> list[int]:
        """The page's link rows, first appearance order, repeats, self-links and unresolved links dropped."""
        stats = self.stats.links
        stats.read += len(links)
        valid = [row for row in rows if row >= 0 and row != own]
        if len(valid) < len(rows):
            title = page_title(self._ids[own])
            for link, row in zip(links, rows, strict=True):
                if row < 0 or row == own:
                    stats.drop(title, link)
        kept = list(dict.fromkeys(valid))
        stats.kept += len(kept)
        return kept

    def _resolve_links(self, work: Path, table: TitleTable, final: np.ndarray) -> None:
        """Each spooled page's links to its kept rows, a chunk of pages at a time, appended to the kept-rows
        spool (appearance order) with one count per page."""
        own = 0
        with (work / _LINKS).open("rb") as spooled, (work / _KEPT).open("wb") as kept_out, \
                (work / _COUNTS).open("wb") as counts_out, (work / _ROWS).open("rb") as typed_in, \
                (self._keep / _HOPS).open("wb") as hops_out:
            for lines in iter(lambda: list(itertools.islice(spooled, _REPLAY_LINES)), []):
                pages: list[list[str]] = [links for line in lines for links in orjson.loads(line)]
                typed: list[list[list[str]]] = [page for line in itertools.islice(typed_in, len(lines))
                                                for page in orjson.loads(line)]
                rows = self._rows(table, final, [page_id(link) for links in pages for link in links])
                kept_rows, counts, at = array("i"), array("i"), 0
                for links, page_rows in zip(pages, typed, strict=True):
                    page_links = rows[at:at + len(links)]
                    kept = self._kept(own, links, page_links)
                    if page_rows:
                        hops_out.write(self._hops(own, page_rows, dict(zip(links, page_links, strict=True))))
                    at += len(links)
                    own += 1
                    counts.append(len(kept))
                    kept_rows.extend(kept)
                kept_out.write(kept_rows.tobytes())
                counts_out.write(counts.tobytes())

    def _hops(self, own: int, page_rows: list[list[str]], rows_of: dict[str, int]) -> bytes:
        """The page's typed infobox rows as hop lines, each target's page id given when it is another article
        of the dump."""
        ids, out = self._ids, []
        for field_name, relation, target, row, statement in page_rows:
            found = rows_of.get(target, -1)
            out.append(orjson.dumps({"page": ids[own], "field": field_name, "relation": relation, "target": target,
                                     "target_page": ids[found] if found >= 0 and found != own else None,
                                     "row": row, "statement": statement}) + b"\n")
        return b"".join(out)

    def infobox_hops(self) -> Iterator[InfoboxHop]:
        """The typed infobox rows of the dump's articles, in page order (after :meth:`documents`); a hop of the
        graph where ``target_page`` is set."""
        if self._phase < ImportPhase.RESOLVED:
            raise AetherError("the infobox hops are resolved with the links; read documents() first",
                              fix="iterate documents() before asking for the infobox hops")
        with (self._keep / _HOPS).open("rb") as spooled:
            for line in spooled:
                yield InfoboxHop.trusted(schema_version=SCHEMA_VERSION, **orjson.loads(line))

    # ------------------------------------------------------------------ pass 2

    def _replay(self, work: Path) -> Iterator[Document]:
        """Pass 2: the spooled pages with their kept links, as Documents; the CSR blocks fill on the way."""
        ids, base_url = self._ids, self.base_url
        own = 0
        with (work / _TEXTS).open("rb") as texts, (work / _KEPT).open("rb") as kept_in, \
                (work / _COUNTS).open("rb") as counts_in:
            for lines in iter(lambda: list(itertools.islice(texts, _REPLAY_LINES)), []):
                pages: list[tuple[str, str]] = [page for line in lines for page in orjson.loads(line)]
                counts = np.fromfile(counts_in, dtype=np.int32, count=len(pages))
                rows: list[int] = np.fromfile(kept_in, dtype=np.int32, count=int(counts.sum())).tolist()
                self._row_lengths.extend(counts)
                at = 0
                for (title, text), count in zip(pages, counts.tolist(), strict=True):
                    kept = rows[at:at + count]
                    at += count
                    self._targets.extend(sorted(kept))
                    doc_id = ids[own]
                    own += 1
                    # trusted: every field is a str (or a list of them) this import made; validating
                    # them again was about 2% of the import's CPU at 1M pages (py-spy)
                    yield Document.trusted(id=doc_id, title=title, text=text, links=[ids[r] for r in kept],
                                           url=f"{base_url}{doc_id}" if base_url else None,
                                           source_contents=None, source_id=None)

    def documents(self) -> Iterator[Document]:
        """The dump's articles as Documents, in dump order (pass 1 and the link resolution run before the
        first one is yielded)."""
        if self._phase is not ImportPhase.NEW:
            raise AetherError("a WikipediaDump is read once", fix="create a new WikipediaDump to read it again")
        self._phase = ImportPhase.READING
        fix_mmap_threshold()  # the resolution's large temporaries are maps, not heap the graph would sit on
        with tempfile.TemporaryDirectory(prefix="aether-wikipedia-", dir=self.spool_dir) as spool_dir:
            work = Path(spool_dir)
            self._spool(work)
            self._resolve(work)
            yield from self._replay(work)
        self._phase = ImportPhase.READ_ALL

    def graph(self) -> LinkGraph:
        """The link graph of the documents read (node order = document order), equal to
        ``LinkGraph.from_documents`` of them, built straight from the CSR arrays filled while reading:
        rows come in page order and each is de-duplicated and sorted already, so no edge list is sorted
        and the import never holds more than 4 bytes per link (8 per page) for the graph."""
        if self._phase is not ImportPhase.READ_ALL:
            raise AetherError("read every document before asking for the graph (a graph of the pages read so far "
                              "would be missing links and pages)", fix="iterate documents() to its end first")
        if self._graph is None:  # the blocks are handed over once
            indptr = np.zeros(len(self._row_lengths) + 1, dtype=np.int64)
            np.cumsum(self._row_lengths.take(), out=indptr[1:])
            self._graph = LinkGraph(self._ids, indptr, self._targets.take())
        return self._graph


def write_infobox_hops(store: str | Path, hops: Iterable[InfoboxHop]) -> Path:
    """Write the hops beside an imported store as :data:`INFOBOX_FILE` (atomically: whole or absent)."""
    path = Path(store) / INFOBOX_FILE
    write_jsonl(path, (hop.model_dump() for hop in hops))
    return path


def read_infobox_hops(store: str | Path) -> dict[str, list[InfoboxHop]]:
    """Page id -> its typed infobox hops, from a store's :data:`INFOBOX_FILE` (empty when it has none:
    stores of other formats, or imported before the hops were kept)."""
    path = Path(store) / INFOBOX_FILE
    hops: dict[str, list[InfoboxHop]] = {}
    if path.exists():
        for line, value in iter_jsonl(path):
            hop = validate_row(path, line, value, InfoboxHop)
            hops.setdefault(hop.page, []).append(hop)
    return hops


def iter_wikipedia(dump: str | Path, stats: LinkStats | None = None, *, workers: int = 1) -> Iterator[Document]:
    """Articles of a MediaWiki export as Documents (see :class:`WikipediaDump` for aliases and the graph)."""
    reader = WikipediaDump(dump, workers=workers)
    yield from reader.documents()
    if stats is not None:
        for name in ("read", "kept", "dropped"):
            setattr(stats, name, getattr(reader.stats.links, name))
        stats.dropped_examples[:] = reader.stats.links.dropped_examples


__all__ = ["BATCH", "INFOBOX_FILE", "RedirectAliases", "WikipediaDump", "WikipediaStats", "iter_wikipedia", "page_id",
           "page_title", "read_infobox_hops", "write_infobox_hops"]
