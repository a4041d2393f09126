"""Typed edges of the demo world and the structures whose facts have entailing alternative chains."""

from __future__ import annotations

from collections import Counter

import pytest

from aethersearch.corpus.demo_world import DemoWorld, generate_world
from aethersearch.corpus.graph import LinkGraph


@pytest.fixture(scope="module")
def world() -> DemoWorld:
    return generate_world(seed=0)


def test_every_link_is_typed_and_every_typed_edge_is_a_link(world: DemoWorld) -> None:
    links = {(d.id, t) for d in world.documents for t in d.links}
    typed = {(s, o) for s, _, o in world.relations}
    assert links == typed
    assert len(world.relations) == len(set(world.relations))
    kinds = Counter(r for _, r, _ in world.relations)
    for relation in ("located_in", "inverse:located_in", "inverse:employer", "inverse:born_in", "sibling", "father",
                     "stepmother", "spouse", "based_in_country", "corresponded_with"):
        assert kinds[relation] > 0, relation
    # every fact with a page answer is a typed edge of its own relation
    edges = set(world.relations)
    assert all((f.subject_id, f.relation, f.answer_id) in edges for f in world.facts if f.answer_id)


def test_symmetric_family_relations_are_stated_from_both_sides_where_written(world: DemoWorld) -> None:
    edges = set(world.relations)
    spouses = [(s, o) for s, r, o in world.relations if r == "spouse"]
    assert spouses and all((o, "spouse", s) in edges for s, o in spouses)


def test_base_world_is_kept_and_structures_are_appended(world: DemoWorld) -> None:
    small = generate_world(seed=1, n_people=40, n_countries=4, n_cities=10, n_orgs=8, n_works=15)
    assert small.relations and {r for _, r, _ in small.relations} >= {"sibling", "located_in"}
    relations = [f.relation for f in world.facts]
    first_new = relations.index("based_in_country")
    base = {"capital", "located_in", "headquartered_in", "born_in", "birth_year", "occupation", "educated_at",
            "employer", "founded_by", "founded_year", "directed_by", "written_by", "release_year", "set_in"}
    assert set(relations[:first_new]) <= base  # the base facts come first, in their old order
    assert [f.id for f in world.facts] == sorted(f.id for f in world.facts)


@pytest.mark.parametrize("relation, hops", [("father", {2, 3, 4}), ("mother", {2}), ("based_in_country", {2})])
def test_new_facts_have_alternative_chains_of_the_designed_length(world: DemoWorld, relation: str,
                                                                  hops: set[int]) -> None:
    graph = LinkGraph.from_documents(world.documents)
    found = set()
    for fact in world.facts:
        if fact.relation == relation:
            v0, vn = graph.index_of(fact.subject_id), graph.index_of(fact.answer_id or "")
            found.add(graph.distance(v0, vn, removed_edge=(v0, vn)))
    assert found == hops


def test_landmark_country_questions_span_three_and_four_hops(world: DemoWorld) -> None:
    graph = LinkGraph.from_documents(world.documents)
    kinds = {d.id: d for d in world.documents}
    lengths = Counter()
    for fact in world.facts:
        if fact.relation == "located_in" and fact.question.startswith(("In which country", "Which country")):
            v0, vn = graph.index_of(fact.subject_id), graph.index_of(fact.answer_id or "")
            lengths[graph.distance(v0, vn, removed_edge=(v0, vn))] += 1
            assert kinds[fact.answer_id or ""].text.startswith(f"{kinds[fact.answer_id or ''].title} is a country")
    assert set(lengths) == {2, 3, 4} and lengths[3] > 10 and lengths[4] > 10
