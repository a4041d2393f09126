"""Typed infobox rows of a dump page: the field -> relation table, and the rows whose value links to a page.

Why: a real dump states its typed edges most often in infobox templates
(``| spouse = [[Mileva Marić]]``, ``| birth_place = [[Ulm]]``,
``| author = [[J. R. R. Tolkien]]``), and a link alone says nothing about what
it means. The importer keeps, per page, each row of an ``{{Infobox ...}}``
template whose field is in :data:`FIELD_RELATIONS` and whose value links to a
page: ``(field, relation, target title, the raw row, the row as plain text)``.
The plain row (``Spouse: Mileva Marić (m. 1903)``) is the hop's statement: the
importer writes it into the page's served text (:func:`with_rows`), so an
agent reads the hop where the page states it, as Wikispeedia's infobox lines
are read (``construct/infobox.py``, whose relation names this table uses: one
inventory, ``tests/corpus/test_dump_infobox.py`` checks it).

Field -> relation (parameter names as enwiki's infobox templates spell them,
lower case, ``_`` and space alike; ``docs/wikipedia-dump.md`` repeats it):

============================================  =================  ===========================
field                                         relation           the linked value must
============================================  =================  ===========================
spouse, spouses, consort                      spouse             begin the value
father / mother                               father / mother    begin the value
parents                                       parent             begin the value
children                                      child              begin the value
siblings                                      sibling            begin the value
author, writer, written by                    written_by         begin the value
director, directed by                         directed_by        begin the value
composer, music, music by                     composed_by        begin the value
starring, artist                              performer          begin the value
artist, in an artwork's infobox               painted_by         begin the value
designer                                      designed_by        begin the value
founder, founders, founded_by                 founded_by         begin the value
employer                                      employer           begin the value
alma_mater, education                         educated_at        begin the value
birth_place, born                             born_in            be its first link
death_place, died                             died_in            be its first link
headquarters, hq_location, hq_location_city   headquartered_in   be its first link
capital                                       has_capital        be its first link
mouth                                         flows_into         be its first link
country, location                             located_in         be its first link, in a
                                                                 place's infobox only
============================================  =================  ===========================

A row of a single-valued relation (:data:`SINGLE_VALUED`: spouse, father,
mother, author, director, composer, designer, founder, employer, education)
whose value links two articles or more is left out: "Who was Albert
Einstein's spouse?" has two right answers. "Begin the value": after list wrappers (``{{plainlist|``, ``{{ubl|``,
``{{marriage|``, bullets, emphasis), the value starts with the link, so
``spouse = Mileva Marić (m. [[1903]])`` names no spouse page. A place's
infobox (:data:`PLACE_TEMPLATES`) is one whose name says it describes a place:
a film's ``country`` is where it was made, not where it lies. Likewise an
artwork's infobox (:data:`ARTWORK_TEMPLATES`: ``{{Infobox artwork}}``,
``{{Infobox painting}}``) reads its fields through :data:`ARTWORK_FIELD_RELATIONS`
first: there the ``artist`` is the painter, on an album the performer.
"""

from __future__ import annotations

import html
import re
from typing import NamedTuple

from aethersearch.corpus.titles import article_target

#: infobox field (lower case, ``_`` for spaces: :func:`field_key`) -> relation: the one table of typed infobox
#: fields, for a dump's templates and for Wikispeedia's infobox labels ("Written by", "Born": read by
#: ``construct/infobox.py`` as the fields they spell). See the module docstring's table
FIELD_RELATIONS: dict[str, str] = {
    "spouse": "spouse", "spouses": "spouse", "consort": "spouse", "father": "father", "mother": "mother",
    "parents": "parent", "children": "child", "siblings": "sibling",
    "author": "written_by", "writer": "written_by", "written_by": "written_by", "director": "directed_by",
    "directed_by": "directed_by", "composer": "composed_by", "music": "composed_by", "music_by": "composed_by",
    "starring": "performer", "artist": "performer", "designer": "designed_by",
    "founder": "founded_by", "founders": "founded_by", "founded_by": "founded_by", "employer": "employer",
    "alma_mater": "educated_at", "education": "educated_at",
    "birth_place": "born_in", "born": "born_in", "death_place": "died_in", "died": "died_in",
    "headquarters": "headquartered_in", "hq_location": "headquartered_in", "hq_location_city": "headquartered_in",
    "capital": "has_capital", "mouth": "flows_into", "country": "located_in", "location": "located_in",
}


#: fields that mean another relation in an artwork's infobox (:data:`ARTWORK_TEMPLATES`) than elsewhere
ARTWORK_FIELD_RELATIONS: dict[str, str] = {"artist": "painted_by"}
#: the field table an artwork's infobox is read with (built once: the importer reads every page's infoboxes)
_ARTWORK_FIELDS = {**FIELD_RELATIONS, **ARTWORK_FIELD_RELATIONS}
#: words in an infobox template's name that make it an artwork's infobox
ARTWORK_TEMPLATES = ("artwork", "painting")


def field_key(name: str) -> str:
    """A field or label as :data:`FIELD_RELATIONS` keys it ("Alma Mater", "alma mater" -> ``alma_mater``)."""
    return "_".join(name.strip().lower().replace("_", " ").split())


#: relations whose object is named anywhere in the value (its first link); the others must begin it
FIRST_LINK = frozenset(("born_in", "died_in", "headquartered_in", "has_capital", "flows_into", "located_in"))
#: relations a question may ask with one answer: a row that links two articles or more for one of them (two
#: spouses, two universities) is left out, as a seed "Who was X's spouse?" would have a false gold
SINGLE_VALUED = frozenset(("spouse", "father", "mother", "written_by", "directed_by", "composed_by", "designed_by",
                           "painted_by", "founded_by", "employer", "educated_at"))
#: relations kept only in a place's infobox
PLACE_ONLY = frozenset(("located_in",))
#: words in an infobox template's name that make it a place's infobox
PLACE_TEMPLATES = ("settlement", "city", "town", "village", "country", "province", "state", "county", "region",
                   "island", "river", "lake", "mountain", "building", "station", "airport", "stadium", "venue",
                   "university", "school", "museum", "church", "park", "protected area", "uk place", "place",
                   "commune", "municipality", "district")

_INFOBOX = re.compile(r"\{\{\s*infobox[ _]", re.IGNORECASE)
_TOKEN = re.compile(r"\{\{|\}\}|\[\[|\]\]|\|")
_LINK = re.compile(r"\[\[([^\[\]|]*)(?:\|[^\[\]]*)?\]\]")
#: what may come before the link a value begins with: list templates, bullets, emphasis, line breaks
_LEAD = re.compile(r"(?:\s+|'{2,}|[*#]|<br\s*/?>|\{\{\s*(?:plainlist|plain list|ubl|unbulleted list|flatlist|"
                   r"flat list|hlist|marriage|nowrap|small|nobr)\s*\|)*", re.IGNORECASE)
_WRAPPER_OPEN = re.compile(r"\{\{\s*(?:plainlist|plain list|ubl|unbulleted list|flatlist|flat list|hlist|"
                           r"nowrap|small|nobr)\s*\|", re.IGNORECASE)
#: ``{{marriage|[[Name]]|date|date|reason=...}}``: the spouse, without the dates
_MARRIAGE = re.compile(r"\{\{\s*marriage\s*\|((?:\[\[[^\[\]]*\]\]|[^|{}\[\]])*)[^{}]*\}\}", re.IGNORECASE)
_COMMAS = re.compile(r"(?:\s*,)+")
_TEMPLATE = re.compile(r"\{\{[^{}]*\}\}")
#: images and category links: no text of the value
_MEDIA = re.compile(r"\[\[\s*(?:file|image|media|category)\s*:[^\[\]]*\]\]", re.IGNORECASE)
_PIPED = re.compile(r"\[\[[^\[\]|]*\|([^\[\]]*)\]\]")
_UNPIPED = re.compile(r"\[\[([^\[\]|]*)\]\]")
_SEPARATORS = re.compile(r"\s*(?:<br\s*/?>|\n\s*[*#]+|\|)\s*")
_MARKUP = re.compile(r"'{2,}|<[^<>]*>|\{\{|\}\}|^[*#]\s*")


class InfoboxRow(NamedTuple):
    """One typed row of a page's infobox: its field, relation, linked target title, the row as written
    (``| spouse = [[Mileva Marić]]``) and as plain text (the hop statement: ``Spouse: Mileva Marić``)."""

    field: str
    relation: str
    target: str
    row: str
    statement: str


def _infobox_spans(wikitext: str) -> list[tuple[int, int, list[int]]]:
    """``(start, end, top-level "|" positions)`` of each ``{{Infobox ...}}`` (unclosed ones are skipped)."""
    spans: list[tuple[int, int, list[int]]] = []
    at = 0
    while (found := _INFOBOX.search(wikitext, at)) is not None:
        braces, links, pipes, end = 0, 0, [], None
        for token in _TOKEN.finditer(wikitext, found.start()):
            kind = token.group()
            if kind == "{{":
                braces += 1
            elif kind == "}}":
                braces -= 1
                if braces == 0:
                    end = token.end()
                    break
            elif kind == "[[":
                links += 1
            elif kind == "]]":
                links = max(0, links - 1)
            elif braces == 1 and links == 0:
                pipes.append(token.start())
        if end is None:
            break
        spans.append((found.start(), end, pipes))
        at = end
    return spans


def plain_value(value: str) -> str:
    """An infobox value as one line of plain text: links as their text, list items joined by ", ", list
    wrappers kept for their items, other templates (dates, flags, citations) and images dropped."""
    text = _WRAPPER_OPEN.sub("", _MARRIAGE.sub(r"\1", value))
    previous = None
    while previous != text:  # innermost templates first
        previous, text = text, _TEMPLATE.sub("", text)
    text = _UNPIPED.sub(r"\1", _PIPED.sub(r"\1", _MEDIA.sub("", text)))
    text = _SEPARATORS.sub(", ", text.strip())
    text = _COMMAS.sub(",", _MARKUP.sub("", text))
    return " ".join(html.unescape(text).split()).strip(" ,")


def infobox_rows(wikitext: str, namespaces: frozenset[str]) -> list[InfoboxRow]:
    """The typed rows of the page's infobox templates, in page order, one per field (the first wins).

    ``wikitext`` should already be without comments and references (``wikitext.cut_not_prose``): a
    citation's link is not the value's. A row is kept when its field is in :data:`FIELD_RELATIONS`, its value
    links to an article (``wikitext.article_target``), that link begins the value (or, for
    :data:`FIRST_LINK` relations, is its first article link), and, for :data:`PLACE_ONLY` relations, the
    template is a place's infobox.
    """
    rows: list[InfoboxRow] = []
    seen: set[str] = set()
    for start, end, pipes in _infobox_spans(wikitext):
        if not pipes:  # "{{Infobox person}}": no rows
            continue
        name = wikitext[start + 2:pipes[0]].strip().lower().replace("_", " ")
        place = any(word in name for word in PLACE_TEMPLATES)
        fields = _ARTWORK_FIELDS if any(word in name for word in ARTWORK_TEMPLATES) else FIELD_RELATIONS
        for at, nxt in zip(pipes, [*pipes[1:], end - 2], strict=True):
            field, equals, value = wikitext[at + 1:nxt].partition("=")
            key = field_key(field)
            relation = fields.get(key)
            if not equals or relation is None or key in seen or (relation in PLACE_ONLY and not place):
                continue
            target = _target(value, namespaces, first_link=relation in FIRST_LINK)
            plain = plain_value(value)
            if target is None or not plain or (relation in SINGLE_VALUED and _articles(value, namespaces) > 1):
                continue
            seen.add(key)
            label = key.replace("_", " ").capitalize()
            rows.append(InfoboxRow(key, relation, target, wikitext[at:nxt].strip(), f"{label}: {plain}"))
    return rows


def _target(value: str, namespaces: frozenset[str], *, first_link: bool) -> str | None:
    """The article the value links to: its first article link, which must begin it unless ``first_link``."""
    if not first_link:
        lead = _LEAD.match(value)
        link = _LINK.match(value, lead.end() if lead else 0)
        return None if link is None else article_target(link.group(1), namespaces)
    for link in _LINK.finditer(value):
        target = article_target(link.group(1), namespaces)
        if target is not None:
            return target
    return None


def _articles(value: str, namespaces: frozenset[str]) -> int:
    """How many different articles the value links to."""
    return len({target for link in _LINK.finditer(value)
                if (target := article_target(link.group(1), namespaces)) is not None})


def with_rows(text: str, statements: list[str]) -> str:
    """The page text with its typed rows' statements as lines after the lead paragraph (where a reader
    finds an infobox; the lead stays the first paragraph, which single-hop triples read)."""
    if not statements:
        return text
    lead, sep, rest = text.partition("\n\n")
    block = "\n".join(statements)
    return f"{lead}\n\n{block}\n\n{rest}" if sep else f"{lead}\n\n{block}"


__all__ = ["ARTWORK_FIELD_RELATIONS", "ARTWORK_TEMPLATES", "FIELD_RELATIONS", "FIRST_LINK", "InfoboxRow",
    "PLACE_ONLY", "PLACE_TEMPLATES", "SINGLE_VALUED", "field_key", "infobox_rows", "plain_value", "with_rows"]
