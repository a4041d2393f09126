"""Hint-free multi-hop construction (WebDetective): single-hop triples -> masked multi-hop chains.

For a triple ``(question, v0, vn)`` -- a question about page ``v0`` whose
answer is page ``vn``, linked directly -- the construction

1. removes the direct link ``v0 -> vn`` and finds the shortest remaining paths
   ``v0 -> v1 -> ... -> vn`` in the hyperlink graph (bidirectional BFS, then
   enumeration of all equal shortest paths, up to :data:`PATH_LIMIT`); a seed
   pair without a direct link is rejected (``no_direct_link``) unless
   ``allow_unlinked`` is set, in which case its shortest path is used as is
   and the row records that nothing was removed;
2. keeps paths of ``min_hops..max_hops`` hops and tries the equal shortest
   paths in a seeded order per question (``random.Random(f"{seed}:{id}")``,
   reproducible, not alphabetical), taking the first whose every hop is stated
   by a clean sentence (:func:`hop_statement`: ``v_(i-1)``'s page names ``v_i``
   in a prose sentence, not a list dump, and a hop before the last does not
   name the final answer), so the chain can actually be read; the others are
   recorded as its alternatives;
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
   per hop (for the Forget probe), asking for what that hop's statement says;
5. screens every seed for hints (``construct.hint_screen``: a fingerprinting
   specification score rejects the seed; an equal shortest path whose pages
   the question names is skipped, and a seed left with none is rejected as
   path narration), and records whether the chain *entails* the answer
   (:func:`chain_entailment`): where the seed's relation composes
   (``typed_facts.TypedGraph``) the chain is the shortest *typed* path whose
   relations compose to it -- possibly longer than the shortest detour --
   else an LLM judge decides, else the chain is not entailing. Only
   entailing chains are accepted; the others are counted (``not_entailing``)
   and, with ``keep_detours``, kept as the separate detour tier.

``construct.build``'s ``build_demo_sandbox_release`` and ``build_wikispeedia_release`` run
the whole thing on the two built-in sources and write a release: the demo
world's own facts, and real Wikispeedia pages with *real* seed questions
(``construct.seeds``: NQ-Open, TriviaQA, PopQA, HotpotQA, 2Wiki and MuSiQue
questions resolved to ``(q, v0, vn)``; the question text is the seed's).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from pydantic import Field

from aethersearch.construct import diversity
from aethersearch.construct.hint_screen import SPECIFICATION_THRESHOLD, narrated_pages, screen_record, specification
from aethersearch.construct.statements import hop_statement
from aethersearch.construct.statements import mention_pattern as _mention
from aethersearch.construct.triples import QATriple, TripleSet
from aethersearch.construct.typed_facts import RELATION_QUESTIONS, TypedGraph
from aethersearch.construct.validate import Candidate, ChainValidator, RuleBasedValidator
from aethersearch.corpus.graph import LinkGraph
from aethersearch.errors import ConfigError
from aethersearch.records import Document, Record
from aethersearch.sandbox.mask import ChainMask
from aethersearch.text import question_key

__all__ = ["BuiltRelease", "ConstructedQuestion", "ConstructionConfig", "ConstructionResult", "EntailmentJudge",
    "PATH_LIMIT", "PageSource", "chain_entailment", "construct_hintfree", "hop_caps", "hop_mix_report",
    "seed_pair_distances"]


class ConstructionConfig(Record):
    """Settings of one construction run (recorded in the release manifest)."""

    min_hops: int = Field(default=2, ge=2)
    max_hops: int = Field(default=4, ge=2)
    max_alternatives: int = Field(default=8, ge=0)
    max_questions: int | None = Field(default=None, ge=1)
    seed: int = 0
    require_grounding: bool = True
    #: also build from seed pairs whose subject page does *not* link the answer (nothing to remove: their
    #: shortest path is used as is, and the row says so); off by default -- the paper starts from linked pairs
    allow_unlinked: bool = False
    #: target share of each hop count (``--hops 2:0.15,3:0.55,4:0.30``); None: no target
    hop_targets: dict[int, float] | None = None
    #: keep non-entailing chains as the separately named detour tier (never in the main release)
    keep_detours: bool = False
    #: long-tail and diverse selection (``construct.diversity``): tail first, one question per subject, no two
    #: chains sharing two hops; off: the seeded order, first come
    diverse: bool = True
    #: no answer page on more than this share of the release (``construct.diversity.cap_answers``); None: no cap
    max_answer_share: float | None = Field(default=0.10, gt=0, le=1)


class ConstructedQuestion(NamedTuple):
    """An accepted hint-free question: its triple, chain, alternatives, mask and hop sub-questions."""

    triple: QATriple
    path: list[str]
    alternatives: list[list[str]]
    alternatives_truncated: bool
    mask: ChainMask
    hop_questions: list[dict[str, Any]]
    equal_paths: int = 1
    equal_paths_capped: bool = False  # more than PATH_LIMIT equal shortest paths: equal_paths is a lower bound
    direct_link: bool = True  # False: an unlinked seed pair (ConstructionConfig.allow_unlinked), nothing removed
    hint_screen: dict[str, Any] = {}
    chain_entailment: dict[str, Any] = {}
    #: the popularity proxy of subject and answer page (``construct.diversity.popularity``)
    popularity: dict[str, Any] = {}


class ConstructionResult(NamedTuple):
    """Accepted questions (in output order), rejection counts by reason, and what was considered."""

    questions: list[ConstructedQuestion]
    rejected: dict[str, int]
    hop_distribution: dict[int, int]
    considered: int
    validators: list[str]
    detours: list[ConstructedQuestion] = []
    hop_mix: dict[str, Any] | None = None
    #: hop count -> entailing chains the diversity rules left out (subject taken, overlap, answer share)
    diversity_dropped: dict[int, int] = {}


def _title_terms(doc: Document, aliases: Mapping[str, Sequence[str]]) -> list[str]:
    return list(dict.fromkeys([doc.title, *aliases.get(doc.id, ())]))


#: Equal shortest paths enumerated per question. The seeded choice is uniform over all of them as long as
#: there are fewer (on the real Wikispeedia seeds at most 98 with the direct link removed); a smaller cap
#: would make the choice among the first paths in index (= alphabetical) order, the bias this replaced.
PATH_LIMIT = 10_000


def _hop_question(source: Document, target: Document, terms: Sequence[str], statement: str,
                  typed: TypedGraph | None) -> dict[str, Any]:
    """The single-hop sub-question of hop ``source -> target``, asking for what *this hop's statement* says.

    A typed hop (its statement is a typed fact of ``source``) is asked with its
    relation's template about ``source`` ("In which country is Abuja?"); any
    other hop is a cloze of its statement. Never a seed question that merely
    shares the page pair: "China -> Beijing" stated as "Beijing is the capital
    of China" is not asked as a question about an ambassador's seat.
    """
    relations = typed.relations(source.id, target.id) if typed is not None else []
    if relations and typed is not None and typed.statement(source.id, target.id) == statement:
        relation = relations[0]
        template = RELATION_QUESTIONS.get(relation)
        if template is not None:
            return {"question": template.format(s=source.title), "answers": list(terms), "page": source.id,
                    "target": target.id, "kind": "relation", "relation": relation, "statement": statement}
    match = _mention(terms).search(statement)
    assert match is not None  # hop statements always name the target
    blank = statement[: match.start()] + "____" + statement[match.end():]
    return {"question": f'Fill in the blank, about "{source.title}": {blank}', "answers": list(terms),
            "page": source.id, "target": target.id, "kind": "cloze", "statement": statement}


class EntailmentJudge(Protocol):
    """Judges chains whose hops the composition rules cannot type (e.g. ``llm_entailment.LLMEntailmentJudge``)."""

    name: str

    def judge(self, triple: QATriple, path: Sequence[str], statements: Sequence[str]) -> dict[str, Any]:
        """The ``extra.chain_entailment`` record; its ``entailing`` says whether the chain answers the question."""
        ...


def construct_hintfree(triples: Iterable[QATriple], graph: LinkGraph, pages: Mapping[str, Document], *,
                       config: ConstructionConfig | None = None,
                       validators: Sequence[ChainValidator] | None = None,
                       page_aliases: Mapping[str, Sequence[str]] | None = None,
                       typed: TypedGraph | None = None, judge: EntailmentJudge | None = None,
                       on_candidate: Callable[[int, int, int], None] | None = None) -> ConstructionResult:
    """Turn single-hop triples into hint-free multi-hop questions (see the module docstring).

    Triples are de-duplicated (same ``(v0, vn)`` pair or same question key:
    the first by id wins), then processed in a seeded shuffle until
    ``max_questions`` are accepted. Every rejection is counted by reason:
    ``duplicate``, ``specification_hint``, ``page_not_in_graph``, ``no_direct_link``,
    ``no_alternative_path``, ``too_short``, ``too_long``,
    ``no_textual_hop_evidence``, ``no_clean_hop_statement``, ``path_narration``, ``chain_broken``,
    each validator's reasons, ``not_entailing`` (the chain does not entail the
    answer: the main release holds only entailing chains; with
    ``keep_detours`` such chains form the detour tier) and ``hop_target_full``
    (the question's hop count already has its ``hop_targets`` share).
    ``on_candidate(considered, candidates, accepted)`` is called after each
    candidate, so a caller can show progress on long builds.
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
    for triple in sorted(triples, key=lambda t: t.id):
        pair, key = (triple.subject, triple.answer_page), question_key(triple.question)
        if pair in seen_pairs or key in seen_keys:
            rejected["duplicate"] += 1
            continue
        seen_pairs.add(pair)
        seen_keys.add(key)
        unique.append(triple)
    random.Random(config.seed).shuffle(unique)
    pop = diversity.popularity(graph, pages)
    if config.diverse:
        unique = [unique[i] for i in diversity.tail_order([(t.subject, t.answer_page) for t in unique], pop)]

    caps = hop_caps(config)
    accepted: list[ConstructedQuestion] = []
    detours: list[ConstructedQuestion] = []
    subjects: set[str] = set()
    chains: list[set[tuple[str, str]]] = []
    answers: Counter[str] = Counter()
    dropped: Counter[int] = Counter()
    per_answer = (diversity.answer_cap(config.max_questions, config.max_answer_share)
                  if config.max_answer_share is not None and config.max_questions is not None else None)
    considered = 0
    for triple in unique:
        if config.max_questions is not None and len(accepted) >= config.max_questions:
            break
        considered += 1
        outcome = _construct_one(triple, graph, pages, config, validators, aliases, typed, judge)
        if not isinstance(outcome, str):
            outcome = outcome._replace(popularity={"subject": pop(triple.subject), "answer": pop(triple.answer_page)})
        if isinstance(outcome, str):
            rejected[outcome] += 1
        elif not outcome.chain_entailment.get("entailing"):
            rejected["not_entailing"] += 1
            if config.keep_detours:
                detours.append(outcome)
        elif caps is not None and sum(len(q.path) - 1 == len(outcome.path) - 1 for q in accepted) \
                >= caps.get(len(outcome.path) - 1, 0):
            rejected["hop_target_full"] += 1
        elif config.diverse and triple.subject in subjects:
            rejected["subject_taken"] += 1
            dropped[len(outcome.path) - 1] += 1
        elif config.diverse and diversity.overlaps(outcome.path, chains):
            rejected["chain_overlap"] += 1
            dropped[len(outcome.path) - 1] += 1
        elif per_answer is not None and answers[triple.answer_page] >= per_answer:
            rejected["answer_share_cap"] += 1  # of max_questions; without it, trimmed on the final count below
            dropped[len(outcome.path) - 1] += 1
        else:
            answers[triple.answer_page] += 1
            accepted.append(outcome)
            subjects.add(triple.subject)
            chains.append(diversity.hops_of(outcome.path))
        if on_candidate is not None:
            on_candidate(considered, len(unique), len(accepted))
    if config.max_answer_share is not None:
        kept = diversity.cap_answers([q.triple.answer_page for q in accepted],
                                     [q.popularity["subject"]["in_degree"] for q in accepted], config.max_answer_share)
        if len(kept) < len(accepted):
            rejected["answer_share_cap"] += len(accepted) - len(kept)
            dropped.update(len(accepted[i].path) - 1 for i in set(range(len(accepted))) - set(kept))
            accepted = [accepted[i] for i in kept]
    hops = Counter(len(q.path) - 1 for q in accepted)
    mix = hop_mix_report(config, caps, hops, detours, rejected, dropped) if caps is not None else None
    return ConstructionResult(accepted, dict(sorted(rejected.items())), dict(sorted(hops.items())), considered,
                              [v.name for v in validators], detours, mix, dict(sorted(dropped.items())))


def hop_caps(config: ConstructionConfig) -> dict[int, int] | None:
    """Questions allowed per hop count under ``hop_targets`` (of ``max_questions``; without it, unbounded)."""
    if config.hop_targets is None:
        return None
    if config.max_questions is None:
        return {h: 10**9 for h in config.hop_targets}
    return {h: round(share * config.max_questions) for h, share in config.hop_targets.items()}


def hop_mix_report(config: ConstructionConfig, caps: Mapping[int, int], hops: Mapping[int, int],
                   detours: Sequence[ConstructedQuestion], rejected: Mapping[str, int],
                   diversity_dropped: Mapping[int, int] | None = None) -> dict[str, Any]:
    """Target against achieved, per hop count, with the reason when the graph (or the diversity rules) fell
    short."""
    total = sum(hops.values())
    detour_hops = Counter(len(q.path) - 1 for q in detours)
    out: dict[str, Any] = {}
    for h, share in sorted((config.hop_targets or {}).items()):
        target = caps[h] if config.max_questions is not None else round(share * total)
        got = hops.get(h, 0)
        row: dict[str, Any] = {"target_share": share, "target": target, "achieved": got,
                               "achieved_share": round(got / total, 4) if total else 0.0}
        if got < target:
            row["short_by"] = target - got
            left_out = (diversity_dropped or {}).get(h, 0)
            row["reason"] = (f"the graph gave only {got + left_out} entailing {h}-hop chain(s) among all seeds"
                             + (f", of which the diversity rules left out {left_out} (subject taken, chain "
                                f"overlap, answer share)" if left_out else "")
                             + f" ({detour_hops.get(h, 0)} non-entailing {h}-hop detours seen; "
                             f"{rejected.get('not_entailing', 0)} chains of any length did not entail)")
        out[str(h)] = row
    return out


def _construct_one(triple: QATriple, graph: LinkGraph, pages: Mapping[str, Document], config: ConstructionConfig,
                   validators: Sequence[ChainValidator], aliases: Mapping[str, Sequence[str]],
                   typed: TypedGraph | None, judge: EntailmentJudge | None) -> ConstructedQuestion | str:
    if triple.subject not in graph or triple.answer_page not in graph or triple.subject not in pages \
            or triple.answer_page not in pages or triple.subject == triple.answer_page:
        return "page_not_in_graph"
    spec = specification(triple.question, _title_terms(pages[triple.subject], aliases))
    if spec.score >= SPECIFICATION_THRESHOLD:
        return "specification_hint"
    v0, vn = graph.index_of(triple.subject), graph.index_of(triple.answer_page)
    linked = graph.has_edge(v0, vn)
    removed = (v0, vn) if linked else None
    typed_paths: list[list[str]] = []
    if typed is not None and triple.relation in typed.composable:
        typed_paths = typed.composing_paths(triple.subject, triple.answer_page, triple.relation,
                                            min_hops=config.min_hops, max_hops=config.max_hops,
                                            removed=(triple.subject, triple.answer_page) if linked else None)
    if not linked and not config.allow_unlinked and not typed_paths:
        # an unlinked pair is built only when typed hops entail its answer: nothing else confirms its subject
        return "no_direct_link"
    enumerated: list[list[int]] = []
    if typed_paths:
        order = _seeded_by_length(typed_paths, f"{config.seed}:{triple.id}")
        paths = order
    else:
        hops = graph.distance(v0, vn, removed_edge=removed, max_depth=config.max_hops)
        if hops < 0:
            return "too_long" if graph.distance(v0, vn, removed_edge=removed) > 0 else "no_alternative_path"
        if hops < config.min_hops:
            return "too_short"
        enumerated = graph.shortest_paths(v0, vn, removed_edge=removed, limit=PATH_LIMIT)
        paths = sorted(graph.page_path(p) for p in enumerated)
        # equal shortest paths are tried in a seeded order (per question), not alphabetically: the first
        # readable one is the chain, the others are recorded as its alternatives
        order = list(paths)
        random.Random(f"{config.seed}:{triple.id}").shuffle(order)
    terms: dict[str, list[str]] = {}
    chosen: list[str] | None = None
    mask: ChainMask | None = None
    statements: list[str] = []
    stated = clean = False
    narrated_skipped = 0
    mentions: dict[tuple[str, str], bool] = {}
    found_statements: dict[tuple[str, str, bool], str | None] = {}

    def page_terms(page: str) -> list[str]:
        if page not in terms:
            terms[page] = _title_terms(pages[page], aliases)
        return terms[page]

    def mentioned(a: str, b: str) -> bool:
        if (a, b) not in mentions:
            mentions[(a, b)] = bool(_mention(page_terms(b)).search(pages[a].text))
        return mentions[(a, b)]

    def statement(source: Document, b: str, last: bool) -> str | None:
        finals = () if last else triple.answers
        fact = typed.statement(source.id, b) if typed_paths and typed is not None else None
        if fact is not None:  # a typed hop is stated by its fact's sentence, if the page (as served) keeps it
            final = _mention(finals) if finals else None
            return fact if fact in source.text and (final is None or not final.search(fact)) else None
        return hop_statement(source, page_terms(b), finals)

    def raw_statement(a: str, b: str, last: bool) -> str | None:
        if (a, b, last) not in found_statements:
            found_statements[(a, b, last)] = statement(pages[a], b, last)
        return found_statements[(a, b, last)]

    for path in order:
        if not all(mentioned(a, b) for a, b in pairwise(path)):
            continue
        stated = True
        found = [raw_statement(a, b, b == path[-1]) for a, b in pairwise(path)]
        if any(f is None for f in found):
            continue
        clean = True
        if narrated_pages(triple.question, path, {p: page_terms(p) for p in path[1:]}):
            narrated_skipped += 1
            continue
        hidden = {page: list(page_terms(page)) for page in path[1:]}
        hidden[path[-1]] = list(dict.fromkeys([*hidden[path[-1]], *triple.answers]))
        candidate_mask = ChainMask(path, hidden)
        if not _followable(path, candidate_mask, pages):
            continue
        # the statements as the sandbox serves them: the mask may withhold a raw page's sentence (one that
        # also names a later chain node), and a hop sub-question must quote what an agent can read
        served = [statement(candidate_mask.render(pages[a]), b, b == path[-1]) for a, b in pairwise(path)]
        if all(served):
            chosen, mask, statements = path, candidate_mask, [f for f in served if f is not None]
            break
    if chosen is None or mask is None:
        if narrated_skipped:
            return "path_narration"
        return "chain_broken" if clean else "no_clean_hop_statement" if stated else "no_textual_hop_evidence"
    others = [p for p in order if p != chosen and len(p) == len(chosen)]
    alternatives = others[: config.max_alternatives]
    candidate = Candidate(triple, chosen, alternatives, mask)
    for validator in validators:
        verdict = validator.validate(candidate)
        if not verdict.ok:
            return verdict.reason or f"rejected_by_{validator.name}"
    hop_questions = [_hop_question(pages[a], pages[b], page_terms(b), st, typed)
                     for (a, b), st in zip(pairwise(chosen), statements, strict=True)]
    capped = len(enumerated) >= PATH_LIMIT
    truncated = capped or len(others) > config.max_alternatives
    screen = screen_record(spec, narrated_skipped=narrated_skipped, path_narration=False)
    entailment = chain_entailment(triple, chosen, statements, typed, judge)
    return ConstructedQuestion(triple, chosen, alternatives, truncated, mask, hop_questions, len(paths), capped,
                               linked, screen, entailment)


def _seeded_by_length(paths: Sequence[list[str]], seed: str) -> list[list[str]]:
    """Shortest paths first; equal-length paths in a seeded order (as the untyped shortest paths are)."""
    rng = random.Random(seed)
    out: list[list[str]] = []
    for length in sorted({len(p) for p in paths}):
        group = [p for p in paths if len(p) == length]
        rng.shuffle(group)
        out.extend(group)
    return out


def chain_entailment(triple: QATriple, path: Sequence[str], statements: Sequence[str], typed: TypedGraph | None,
                     judge: EntailmentJudge | None) -> dict[str, Any]:
    """``extra.chain_entailment``: which validator says the composed hops answer the question, and how.

    Typed hops that compose (``typed_facts.TypedGraph``) to the question's
    relation entail it by rule; otherwise the ``judge`` (the LLM validator)
    decides; without one the chain is recorded as not entailing: a chain
    whose hops only *mention* the next page says nothing about the answer.
    """
    if typed is not None:
        hop_relations = typed.hop_relations(path)
        composed = typed.entails(path, triple.relation) if all(hop_relations) else frozenset()
        if triple.relation in composed:
            return {"entailing": True, "validator": "relation-composition", "hop_relations": hop_relations,
                    "question_relation": triple.relation,
                    "how": f"the hops' typed relations {hop_relations} compose left to right to "
                           f"{triple.relation!r} (the rules of construct/chain_semantics.py)"}
    if judge is not None:
        return judge.judge(triple, path, statements)
    return {"entailing": False, "validator": None,
            "how": "no typed relations compose to the question's relation and no --validator-endpoint judged it: "
                   "the hops only mention the next page"}


def _followable(path: Sequence[str], mask: ChainMask, pages: Mapping[str, Document]) -> bool:
    """Whether each ``v_(i-1)``'s *served* page still links to and mentions ``v_i``."""
    for a, b in pairwise(path):
        served = mask.render(pages[a])
        if b not in served.links or not _mention(mask.hidden_terms[b]).search(served.text):
            return False
    return True


# ----------------------------------------------------------------------------- the two built-in sources


class PageSource(NamedTuple):
    """Real pages other than Wikispeedia's: the release name and source label, the manifest's corpus
    record and the page aliases (a dump's redirect titles), for ``page_release.build_page_release``."""

    name: str
    source_dataset: str
    corpus: dict[str, Any]
    page_aliases: Mapping[str, Sequence[str]]


class BuiltRelease(NamedTuple):
    """A written release, the construction result behind it, and the model checks' summaries (if run)."""

    path: Path
    result: ConstructionResult
    triples: TripleSet
    checks: dict[str, Any] = {}


def seed_pair_distances(triples: Iterable[QATriple], graph: LinkGraph) -> dict[str, Any]:
    """What the graph permits: hop distance of every distinct resolved seed pair ``(v0, vn)``.

    ``direct_link_removed``: pairs whose ``v0`` links ``vn``, distance with
    that link removed (the paper's construction); ``no_direct_link``: the
    other pairs, distance as is (``-1``: unreachable). Counted before any
    text check, so it bounds the hop distribution any validator can keep.
    """
    linked: Counter[int] = Counter()
    unlinked: Counter[int] = Counter()
    seen: set[tuple[str, str]] = set()
    for t in triples:
        pair = (t.subject, t.answer_page)
        if pair in seen or t.subject not in graph or t.answer_page not in graph or t.subject == t.answer_page:
            continue
        seen.add(pair)
        v0, vn = graph.index_of(t.subject), graph.index_of(t.answer_page)
        if graph.has_edge(v0, vn):
            linked[graph.distance(v0, vn, removed_edge=(v0, vn))] += 1
        else:
            unlinked[graph.distance(v0, vn)] += 1
    return {"pairs": len(seen),
            "direct_link_removed": {str(k): v for k, v in sorted(linked.items())},
            "no_direct_link": {str(k): v for k, v in sorted(unlinked.items())}}

