"""No false gold: a typed fact comes only from the subject's own clause, and a place lies only in a larger one.

The issue's case: the real Wikispeedia page of Lagos says "Lagos was the capital
of Nigeria from 1914 - 1991; it was stripped of this title when the Federal
Capital Territory was established at the purpose-built city of Abuja." The
``located_in`` pattern matched "was established at the purpose-built city of"
and the build asked "In which city is Lagos?" with the gold "Abuja".
"""

from __future__ import annotations

import pytest

from aethersearch.construct.typed_facts import (
    KIND_MISMATCH,
    NOT_OWN_CLAUSE,
    TypedGraph,
    extract_facts,
    fact_seeds,
    own_clause,
)
from aethersearch.records import Document

# the real sentences of the three Wikispeedia pages (2007 Wikipedia for Schools)
LAGOS = [
    Document(id="Lagos", title="Lagos", links=["Nigeria", "Abuja"],
             text="Lagos is the largest city in Nigeria. Lagos was the capital of Nigeria from 1914 - 1991; it was "
                  "stripped of this title when the Federal Capital Territory was established at the purpose-built "
                  "city of Abuja."),
    Document(id="Abuja", title="Abuja", links=["Nigeria"],
             text="Abuja is the capital city of Nigeria, with an estimated population of 2.5 million."),
    Document(id="Nigeria", title="Nigeria", links=["Africa", "Abuja"],
             text="Nigeria is a country in West Africa. Both are presently headquartered in the capital Abuja."),
    Document(id="Africa", title="Africa", links=[], text="Africa is the world's second-largest continent."),
]


def test_lagos_is_not_in_the_city_of_abuja() -> None:
    facts = extract_facts(LAGOS)
    triples = {(f.subject, f.relation, f.object) for f in facts.facts}
    assert ("Lagos", "located_in", "Abuja") not in triples
    assert ("Lagos", "largest_city_of", "Nigeria") in triples and ("Abuja", "capital_of", "Nigeria") in triples
    assert facts.left_out == {NOT_OWN_CLAUSE: 1}
    seeds = fact_seeds(TypedGraph(facts.facts), facts, {d.id: d for d in LAGOS}, source="t", max_hops=3).seeds
    questions = {s.question: s.answers for s in seeds}
    assert "In which city is Lagos?" not in questions
    assert questions["In which country is Lagos?"] == ["Nigeria"]
    assert questions["In which continent is Lagos?"] == ["Africa"]


def test_a_city_is_not_in_a_city_even_when_its_own_sentence_says_so() -> None:
    """The answer-type check: both kinds known and the container is no higher a level -> left out, counted."""
    docs = [Document(id="Ikeja", title="Ikeja", links=["Lagos"], text="Ikeja is a city in Lagos."),
            Document(id="Lagos", title="Lagos", links=[], text="Lagos is a city on the coast."),
            Document(id="Kano", title="Kano", links=["Nigeria"], text="Kano is a city in Nigeria."),
            Document(id="Nigeria", title="Nigeria", links=[], text="Nigeria is a country.")]
    facts = extract_facts(docs)
    assert {(f.subject, f.object) for f in facts.facts} == {("Kano", "Nigeria")}
    assert facts.left_out == {KIND_MISMATCH: 1}


@pytest.mark.parametrize(("before", "own"), [
    ("Lagos ", True),
    ("It ", True),
    ("Copenhagen ( IPA: [kəʊpənˈheɪgən], rhyming with pagan (the way the Danes pronounce it); Danish København) ",
     True),  # a parenthesis, nested, with a semicolon inside, is skipped
    ("Lagos was the capital of Nigeria from 1914 - 1991; it was stripped of this title when the Federal Capital "
     "Territory ", False),
    ("Lake Kivu empties into the Ruzizi River, which ", False),
    ("It is possible that around 62 million people ", False),
    ("Philadelphia's climate is considered to fall in the humid subtropical climate zone, although it ", False),
])
def test_a_pattern_after_a_clause_boundary_is_no_fact_about_the_subject(before: str, own: bool) -> None:
    assert own_clause(before) is own


def test_a_kind_is_not_read_past_an_of_phrase() -> None:
    """"Ottawa is the capital of Canada and the country's fourth largest city" does not make Ottawa a country."""
    docs = [Document(id="Ottawa", title="Ottawa", links=["Canada"],
                     text="Ottawa is the capital of Canada and the country's fourth largest city."),
            Document(id="Canada", title="Canada", links=[], text="Canada is a country in North America.")]
    assert extract_facts(docs).kinds == {"Canada": "country"}


@pytest.mark.realdata
def test_real_wikispeedia_gives_no_fact_from_another_clause(wikispeedia_documents: list) -> None:
    facts = extract_facts(wikispeedia_documents)
    triples = {(f.subject, f.relation, f.object) for f in facts.facts}
    assert ("Lagos", "located_in", "Abuja") not in triples
    assert ("Lagos", "largest_city_of", "Nigeria") in triples
    # "Mecca ... is the capital city of Saudi Arabia's Makkah province": Mecca is no capital of Saudi Arabia
    assert ("Mecca", "capital_of", "Saudi_Arabia") not in triples
    assert facts.kinds["Ottawa"] == "city" and facts.left_out[NOT_OWN_CLAUSE] > 50
    pages = {d.id: d for d in wikispeedia_documents}
    seeds = fact_seeds(TypedGraph(facts.facts), facts, pages, source="wikispeedia", max_hops=3).seeds
    assert not [s for s in seeds if s.subject == "Lagos" and s.answer_page == "Abuja"]
