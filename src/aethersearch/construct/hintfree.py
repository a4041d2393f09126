"""Hint-free multi-hop construction (WebDetective): single-hop triples -> masked multi-hop chains.

For a triple ``(question, v0, vn)`` -- a question about page ``v0`` whose
answer is page ``vn``, linked directly -- the construction

1. removes the direct link ``v0 -> vn`` and finds the shortest remaining paths
   ``v0 -> v1 -> ... -> vn`` in the hyperlink graph (bidirectional BFS, then
   enumeration of up to ``max_alternatives + 1`` shortest paths);
2. keeps paths of ``min_hops..max_hops`` hops and picks, in lexicographic
   order, the first whose every hop is stated in text (``v_(i-1)``'s page
   mentions ``v_i`` by title), so the chain can actually be read;
3. builds the chain mask the sandbox will apply (see
   ``aethersearch.sandbox.mask``): ``v1..vn`` locked until their predecessor
   is visited, and their mentions withheld off the predecessor page. That is
   how the direct evidence is removed: **the question text is left exactly
   as the single-hop question** (the minimal information need -- no path, no
   attribute hints), and in the sandbox ``v0``'s page is served without the
   sentence stating the answer and without the link ``v0 -> vn``; the demo
   world's facts sit on their subject pages by design, so this is what turns
   them into hint-free multi-hop questions;
4. asks the validators (default :class:`RuleBasedValidator`) whether the
   chain is necessary, and records hop count, path, the other shortest paths,
   the evidence set E (the pages of the path) and one single-hop sub-question
   per hop (for the Forget probe).

:func:`build_demo_sandbox_release` and :func:`build_wikispeedia_release` run
the whole thing on the two built-in sources and write a release.
"""

from __future__ import annotations

from itertools import pairwise
import random
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import Field

from aethersearch.construct.triples import QATriple, TripleSet
from aethersearch.construct.validate import Candidate, ChainValidator, RuleBasedValidator
from aethersearch.corpus.graph import LinkGraph
from aethersearch.errors import ConfigError
from aethersearch.records import Document, Record
from aethersearch.sandbox.mask import ChainMask
from aethersearch.text import question_key


class ConstructionConfig(Record):
    """Settings of one construction run (recorded in the release manifest)."""

    min_hops: int = Field(default=2, ge=2)
    max_hops: int = Field(default=4, ge=2)
    max_alternatives: int = Field(default=8, ge=0)
    max_questions: int | None = Field(default=None, ge=1)
    seed: int = 0
    require_grounding: bool = True


class ConstructedQuestion(NamedTuple):
    """An accepted hint-free question: its triple, chain, alternatives, mask and hop sub-questions."""

    triple: QATriple
    path: list[str]
    alternatives: list[list[str]]
    alternatives_truncated: bool
    mask: ChainMask
    hop_questions: list[dict[str, Any]]


class ConstructionResult(NamedTuple):
    """Accepted questions (in output order), rejection counts by reason, and what was considered."""

    questions: list[ConstructedQuestion]
    rejected: dict[str, int]
    hop_distribution: dict[int, int]
    considered: int
    validators: list[str]


def _title_terms(doc: Document, aliases: Mapping[str, Sequence[str]]) -> list[str]:
    return list(dict.fromkeys([doc.title, *aliases.get(doc.id, ())]))


def _mention(terms: Sequence[str]) -> re.Pattern[str]:
    body = "|".join(re.escape(t) for t in sorted(set(terms), key=lambda t: (-len(t), t)))
    return re.compile(rf"(?<!\w)(?:{body})(?!\w)", re.IGNORECASE)


def _sentence_with(text: str, pattern: re.Pattern[str]) -> tuple[str, re.Match[str]] | None:
    for sentence in re.split(r"(?<=[.!?])\s+|\n+", text):
        match = pattern.search(sentence)
        if match:
            return sentence.strip(), match
    return None


def _hop_question(source: Document, target: Document, terms: Sequence[str],
                  by_pair: Mapping[tuple[str, str], QATriple]) -> dict[str, Any]:
    """The single-hop sub-question of hop ``source -> target``: a known triple, else a cloze of its sentence."""
    triple = by_pair.get((source.id, target.id))
    if triple is not None:
        return {"question": triple.question, "answers": list(triple.answers), "page": source.id,
                "target": target.id, "kind": "relation"}
    found = _sentence_with(source.text, _mention(terms))
    assert found is not None  # paths are chosen so every hop is stated in text
    sentence, match = found
    blank = sentence[: match.start()] + "____" + sentence[match.end():]
    return {"question": f'Fill in the blank, about "{source.title}": {blank}', "answers": list(terms),
            "page": source.id, "target": target.id, "kind": "cloze"}


def construct_hintfree(triples: Iterable[QATriple], graph: LinkGraph, pages: Mapping[str, Document], *,
                       config: ConstructionConfig | None = None,
                       validators: Sequence[ChainValidator] | None = None,
                       page_aliases: Mapping[str, Sequence[str]] | None = None) -> ConstructionResult:
    """Turn single-hop triples into hint-free multi-hop questions (see the module docstring).

    Triples are de-duplicated (same ``(v0, vn)`` pair or same question key:
    the first by id wins), then processed in a seeded shuffle until
    ``max_questions`` are accepted. Every rejection is counted by reason:
    ``duplicate``, ``page_not_in_graph``, ``no_direct_link``,
    ``no_alternative_path``, ``too_short``, ``too_long``,
    ``no_textual_hop_evidence`` and each validator's reasons.
    """
    config = config or ConstructionConfig()
    if config.max_hops < config.min_hops:
        raise ConfigError(f"max_hops ({config.max_hops}) is below min_hops ({config.min_hops})",
                          fix="choose min_hops <= max_hops")
    aliases = page_aliases or {}
    validators = list(validators) if validators is not None else [
        RuleBasedValidator(pages, require_grounding=config.require_grounding)]
    rejected: Counter[str] = Counter()
    unique: list[QATriple] = []
    seen_pairs: set[tuple[str, str]] = set()
    seen_keys: set[str] = set()
    all_triples = sorted(triples, key=lambda t: t.id)
    by_pair: dict[tuple[str, str], QATriple] = {}
    for triple in all_triples:
        pair, key = (triple.subject, triple.answer_page), question_key(triple.question)
        by_pair.setdefault(pair, triple)
        if pair in seen_pairs or key in seen_keys:
            rejected["duplicate"] += 1
            continue
        seen_pairs.add(pair)
        seen_keys.add(key)
        unique.append(triple)
    random.Random(config.seed).shuffle(unique)

    accepted: list[ConstructedQuestion] = []
    considered = 0
    for triple in unique:
        if config.max_questions is not None and len(accepted) >= config.max_questions:
            break
        considered += 1
        outcome = _construct_one(triple, graph, pages, config, validators, aliases, by_pair)
        if isinstance(outcome, str):
            rejected[outcome] += 1
        else:
            accepted.append(outcome)
    hops = Counter(len(q.path) - 1 for q in accepted)
    return ConstructionResult(accepted, dict(sorted(rejected.items())), dict(sorted(hops.items())), considered,
                              [v.name for v in validators])


def _construct_one(triple: QATriple, graph: LinkGraph, pages: Mapping[str, Document], config: ConstructionConfig,
                   validators: Sequence[ChainValidator], aliases: Mapping[str, Sequence[str]],
                   by_pair: Mapping[tuple[str, str], QATriple]) -> ConstructedQuestion | str:
    if triple.subject not in graph or triple.answer_page not in graph or triple.subject not in pages \
            or triple.answer_page not in pages or triple.subject == triple.answer_page:
        return "page_not_in_graph"
    v0, vn = graph.index_of(triple.subject), graph.index_of(triple.answer_page)
    if not graph.has_edge(v0, vn):
        return "no_direct_link"
    removed = (v0, vn)
    hops = graph.distance(v0, vn, removed_edge=removed, max_depth=config.max_hops)
    if hops < 0:
        return "too_long" if graph.distance(v0, vn, removed_edge=removed) > 0 else "no_alternative_path"
    if hops < config.min_hops:
        return "too_short"
    enumerated = graph.shortest_paths(v0, vn, removed_edge=removed, limit=max(16, config.max_alternatives + 1))
    paths = [graph.page_path(p) for p in enumerated]
    terms = {page: _title_terms(pages[page], aliases) for path in paths for page in path}
    chosen: list[str] | None = None
    mask: ChainMask | None = None
    stated = False
    for path in paths:
        if not all(_mention(terms[b]).search(pages[a].text) for a, b in pairwise(path)):
            continue
        stated = True
        hidden = {page: list(terms[page]) for page in path[1:]}
        hidden[path[-1]] = list(dict.fromkeys([*hidden[path[-1]], *triple.answers]))
        candidate_mask = ChainMask(path, hidden)
        if _followable(path, candidate_mask, pages):
            chosen, mask = path, candidate_mask
            break
    if chosen is None or mask is None:
        return "chain_broken" if stated else "no_textual_hop_evidence"
    others = [p for p in paths if p != chosen]
    alternatives = others[: config.max_alternatives]
    candidate = Candidate(triple, chosen, alternatives, mask)
    for validator in validators:
        verdict = validator.validate(candidate)
        if not verdict.ok:
            return verdict.reason or f"rejected_by_{validator.name}"
    hop_questions = [_hop_question(pages[a], pages[b], terms[b], by_pair) for a, b in pairwise(chosen)]
    truncated = len(enumerated) >= max(16, config.max_alternatives + 1) or len(others) > config.max_alternatives
    return ConstructedQuestion(triple, chosen, alternatives, truncated, mask, hop_questions)


def _followable(path: Sequence[str], mask: ChainMask, pages: Mapping[str, Document]) -> bool:
    """Whether each ``v_(i-1)``'s *served* page still links to and mentions ``v_i``."""
    for a, b in pairwise(path):
        served = mask.render(pages[a])
        if b not in served.links or not _mention(mask.hidden_terms[b]).search(served.text):
            return False
    return True


# ----------------------------------------------------------------------------- the two built-in sources


class BuiltRelease(NamedTuple):
    """A written release and the construction result behind it."""

    path: Path
    result: ConstructionResult
    triples: TripleSet


def build_demo_release(out_dir: str | Path, *, seed: int = 0, config: ConstructionConfig | None = None,
                       overwrite: bool = False) -> BuiltRelease:
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
                                validators=validators)
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
                              documents: Sequence[Document] | None = None) -> BuiltRelease:
    """Import real Wikispeedia from ``data_dir`` (../shared/data/wikispeedia), derive triples, construct, write.

    ``documents`` skips the import when the caller already holds the imported
    pages (they must be ``iter_wikispeedia`` output for the same ``data_dir``).
    """
    from aethersearch.construct.release_writer import write_hintfree_release
    from aethersearch.construct.triples import wikispeedia_triples
    from aethersearch.corpus.hashing import corpus_hash
    from aethersearch.corpus.importers import iter_wikispeedia, wikispeedia_paths

    articles, links = wikispeedia_paths(data_dir)
    documents = list(documents) if documents is not None else list(iter_wikispeedia(articles, links))
    config = config or ConstructionConfig()
    triples = wikispeedia_triples(documents, source_file=f"wikispeedia/{articles.name}")
    graph = LinkGraph.from_documents(documents)
    pages = {doc.id: doc for doc in documents}
    result = construct_hintfree(triples.triples, graph, pages, config=config, page_aliases=triples.page_aliases)
    path = write_hintfree_release(
        result, out_dir, name="webdetective_wikispeedia", source_dataset="webdetective-wikispeedia",
        config=config, corpus={"kind": "wikispeedia", "articles": str(articles.name), "documents": len(documents),
                               "corpus_hash": corpus_hash(documents)},
        graph=graph, triple_stats=triples.stats, overwrite=overwrite,
    )
    return BuiltRelease(path, result, triples)
