"""The demo world: deterministic, fictional, linked, and answerable by search."""

from __future__ import annotations

from pathlib import Path

import pytest

from aethersearch.corpus.demo_builder import slugify
from aethersearch.corpus.demo_world import DemoWorld, generate_world, write_world
from aethersearch.errors import ConfigError
from aethersearch.jsonl import read_jsonl


@pytest.fixture(scope="module")
def world() -> DemoWorld:
    return generate_world(seed=0)


def test_same_seed_same_world_other_seed_differs(world: DemoWorld) -> None:
    again = generate_world(seed=0)
    assert again == world
    other = generate_world(seed=1)
    assert [d.title for d in other.documents] != [d.title for d in world.documents]


def test_page_ids_are_unique_stable_slugs_and_links_resolve(world: DemoWorld) -> None:
    ids = [d.id for d in world.documents]
    assert len(ids) == len(set(ids))
    assert 300 <= len(ids) <= 5000
    for doc in world.documents:
        assert doc.id == slugify(doc.title)
        assert doc.id not in doc.links
        assert len(doc.links) == len(set(doc.links))
    known = set(ids)
    assert all(target in known for d in world.documents for target in d.links)


def test_every_fact_answer_is_on_the_subject_page(world: DemoWorld) -> None:
    pages = {d.id: d for d in world.documents}
    for fact in world.facts:
        assert fact.answers[0] in pages[fact.subject_id].text, fact
        if fact.answer_id is not None:
            assert fact.answer_id in pages[fact.subject_id].links, fact
            assert pages[fact.answer_id].title == fact.answers[0]


def test_relations_with_page_answers_and_varied_phrasing(world: DemoWorld) -> None:
    relations = {f.relation for f in world.facts if f.answer_id is not None}
    assert {"born_in", "directed_by", "founded_by", "located_in", "employer"} <= relations
    born_in = [f.question.replace(f.question.split(" ")[-1], "") for f in world.facts if f.relation == "born_in"]
    phrasings = {q.split(" ")[0] + " " + q.split(" ")[1] for q in born_in}
    assert len(phrasings) >= 2
    person_facts = [f for f in world.facts if f.relation == "founded_by"]
    assert all(len(f.answers) == 2 for f in person_facts)  # full name + surname alias


def test_multihop_questions_compose_two_facts(world: DemoWorld) -> None:
    pages = {d.id: d for d in world.documents}
    kinds = {q.kind for q in world.multihop_questions}
    assert kinds == {"compositional", "comparison"}
    for q in world.multihop_questions:
        assert len(q.supporting_pages) == 2 and len(q.decomposition) == 2
        assert [h["page"] for h in q.decomposition] == q.supporting_pages
        if q.kind == "compositional":
            first, second = q.decomposition
            assert first["answer_id"] == second["page"]
            assert q.answers[0] == second["answer"]
            assert second["answer"] in pages[second["page"]].text


def test_names_are_fictional(world: DemoWorld) -> None:
    titles = {d.title for d in world.documents}
    assert not titles & {"Paris", "London", "Berlin", "Steven Spielberg", "Harvard University"}


def test_write_world_files(world: DemoWorld, tmp_path: Path) -> None:
    files = write_world(world, tmp_path / "w")
    rows = read_jsonl(files.corpus)
    assert len(rows) == len(world.documents)
    assert rows[0] == {"id": world.documents[0].id, "contents": world.documents[0].contents}
    assert rows[0]["contents"].startswith(f'"{world.documents[0].title}"\n')
    pairs = files.links.read_text().splitlines()
    assert len(pairs) == sum(len(d.links) for d in world.documents)
    assert len(read_jsonl(files.facts)) == len(world.facts)
    assert len(read_jsonl(files.multihop)) == len(world.multihop_questions)


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ConfigError, match="n_cities >= n_countries"):
        generate_world(n_cities=2, n_countries=5)
