"""Stream the pages of an official MediaWiki XML export (``pages-articles``), bz2 or plain.

Why the standard library's expat, fed by us, and not ``mwxml``: both stream, but
on the real enwiki excerpt ``mwxml`` took 1.6x as long to hand out the same 206
revisions (``benchmarks/wikipedia_build.py --compare``), and feeding the parser
ourselves keeps the two offsets a bad-input error needs: how many compressed
bytes were read and which page was last complete. Expat's callbacks keep only the
fields a page needs (title, namespace, id, redirect, the first revision's text)
and build no element tree: building one for every element of an export (contributor,
timestamp, sha1...) and reading it back through ElementTree's pull events was a
third of the import's CPU. Memory stays flat in the number of pages.

Errors (all :class:`~aethersearch.errors.DataError` naming the dump):

* a truncated or corrupt bz2 stream: the compressed byte offset reached and the
  last complete page;
* malformed XML, or an export that ends before ``</mediawiki>``: the line and
  column in the decompressed XML and the last complete page;
* a byte that is not UTF-8 (an export is UTF-8): an *encoding* error naming its
  byte offset in the decompressed XML, the bytes there and the page it is in
  (expat alone calls it "not well-formed (invalid token)");
* a page whose text is over ``max_page_bytes`` (MediaWiki's own article limit,
  ``$wgMaxArticleSize``: 2 MiB, :data:`MAX_PAGE_BYTES`): its title and page id,
  refused before its text is handed on;
* a content page with no ``<text>`` (or a deleted one): its title and page id.
"""

from __future__ import annotations

import bz2
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple
from xml.parsers.expat import ExpatError, ParserCreate

from aethersearch.errors import DataError

#: bytes read from the (decompressed) stream per parser feed
CHUNK = 1 << 20
_BZ2_MAGIC = b"BZh"
#: the ``<page>`` children whose text a page keeps
_PAGE_FIELDS = frozenset({"title", "ns", "id"})
#: MediaWiki's default ``$wgMaxArticleSize`` (2,048 KiB): no page of a real export is longer
MAX_PAGE_BYTES = 2048 * 1024


class DumpPage(NamedTuple):
    """One ``<page>`` of the export: its latest revision's wikitext, or its redirect target."""

    title: str
    namespace: int
    page_id: str
    redirect: str | None
    text: str


class SiteInfo(NamedTuple):
    """What ``<siteinfo>`` says: namespace prefixes by key, the wiki's base URL and its title case rule."""

    namespaces: dict[int, str]
    base: str
    case: str


def open_dump(path: str | Path) -> tuple[BinaryIO, BinaryIO]:
    """``(stream, raw file)``: the decompressed XML stream (bz2 told by its magic bytes) and the file under it."""
    path = Path(path)
    try:
        raw = path.open("rb")
    except OSError as exc:
        raise DataError(path, f"cannot open the dump: {exc.strerror}", fix="check the path") from None
    magic = raw.read(3)
    raw.seek(0)
    if magic == _BZ2_MAGIC:
        return bz2.BZ2File(raw), raw  # type: ignore[return-value]
    return raw, raw


class DumpReader:
    """Iterate the pages of one export; ``site`` is filled once ``<siteinfo>`` has been read.

    ``pages_read`` and ``last_title`` say how far the stream got, for the
    caller's progress and for error messages.
    """

    def __init__(self, path: str | Path, *, max_page_bytes: int = MAX_PAGE_BYTES) -> None:
        self.path = Path(path)
        self.max_page_bytes = max_page_bytes
        self.site = SiteInfo({}, "", "first-letter")
        self.pages_read = 0
        self.last_title: str | None = None
        self._open_title: str | None = None  # the title of the page being parsed (for an error inside it)

    def _where(self) -> str:
        return f"after page {self.last_title!r} (page {self.pages_read})" if self.last_title else "before the first page"

    def _page(self, fields: dict[str, Any]) -> DumpPage:
        title, page_id, ns = fields.get("title", ""), fields.get("id", "").strip(), fields.get("ns", "")
        try:
            namespace = int(ns or 0)
        except ValueError:
            raise DataError(self.path, f"page {title!r} (id {page_id}) has a non-integer <ns>",
                            fix="this is not a MediaWiki export") from None
        text = fields.get("text")
        # a UTF-8 character is at most 4 bytes: encode only a text that may be over the limit
        if text is not None and len(text) * 4 > self.max_page_bytes \
                and len(size := text.encode("utf-8")) > self.max_page_bytes:
            raise DataError(self.path, f"page {title!r} (id {page_id}) has {len(size):,} bytes of text, over the "
                            f"{self.max_page_bytes:,}-byte page limit (MediaWiki's $wgMaxArticleSize)",
                            fix="remove the page from the export, or raise the limit (max_page_bytes) if the wiki "
                                "allows longer pages")
        if text is None or fields.get("deleted"):
            raise DataError(self.path, f"page {title!r} (id {page_id}) has no revision text",
                            fix="use a pages-articles export with page text (not a stub or logging dump), or "
                                "drop the page from the file")
        return DumpPage(title, namespace, page_id, fields.get("redirect"), text)

    def __iter__(self) -> Iterator[DumpPage]:
        stream, raw = open_dump(self.path)
        ready: list[DumpPage] = []
        parser = self._parser(ready)
        fed = 0  # decompressed bytes fed before the current chunk
        previous = b""  # the chunk before it (an invalid byte may sit in its tail, still unparsed)
        try:
            while True:
                try:
                    chunk = stream.read(CHUNK)
                except (EOFError, OSError) as exc:
                    raise DataError(self.path, f"the bz2 stream is truncated or corrupt at compressed byte "
                                    f"{raw.tell():,} ({exc}), {self._where()}",
                                    fix="download the dump again and check it against the published md5/sha1 "
                                        "sums") from None
                failed: ExpatError | DataError | None = None
                try:
                    parser.Parse(chunk, not chunk)
                except (ExpatError, DataError) as exc:  # the pages completed before it are handed out first
                    failed = exc
                for page in ready:
                    self.pages_read += 1
                    self.last_title = page.title
                    yield page
                ready.clear()
                if isinstance(failed, ExpatError):
                    self._encoding_error(previous[-8:] + chunk, fed - len(previous[-8:]), parser.ErrorByteIndex)
                    raise DataError(self.path, f"malformed XML at line {failed.lineno}, column {failed.offset} "
                                    f"({failed}), {self._where()}", line=failed.lineno,
                                    fix="the export is cut short or edited: download it again") from None
                if failed is not None:
                    raise failed
                if not chunk:
                    break
                fed += len(chunk)
                previous = chunk
        finally:
            stream.close()
            raw.close()

    def _encoding_error(self, window: bytes, start: int, offset: int) -> None:
        """Raise the encoding error when the byte expat stopped at (``offset`` in the XML; ``window`` holds the
        XML's bytes from ``start``) does not start valid UTF-8; return when it does (the XML is what is wrong)."""
        at = offset - start
        if not 0 <= at < len(window):
            return
        try:
            window[at:at + 4].decode("utf-8")
            return
        except UnicodeDecodeError as exc:
            if exc.start != 0:
                return
        chunk = window
        page = f"in page {self._open_title!r}" if self._open_title else "outside any page"
        raise DataError(self.path, f"encoding error: byte {chunk[at:at + 1].hex()} at byte offset {offset:,} of the "
                        f"XML is not UTF-8, {page} ({self._where()})",
                        fix="an export is UTF-8: re-encode the file (e.g. iconv -f LATIN1 -t UTF-8) or download "
                            "it again") from None

    def _parser(self, ready: list[DumpPage]) -> Any:
        """An expat parser whose callbacks append each complete page to ``ready`` and fill :attr:`site`.

        Character data is kept only inside the elements read (:data:`_PAGE_FIELDS`, ``<text>`` of the
        first revision, the site info's), each taken once per page (the first, as a page's ``<id>``
        comes before its revision's)."""
        parser = ParserCreate()
        parser.buffer_text = True
        parser.buffer_size = CHUNK
        path: list[str] = []
        fields: dict[str, Any] = {}
        buffer: list[str] = []
        keep: str | None = None  # the field the current character data belongs to
        namespaces: dict[int, str] = {}
        site: dict[str, str] = {}

        def start(name: str, attributes: dict[str, str]) -> None:
            nonlocal keep
            parent = path[-1] if path else ""
            path.append(name)
            field = None
            if parent == "page":
                if name in _PAGE_FIELDS and name not in fields:
                    field = name
                elif name == "redirect":
                    fields["redirect"] = attributes.get("title")
            elif name == "text" and parent == "revision" and len(path) >= 3 and path[-3] == "page":
                if "text" not in fields:
                    field = "text"
                    fields["deleted"] = "deleted" in attributes
            elif parent == "siteinfo" and name in ("base", "case"):
                field = name
            elif name == "namespace" and parent == "namespaces":
                field = "namespace"
                fields["key"] = attributes.get("key", "")
            if field is not None:
                keep = field
                buffer.clear()

        def end(name: str) -> None:
            nonlocal keep
            path.pop()
            field = keep
            if field is not None:
                keep = None
                value = "".join(buffer)
                if field == "namespace":
                    try:
                        namespaces[int(fields.pop("key"))] = value.strip()
                    except ValueError:
                        pass
                elif field in ("base", "case"):
                    site[field] = value.strip()
                else:
                    fields[field] = value
                    if field == "title":
                        self._open_title = value
            if name == "page":
                self._open_title = None
                ready.append(self._page(fields))
                fields.clear()
            elif name == "siteinfo":
                self.site = SiteInfo(dict(namespaces), site.get("base", ""), site.get("case", ""))
                fields.clear()

        def characters(data: str) -> None:
            if keep is not None:
                buffer.append(data)

        parser.StartElementHandler = start
        parser.EndElementHandler = end
        parser.CharacterDataHandler = characters
        return parser


def read_dump(path: str | Path) -> Iterator[DumpPage]:
    """The pages of the export at ``path`` (see :class:`DumpReader` to read its site info too)."""
    return iter(DumpReader(path))


__all__ = ["CHUNK", "DumpPage", "DumpReader", "MAX_PAGE_BYTES", "SiteInfo", "open_dump", "read_dump"]
