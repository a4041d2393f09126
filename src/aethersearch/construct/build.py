"""The two built-in hint-free releases: the demo world's and real Wikispeedia's.

Why apart from ``construct.hintfree``: these builders run the whole path --
construction, the LLM checks, the question review and the release writer --
and those steps import hintfree's records; keeping the builders here lets every
step import hintfree one way, with nothing importing back up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from aethersearch.construct.hintfree import (
    BuiltRelease,
    ConstructionConfig,
    EntailmentJudge,
    construct_hintfree,
)
from aethersearch.construct.typed_facts import TypedGraph
from aethersearch.construct.validate import ChainValidator, RuleBasedValidator
from aethersearch.corpus.graph import LinkGraph
from aethersearch.records import Document

__all__ = ["build_demo_release", "build_demo_sandbox_release", "build_wikispeedia_release"]


def build_demo_release(out_dir: str | Path, *, seed: int = 0, config: ConstructionConfig | None = None,
                       overwrite: bool = False,
                       on_candidate: Callable[[int, int, int], None] | None = None) -> BuiltRelease:
    """Generate the demo world (``seed``), construct its hint-free questions and write the release."""
    from aethersearch.construct.chain_semantics import demo_chain_validator
    from aethersearch.construct.release_writer import write_hintfree_release
    from aethersearch.construct.triples import demo_triples
    from aethersearch.corpus.demo_world import generate_world
    from aethersearch.corpus.hashing import corpus_hash

    world = generate_world(seed=seed)
    config = config or ConstructionConfig(max_questions=60, seed=seed)
    triples = demo_triples(world)
    graph = LinkGraph.from_documents(world.documents)
    pages = {doc.id: doc for doc in world.documents}
    # The demo world's typed edges let us demand more than the paper's rule-based
    # check: a chain is kept only if its relations compose to the question's
    # relation, so every question is answerable by reasoning along its chain.
    validators: list[ChainValidator] = [RuleBasedValidator(pages, require_grounding=config.require_grounding),
                  demo_chain_validator(world)]
    result = construct_hintfree(triples.triples, graph, pages, config=config, page_aliases=triples.page_aliases,
                                validators=validators, typed=TypedGraph.from_edges(world.relations),
                                on_candidate=on_candidate)
    path = write_hintfree_release(
        result, out_dir, name="webdetective_demo", source_dataset="webdetective-demo", config=config,
        corpus={"kind": "demo-world", "seed": seed, "documents": len(world.documents),
                "corpus_hash": corpus_hash(world.documents)},
        graph=graph, triple_stats=triples.stats, overwrite=overwrite,
    )
    return BuiltRelease(path, result, triples)


def build_demo_sandbox_release(out_dir: Path, *, seed: int = 0) -> Path:
    """The demo's hint-free sandbox release (60 questions over the demo world of ``seed``); returns its path.

    Open it with ``aethersearch.sandbox.episode.open_sandbox(path, index, store)``
    over an index of the same demo world (``import_corpus("demo", ..., seed=seed)``).
    """
    return build_demo_release(out_dir, seed=seed, overwrite=True).path


def build_wikispeedia_release(data_dir: str | Path, out_dir: str | Path, *,
                              config: ConstructionConfig | None = None, overwrite: bool = False,
                              documents: Sequence[Document] | None = None,
                              seeds_root: str | Path | None = None, fact_seeds: bool = True,
                              validators: Sequence[ChainValidator] | None = None,
                              judge: EntailmentJudge | None = None,
                              screen: Any | None = None, keep_memorised: bool = False,
                              detours_out: str | Path | None = None, review: str | Path | None = None,
                              memorised_out: str | Path | None = None,
                              on_candidate: Callable[[int, int, int], None] | None = None) -> BuiltRelease:
    """Real Wikispeedia pages + real seed questions -> a hint-free release (WebDetective's construction).

    ``data_dir`` is ../shared/data/wikispeedia; ``seeds_root`` (default: its
    parent, ../shared/data) holds the seed question lists read by
    :mod:`aethersearch.construct.seeds`. Everything after reading the pages is
    the shared construction path, ``page_release.build_page_release`` (its
    docstring lists the steps and the options); ``documents`` skips the
    import when the caller already holds the imported pages.
    """
    from aethersearch.construct.page_release import build_page_release
    from aethersearch.corpus.importers import iter_wikispeedia, wikispeedia_paths

    articles, links = wikispeedia_paths(data_dir)
    documents = list(documents) if documents is not None else list(iter_wikispeedia(articles, links))
    return build_page_release(
        documents, out_dir, name="webdetective_wikispeedia", source_dataset="wikispeedia",
        corpus={"kind": "wikispeedia", "articles": str(articles.name)}, config=config,
        seeds_root=seeds_root if seeds_root is not None else Path(data_dir).parent, fact_seeds=fact_seeds,
        validators=validators, judge=judge, screen=screen, keep_memorised=keep_memorised,
        detours_out=detours_out, overwrite=overwrite, review=review, memorised_out=memorised_out,
        on_candidate=on_candidate)
