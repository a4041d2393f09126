"""Relation-chain validation: a hint-free chain is kept only if its typed relations entail the question."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import pytest

from aethersearch.construct.chain_semantics import (
    DEFAULT_RULES,
    RelationChainValidator,
    compose,
    demo_chain_validator,
)
from aethersearch.construct.hintfree import ConstructionConfig, construct_hintfree
from aethersearch.construct.triples import QATriple, demo_triples
from aethersearch.construct.typed_facts import TypedGraph
from aethersearch.construct.validate import Candidate, ChainValidator, RuleBasedValidator
from aethersearch.corpus.demo_world import generate_world
from aethersearch.corpus.graph import LinkGraph
from aethersearch.sandbox.mask import ChainMask

# Kane -> brother Chad -> stepmother Nicole -> her husband Graham (the paper's example), plus a
# geography chain and links that connect pages without entailing anything.
EDGES = [
    ("kane", "father", "graham"), ("kane", "sibling", "chad"), ("chad", "sibling", "kane"),
    ("chad", "stepmother", "nicole"), ("nicole", "spouse", "graham"), ("graham", "spouse", "nicole"),
    ("chad", "father", "graham"), ("chad", "mother", "mary"), ("graham", "inverse:father", "kane"),
    ("bridge", "located_in", "town"), ("town", "located_in", "region"), ("region", "located_in", "land"),
    ("bridge", "located_in", "land"),
    ("ann", "employer", "works"), ("ann", "educated_at", "uni"), ("uni", "inverse:employer", "bob"),
    ("bob", "employer", "works"), ("bob", "corresponded_with", "cy"), ("ann", "sibling", "cy"),
]


def _candidate(path: list[str], relation: str, question: str = "Who is the father of Kane?") -> Candidate:
    triple = QATriple(id="q", question=question, answers=[path[-1].title()], subject=path[0],
                      answer_page=path[-1], relation=relation, source_dataset="t", source_split="t",
                      source_id="q", source_row_number=1, source_file="t")
    return Candidate(triple, path, [], ChainMask(path, {p: [p.title()] for p in path[1:]}))


@pytest.fixture()
def validator() -> RelationChainValidator:
    return RelationChainValidator(EDGES)


def test_it_is_a_chain_validator(validator: RelationChainValidator) -> None:
    assert isinstance(validator, ChainValidator) and validator.name == "relation-chain"


@pytest.mark.parametrize("path, relation", [
    (["kane", "chad", "graham"], "father"),                     # sibling . father
    (["kane", "chad", "nicole", "graham"], "father"),           # sibling . stepmother . spouse (the paper's)
    (["bridge", "town", "region", "land"], "located_in"),       # transitive containment
    (["kane", "chad", "mary"], "mother"),                       # sibling . mother
])
def test_entailing_chains_are_accepted(validator: RelationChainValidator, path: list[str], relation: str) -> None:
    assert validator.validate(_candidate(path, relation)).ok


@pytest.mark.parametrize("path, relation, reason", [
    (["ann", "uni", "bob", "works"], "employer", "relation_not_composable"),    # colleagues prove nothing
    (["kane", "graham", "nicole"], "mother", "relations_do_not_compose"),     # father . spouse: maybe a stepmother
    (["kane", "chad", "mary"], "father", "chain_entails_other_relation"),     # composes, to "mother"
    (["kane", "chad", "ghost"], "father", "untyped_hop"),
    (["ann", "cy", "bob"], "father", "untyped_hop"),
    (["ann", "uni", "bob"], "sibling", "relations_do_not_compose"),
])
def test_non_entailing_chains_are_rejected_with_a_named_reason(validator: RelationChainValidator, path: list[str],
                                                               relation: str, reason: str) -> None:
    verdict = validator.validate(_candidate(path, relation))
    assert not verdict.ok and verdict.reason == reason and verdict.detail


def test_compose_folds_left_over_every_choice_of_hop_relation() -> None:
    assert compose([["sibling"], ["sibling"], ["stepmother"], ["spouse"]]) == (frozenset({"father"}), None)
    # an edge may carry several relations: any one choice per hop may compose
    assert compose([["employer", "headquartered_in"], ["located_in"]]) == (frozenset({"based_in_country"}), None)
    assert compose([["sibling"], ["employer"]]) == (frozenset(), 1)
    assert compose([[], ["father"]]) == (frozenset(), 0)
    assert ("father", "spouse") not in DEFAULT_RULES and ("mother", "spouse") not in DEFAULT_RULES


def test_custom_rules_replace_the_table() -> None:
    validator = RelationChainValidator([("a", "r", "b"), ("b", "r", "c")], rules={("r", "r"): "rr"})
    assert validator.validate(_candidate(["a", "b", "c"], "rr")).ok
    assert validator.validate(_candidate(["a", "b", "c"], "father")).reason == "relation_not_composable"


@pytest.fixture(scope="module")
def demo_construction():  # type: ignore[no-untyped-def]
    world = generate_world(seed=0)
    triples = demo_triples(world)
    graph = LinkGraph.from_documents(world.documents)
    pages = {doc.id: doc for doc in world.documents}
    chain = demo_chain_validator(world)
    result = construct_hintfree(triples.triples, graph, pages, config=ConstructionConfig(max_questions=60),
                                validators=[RuleBasedValidator(pages), chain], page_aliases=triples.page_aliases,
                                typed=TypedGraph.from_edges(world.relations))
    return world, graph, pages, triples, chain, result


def test_every_accepted_demo_question_has_a_chain_that_composes_to_its_relation(demo_construction) -> None:
    world, graph, pages, triples, chain, result = demo_construction
    assert len(result.questions) == 60 and set(result.hop_distribution) == {2, 3, 4}
    assert result.rejected["relation_not_composable"] > 0  # employer, educated_at, ... are refused, and counted
    typed: dict[tuple[str, str], set[str]] = {}
    for subject, relation, obj in world.relations:
        typed.setdefault((subject, obj), set()).add(relation)
    for question in result.questions:
        path, relation = question.path, question.triple.relation
        hops = [sorted(typed[(a, b)]) for a, b in pairwise(path)]  # every hop is a typed edge of the world
        assert relation in compose(hops)[0], (question.triple.question, path, hops)
        assert (path[0], path[-1]) not in pairwise(path)  # the direct link is not the chain
    assert {q.triple.relation for q in result.questions} >= {"located_in", "based_in_country", "father"}


def test_without_the_relation_validator_demo_chains_are_mostly_arbitrary(demo_construction) -> None:
    world, graph, pages, triples, chain, _ = demo_construction
    plain = construct_hintfree(triples.triples, graph, pages,
                               # a seeded random sample of seeds (the tail-first order would bias it)
                               config=ConstructionConfig(max_questions=60, keep_detours=True, diverse=False),
                               page_aliases=triples.page_aliases)
    assert not plain.questions  # no typed graph, no judge: nothing is known to entail, so nothing is released
    detours = plain.detours[:60]
    verdicts = Counter(chain.validate(Candidate(q.triple, q.path, q.alternatives, q.mask)).reason for q in detours)
    assert verdicts[None] < len(detours) / 2  # what the issue observed: shortest paths rarely entail
    assert verdicts["relation_not_composable"] > 0
