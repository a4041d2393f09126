"""Split pages into retrieval passages: by paragraph, or by N words with overlap.

Why: retrieval corpora (DPR wiki-18: 100-word passages) index passages, while
the sandbox browses whole pages. A passage keeps a pointer to its page in its id,
``"<page id>#<n>"`` (n = 0-based passage number), so a hit can always be mapped
back to the page it came from with :func:`passage_page`. Passages carry the page
title (as Search-R1's ``"Title"\\nText`` contents do) and no links: the page
store keeps the page's outgoing links.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Literal

from pydantic import Field, model_validator

from aethersearch.errors import ConfigError
from aethersearch.records import Document, Record

__all__ = ["ChunkConfig", "PASSAGE_SEPARATOR", "chunk_document", "chunk_documents", "passage_id", "passage_page"]

PASSAGE_SEPARATOR = "#"
_PARAGRAPH = re.compile(r"\n\s*\n")


class ChunkConfig(Record):
    """How to cut pages: ``none`` (one passage per page), ``paragraph`` or ``words``."""

    mode: Literal["none", "paragraph", "words"] = "none"
    size: int = Field(default=100, ge=1, description="words per passage (mode=words)")
    overlap: int = Field(default=0, ge=0, description="words shared by consecutive passages (mode=words)")
    min_words: int = Field(default=1, ge=1, description="paragraphs shorter than this merge into the next")

    @model_validator(mode="after")
    def _overlap_below_size(self) -> ChunkConfig:
        if self.mode == "words" and self.overlap >= self.size:
            raise ConfigError(f"chunk overlap {self.overlap} must be smaller than size {self.size}",
                              fix="use e.g. --chunk-size 100 --chunk-overlap 20")
        return self


def passage_id(page_id: str, number: int) -> str:
    """Id of passage ``number`` of page ``page_id``."""
    return f"{page_id}{PASSAGE_SEPARATOR}{number}"


def passage_page(doc_id: str) -> str:
    """The page id a passage id points to (an id without ``#<n>`` is a page id itself)."""
    head, sep, tail = doc_id.rpartition(PASSAGE_SEPARATOR)
    return head if sep and tail.isdigit() else doc_id


def _paragraphs(text: str, min_words: int) -> list[str]:
    pieces = [" ".join(block.split()) for block in _PARAGRAPH.split(text)]
    pieces = [p for p in pieces if p]
    merged: list[str] = []
    pending = ""
    for piece in pieces:
        pending = f"{pending} {piece}".strip()
        if len(pending.split()) >= min_words:
            merged.append(pending)
            pending = ""
    if pending:
        if merged:
            merged[-1] = f"{merged[-1]} {pending}"
        else:
            merged.append(pending)
    return merged


def _windows(text: str, size: int, overlap: int) -> list[str]:
    words = text.split()
    if not words:
        return []
    step = size - overlap
    out = []
    for start in range(0, len(words), step):
        out.append(" ".join(words[start:start + size]))
        if start + size >= len(words):
            break
    return out


def chunk_document(doc: Document, config: ChunkConfig) -> list[Document]:
    """The passages of one page (the page itself when ``mode == "none"``)."""
    if config.mode == "none":
        return [doc]
    if config.mode == "paragraph":
        pieces = _paragraphs(doc.text, config.min_words)
    else:
        pieces = _windows(doc.text, config.size, config.overlap)
    return [Document(id=passage_id(doc.id, n), title=doc.title, text=piece, url=doc.url)
            for n, piece in enumerate(pieces)]


def chunk_documents(docs: Iterable[Document], config: ChunkConfig) -> Iterator[Document]:
    """Stream the passages of many pages, page order then passage order."""
    for doc in docs:
        yield from chunk_document(doc, config)
