"""Typed hops from infobox rows: the field -> relation table, and the rows of a page's flattened infobox.

Why: a page's infobox states its typed edges more often than its prose does
("Father George VI", "Author J. R. R. Tolkien", "Born 21 March 1685 Eisenach,
Thuringia, Germany"); prose patterns alone gave 368 typed facts on 4,604 real
Wikispeedia pages, almost all geography. Wikispeedia's plain text keeps each
infobox as one line of ``Label value Label value ...``; a row is a label of
:data:`FIELD_RELATIONS` followed by its value, up to the next label of
:data:`LABELS`. The value's first named page that the page links to is the
object; the **hop statement is the row** ("Father George VI"), which stays in
the page's served text, so an agent reads the hop where the page states it.

Field -> relation (the documented table; ``docs/guides/hint-free.md`` repeats it). Each label is read as
the field it spells in the one table of typed infobox fields, ``corpus/infobox.FIELD_RELATIONS``, which a
dump's infobox templates use too (:data:`WIKISPEEDIA_LABELS` are the labels read):

======================  ================  ==================================
field (infobox label)   relation          object's type
======================  ================  ==================================
Father                  father            a person (no kind of place)
Mother                  mother            a person
Spouse, Consort         spouse            a person
Author, Written by      written_by        a person
Directed by, Director   directed_by       a person
Music by, Composer      composed_by       a person
Founder, Founded by     founded_by        a person or organisation
Alma Mater              educated_at       an institution (no kind of place)
Headquarters            headquartered_in  a place
Born                    born_in           a place
Died                    died_in           a place
Capital                 has_capital       a place (the subject's capital)
======================  ================  ==================================

Answer types are checked by :func:`type_ok` against the kinds of place the
pages say they are (``typed_facts.KINDS``): a birth place must be a place, a
father must not be one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import NamedTuple

from aethersearch.corpus.infobox import FIELD_RELATIONS as FIELDS
from aethersearch.corpus.infobox import field_key

#: Wikispeedia's infobox labels read as typed fields; each is read as the field it spells, in the one table of
#: typed infobox fields (``corpus/infobox.FIELD_RELATIONS``, which a dump's templates use too)
WIKISPEEDIA_LABELS = ("Father", "Mother", "Spouse", "Consort", "Author", "Written by", "Directed by", "Director",
                      "Music by", "Composer", "Founder", "Founded by", "Alma Mater", "Alma mater", "Headquarters",
                      "Born", "Died", "Capital")
#: infobox label -> relation (see the module docstring's table)
FIELD_RELATIONS: dict[str, str] = {label: FIELDS[field_key(label)] for label in WIKISPEEDIA_LABELS}
#: relations whose object is a place / never a place
PLACE_OBJECT = frozenset(("born_in", "died_in", "headquartered_in", "has_capital"))
PERSON_OBJECT = frozenset(("father", "mother", "spouse", "written_by", "directed_by", "composed_by", "painted_by",
                           "educated_at",
                           # only a dump's infobox rows give these (``corpus/infobox.py``): typed hops, never
                           # seed questions (each has several right answers: a child, a sibling, a cast member)
                           "parent", "child", "sibling", "performer", "employer"))
#: relations whose object must begin the row's value (a name, not a place mentioned after it)
AT_START = PERSON_OBJECT | {"founded_by", "has_capital"}
#: every label that ends a row's value (the table's fields and the other common infobox labels)
LABELS = tuple(sorted({*FIELD_RELATIONS, "Predecessor", "Successor", "Issue", "Religion", "Nationality", "Residence",
                       "Known for", "Notable Prizes", "Field", "Institution", "Institutions", "Country", "Language",
                       "Genre", "Genre(s)", "Publisher", "Released", "Media Type", "Pages", "ISBN", "Preceded by",
                       "Followed by", "Starring", "Produced by", "Key people", "Type", "Industry", "Products",
                       "Revenue", "Employees", "Website", "Largest city", "Official languages", "Government",
                       "Area", "Population", "Currency", "Time zone", "Motto", "Anthem", "Reign", "Coronation",
                       "Heir Apparent", "Full name", "Titles", "Royal House", "Royal anthem", "Burial",
                       "Location", "Owner", "Doctoral advisor", "Doctoral students", "Influences", "Influenced",
                       "Occupation", "Cinematography", "Editing by", "Distributed by", "Running time", "Budget",
                       "Calling code", "Internet TLD", "Independence", "Demonym", "Founded", "Parent company",
                       "Original title", "Translator", "Cover artist", "Illustrator", "Membership", "Academic advisor",
                       "Notable students", "Series", "Subject", "Release date", "Country of origin", "Largest town",
                       "Political party", "Profession", "Spouse(s)", "Children", "Signature"},
                      key=lambda label: (-len(label), label)))
_LABEL = re.compile(r"(?<![\w-])(?:" + "|".join(re.escape(label) for label in LABELS) + r")(?= [A-Z0-9(])")
#: only the head of a page carries its infobox
HEAD_CHARS = 3_000
#: labels a line needs to count as an infobox line ("Father Christmas is also present ... Country" is prose)
MIN_LABELS = 3
#: words a person's name may follow at the start of a row ("Father King Henry VIII")
_HONORIFIC = re.compile(r"^(?:\([^()]*\) *)?(?:(?:king|queen|prince|princess|sir|lord|lady|emperor|empress|saint|"
                        r"st\.|dr\.) )*")
#: a name right after "of" is part of a longer name ("Port of Spain" is no Spain)
_OF_BEFORE = re.compile(r"\bof $")


class InfoboxRow(NamedTuple):
    """One infobox row: its field, its relation, the object page and the row's text (the hop statement)."""

    field: str
    relation: str
    object: str
    row: str
    #: how the row names the object ("George VI" for the page "George VI of the United Kingdom")
    surface: str


def _rows(line: str) -> Iterator[tuple[str, str]]:
    """``(label, value)`` of every labelled row of a flattened infobox line."""
    marks = list(_LABEL.finditer(line))
    for mark, nxt in zip(marks, [*marks[1:], None], strict=True):
        end = nxt.start() if nxt is not None else len(line)
        yield mark.group(0), line[mark.end():end].strip()


def infobox_rows(text: str, link_titles: Sequence[tuple[str, str]]) -> list[InfoboxRow]:
    """The typed rows of the infobox lines in the head of ``text`` (one per field, first linked name wins).

    ``link_titles``: ``(casefolded name, page id)`` of the pages the page links to. A line is an infobox
    line when it carries at least :data:`MIN_LABELS` labels; a value's object is the linked name that occurs
    earliest in it (whole words), so "Born 21 March 1685 Eisenach, Thuringia, Germany" gives Eisenach; a
    person's name must begin the value.
    """
    out: list[InfoboxRow] = []
    seen: set[str] = set()
    names = [*link_titles, *_heads(link_titles)]
    for line in text[:HEAD_CHARS].split("\n"):
        if len(_LABEL.findall(line)) < MIN_LABELS:
            continue
        for label, value in _rows(line):
            relation = FIELD_RELATIONS.get(label)
            if relation is None or label in seen or not value:
                continue
            found = _first_named(value, names, at_start=relation in AT_START)
            if found is not None:
                seen.add(label)
                out.append(InfoboxRow(label, relation, found[0], f"{label} {value}", found[1]))
    return out


def short_name(title: str) -> str:
    """The part of a title before " of " when it has two words or more ("George VI" of "George VI of the United
    Kingdom"), else the title: how infobox rows and neighbouring pages name a monarch or a noble."""
    head = title.split(" of ")[0]
    return head if head != title and len(head.split()) >= 2 else title


def _heads(link_titles: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """A monarch's row names "George VI" for the page "George VI of the United Kingdom": the part of a linked
    title before " of ", when it has two words or more and no other linked page shares it."""
    heads: dict[str, set[str]] = {}
    for name, page in link_titles:
        head = short_name(name)
        if head != name:
            heads.setdefault(head, set()).add(page)
    taken = {name for name, _ in link_titles}
    return [(head, next(iter(pages))) for head, pages in heads.items() if len(pages) == 1 and head not in taken]


def _first_named(value: str, link_titles: Sequence[tuple[str, str]], *, at_start: bool) -> tuple[str, str] | None:
    """The linked page named earliest in ``value`` (longest name first at a position); ``at_start``: only a
    name that begins the value, after honorifics ("Consort Edith of Wessex" is not a marriage to Wessex)."""
    folded = value.casefold()
    # a name may begin the value with its honorific ("Prince Philip") or after it ("King Henry VIII")
    starts = {0, _HONORIFIC.match(folded).end()}  # type: ignore[union-attr]
    best: tuple[int, int, str] | None = None
    for name, page in link_titles:
        match = re.search(rf"(?<!\w){re.escape(name)}(?!\w)", folded)
        if match is not None and (not at_start or match.start() in starts) \
                and not _OF_BEFORE.search(folded[:match.start()]) \
                and (best is None or (match.start(), -len(name)) < best[:2]):
            best = (match.start(), -len(name), page)
    if best is None:
        return None
    start, length = best[0], -best[1]
    # the row's own spelling of the name (casefolding kept the length), else the linked name as folded
    surface = value[start:start + length] if len(folded) == len(value) else folded[start:start + length]
    return best[2], surface


def type_ok(relation: str, obj: str, kinds: Mapping[str, str], places: frozenset[str] | set[str]) -> bool:
    """Whether ``obj`` has the type ``relation`` needs: a place (a known kind, or the subject of a place fact)
    for :data:`PLACE_OBJECT`, no place for :data:`PERSON_OBJECT`."""
    is_place = obj in kinds or obj in places
    if relation in PLACE_OBJECT:
        return is_place
    if relation in PERSON_OBJECT:
        return not is_place
    return True


__all__ = ["FIELD_RELATIONS", "LABELS", "WIKISPEEDIA_LABELS", "InfoboxRow", "infobox_rows", "short_name", "type_ok"]
