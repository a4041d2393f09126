"""The chain census: every short path of a corpus's graph, counted by why it can or cannot entail an answer."""

from __future__ import annotations

from aethersearch.construct.chain_census import chain_census
from aethersearch.construct.typed_facts import TypedGraph, extract_facts
from aethersearch.records import Document

DOCS = [
    Document(id="Abuja", title="Abuja", links=["Nigeria", "Lagos"],
             text="Abuja is the capital city of Nigeria. Abuja is near Lagos."),
    Document(id="Nigeria", title="Nigeria", links=["Africa", "Lagos"],
             text="Nigeria is a country in West Africa. Nigeria trades with Lagos."),
    Document(id="Lagos", title="Lagos", links=["Nigeria"], text="Lagos is a city. Lagos hosts the Nigeria team."),
    Document(id="Africa", title="Africa", links=[], text="Africa is a continent. It borders Europe."),
    Document(id="Ghana", title="Ghana", links=[], text="Ghana is a country in Mars Region."),
]
LINKS = {d.id: list(d.links) for d in DOCS}


def test_paths_are_counted_by_the_first_reason_they_cannot_entail() -> None:
    facts = extract_facts(DOCS)
    census = chain_census(LINKS, TypedGraph(facts.facts), facts, max_hops=3)
    # typed: Abuja -capital_of-> Nigeria, Nigeria -located_in-> Africa; the rest only mention the next page
    assert (census.links, census.typed_links) == (5, 2)
    assert census.paths_by_hops == {2: 4, 3: 1}
    # Abuja->Nigeria->Africa composes (capital_of implies located_in); every other path has an untyped hop
    assert census.reasons == {"composes": 1, "untyped_hop": 4}
    # "Ghana is a country in Mars Region": the pattern matched, but its object is no page
    assert census.object_not_a_page == {"located_in": 1}
    assert not census.truncated
    assert "5 links between its pages, 2 of them typed" in census.summary()


def test_aliases_name_a_fact_s_subject_and_object() -> None:
    docs = [Document(id="Federal_Capital", title="Federal Capital", links=["Nigeria"],
                     text="Abuja is the capital city of the Federal Republic of Nigeria."),
            Document(id="Nigeria", title="Nigeria", links=[], text="Nigeria is a country.")]
    assert extract_facts(docs).facts == []
    aliases = {"Federal_Capital": ["Abuja"], "Nigeria": ["Federal Republic of Nigeria"]}
    assert [(f.subject, f.relation, f.object) for f in extract_facts(docs, aliases).facts] == [
        ("Federal_Capital", "capital_of", "Nigeria"), ("Federal_Capital", "located_in", "Nigeria")]
