"""The embedded demo world: a seeded, fictional encyclopedia with its own QA facts.

Why fictional: a model's parametric memory cannot answer questions about people,
places and works that do not exist, so the only way to answer is to search the
corpus. Names are generated from syllables; every fact is rendered on its
subject's page as one of several natural sentence templates, and every entity
mentioned on a page is a hyperlink (``Document.links``) to that entity's page.

Determinism: the base world is drawn from one ``random.Random(seed)`` in a
fixed order and nothing iterates over a ``set`` of strings, so the same seed and
sizes give byte-identical pages, facts and questions on every machine and run.
The structures of ``corpus/demo_structures.py`` (regions, towns, districts,
landmarks, organisation countries, families) are drawn afterwards from their own
stream, so they append pages, sentences and facts without changing the base ones.
Both steps draw through ``corpus/demo_builder.py``; :func:`generate_world` runs them in order.

Typed edges: every sentence that mentions another page records its relation,
and ``DemoWorld.relations`` lists them (``inverse:employer`` for "Staff have
included ...", ``sibling``, ``spouse``, ...), which is what lets the hint-free
construction keep only chains that *entail* their answer
(``construct/chain_semantics.py``).

Relations whose answer is itself a page (``born_in``, ``directed_by``,
``written_by``, ``founded_by``, ``located_in``, ``employer``, ``educated_at``,
``capital``) plus inverse mentions ("Notable people born in X include ...",
"Staff have included ...") and colleague links give the link graph enough
redundancy for the hint-free construction to find 2-4-hop alternative paths
after removing a direct link.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from aethersearch.corpus.demo_builder import DemoFact, DemoMultiHop, WorldBuilder
from aethersearch.corpus.demo_structures import add_structures
from aethersearch.errors import ConfigError
from aethersearch.jsonl import atomic_write_json, atomic_write_text, write_jsonl
from aethersearch.records import Document

__all__ = ["DemoWorld", "WorldFiles", "generate_world", "write_world"]

# ----------------------------------------------------------------------------- records


class DemoWorld(NamedTuple):
    """Pages, single-hop facts, multi-hop questions and typed edges of one generated world.

    ``relations`` are the typed edges ``(subject_id, relation, object_id)``,
    one per (link, relation) a page states, in page order: every
    ``Document.links`` entry has at least one. A page mentioned in a list on
    its container ("Staff have included ...") carries the ``inverse:`` form of
    the relation (``inverse:employer``); symmetric relations (``sibling``,
    ``spouse``) appear once per direction, as each page states them. They are
    what a chain validator composes (``construct.chain_semantics``).
    """

    seed: int
    documents: list[Document]
    facts: list[DemoFact]
    multihop_questions: list[DemoMultiHop]
    relations: list[tuple[str, str, str]] = []  # noqa: RUF012 -- a NamedTuple default, never mutated

    def document(self, doc_id: str) -> Document:
        """The page with this id (linear scan; the world is small)."""
        for doc in self.documents:
            if doc.id == doc_id:
                return doc
        raise LookupError(f"demo world (seed {self.seed}) has no page {doc_id!r}")


class WorldFiles(NamedTuple):
    """Paths written by :func:`write_world`."""

    corpus: Path
    links: Path
    facts: Path
    multihop: Path
    manifest: Path


# ----------------------------------------------------------------------------- public API


def generate_world(seed: int = 0, n_people: int = 400, n_countries: int = 12, n_cities: int = 60,
                   n_orgs: int = 80, n_works: int = 200) -> DemoWorld:
    """Generate the demo world; same arguments -> identical world (pages, facts, questions).

    Defaults give ~750 pages, ~3,000 single-hop facts and ~700 multi-hop questions
    in well under a second.
    """
    if min(n_people, n_countries, n_cities, n_orgs, n_works) < 1 or n_cities < n_countries:
        raise ConfigError("demo world sizes must be >= 1 and n_cities >= n_countries "
                         f"(got people={n_people} countries={n_countries} cities={n_cities} "
                         f"orgs={n_orgs} works={n_works})")
    builder = WorldBuilder(seed)
    places = builder.build(n_people, n_countries, n_cities, n_orgs, n_works)
    # the places and families whose facts have *entailing* alternative chains, drawn after the base world
    add_structures(builder, places.countries, places.cities, places.orgs)
    documents = [page.document() for page in builder.pages]
    relations = list(dict.fromkeys((page.id, rel, obj) for page in builder.pages for rel, obj in page.typed))
    return DemoWorld(seed, documents, builder.facts, builder.multihop, relations)


def write_world(world: DemoWorld, out_dir: str | Path) -> WorldFiles:
    """Write the world as a Search-R1 corpus (``corpus.jsonl``: ``id``, ``contents``) plus side files.

    ``links.tsv`` holds one ``source<TAB>target`` page-id pair per line (Wikispeedia
    layout); ``facts.jsonl`` / ``multihop.jsonl`` hold the questions; ``world.json``
    the seed and counts. Every file is written atomically.
    """
    out = Path(out_dir)
    files = WorldFiles(out / "corpus.jsonl", out / "links.tsv", out / "facts.jsonl",
                       out / "multihop.jsonl", out / "world.json")
    write_jsonl(files.corpus, ({"id": d.id, "contents": d.contents} for d in world.documents))
    atomic_write_text(files.links, "".join(f"{d.id}\t{t}\n" for d in world.documents for t in d.links))
    write_jsonl(files.facts, world.facts)
    write_jsonl(files.multihop, world.multihop_questions)
    atomic_write_json(files.manifest, {
        "kind": "aethersearch-demo-world", "seed": world.seed, "documents": len(world.documents),
        "links": sum(len(d.links) for d in world.documents), "facts": len(world.facts),
        "multihop_questions": len(world.multihop_questions),
    })
    return files
