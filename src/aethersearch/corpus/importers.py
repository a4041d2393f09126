"""Corpus importers: Search-R1/FlashRAG JSONL, DPR TSV, wikiextractor JSON and Wikispeedia.

Each ``iter_*`` function streams ``Document`` records in the source's own order
(that order is the store order the corpus hash is computed over). Malformed rows
are a ``DataError`` naming the file and line; links whose target is not a page of
the corpus are not silently dropped but counted in :class:`LinkStats` and shown
by the CLI.

Formats:

* ``jsonl`` -- one object per line, ``{"id", "contents": "\\"Title\\"\\nText"}`` as
  Search-R1 / FlashRAG ship wiki-18, or ``{"id", "title", "text"}``; an optional
  links TSV (``source<TAB>target`` page ids) attaches outgoing links.
* ``dpr`` -- DPR's ``psgs_w100.tsv``: header ``id  text  title``, tab-separated.
* ``wikiextractor`` -- ``wikiextractor --json [--links]`` output (a file or a directory
  of ``AA/wiki_00`` files); ``<a href="...">`` links are resolved to page ids by title.
* ``wikipedia`` -- an official MediaWiki XML export (pages-articles, ``.bz2`` or plain):
  ``corpus.wikipedia`` (articles, redirects resolved, disambiguation pages left out); the pages' typed
  infobox rows go beside the page store as ``infobox_rows.jsonl`` (``corpus.wikipedia.INFOBOX_FILE``).
* ``wikispeedia`` -- West & Leskovec's Wikispeedia: ``plaintext_articles.tar.gz`` (or
  the extracted folder) plus ``links.tsv``; URL-encoded names are decoded, the id
  is the decoded name (``Ancient_Egypt``) and the title has spaces (``Ancient Egypt``).
"""

from __future__ import annotations

import csv
import re
import sys
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote

import orjson

from aethersearch.corpus.chunking import ChunkConfig, chunk_documents
from aethersearch.corpus.link_stats import LinkStats
from aethersearch.corpus.store import JsonlStore, build_store
from aethersearch.errors import ConfigError, DataError
from aethersearch.jsonl import iter_jsonl
from aethersearch.records import Document

__all__ = ["FORMATS", "ImportResult", "import_corpus", "iter_dpr_tsv", "iter_jsonl_corpus", "iter_pages",
    "iter_wikiextractor", "iter_wikispeedia", "load_links", "parse_contents", "read_links_tsv", "row_contents",
    "wikispeedia_paths"]


def parse_contents(contents: str) -> tuple[str, str]:
    """Split Search-R1 ``contents`` (``"Title"\\nText``) into ``(title, text)``."""
    first, _, rest = contents.partition("\n")
    title = first.strip()
    if len(title) >= 2 and title[0] == '"' and title[-1] == '"':
        title = title[1:-1]
    return title, rest


def row_contents(raw: dict[str, Any]) -> str:
    """A stored row's Search-R1 ``contents``: its own when the corpus gave one, else ``"Title"\\nText``.

    The one rule for what the server returns as ``contents`` and what the faiss
    backend encodes (Search-R1's index builder encodes ``contents``).
    """
    own = raw.get("source_contents")
    return str(own) if own is not None else f'"{raw.get("title", "")}"\n{raw.get("text", "")}'


def read_links_tsv(path: str | Path, *, url_decode: bool = False) -> Iterator[tuple[int, str, str]]:
    """``(line, source, target)`` of a links TSV; ``#`` comment lines and blank lines are skipped."""
    path = Path(path)
    with path.open("r", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split("\t")
            if len(parts) != 2 or not parts[0] or not parts[1]:
                raise DataError(path, f"expected 'source<TAB>target', got {line!r}", line=number,
                                fix="one link per line, two tab-separated page ids")
            source, target = (unquote(p) for p in parts) if url_decode else parts
            yield number, source, target


def load_links(path: str | Path, page_ids: set[str], stats: LinkStats, *,
               url_decode: bool = False) -> dict[str, list[str]]:
    """Outgoing links per page from a TSV, keeping file order and dropping duplicates."""
    links: dict[str, list[str]] = {}
    seen: set[tuple[str, str]] = set()
    for _, source, target in read_links_tsv(path, url_decode=url_decode):
        stats.read += 1
        if source not in page_ids or target not in page_ids:
            stats.drop(source, target)
            continue
        if (source, target) in seen:
            continue
        seen.add((source, target))
        links.setdefault(source, []).append(target)
        stats.kept += 1
    return links


# ----------------------------------------------------------------------------- JSONL


def _jsonl_document(path: Path, number: int, row: object) -> Document:
    if not isinstance(row, dict):
        raise DataError(path, "expected a JSON object", line=number)
    doc_id = row.get("id")
    if doc_id is None or (not isinstance(doc_id, (str, int))) or str(doc_id) == "":
        raise DataError(path, "missing or empty 'id'", line=number, field="id",
                        fix='each row needs "id" and "contents" (or "title" and "text")')
    source_contents: str | None = None
    if isinstance(row.get("contents"), str):
        title, text = parse_contents(row["contents"])
        if row["contents"] != f'"{title}"\n{text}':  # kept verbatim only when rebuilding would change it
            source_contents = row["contents"]
    elif isinstance(row.get("text"), str):
        title, text = str(row.get("title") or ""), row["text"]
    else:
        raise DataError(path, "row has neither 'contents' nor 'text' as a string", line=number,
                        field="contents", fix='Search-R1 rows look like {"id": "0", "contents": "\\"Title\\"\\nText"}')
    source_id = doc_id if isinstance(doc_id, int) and not isinstance(doc_id, bool) else None
    return Document(id=str(doc_id), title=title, text=text, source_contents=source_contents, source_id=source_id,
                    url=row.get("url") if isinstance(row.get("url"), str) else None)


def iter_jsonl_corpus(path: str | Path, links_path: str | Path | None = None,
                      stats: LinkStats | None = None) -> Iterator[Document]:
    """Documents of a Search-R1/FlashRAG JSONL corpus, with links from an optional TSV."""
    path = Path(path)
    links: dict[str, list[str]] = {}
    if links_path is not None:
        ids = {str(row.get("id")) for _, row in iter_jsonl(path) if isinstance(row, dict)}
        links = load_links(links_path, ids, stats if stats is not None else LinkStats())
    for number, row in iter_jsonl(path):
        doc = _jsonl_document(path, number, row)
        yield doc.model_copy(update={"links": links.get(doc.id, [])}) if doc.id in links else doc


# ----------------------------------------------------------------------------- DPR TSV


def iter_dpr_tsv(path: str | Path) -> Iterator[Document]:
    """Passages of DPR's ``psgs_w100.tsv`` (header ``id text title``)."""
    path = Path(path)
    csv.field_size_limit(sys.maxsize)
    with path.open("r", encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t")
        header = next(reader, None)
        if header is None or [h.strip().lower() for h in header[:3]] != ["id", "text", "title"]:
            raise DataError(path, f"header is {header!r}, expected ['id', 'text', 'title']", line=1,
                            fix="DPR passage files start with the header line 'id<TAB>text<TAB>title'")
        for row in reader:
            if len(row) < 3 or not row[0]:
                raise DataError(path, f"expected 3 tab-separated columns, got {len(row)}", line=reader.line_num,
                                fix="check the quoting of the text column")
            yield Document(id=row[0], title=row[2], text=row[1])


# ----------------------------------------------------------------------------- wikiextractor

_ANCHOR = re.compile(r'<a href="([^"]*)">(.*?)</a>', re.DOTALL)


def _wikiextractor_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
    if not files:
        raise DataError(path, "no wikiextractor output files found", fix="pass the --output directory of wikiextractor --json")
    return files


def _title_key(title: str) -> str:
    title = unquote(title).replace("_", " ").strip()
    return title[:1].upper() + title[1:]


def _wikiextractor_rows(path: Path) -> Iterator[tuple[Path, int, dict[str, str]]]:
    for file in _wikiextractor_files(path):
        with file.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                if not raw.strip():
                    continue
                try:
                    row = orjson.loads(raw)
                except orjson.JSONDecodeError as exc:
                    raise DataError(file, f"invalid JSON: {exc}", line=number,
                                    fix="run wikiextractor with --json") from None
                if not isinstance(row, dict) or not row.get("id") or not isinstance(row.get("text"), str):
                    raise DataError(file, "expected an object with 'id', 'title', 'text'", line=number)
                yield file, number, row


def iter_wikiextractor(path: str | Path, stats: LinkStats | None = None) -> Iterator[Document]:
    """Pages of wikiextractor ``--json`` output; ``--links`` anchors become ``Document.links``."""
    path = Path(path)
    stats = stats if stats is not None else LinkStats()
    title_to_id = {_title_key(str(row.get("title", ""))): str(row["id"]) for _, _, row in _wikiextractor_rows(path)}
    for _, _, row in _wikiextractor_rows(path):
        title = str(row.get("title", ""))
        text = row["text"]
        first, _, rest = text.partition("\n")
        if first.strip() == title:
            text = rest.lstrip("\n")
        links: list[str] = []
        for href, _anchor in _ANCHOR.findall(text):
            stats.read += 1
            target = title_to_id.get(_title_key(href))
            if target is None or target == str(row["id"]):
                stats.drop(title, href)
            elif target not in links:
                links.append(target)
                stats.kept += 1
        text = _ANCHOR.sub(lambda m: m.group(2), text)
        yield Document(id=str(row["id"]), title=title, text=text, links=links,
                       url=row.get("url") if isinstance(row.get("url"), str) else None)


# ----------------------------------------------------------------------------- Wikispeedia


def _clean_wikispeedia(raw: str, title: str) -> str:
    """Drop the ``#copyright`` / title / "2007 Schools Wikipedia Selection" header; keep paragraphs."""
    lines = raw.splitlines()
    for index, line in enumerate(lines[:12]):
        if line.strip().startswith("2007 Schools Wikipedia Selection"):
            lines = lines[index + 1:]
            break
    else:
        lines = [ln for ln in lines if ln.strip() not in ("#copyright", title)]
    text = "\n".join(lines)
    paragraphs = [" ".join(block.split()) for block in re.split(r"\n\s*\n", text)]
    return "\n\n".join(p for p in paragraphs if p)


def _wikispeedia_articles(articles: Path) -> Iterator[tuple[str, str]]:
    """``(encoded name, raw text)`` per article, in sorted file order."""
    if articles.is_dir():
        for file in sorted(articles.glob("*.txt")):
            yield file.stem, file.read_text(encoding="utf-8", errors="replace")
        return
    with tarfile.open(articles, "r:*") as tar:
        members = sorted((m for m in tar.getmembers() if m.isfile() and m.name.endswith(".txt")),
                         key=lambda m: m.name)
        for member in members:
            handle = tar.extractfile(member)
            assert handle is not None
            yield Path(member.name).stem, handle.read().decode("utf-8", errors="replace")


def iter_wikispeedia(articles: str | Path, links_path: str | Path,
                     stats: LinkStats | None = None) -> Iterator[Document]:
    """Wikispeedia pages with their outgoing links (decoded names as ids)."""
    articles, links_path = Path(articles), Path(links_path)
    if not articles.exists():
        raise DataError(articles, "Wikispeedia articles not found",
                        fix="pass plaintext_articles.tar.gz or the extracted plaintext_articles/ folder")
    pages = [(unquote(name), raw) for name, raw in _wikispeedia_articles(articles)]
    if not pages:
        raise DataError(articles, "no .txt articles found", fix="check the Wikispeedia articles path")
    links = load_links(links_path, {page_id for page_id, _ in pages},
                       stats if stats is not None else LinkStats(), url_decode=True)
    for page_id, raw in pages:
        title = page_id.replace("_", " ")
        yield Document(id=page_id, title=title, text=_clean_wikispeedia(raw, title), links=links.get(page_id, []))


def wikispeedia_paths(root: str | Path) -> tuple[Path, Path]:
    """``(articles, links.tsv)`` inside a Wikispeedia folder laid out as ../shared/data/wikispeedia."""
    root = Path(root)
    articles = root / "plaintext_articles.tar.gz"
    if not articles.exists():
        articles = root / "plaintext_articles"
    return articles, root / "wikispeedia_paths-and-graph" / "links.tsv"


# ----------------------------------------------------------------------------- one entry point

FORMATS = ("jsonl", "dpr", "wikiextractor", "wikispeedia", "wikipedia", "demo")


class ImportResult(NamedTuple):
    """What :func:`import_corpus` wrote: the indexed store, the page store (if chunked) and link counts."""

    store: JsonlStore
    pages: JsonlStore | None
    links: LinkStats


def iter_pages(fmt: str, source: str | Path, *, links: str | Path | None = None, seed: int = 0,
               stats: LinkStats | None = None) -> Iterator[Document]:
    """Pages of ``source`` in format ``fmt`` (one of :data:`FORMATS`)."""
    stats = stats if stats is not None else LinkStats()
    if fmt == "jsonl":
        return iter_jsonl_corpus(source, links, stats)
    if fmt == "dpr":
        return iter_dpr_tsv(source)
    if fmt == "wikiextractor":
        return iter_wikiextractor(source, stats)
    if fmt == "wikispeedia":
        articles, default_links = wikispeedia_paths(source) if Path(source).is_dir() and not Path(
            source).name == "plaintext_articles" else (Path(source), None)
        links_path = Path(links) if links is not None else default_links
        if links_path is None:
            raise ConfigError("Wikispeedia needs its links.tsv", fix="pass --links .../links.tsv")
        return iter_wikispeedia(articles, links_path, stats)
    if fmt == "wikipedia":
        from aethersearch.corpus.wikipedia import iter_wikipedia

        return iter_wikipedia(source, stats)
    if fmt == "demo":
        from aethersearch.corpus.demo_world import generate_world

        world = generate_world(seed=seed)
        stats.read = stats.kept = sum(len(d.links) for d in world.documents)
        return iter(world.documents)
    raise ConfigError(f"unknown corpus format {fmt!r}", fix=f"use one of: {', '.join(FORMATS)}")


def import_corpus(fmt: str, source: str | Path, out_dir: str | Path, *, links: str | Path | None = None,
                  chunk: ChunkConfig | None = None, pages_out: str | Path | None = None, seed: int = 0,
                  overwrite: bool = False, on_document: Callable[[int], None] | None = None) -> ImportResult:
    """Import a corpus into a store at ``out_dir`` (passages when ``chunk`` cuts pages).

    With chunking, the whole pages (with their links) go to ``pages_out`` when given,
    so the sandbox can browse pages while search indexes passages.
    """
    chunk = chunk or ChunkConfig()
    stats = LinkStats()
    label = f"{fmt}:{source}"
    if fmt == "wikipedia" and (chunk.mode == "none" or pages_out is not None):
        return _import_wikipedia(source, out_dir, chunk, pages_out, label, overwrite, on_document)
    if chunk.mode == "none":
        store = build_store(iter_pages(fmt, source, links=links, seed=seed, stats=stats), out_dir,
                            source=label, overwrite=overwrite, on_document=on_document)
        return ImportResult(store, None, stats)
    pages: JsonlStore | None = None
    if pages_out is not None:
        pages = build_store(iter_pages(fmt, source, links=links, seed=seed, stats=stats), pages_out,
                            source=label, overwrite=overwrite)
        page_iter: Iterator[Document] = iter(pages)
    else:
        page_iter = iter_pages(fmt, source, links=links, seed=seed, stats=stats)
    store = build_store(chunk_documents(page_iter, chunk), out_dir, source=f"{label} chunked {chunk.model_dump()}",
                        overwrite=overwrite, on_document=on_document)
    return ImportResult(store, pages, stats)


def _import_wikipedia(source: str | Path, out_dir: str | Path, chunk: ChunkConfig, pages_out: str | Path | None,
                      label: str, overwrite: bool, on_document: Callable[[int], None] | None) -> ImportResult:
    """A dump's pages to a store, with its typed infobox rows beside the page store
    (``corpus.wikipedia.INFOBOX_FILE``); chunked passages go to ``out_dir`` as for any format."""
    from aethersearch.corpus.wikipedia import WikipediaDump, write_infobox_hops

    dump = WikipediaDump(source)
    page_dir = out_dir if chunk.mode == "none" else pages_out
    assert page_dir is not None  # import_corpus sends only these two cases
    pages = build_store(dump.documents(), page_dir, source=label, overwrite=overwrite,
                        on_document=on_document if chunk.mode == "none" else None)
    write_infobox_hops(page_dir, dump.infobox_hops())
    if chunk.mode == "none":
        return ImportResult(pages, None, dump.stats.links)
    store = build_store(chunk_documents(iter(pages), chunk), out_dir, source=f"{label} chunked {chunk.model_dump()}",
                        overwrite=overwrite, on_document=on_document)
    return ImportResult(store, pages, dump.stats.links)

