"""One construction path for every page corpus: pages + seeds -> a hint-free release (and its detour tier).

Wikispeedia (``aether construct wikispeedia``) and a Wikipedia dump (``aether
construct wikipedia``) differ only in how their pages are read; from the page
list on, :func:`build_page_release` does the same thing for both:

1. **Seeds.** Real single-hop dataset questions resolved to ``(q, v0, vn)``
   (``construct.seeds``), and -- with ``fact_seeds`` -- minimal-need seeds
   from the pages' typed facts (``construct.typed_facts``: "In which country is
   Abuja?").
2. **Chains** (``hintfree.construct_hintfree``): the hint screen on every
   seed (``construct.hint_screen``), the chain search (typed composing paths
   where the seed's relation composes, else the paper's equal shortest paths
   with the direct link removed), the rule-based necessity checks, and the
   chain's entailment: relation composition, else the LLM judge
   (``llm_entailment``, ``--validator-endpoint``), else not entailing.
3. **Parametric screen** (``--screen-endpoint``): a question the model
   answers without search is dropped (``memorised``) unless
   ``keep_memorised``, which keeps it marked.
4. **Human pass** (``construct.question_review``): a review file in the
   benchmark audit's form (``--review``) retains or excludes each question;
   ``<release>.question_review.todo.json`` lists the undecided ones, and the
   manifest records who or what decided each.
5. **Release** of the entailing chains only; with ``detours_out`` the chains
   that do not entail are written as a separately named release (``tier:
   detour`` in its manifest), never mixed into the first.

Every seed and chain not in the release is counted by reason in the manifest
(``construction.rejected``): dataset seeds that did not resolve
(``seed_*``), ``specification_hint`` and ``path_narration`` (the hint screen),
the chain search's and validators' reasons, ``not_entailing``, ``memorised``,
``human_rejected`` and ``hop_target_full``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from aethersearch.construct.hintfree import (
    PATH_LIMIT,
    BuiltRelease,
    ConstructedQuestion,
    ConstructionConfig,
    ConstructionResult,
    EntailmentJudge,
    construct_hintfree,
    hop_caps,
    hop_mix_report,
    seed_pair_distances,
)
from aethersearch.construct.question_review import TEMPLATE_NAME, UNDECIDED, apply_question_review
from aethersearch.construct.triples import QATriple, TripleSet
from aethersearch.construct.typed_facts import FactSet, TypedGraph
from aethersearch.construct.validate import ChainValidator, RuleBasedValidator
from aethersearch.corpus.graph import LinkGraph
from aethersearch.errors import ConfigError, ShortageError
from aethersearch.records import Document, InfoboxHop

__all__ = ["Screen", "SeedPool", "WithNames", "apply_screen", "build_page_release", "census_note", "gather_seeds",
    "no_questions", "screen_accuracy"]

Screen = Callable[[Sequence[ConstructedQuestion]], Mapping[str, dict[str, Any]]]


class WithNames(Mapping[str, Sequence[str]]):
    """Page aliases (a dump's redirect titles: read lazily, never copied) plus the names infobox rows use."""

    def __init__(self, base: Mapping[str, Sequence[str]], names: Mapping[str, Sequence[str]]) -> None:
        self._base, self._names = base, names

    def __getitem__(self, page: str) -> Sequence[str]:
        extra = self._names.get(page, ())
        if not extra:
            return self._base[page]
        return list(dict.fromkeys([*self._base.get(page, ()), *extra]))

    def __iter__(self) -> Iterator[str]:
        yield from self._base
        yield from (page for page in self._names if page not in self._base)

    def __len__(self) -> int:
        return len(self._base) + sum(page not in self._base for page in self._names)


class SeedPool(NamedTuple):
    """All seeds of a build, with what was read and rejected before construction."""

    triples: list[QATriple]
    review: list[dict[str, Any]]
    rejected: dict[str, int]
    stats: dict[str, Any]
    facts: FactSet


def gather_seeds(pages: Mapping[str, Document], seeds_root: str | Path | None, *, fact_seeds: bool,
                 corpus_name: str, max_hops: int, page_aliases: Mapping[str, Sequence[str]] | None = None,
                 infobox_hops: Mapping[str, Sequence[InfoboxHop]] | None = None) -> tuple[SeedPool, TypedGraph]:
    """Dataset seeds (when ``seeds_root`` is given) plus typed-fact seeds; returns the pool and the typed graph.

    ``page_aliases`` (a dump's redirect titles) name their pages for both: a seed answer or subject given
    by a redirect title resolves to its article, and a fact sentence may name its subject or object so.
    """
    from aethersearch.construct.seeds import MATCH_RULE, read_seed_questions, resolve_seeds
    from aethersearch.construct.typed_facts import extract_facts
    from aethersearch.construct.typed_facts import fact_seeds as derive_fact_seeds
    from aethersearch.corpus.page_texts import page_titles

    triples: list[QATriple] = []
    review: list[dict[str, Any]] = []
    rejected: dict[str, int] = {}
    stats: dict[str, Any] = {}
    if seeds_root is not None:
        questions, read = read_seed_questions(seeds_root)
        if not questions:
            raise ConfigError(f"no seed question lists found under {seeds_root}",
                              fix="pass the folder holding qa/ (../shared/data) as seeds_root / --seeds")
        resolved = resolve_seeds(questions, pages, page_aliases)
        triples += resolved.triples
        review += resolved.review
        rejected.update({f"seed_{k}": v for k, v in resolved.rejected.items()})
        stats.update({"seed_files": read, "seed_questions": len(questions), "resolved": len(resolved.triples),
                      "match_rule": MATCH_RULE})
    facts = extract_facts(pages.values(), page_aliases, titles=page_titles(pages), infobox_hops=infobox_hops)
    typed = TypedGraph(facts.facts)
    if fact_seeds:
        derived = derive_fact_seeds(typed, facts, pages, source=corpus_name, max_hops=max_hops)
        triples += derived.seeds
        stats["fact_seeds"] = {"typed_facts": len(facts.facts), "pages_with_kind": len(facts.kinds),
                               "matches_left_out": facts.left_out,
                               "seeds": len(derived.seeds), "ambiguous_left_out": derived.ambiguous,
                               "relations": dict(sorted(Counter(t.relation for t in derived.seeds).items()))}
        if derived.ambiguous:
            rejected["fact_seed_ambiguous"] = derived.ambiguous
    if not triples and seeds_root is not None:
        raise ShortageError(f"no seed resolved to pages of this corpus (rejected: {rejected}) and the pages' typed "
                            f"facts gave {stats.get('fact_seeds', {}).get('seeds', 0)} seeds; "
                            f"{census_note(pages, typed, facts, max_hops)}",
                            fix="build on a corpus that holds the seed questions' subject and answer pages")
    if not triples:
        raise ConfigError("no seeds: no dataset seed list was given and the pages carry no typed facts",
                          fix="pass --seeds (the folder holding qa/) or keep --fact-seeds on a corpus with prose")
    return SeedPool(triples, review, rejected, stats, facts), typed


def census_note(pages: Mapping[str, Document], typed: TypedGraph, facts: FactSet, max_hops: int) -> str:
    """What the corpus's link graph allows (``construct.chain_census``), for the message of an empty build."""
    from aethersearch.construct.chain_census import chain_census

    links = {page_id: [link for link in doc.links if link in pages] for page_id, doc in pages.items()}
    return chain_census(links, typed, facts, max_hops=max_hops).summary()


def apply_screen(result: ConstructionResult, screened: Mapping[str, dict[str, Any]] | None, *,
                 keep_memorised: bool) -> tuple[ConstructionResult, dict[str, dict[str, Any]] | None]:
    """Drop (or, with ``keep_memorised``, mark) the questions the screening model answered without search."""
    if screened is None:
        return result, None
    records = {tid: dict(r) for tid, r in screened.items()}
    memorised = {tid for tid, r in records.items() if r.get("answered_without_search")}
    for tid in memorised:
        records[tid]["kept_memorised"] = keep_memorised
    if keep_memorised or not memorised:
        return result, records
    kept = [q for q in result.questions if q.triple.id not in memorised]
    rejected = dict(result.rejected)
    rejected["memorised"] = rejected.get("memorised", 0) + len(result.questions) - len(kept)
    hops = Counter(len(q.path) - 1 for q in kept)
    return result._replace(questions=kept, rejected=dict(sorted(rejected.items())),
                           hop_distribution=dict(sorted(hops.items()))), records


def screen_accuracy(screened: Mapping[str, Mapping[str, Any]], kept: Sequence[ConstructedQuestion]) -> dict[str, Any]:
    """The screening model and its closed-book accuracy (answered without search) on all it screened and on the
    questions kept; absent (None) when nothing was screened."""
    records = [r for r in screened.values() if r.get("screened")]
    on_kept = [screened[q.triple.id] for q in kept if screened.get(q.triple.id, {}).get("screened")]
    models = sorted({str(r.get("model")) for r in records})
    return {"model": models[0] if len(models) == 1 else models,
            "closed_book_accuracy": (round(sum(bool(r["answered_without_search"]) for r in records) / len(records), 4)
                                     if records else None),
            "closed_book_accuracy_on_kept": (round(sum(bool(r["answered_without_search"]) for r in on_kept)
                                                   / len(on_kept), 4) if on_kept else None)}


def build_page_release(documents: Sequence[Document] | Mapping[str, Document], out_dir: str | Path, *, name: str,
                       source_dataset: str, corpus: dict[str, Any], config: ConstructionConfig | None = None,
                       seeds_root: str | Path | None = None, fact_seeds: bool = True,
                       validators: Sequence[ChainValidator] | None = None, judge: EntailmentJudge | None = None,
                       screen: Screen | None = None, keep_memorised: bool = False,
                       detours_out: str | Path | None = None, overwrite: bool = False,
                       review: str | Path | None = None,
                       page_aliases: Mapping[str, Sequence[str]] | None = None,
                       on_candidate: Callable[[int, int, int], None] | None = None,
                       graph: LinkGraph | None = None,
                       memorised_out: str | Path | None = None,
                       infobox_hops: Mapping[str, Sequence[InfoboxHop]] | None = None) -> BuiltRelease:
    """Pages + seeds -> the release of entailing hint-free questions (see the module docstring).

    ``documents`` is the page list, or a mapping page id -> page in page order: a
    :class:`~aethersearch.corpus.page_texts.PageTexts` reads each page from the on-disk page store
    when it is needed, so construction holds the graph, the typed facts and the names, never every
    page's text (the facts come from one streamed pass, the validator's corpus index holds only the
    seeds' answer tokens). ``graph`` is the pages' link graph when the import built it already
    (else it is built from the pages' links).

    ``page_aliases`` (page id -> other names, e.g. a dump's redirect titles) are hidden by the
    sandbox mask with the page's own title. ``infobox_hops`` (page id -> a dump's typed infobox rows,
    ``corpus.wikipedia.read_infobox_hops``) are typed facts of their pages, checked as every fact is.

    ``corpus`` is recorded in the manifest (add ``corpus_hash``-style
    identifiers there); the corpus hash of ``documents`` is added. Seeds that
    resolve are written for review beside the release (``seed_review.jsonl``).
    """
    from aethersearch.construct.llm_checks import screen_counts
    from aethersearch.construct.release_writer import write_hintfree_release
    from aethersearch.corpus.page_texts import pages_hash
    from aethersearch.jsonl import encode_jsonl

    config = config or ConstructionConfig()
    if detours_out is not None:
        config = config.model_copy(update={"keep_detours": True})
    pages = documents if isinstance(documents, Mapping) else {doc.id: doc for doc in documents}
    pool, typed = gather_seeds(pages, seeds_root, fact_seeds=fact_seeds, corpus_name=source_dataset,
                               max_hops=config.max_hops, page_aliases=page_aliases, infobox_hops=infobox_hops)
    if pool.facts.names:  # the names infobox rows call pages by are names of those pages, like redirect titles
        page_aliases = WithNames(page_aliases or {}, pool.facts.names)
    if graph is None:
        graph = LinkGraph.from_documents(pages.values())
    used = list(validators) if validators is not None else [
        RuleBasedValidator(pages, require_grounding=config.require_grounding,
                           answers=[answer for triple in pool.triples for answer in triple.answers])]
    result = construct_hintfree(pool.triples, graph, pages, config=config, validators=used, typed=typed,
                                judge=judge, page_aliases=page_aliases, on_candidate=on_candidate)
    result = result._replace(rejected=dict(sorted({**pool.rejected, **result.rejected}.items())))
    if not result.questions:
        no_questions(result, used, f"; {census_note(pages, typed, pool.facts, config.max_hops)}")
    screened_raw = screen(result.questions) if screen is not None else None
    before = result.questions
    result, screened = apply_screen(result, screened_raw, keep_memorised=keep_memorised)
    kept_ids = {q.triple.id for q in result.questions}
    memorised = [q for q in before if q.triple.id not in kept_ids]
    reviewed = apply_question_review(result.questions, Path(review) if review is not None else None, pages)
    if reviewed.excluded:
        rejected = {**result.rejected, "human_rejected": reviewed.excluded}
        result = result._replace(questions=reviewed.kept, rejected=dict(sorted(rejected.items())),
                                 hop_distribution=dict(sorted(Counter(len(q.path) - 1
                                                                      for q in reviewed.kept).items())))
    if not result.questions:
        no_questions(result, used)
    if result.hop_mix is not None and len(result.questions) < len(before):  # the mix of the rows written
        caps = hop_caps(config)
        result = result._replace(hop_mix=hop_mix_report(config, caps, result.hop_distribution, result.detours,
                                                        result.rejected, result.diversity_dropped)
                                 if caps is not None else None)
    accepted = {q.triple.id for q in result.questions}
    seed_review = [{**row, "accepted": row["triple_id"] in accepted} for row in pool.review]
    checks: dict[str, Any] = {
        "parametric_screen": ({**screen_counts(screened), **screen_accuracy(screened, result.questions),
                               "policy": "kept, marked" if keep_memorised else "dropped",
                               "memorised_tier": Path(memorised_out).name if memorised_out is not None and memorised
                               else None}
                              if screened is not None else "not run (--no-screen)"),
        "entailment_judge": judge.name if judge is not None else "not run (relation composition only)",
        "review": {"file": Path(review).name if review is not None else None,
                   "excluded": reviewed.excluded,
                   "decided_by_a_person": sum(d["decided_by"] != UNDECIDED for d in reviewed.decisions),
                   "decisions": reviewed.decisions}}
    stats: dict[str, Any] = {**pool.stats,
                             "path_choice": "typed composing paths, shortest first, when the seed's relation "
                                            "composes; else a seeded shuffle of all equal shortest paths per "
                                            f"question (up to {PATH_LIMIT}; random.Random(f'{{seed}}:{{triple "
                                            "id}}')); first readable wins, the others are the recorded alternatives",
                             "seed_pair_distances": seed_pair_distances(pool.triples, graph),
                             "seed_pair_distances_note": "hop distance of each distinct seed pair before any text "
                                                         "check: what the graph permits",
                             **checks}
    corpus = {**corpus, "documents": len(pages), "corpus_hash": pages_hash(pages)}
    common: dict[str, Any] = {"source_dataset": source_dataset, "config": config, "corpus": corpus, "graph": graph,
                              "triple_stats": stats, "overwrite": overwrite, "per_source": True}
    path = write_hintfree_release(result, out_dir, name=name, screen=screened,
                                  companions={"seed_review.jsonl": encode_jsonl(seed_review),
                                              TEMPLATE_NAME: reviewed.template}, **common)
    if memorised_out is not None and memorised:
        hops = Counter(len(q.path) - 1 for q in memorised)
        tier = result._replace(questions=memorised, hop_distribution=dict(sorted(hops.items())), hop_mix=None)
        write_hintfree_release(tier, memorised_out, name=f"{name}_memorised", tier="memorised", screen=screened,
                               **common)
    if detours_out is not None and result.detours:
        hops = Counter(len(q.path) - 1 for q in result.detours)
        detours = result._replace(questions=result.detours, hop_distribution=dict(sorted(hops.items())),
                                  hop_mix=None)
        write_hintfree_release(detours, detours_out, name=f"{name}_detours", tier="detour", **common)
    return BuiltRelease(path, result, TripleSet(pool.triples, {}, {"seeds": len(pool.triples)}),
                        {**{k: ({kk: vv for kk, vv in v.items() if kk != "verdicts"} if isinstance(v, dict) else v)
                            for k, v in checks.items()}, "seed_pair_distances": stats["seed_pair_distances"]})


def no_questions(result: ConstructionResult, validators: Sequence[ChainValidator], detail: str = "") -> None:
    """Raise the ShortageError of an empty build, naming an enforced LLM validator that rejected everything;
    ``detail`` (e.g. the chain census of the corpus) ends the message."""
    from aethersearch.construct.llm_checks import LLMChainValidator

    for validator in validators:
        if isinstance(validator, LLMChainValidator) and validator.enforce:
            c = validator.counts()
            if c["judged"]:
                raise ShortageError(
                    f"the LLM validator ({c['model']}) rejected every candidate it judged: {c['judged']} judged, "
                    f"{c['valid']} valid, {c['invalid']} invalid, {c['unparseable']} unparseable replies "
                    f"(rejected by reason: {result.rejected}); no release was written",
                    fix="use a model that answers VALID/INVALID as its first word, or build the validator with "
                        "enforce=False to record its verdicts without enforcing them")
    raise ShortageError(f"construction accepted no questions (rejected: {result.rejected}){detail}",
                        fix="relax --min-hops/--max-hops or check the triples and graph")
