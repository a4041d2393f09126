"""How many links an importer read, kept and dropped: one counter every page importer fills.

Why its own module: the format importers (``corpus.importers``) and the MediaWiki
dump reader (``corpus.wikipedia``) both count into it, and the importers hand the
``wikipedia`` format to the dump reader, so the counter lives below both instead
of one importing it back from the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["LinkStats"]


@dataclass
class LinkStats:
    """Links read, kept and dropped (target or source not a page of the corpus)."""

    read: int = 0
    kept: int = 0
    dropped: int = 0
    dropped_examples: list[tuple[str, str]] = field(default_factory=list)

    def drop(self, source: str, target: str) -> None:
        self.dropped += 1
        if len(self.dropped_examples) < 5:
            self.dropped_examples.append((source, target))
