"""Wikilink targets as MediaWiki names pages: the title a link names, and whether it names an article.

Its own module because both the wikitext parse (``corpus/wikitext.py``) and the infobox rows
(``corpus/infobox.py``, which the parse calls) read link targets by the same rule.
"""

from __future__ import annotations

import functools
import re

_INTERWIKI = re.compile(r"^[a-z][a-z-]{1,11}$")


def normalize_title(title: str) -> str:
    """A page title as MediaWiki stores it on a first-letter wiki (``_`` as space, first letter upper)."""
    title = " ".join(title.replace("_", " ").split())
    return title[:1].upper() + title[1:]


@functools.lru_cache(maxsize=1 << 16)
def article_target(target: str, namespaces: frozenset[str]) -> str | None:
    """The article a wikilink target names, or ``None`` for a namespaced, interwiki or empty target.

    ``namespaces`` are the wiki's namespace prefixes, lower-cased (``"file"``, ``"category"``, ...).
    Cached: a dump names its popular targets millions of times (a tenth of the import's CPU uncached).
    """
    target = target.partition("#")[0].strip().lstrip(":").strip()
    if not target or "{" in target or "<" in target:
        return None
    prefix, colon, _ = target.partition(":")
    if colon:
        key = prefix.strip().lower()
        if key in namespaces or (prefix == prefix.lower() and _INTERWIKI.match(prefix)) or key in ("image", "media"):
            return None
    return normalize_title(target)


__all__ = ["article_target", "normalize_title"]
