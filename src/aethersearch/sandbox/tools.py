"""The sandbox's browse tools as the model sees them, and the input checks behind them.

Why here: the tool descriptions are part of the evaluation contract (they are
the text a function-calling agent reads), so they live in one place, and the
same validation runs in-process and behind the HTTP API. Page names are looked
up in the corpus store, never on a filesystem, but names that look like paths
(``/``, ``\\``, ``..``), control characters and over-long names are refused
anyway so no caller can ever smuggle a path through a page argument.
"""

from __future__ import annotations

import sys
import unicodedata
from collections.abc import Sequence
from functools import cache
from typing import Any, Protocol, runtime_checkable

from aethersearch.errors import ToolError
from aethersearch.records import Document

__all__ = ["MAX_PAGE_NAME", "MAX_QUERY_CHARS", "PageResolver", "QUERY_PATTERN", "SEARCH_TOOL", "SearchBackend",
    "TOOL_SPECS", "VISIT_TOOL", "page_name_pattern", "render_documents", "validate_page_name", "validate_query"]

MAX_PAGE_NAME = 256
MAX_QUERY_CHARS = 512
#: what :func:`validate_query` needs besides the length, as a JSON Schema ``pattern``: a non-space character
QUERY_PATTERN = r"\S"
#: the Unicode categories a page name may not contain (control, format, surrogate)
_REFUSED_CATEGORIES = ("Cc", "Cf", "Cs")
#: those :func:`page_name_pattern` lists (see there why not surrogates)
_LISTED_CATEGORIES = ("Cc", "Cf")

SEARCH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "search",
        "description": (
            "Search the encyclopedia. Returns the ids and titles of the best matching pages, each with a "
            "short snippet (at most two sentences); open a page with visit to read all of it. "
            "Some pages only become findable after you have opened a page that links to them, "
            "so if a search does not find what you need, open related pages and follow their links."
        ),
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "Keywords to search for."}},
            "required": ["query"],
        },
    },
}

VISIT_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "visit",
        "description": (
            "Open one encyclopedia page by its id or exact title and read its full text and the pages it "
            "links to. Opening a page can make the pages it links to available."
        ),
        "parameters": {
            "type": "object",
            "properties": {"page": {"type": "string", "description": "Page id or exact title."}},
            "required": ["page"],
        },
    },
}

TOOL_SPECS: tuple[dict[str, Any], ...] = (SEARCH_TOOL, VISIT_TOOL)


@runtime_checkable
class SearchBackend(Protocol):
    """What the sandbox needs of a ``SearchIndex``: ``search``, and ``warm_up`` before serving."""

    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]: ...

    def warm_up(self) -> None:
        """Pay first-request costs before serving (every ``SearchIndex`` has it; default: none)."""
        return None


def validate_query(query: object) -> str:
    """A non-empty query of at most ``MAX_QUERY_CHARS`` characters, or ToolError saying which limit."""
    if not isinstance(query, str) or not query.strip():
        raise ToolError("search needs a non-empty query string")
    if len(query) > MAX_QUERY_CHARS:
        raise ToolError(f"query is {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
    return query.strip()


def validate_page_name(page: object) -> str:
    """A safe page id/title, or ToolError naming the problem (no paths, no control characters)."""
    if not isinstance(page, str) or not page.strip():
        raise ToolError("visit needs a page id or title")
    name = page.strip()
    if len(name) > MAX_PAGE_NAME:
        raise ToolError(f"page name is {len(name)} characters; the limit is {MAX_PAGE_NAME}")
    if "/" in name or "\\" in name or ".." in name or name.startswith("."):
        raise ToolError(f"invalid page name {name!r}: page names never contain '/', '\\\\' or '..'",
                        fix="pass a page id or title as shown in search results or links")
    if any(unicodedata.category(ch) in _REFUSED_CATEGORIES for ch in name):
        raise ToolError(f"invalid page name {name!r}: control characters are not allowed")
    return name


@cache
def page_name_pattern() -> str:
    """:func:`validate_page_name`'s rule as a JSON Schema ``pattern`` (for the sandbox's OpenAPI).

    Stricter only at the edges: the name must start with a non-space character (the
    tool strips spaces first). No '/', '\\', control/format/surrogate characters
    anywhere, no '..', no leading '.'. The refused characters are listed from this
    Python's ``unicodedata``, so the pattern and the check agree by construction.
    Surrogates are left out of the list: no JSON text the sandbox parses carries one
    (a lone ``\\ud800`` is refused as invalid JSON), and a regex engine that
    validates Unicode scalar values, pydantic's among them, rejects them in a class.
    """
    refused: list[str] = []
    code = 0
    while code <= sys.maxunicode:
        if unicodedata.category(chr(code)) in _LISTED_CATEGORIES:
            end = code
            while end + 1 <= sys.maxunicode and unicodedata.category(chr(end + 1)) in _LISTED_CATEGORIES:
                end += 1
            refused.append(_class_char(code) if end == code else f"{_class_char(code)}-{_class_char(end)}")
            code = end
        code += 1
    bad = "/\\\\" + "".join(refused)
    dotless = f"[^.{bad}]"  # any allowed character but '.'; a '.' only before one of them, or last: never '..'
    return rf"^[^\s.{bad}](?:{dotless}|\.{dotless})*\.?$"


def _class_char(code: int) -> str:
    """One code point inside a regex character class: escaped in the BMP, literal beyond it."""
    return f"\\u{code:04x}" if code <= 0xFFFF else chr(code)


class PageResolver:
    """Resolves a visit argument to a page id: exact id, then ``spaces -> _`` id, then title (casefolded)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self._titles: dict[str, str] | None = None

    def _title_map(self) -> dict[str, str]:
        if self._titles is None:
            titles: dict[str, str] = {}
            for doc in self.store:
                titles.setdefault(unicodedata.normalize("NFC", doc.title).casefold(), doc.id)
            self._titles = titles
        return self._titles

    def resolve(self, name: str) -> str | None:
        """The page id ``name`` refers to, or ``None`` if no page matches."""
        if name in self.store:
            return name
        underscored = name.replace(" ", "_")
        if underscored in self.store:
            return underscored
        return self._title_map().get(unicodedata.normalize("NFC", name).casefold())


def render_documents(documents: Sequence[Document], *, max_chars: int = 1500, with_links: bool = False) -> str:
    """Observation text for an agent: ``Doc i(Title: ..., id: ...) text`` per page (Search-R1 style)."""
    lines = []
    for i, doc in enumerate(documents, start=1):
        text = doc.text if len(doc.text) <= max_chars else doc.text[:max_chars] + " ..."
        line = f"Doc {i}(Title: {doc.title}, id: {doc.id}) {text}"
        if with_links and doc.links:
            line += "\nLinks: " + ", ".join(doc.links)
        lines.append(line)
    return "\n".join(lines)
