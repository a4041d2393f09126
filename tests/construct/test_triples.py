"""Single-hop triple derivation: demo-world facts and link-anchored Wikispeedia first-paragraph facts."""

from __future__ import annotations

import re

import pytest

from aethersearch.construct.triples import demo_triples, wikispeedia_triples
from aethersearch.corpus.demo_world import generate_world
from aethersearch.records import Document


def test_demo_triples_are_the_facts_whose_answer_is_a_linked_page() -> None:
    world = generate_world(seed=1, n_people=40, n_countries=4, n_cities=10, n_orgs=8, n_works=15)
    triples = demo_triples(world)
    with_page = [f for f in world.facts if f.answer_id is not None]
    assert [t.id for t in triples.triples] == [f.id for f in with_page] and triples.triples
    pages = {d.id: d for d in world.documents}
    for triple in triples.triples:
        assert triple.answer_page in pages[triple.subject].links  # the direct link construction removes
        assert pages[triple.answer_page].title in triples.page_aliases[triple.answer_page]
    person = next(t for t in triples.triples if t.relation == "founded_by")
    assert len(triples.page_aliases[person.answer_page]) == 2  # full name and surname


def test_wikispeedia_patterns_need_a_linked_object_page() -> None:
    docs = [
        Document(id="Canberra", title="Canberra", links=["Australia"],
                 text="Infobox Population 300,000\n\nCanberra is the capital city of Australia and with a population "
                      "of just over 325,000, is Australia's largest inland city."),
        Document(id="Australia", title="Australia", links=[], text="Australia is a country in Oceania and more."),
        Document(id="Zed", title="Zed", links=["Australia"],
                 text="Zed is the capital of Nowhere, a land without a page in this corpus at all."),
    ]
    triples = wikispeedia_triples(docs).triples
    assert [(t.subject, t.relation, t.answer_page, t.question) for t in triples] == [
        ("Canberra", "capital_of", "Australia", "Of what is Canberra the capital?")]


@pytest.mark.realdata
def test_real_wikispeedia_triples_are_link_anchored(wikispeedia_documents: list) -> None:
    pages = {d.id: d for d in wikispeedia_documents}
    result = wikispeedia_triples(wikispeedia_documents)
    assert len(result.triples) >= 150 and result.stats["articles"] == 4604
    found = {(t.subject, t.relation): t for t in result.triples}
    assert found[("Canberra", "capital_of")].answers == ["Australia"]
    for triple in result.triples:
        subject = pages[triple.subject]
        assert triple.answer_page in subject.links and triple.evidence in subject.text
        assert re.search(re.escape(triple.answers[-1]), triple.evidence)
        assert subject.title in triple.question and pages[triple.answer_page].title not in triple.question
