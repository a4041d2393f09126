"""Typed infobox rows of a dump (corpus/infobox.py): the field table, the row rules, the importer's file, the facts.

On the real enwiki excerpt (skipped, with the reason, when ../shared/data is absent) the count of typed rows is
exact and ten rows are quoted with their page and field, as ``docs/wikipedia-dump.md`` quotes them.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aethersearch.construct.chain_semantics import DEFAULT_RULES
from aethersearch.construct.infobox import FIELD_RELATIONS as WIKISPEEDIA_FIELDS
from aethersearch.construct.infobox import PERSON_OBJECT, PLACE_OBJECT
from aethersearch.construct.typed_facts import RELATION_QUESTIONS, TypedGraph, extract_facts
from aethersearch.corpus.importers import import_corpus
from aethersearch.corpus.infobox import FIELD_RELATIONS, field_key, infobox_rows, plain_value
from aethersearch.corpus.mediawiki import DumpReader
from aethersearch.corpus.wikipedia import INFOBOX_FILE, WikipediaDump, read_infobox_hops
from aethersearch.corpus.wikitext import cut_not_prose, parse_wikitext
from aethersearch.errors import DataError
from tests.conftest import require_shared
from tests.corpus.mediawiki_export import Page, write_export

NAMESPACES = frozenset({"file", "image", "category", "template"})
EXCERPT = "wikipedia/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def rows(wikitext: str) -> list[tuple[str, str, str, str]]:
    return [(r.field, r.relation, r.target, r.statement) for r in infobox_rows(wikitext, NAMESPACES)]


def test_one_table_with_the_inventorys_relation_names() -> None:
    known = set(RELATION_QUESTIONS) | PERSON_OBJECT | PLACE_OBJECT | {a for pair in DEFAULT_RULES for a in pair}
    assert set(FIELD_RELATIONS.values()) <= known | {"located_in", "flows_into", "designed_by"}
    # Wikispeedia's labels are read as fields of the same table, with the relations they had
    assert WIKISPEEDIA_FIELDS == {label: FIELD_RELATIONS[field_key(label)] for label in WIKISPEEDIA_FIELDS}
    assert WIKISPEEDIA_FIELDS["Written by"] == "written_by" and WIKISPEEDIA_FIELDS["Born"] == "born_in"


def test_list_wrappers_and_the_first_link() -> None:
    text = ("{{Infobox person\n| name = X\n| spouse = {{marriage|[[Mary Todd Lincoln|Mary Todd]]|1842|1865}}\n"
            "| birth_place = Zavrazhye, [[Kostroma Oblast|Kostroma]], [[Russia]]\n"
            "| alma_mater = {{Plainlist|\n* [[ETH Zurich|Swiss Federal Polytechnic]] (1900)}}\n"
            "| starring = {{ubl|[[Núria Espert]]|[[Rosa Maria Sardà]]}}\n}}\nProse.")
    assert rows(text) == [
        ("spouse", "spouse", "Mary Todd Lincoln", "Spouse: Mary Todd"),
        ("birth_place", "born_in", "Kostroma Oblast", "Birth place: Zavrazhye, Kostroma, Russia"),
        ("alma_mater", "educated_at", "ETH Zurich", "Alma mater: Swiss Federal Polytechnic (1900)"),
        ("starring", "performer", "Núria Espert", "Starring: Núria Espert, Rosa Maria Sardà"),
    ]


def test_an_artworks_artist_is_its_painter_an_albums_its_performer() -> None:
    assert rows("{{Infobox artwork\n| title = The Night Watch\n| artist = [[Rembrandt]]\n| year = 1642\n}}") == [
        ("artist", "painted_by", "Rembrandt", "Artist: Rembrandt")]
    assert rows("{{Infobox album\n| name = Abbey Road\n| artist = [[The Beatles]]\n}}") == [
        ("artist", "performer", "The Beatles", "Artist: The Beatles")]
    # one painter asked for: two linked artists are left out, as two spouses are
    assert rows("{{Infobox painting\n| artist = [[Rubens]] and [[Jan Brueghel the Elder]]\n}}") == []


def test_rows_that_would_state_a_false_hop_are_left_out() -> None:
    # a person must begin the value: the year is no spouse
    assert rows("{{Infobox person\n| spouse = Mileva Marić (m. [[1903]])\n}}") == []
    # two spouses: "Who was X's spouse?" would have two right answers
    assert rows("{{Infobox person\n| spouse = [[Mileva Marić]]<br />[[Elsa Löwenthal]]\n}}") == []
    # a film's country is where it was made, not where it lies; a town's country is where it lies
    assert rows("{{Infobox film\n| country = [[Spain]]\n}}") == []
    assert rows("{{Infobox settlement\n| country = [[Spain]]\n}}") == [
        ("country", "located_in", "Spain", "Country: Spain")]
    # a file or a category is no page; a field outside the table is no typed row; a text without a link neither
    assert rows("{{Infobox person\n| birth_place = [[File:x.jpg]] [[Ulm]]\n| website = [[Ulm]]\n"
                "| death_place = Princeton\n}}") == [("birth_place", "born_in", "Ulm", "Birth place: Ulm")]


def test_plain_value_reads_as_a_statement() -> None:
    assert plain_value("[[Petersen House (Washington, D.C.)|Petersen House]],<br />[[Washington, D.C.]], U.S.") \
        == "Petersen House, Washington, D.C., U.S."
    assert plain_value("[[Mileva Marić]]&nbsp;(1903–1919)") == "Mileva Marić (1903–1919)"


@pytest.mark.realdata
def test_the_real_excerpt_yields_these_typed_rows() -> None:
    reader = DumpReader(require_shared(EXCERPT))
    pages = [(p.title, p.text) for p in reader if p.namespace == 0 and p.redirect is None]
    namespaces = frozenset(n.lower() for k, n in reader.site.namespaces.items() if n and k != 0)
    found = {(title, row.field): row for title, text in pages for row in parse_wikitext(text, namespaces).infobox}
    assert len(found) == 46
    assert Counter(row.relation for row in found.values()) == Counter({
        "has_capital": 10, "born_in": 9, "died_in": 6, "written_by": 6, "child": 3, "educated_at": 3, "spouse": 2,
        "headquartered_in": 2, "directed_by": 1, "performer": 1, "parent": 1, "sibling": 1, "composed_by": 1})
    quoted = {  # (page, field): (relation, target, the row as written, the statement the page serves)
        ("Albert Einstein", "birth_place"): (
            "born_in", "Ulm", "| birth_place = [[Ulm]], [[Kingdom of Württemberg]], [[German Empire]]",
            "Birth place: Ulm, Kingdom of Württemberg, German Empire"),
        ("Abraham Lincoln", "spouse"): (
            "spouse", "Mary Todd Lincoln",
            "| spouse        = {{marriage|[[Mary Todd Lincoln|Mary Todd]]|November 4, 1842|1865|reason=his death}}",
            "Spouse: Mary Todd"),
        ("Actrius", "director"): ("directed_by", "Ventura Pons", "| director       = [[Ventura Pons]]",
                                  "Director: Ventura Pons"),
        ("Animal Farm", "author"): ("written_by", "George Orwell", "| author       = [[George Orwell]]",
                                    "Author: George Orwell"),
        ("America the Beautiful", "composer"): ("composed_by", "Samuel A. Ward",
                                                "| Composer       = [[Samuel A. Ward]]", "Composer: Samuel A. Ward"),
        ("Aldous Huxley", "education"): ("educated_at", "Eton College", "| education = [[Eton College]]",
                                         "Education: Eton College"),
        ("American National Standards Institute", "headquarters"): (
            "headquartered_in", "Washington, D.C.", "|headquarters        = [[Washington, D.C.]],<br/>United States",
            "Headquarters: Washington, D.C., United States"),
        ("Apollo", "parents"): ("parent", "Zeus", "| parents = [[Zeus]] and [[Leto]]", "Parents: Zeus and Leto"),
        ("Arthur Schopenhauer", "death_place"): (
            "died_in", "Frankfurt", "|death_place  = [[Frankfurt]], [[German Confederation]]",
            "Death place: Frankfurt, German Confederation"),
        ("Algeria", "capital"): ("has_capital", "Algiers", "|capital         = [[Algiers]]", "Capital: Algiers"),
    }
    for key, (relation, target, row, statement) in quoted.items():
        assert (found[key].relation, found[key].target, found[key].row, found[key].statement) == \
            (relation, target, row, statement), key


@pytest.mark.realdata
def test_the_importer_serves_and_stores_the_rows_of_the_real_excerpt(tmp_path: Path) -> None:
    result = import_corpus("wikipedia", require_shared(EXCERPT), tmp_path / "store")
    hops = read_infobox_hops(tmp_path / "store")
    assert sum(len(page) for page in hops.values()) == 46
    # the excerpt's 98 articles are a slice of the alphabet: no typed row lands on another of them
    assert all(hop.target_page is None for page in hops.values() for hop in page)
    einstein = result.store.get("Albert_Einstein")
    assert einstein is not None
    lead, _, rest = einstein.text.partition("\n\n")
    assert lead.startswith("Albert Einstein (") and rest.startswith("Birth place: Ulm, Kingdom of Württemberg")


def _dump(tmp_path: Path) -> Path:
    return write_export(tmp_path / "dump.xml", [
        Page("Kane Cornes", "{{Infobox AFL biography\n| father = [[Graham Cornes]]\n| birth_place = [[Adelaide]]\n"
                            "| relatives = [[Chad Cornes]]\n}}\n'''Kane Cornes''' is a footballer. "
                            "His father [[Graham Cornes]] coached in [[Adelaide]]."),
        Page("Graham Cornes", "{{Infobox person\n| birth_place = [[Adelaide (city)|Adelaide]]\n"
                              "| spouse = [[Nowhere Person]]\n}}\nGraham Cornes was born in [[Adelaide]]."),
        Page("Adelaide", "Adelaide is a city in [[Australia]]."),
        Page("Adelaide (city)", redirect="Adelaide"),
        Page("Australia", "Australia is a country."),
    ])


def test_the_importer_resolves_row_targets_and_writes_them_beside_the_store(tmp_path: Path) -> None:
    import_corpus("wikipedia", _dump(tmp_path), tmp_path / "store")
    assert (tmp_path / "store" / INFOBOX_FILE).exists()
    hops = read_infobox_hops(tmp_path / "store")
    assert [(h.field, h.relation, h.target, h.target_page) for h in hops["Kane_Cornes"]] == [
        ("father", "father", "Graham Cornes", "Graham_Cornes"), ("birth_place", "born_in", "Adelaide", "Adelaide")]
    # through a redirect; a page outside the dump is kept as a typed row with no page
    assert [(h.field, h.target, h.target_page) for h in hops["Graham_Cornes"]] == [
        ("birth_place", "Adelaide (city)", "Adelaide"), ("spouse", "Nowhere Person", None)]


def test_infobox_rows_are_typed_facts_with_the_row_as_statement(tmp_path: Path) -> None:
    reader = WikipediaDump(_dump(tmp_path))
    docs = list(reader.documents())
    hops: dict[str, list] = {}
    for hop in reader.infobox_hops():
        hops.setdefault(hop.page, []).append(hop)
    facts = extract_facts(docs, reader.aliases, infobox_hops=hops)
    stated = {(f.subject, f.relation, f.object, f.sentence) for f in facts.facts}
    assert ("Kane_Cornes", "father", "Graham_Cornes", "Father: Graham Cornes") in stated
    assert ("Kane_Cornes", "born_in", "Adelaide", "Birth place: Adelaide") in stated
    assert ("Graham_Cornes", "born_in", "Adelaide", "Birth place: Adelaide") in stated
    # typed hops of the graph the construction walks: the row is the hop's statement, and the hops compose
    typed = TypedGraph(facts.facts)
    assert typed.statement("Kane_Cornes", "Graham_Cornes") == "Father: Graham Cornes"
    assert "father_born_in" in typed.entails(["Kane_Cornes", "Graham_Cornes", "Adelaide"], "father_born_in")
    without = extract_facts(docs, reader.aliases)
    assert not any(f.sentence.startswith(("Father:", "Birth place:")) for f in without.facts)


def test_a_row_of_the_wrong_type_is_no_fact(tmp_path: Path) -> None:
    """The same type checks as Wikispeedia's rows (``construct.infobox.type_ok``): a father must not be a place,
    and Adelaide is one (its own sentence puts it in Australia)."""
    dump = write_export(tmp_path / "dump.xml", [
        Page("Kane Cornes", "{{Infobox person\n| father = [[Adelaide]]\n}}\nKane Cornes is a footballer."),
        Page("Adelaide", "Adelaide is a city in [[Australia]]."),
        Page("Australia", "Australia is a country."),
    ])
    reader = WikipediaDump(dump)
    docs = list(reader.documents())
    facts = extract_facts(docs, reader.aliases, infobox_hops={"Kane_Cornes": list(reader.infobox_hops())})
    assert not any(f.relation == "father" for f in facts.facts)
    assert facts.left_out.get("object_not_of_the_relations_type") == 1


def test_a_bad_row_in_the_stored_file_names_its_line(tmp_path: Path) -> None:
    (tmp_path / INFOBOX_FILE).write_text('{"page": "A", "field": "spouse"}\n', encoding="utf-8")
    with pytest.raises(DataError, match="InfoboxHop") as raised:
        read_infobox_hops(tmp_path)
    assert raised.value.line == 1


def test_rows_are_read_without_comments_and_references() -> None:
    text = cut_not_prose("{{Infobox person\n| spouse = <!-- [[Not Her]] -->[[Her Name]]<ref>[[Source]]</ref>\n}}",
                         NAMESPACES)
    assert rows(text) == [("spouse", "spouse", "Her Name", "Spouse: Her Name")]


def test_two_worker_processes_give_the_same_rows(tmp_path: Path) -> None:
    pages = [Page(f"Person {i}", f"{{{{Infobox person\n| father = [[Person {(i + 1) % 150}]]\n}}}}\n"
                                 f"Person {i} is a person.") for i in range(150)]
    dump = write_export(tmp_path / "dump.xml", pages)
    readers = [WikipediaDump(dump), WikipediaDump(dump, workers=2)]
    docs = [list(reader.documents()) for reader in readers]
    one, two = (list(reader.infobox_hops()) for reader in readers)
    assert docs[0] == docs[1] and one == two and len(one) == 150
    assert (one[149].page, one[149].target_page, one[149].statement) == ("Person_149", "Person_0", "Father: Person 0")


_INFOBOX_PIECES = st.sampled_from([
    "{{Infobox person", "{{infobox_settlement", "\n| spouse = ", "| birth_place=", "| country = ", "[[A]]", "[[B|b]]",
    "{{marriage|", "{{ubl|", "}}", "{{", "|", "[[", "]]", "<br />", "* ", "''", "x", " (m. 1903)", "[[File:x.jpg]]",
    "&nbsp;", "=", "\n"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_INFOBOX_PIECES, max_size=30))
def test_any_wikitext_gives_rows_or_none_without_an_error(pieces: list[str]) -> None:
    """Found so: "{{Infobox person}}" (no "|") raised in the row split."""
    for row in infobox_rows("".join(pieces), NAMESPACES):
        assert row.target and row.statement and row.relation in FIELD_RELATIONS.values()
