"""Wikitext -> plain page text and outgoing link titles, with ``wikitextparser``.

Why wikitextparser and not mwparserfromhell: on the real enwiki excerpt
(106 articles, 5.7 MB of wikitext) ``wikitextparser``'s ``plain_text`` converted
about twice as many pages per second as ``mwparserfromhell``'s ``strip_code``
(``benchmarks/wikipedia_build.py --compare`` prints both side by side),
and one parse gives both the text and every wikilink, including links nested in
templates, infoboxes and image captions, which WebDetective's graph
needs (an infobox's ``| spouse = [[...]]`` is a hop). Comments are not links.

Conventions of this module (one place, used by the importer and its tests):

* a link target is normalised as MediaWiki does for a first-letter wiki:
  ``#section`` dropped, ``_`` read as a space, whitespace collapsed, the first
  letter upper-cased; a leading ``:`` is dropped;
* a target whose prefix before ``:`` is a namespace of the wiki (``File:``,
  ``Category:``, ``Template:``...) or an interlanguage/interwiki code (lower case,
  ``fr:``, ``wikt:``) is not an article link; it is dropped from the links and
  from the text (a category line is not prose);
* formulas (``<math>``) are cut, and references (``<ref>...</ref>``) with their links: a citation is not
  text an agent reads as a hop, and the page text and its links must agree;
* a page is a disambiguation page when it transcludes a template of the
  :data:`DISAMBIGUATION_TEMPLATES` family, as Wikipedia's own
  ``Category:Disambiguation pages`` is filled.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection
from typing import NamedTuple

import wikitextparser

#: template names (lower case) that mark a disambiguation page, besides any name *ending* in "disambiguation"
#: ("Airport disambiguation"); "Disambiguation needed" is an inline cleanup tag on ordinary articles
DISAMBIGUATION_TEMPLATES = frozenset({
    "disambig", "dab", "disamb", "hndis", "geodis", "numberdis", "schooldis", "hospitaldis", "mathdab",
    "letter-numbercombdisambig", "roaddis",
})

_HEADING = re.compile(r"^(={1,6})\s*(.*?)\s*\1\s*$", re.MULTILINE)
_BLANK_LINES = re.compile(r"\n\s*\n\s*(?:\n\s*)*")
_SPACES = re.compile(r"[ \t\u00a0]+")
_EMPHASIS = re.compile(r"'{2,}")
_INTERWIKI = re.compile(r"^[a-z][a-z-]{1,11}$")


class ParsedPage(NamedTuple):
    """Plain text, normalised link titles (first appearance order, no repeats) and the disambiguation flag."""

    text: str
    links: list[str]
    disambiguation: bool


def normalize_title(title: str) -> str:
    """A page title as MediaWiki stores it on a first-letter wiki (``_`` as space, first letter upper)."""
    title = " ".join(title.replace("_", " ").split())
    return title[:1].upper() + title[1:]


def article_target(target: str, namespaces: Collection[str]) -> str | None:
    """The article a wikilink target names, or ``None`` for a namespaced, interwiki or empty target.

    ``namespaces`` are the wiki's namespace prefixes, lower-cased (``"file"``, ``"category"``, ...).
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


def is_disambiguation(template_names: Collection[str]) -> bool:
    """Whether a page transcluding these (normalised, any case) templates is a disambiguation page."""
    return any(name.endswith("disambiguation") or name in DISAMBIGUATION_TEMPLATES
               for name in (n.strip().lower() for n in template_names))


def _tidy(text: str) -> str:
    text = _HEADING.sub(lambda m: m.group(2), text)
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()


@functools.lru_cache(maxsize=8)
def _not_prose(namespaces: frozenset[str]) -> re.Pattern[str]:
    """References, formulas (TeX is not prose), and namespaced or interlanguage links without nested links (category lines, ``[[fr:...]]``)."""
    prefixes = "|".join(sorted((re.escape(n) for n in namespaces), key=len, reverse=True))
    return re.compile(r"<ref\b[^>]*/>|<ref\b[^>]*>.*?</ref\s*>|<math\b[^>]*>.*?</math\s*>|"
                      rf"\[\[\s*(?:(?i:{prefixes})|[a-z][a-z-]{{1,11}})\s*:[^\[\]]*\]\]", re.DOTALL)


def parse_wikitext(wikitext: str, namespaces: frozenset[str]) -> ParsedPage:
    """Plain text and article links of one page's wikitext (see the module docstring for the rules).

    References and category/interlanguage links are cut before parsing: they
    are not prose, and cutting them in the parsed tree costs one tree update
    each (four times the whole parse on the real excerpt).
    """
    parsed = wikitextparser.parse(_not_prose(namespaces).sub("", wikitext))
    links: dict[str, None] = {}
    for link in parsed.wikilinks:  # every link, those nested in templates, infoboxes and captions too
        # the target is the span's text up to the first "|" (a title holds no "|"); reading it so skips the
        # regex match wikitextparser's ``title`` property runs on every access (a fifth of the parse)
        target = article_target(link.string[2:-2].partition("|")[0], namespaces)
        if target is not None:
            links.setdefault(target, None)
    disambiguation = is_disambiguation([t.normal_name() for t in parsed.templates])
    # bold/italic quote runs are dropped by a regex afterwards: wikitextparser's own pass pairs them up, which
    # is a third of plain_text's cost, and an agent reads the words, not the emphasis
    text = _EMPHASIS.sub("", parsed.plain_text(replace_bolds_and_italics=False))
    return ParsedPage(_tidy(text), list(links), disambiguation)


__all__ = ["DISAMBIGUATION_TEMPLATES", "ParsedPage", "article_target", "is_disambiguation", "normalize_title",
           "parse_wikitext"]
