"""Typed facts on pages: minimal-need seeds, and chains whose typed hops entail the answer.

Any page store with titles, prose text and links (Wikispeedia, a Wikipedia
dump) carries facts in the project's relation patterns
(``triples.RELATION_PATTERNS``): a prose sentence about the page's subject
("Abuja is the capital city of Nigeria", "He was born in Ulm") whose object is
the title of a page it links to. :func:`extract_facts` reads every such
sentence of every page (not only the first paragraph, as the single-hop
triples do), so the link ``subject -> object`` becomes a *typed* edge carrying
that sentence as its hop statement.

Two uses:

* **Minimal-need seeds** (:func:`fact_seeds`): one question per fact naming
  only the subject, as in the paper's "Who is the father of Kane Cornes?".
  Place facts are asked at the level of their answer ("In which country is
  Abuja?"), the level read off the answer page's own sentence ("Nigeria is a
  country in West Africa": ``kind`` = country), so the answer is the only
  right one; a birth or death place that is a country is asked as "In which
  country was X born?". Without a known kind the relation's own template is
  used ("Where is X?").
* **Entailing chains** (:class:`TypedGraph`): paths whose typed hops compose,
  under ``chain_semantics`` rules, to the seed's relation
  (X located_in Region, Region located_in Country => X located_in Country; the
  rules are ``chain_semantics.DEFAULT_RULES``).
  Implied relations: a capital or largest city lies in what it is the capital
  or largest city of (``capital_of`` and ``largest_city_of`` also carry
  ``located_in``).
"""

from __future__ import annotations

import functools
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple

from aethersearch.construct.chain_semantics import compose
from aethersearch.construct.infobox import infobox_rows, type_ok
from aethersearch.construct.statements import MAX_STATEMENT_WORDS, is_prose
from aethersearch.construct.triples import (
    RELATION_PATTERNS,
    SENTENCE_SPLIT,
    QATriple,
    about_subject,
    object_page,
)
from aethersearch.records import Document, InfoboxHop

__all__ = ["CONTAINMENT", "CONTAINMENT_LEVEL", "FactSeeds", "FactSet", "IMPLIED", "KINDS", "KIND_MISMATCH",
    "NOT_OWN_CLAUSE", "PATH_LIMIT", "PERSON_SEEDS", "RELATION_QUESTIONS", "SEED_QUESTIONS", "TYPE_MISMATCH",
    "TypedFact", "TypedGraph", "contains", "extract_facts", "fact_seeds", "own_clause"]

#: "in West Africa", "of southern Europe": a compass word before the object page's title is skipped, unless
#: a linked page's title begins with it
_DIRECTION = re.compile(r"^(?:(?:north|south|east|west|central|northern|southern|eastern|western|"
                        r"north-?eastern|north-?western|south-?eastern|south-?western)\s+)", re.IGNORECASE)
#: the kind of place a page says it is, in its own sentence: "Nigeria is a country in West Africa"
KINDS = ("continent", "country", "city", "town", "village", "island", "region", "province", "state", "county",
         "territory", "kingdom", "archipelago", "peninsula", "river", "lake", "sea", "ocean", "mountain range")
_KIND = re.compile(r"^[^,;]{1,80}?\b(?:is|was) (?:an?|the) (?:(?!of )[\w'-]+ ){0,5}?(?P<kind>"
                   + "|".join(KINDS) + r")\b(?! (?:house|houses|estate|club|music|park|seat|road|hall)\b)",
                   re.IGNORECASE)  # "Sandringham House is a country house" is no country
IMPLIED: dict[str, tuple[str, ...]] = {"capital_of": ("located_in",), "largest_city_of": ("located_in",)}
RELATION_QUESTIONS = {relation: template for relation, _, template in RELATION_PATTERNS} | {
    # the relations only infobox rows give (``construct.infobox``)
    "father": "Who is the father of {s}?", "mother": "Who is the mother of {s}?", "spouse": "Who was {s}'s spouse?",
    "directed_by": "Who directed {s}?", "educated_at": "Where was {s} educated?",
    "headquartered_in": "Where is {s} headquartered?", "has_capital": "What is the capital of {s}?"}
#: containment level of a kind of place: a place lies only in a place of a higher level (a city is not "in" a
#: city, a country not "in" a region); kinds not listed (river, lake, mountain range ...) are not ranked
#: ("region", "territory", "state", "island" name places on either side of a country: not ranked)
CONTAINMENT_LEVEL = {"village": 1, "town": 1, "city": 2, "county": 3, "province": 3, "country": 4, "kingdom": 4,
                     "continent": 5}
#: relations that say the subject lies in the object (checked against :data:`CONTAINMENT_LEVEL`)
CONTAINMENT = frozenset(("located_in", "capital_of", "largest_city_of"))
#: a clause boundary between the subject and the pattern: the words after it may be about something else
#: ("Lagos was the capital ...; it was stripped of this title when the Federal Capital Territory was
#: established at the purpose-built city of Abuja" does not say Lagos is in Abuja)
_OTHER_CLAUSE = re.compile(r"[;:]|\b(?:when|where|which|who|whom|whose|that|while|after|before|until|because|"
                           r"although|though|since|whereas|unless|if|but)\b", re.IGNORECASE)
_PARENTHESES = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")
#: why a matched sentence gave no fact (``FactSet.left_out``)
NOT_OWN_CLAUSE = "not_the_subjects_own_clause"
KIND_MISMATCH = "answer_kind_not_a_container"
TYPE_MISMATCH = "object_not_of_the_relations_type"
#: paths enumerated per seed by :meth:`TypedGraph.composing_paths`
PATH_LIMIT = 1_000
#: pages whose names (title, then aliases) the facts pass keeps at hand: bounded, whatever the corpus size
_NAMES_CACHED = 1 << 18


class TypedFact(NamedTuple):
    """``subject`` --relation--> ``object`` (page ids), stated by ``sentence`` on the subject's page."""

    subject: str
    relation: str
    object: str
    sentence: str


class FactSet(NamedTuple):
    """Every typed fact, the kind of place each page says it is (``"country"``, ``"city"`` ...), and per
    relation the sentences that matched its pattern but whose object is no page linked from there (a fact
    about a page outside the corpus: "Alberta is a province of Canada" where Canada is not a page)."""

    facts: list[TypedFact]
    kinds: dict[str, str]
    object_not_a_page: dict[str, int] = {}
    #: pattern matches left out so that no gold is false, by reason (:data:`NOT_OWN_CLAUSE`,
    #: :data:`KIND_MISMATCH`)
    left_out: dict[str, int] = {}
    #: page id -> the other names an infobox row calls it by ("George VI"): names of that page, for the
    #: construction's mentions and the mask's hidden terms, as a dump's redirect titles are
    names: dict[str, list[str]] = {}


def own_clause(before: str) -> bool:
    """Whether the words between a sentence's subject and a relation pattern leave the subject in charge.

    ``before`` is the sentence up to the pattern; a parenthesis (dates, a
    pronunciation) is skipped, then any clause boundary (``;``, ``:``, a
    relative or subordinating word, "but") means the pattern's verb may have
    another subject, so the match is no fact about the page's subject.
    """
    while True:  # nested: "Copenhagen ( IPA: [...], rhyming with pagan (the way ...) ...)"
        bare = _PARENTHESES.sub("", before)
        if bare == before:
            return _OTHER_CLAUSE.search(bare) is None
        before = bare


def contains(kinds: Mapping[str, str], subject: str, container: str) -> bool:
    """False when both pages' kinds are ranked and ``container`` is not of a higher level than ``subject``."""
    low, high = CONTAINMENT_LEVEL.get(kinds.get(subject, "")), CONTAINMENT_LEVEL.get(kinds.get(container, ""))
    return low is None or high is None or high > low


def extract_facts(documents: Iterable[Document], aliases: Mapping[str, Sequence[str]] | None = None, *,
                  titles: Mapping[str, str] | None = None,
                  infobox_hops: Mapping[str, Sequence[InfoboxHop]] | None = None) -> FactSet:
    """The typed facts of every page, in page and sentence order (one per relation per sentence).

    Streamed when ``titles`` (page id -> title of every page) is given: each page is read once, in
    order, and dropped after its sentences are matched, so a page store's texts never sit in memory
    together (``corpus.page_texts``); without it the pages are listed first to learn their titles.

    A fact's sentence is prose (``statements.is_prose``, at most
    ``MAX_STATEMENT_WORDS`` words) about the page's subject (it starts with the
    title, one of its ``aliases``, or a pronoun), and its object begins, right
    after the pattern, with the title or an alias of a page the sentence's page
    links to. ``aliases`` (page id -> other names: a dump's redirect titles) are
    the names the wiki itself says mean that page ("Afro-asiatic languages").

    No false gold: the pattern must sit in the subject's own clause
    (:func:`own_clause`), and a containment fact (``located_in``,
    ``capital_of``, ``largest_city_of``) whose object is no higher a kind of
    place than its subject (a city "in" a city) is left out
    (:func:`contains`); both are counted in ``FactSet.left_out``.

    ``infobox_hops`` (page id -> a dump's typed infobox rows, ``corpus/infobox.py``) add a fact for each
    row whose target is another page of the corpus that the page links to and whose statement the page's
    text serves (the importer writes it there); its sentence is the row's statement ("Spouse: Mileva
    Marić"). They pass the same containment and type checks (``infobox.type_ok``) as Wikispeedia's rows.
    """
    docs: Iterable[Document] = documents
    if titles is None:
        docs = list(documents)
        titles = {doc.id: doc.title for doc in docs}
    known, redirects = titles, aliases or {}

    @functools.lru_cache(maxsize=_NAMES_CACHED)
    def names_of(page: str) -> tuple[str, ...]:
        # asked per link, not built for every page first (that table was about 300 bytes an article on a
        # dump); cached, as a few pages take most links and a dump's aliases are read from disk
        return (known[page], *redirects.get(page, ()))

    facts: list[TypedFact] = []
    kinds: dict[str, str] = {}
    outside: Counter[str] = Counter()
    left_out: Counter[str] = Counter()
    surfaces: dict[str, set[str]] = defaultdict(set)
    for doc in docs:
        own = names_of(doc.id)
        link_titles = sorted({(name.casefold(), p) for p in doc.links if p in known and p != doc.id
                              for name in names_of(p)}, key=lambda item: (-len(item[0]), item[0]))
        forms = [doc] + [doc.model_copy(update={"title": name}) for name in own[1:]]
        for hop in (infobox_hops or {}).get(doc.id, ()):
            if hop.target_page is not None and hop.target_page in known and hop.target_page in doc.links \
                    and hop.statement in doc.text:
                facts.append(TypedFact(doc.id, hop.relation, hop.target_page, hop.statement))
        for row in infobox_rows(doc.text, link_titles):
            facts.append(TypedFact(doc.id, row.relation, row.object, row.row))
            if row.surface.casefold() not in {name.casefold() for name in names_of(row.object)}:
                surfaces[row.object].add(row.surface)
        for line in doc.text.split("\n"):
            for raw in SENTENCE_SPLIT.split(line):
                sentence = raw.strip()
                if not any(about_subject(sentence, form) for form in forms) \
                        or len(sentence.split()) > MAX_STATEMENT_WORDS or not is_prose(sentence):
                    continue
                for relation, pattern, _ in RELATION_PATTERNS:
                    match = pattern.search(sentence)
                    if match is None:
                        continue
                    if not own_clause(sentence[:match.start()]):
                        left_out[NOT_OWN_CLAUSE] += 1
                        continue
                    rest = sentence[match.end():]
                    # a linked title that starts with the compass word wins ("Northern Ireland" over "Ireland")
                    found = object_page(rest, link_titles) or object_page(_DIRECTION.sub("", rest, count=1),
                                                                          link_titles)
                    if found is None:
                        outside[relation] += 1
                        continue
                    facts.append(TypedFact(doc.id, relation, found[0], sentence))
                kind = _KIND.match(sentence)
                if kind and doc.id not in kinds and sentence.casefold().startswith(
                        tuple(name.split(" (")[0].casefold() for name in own)):
                    kinds[doc.id] = kind.group("kind").lower()
    typed = [fact for fact in facts if fact.relation not in CONTAINMENT or contains(kinds, fact.subject, fact.object)]
    if len(typed) < len(facts):
        left_out[KIND_MISMATCH] += len(facts) - len(typed)
    # a place: what a containment fact puts somewhere or puts something in, and what has or is a capital
    places = {page for fact in typed if fact.relation in CONTAINMENT or fact.relation == "has_capital"
              for page in (fact.subject, fact.object)}
    checked = [fact for fact in typed if type_ok(fact.relation, fact.object, kinds, places)]
    if len(checked) < len(typed):
        left_out[TYPE_MISMATCH] += len(typed) - len(checked)
    typed = checked
    used = {fact.object for fact in typed}
    names = {page: sorted(forms) for page, forms in sorted(surfaces.items()) if page in used}
    return FactSet(typed, kinds, dict(sorted(outside.items())), dict(sorted(left_out.items())), names)


#: composed relations asked as seeds, at the level of the answer page's kind
SEED_QUESTIONS = {"located_in": "In which {kind} is {s}?", "born_in_country": "In which {kind} was {s} born?",
                  "died_in_country": "In which {kind} did {s} die?",
                  "based_in_country": "In which {kind} is {s} headquartered?",
                  "author_born_in": "In which {kind} was the writer of {s} born?",
                  "director_born_in": "In which {kind} was the director of {s} born?",
                  "composer_born_in": "In which {kind} was the composer of {s} born?",
                  "painter_born_in": "In which {kind} was the painter of {s} born?",
                  "founder_born_in": "In which {kind} was the founder of {s} born?",
                  "father_born_in": "In which {kind} was the father of {s} born?",
                  "father_died_in": "In which {kind} did the father of {s} die?",
                  "mother_born_in": "In which {kind} was the mother of {s} born?",
                  "spouse_born_in": "In which {kind} was the spouse of {s} born?",
                  # family: the answer is a person, no kind
                  "paternal_grandfather": "Who was the paternal grandfather of {s}?",
                  "maternal_grandfather": "Who was the maternal grandfather of {s}?",
                  "paternal_grandmother": "Who was the paternal grandmother of {s}?",
                  "maternal_grandmother": "Who was the maternal grandmother of {s}?",
                  "father_in_law": "Who was the father-in-law of {s}?",
                  "mother_in_law": "Who was the mother-in-law of {s}?"}
#: composed relations asked without a kind of place (their answer is a person)
PERSON_SEEDS = frozenset(("paternal_grandfather", "maternal_grandfather", "paternal_grandmother",
                          "maternal_grandmother", "father_in_law", "mother_in_law"))


class FactSeeds(NamedTuple):
    """The seeds, and how many (subject, relation, kind) groups were left out as ambiguous (two answers)."""

    seeds: list[QATriple]
    ambiguous: int


def fact_seeds(typed: TypedGraph, fact_set: FactSet, pages: Mapping[str, Document], *, source: str,
               max_hops: int) -> FactSeeds:
    """Minimal-need seeds from the typed facts (see the module docstring).

    * Each typed path of ``1..max_hops`` hops from a page whose relations
      compose to a relation of :data:`SEED_QUESTIONS` and that ends at a page
      of a known kind gives "In which <kind> is <subject>?"; a (subject,
      relation, kind) with two different answers is ambiguous and left out.
    * Every other direct fact gives its relation's own template ("Who wrote
      X?"), the single-hop seed of the paper's construction.
    """
    answers: dict[tuple[str, str, str], dict[str, str]] = defaultdict(dict)
    for v0 in sorted(typed.out):
        for path, composed in typed.walk(v0, max_hops):
            kind = fact_set.kinds.get(path[-1])
            for relation in sorted(composed & SEED_QUESTIONS.keys()):
                if relation in PERSON_SEEDS:
                    if kind is not None:  # a person is no kind of place
                        continue
                elif kind is None or not contains(fact_set.kinds, v0, path[-1]):
                    continue
                evidence = typed.statement(path[0], path[1]) or ""
                answers[(v0, relation, kind or "")].setdefault(path[-1], evidence)
    seeds: list[QATriple] = []
    ambiguous = 0
    for (v0, relation, kind), ends in sorted(answers.items()):
        if len(ends) != 1:
            ambiguous += 1
            continue
        ((answer, evidence),) = ends.items()
        question = SEED_QUESTIONS[relation].format(kind=kind, s=pages[v0].title)
        seeds.append(_seed(pages[v0], pages[answer], relation, question, evidence, source, len(seeds) + 1))
    covered = {(t.subject, t.answer_page) for t in seeds}
    for fact in fact_set.facts:
        if (fact.subject, fact.object) in covered or fact.relation in ("located_in", "capital_of", "largest_city_of") \
                or fact.relation not in RELATION_QUESTIONS:
            continue
        covered.add((fact.subject, fact.object))
        question = RELATION_QUESTIONS[fact.relation].format(s=pages[fact.subject].title)
        seeds.append(_seed(pages[fact.subject], pages[fact.object], fact.relation, question, fact.sentence,
                           source, len(seeds) + 1))
    return FactSeeds(seeds, ambiguous)


def _seed(subject: Document, answer: Document, relation: str, question: str, evidence: str, source: str,
          row: int) -> QATriple:
    return QATriple(
        id=f"fact:{subject.id}#{relation}#{answer.id}", question=question, answers=[answer.title], subject=subject.id,
        answer_page=answer.id, relation=relation, evidence=evidence, source_dataset="page-facts",
        source_split=source, source_id=f"{subject.id}#{relation}#{answer.id}", source_row_number=row,
        source_file=f"{source} typed facts (construct/typed_facts.py)")


class TypedGraph:
    """Typed edges of the link graph, with the composition rules that say what a chain entails."""

    @classmethod
    def from_edges(cls, edges: Iterable[tuple[str, str, str]]) -> TypedGraph:
        """A typed graph over bare ``(subject, relation, object)`` edges (no statements: the demo world's)."""
        return cls(TypedFact(a, relation, b, "") for a, relation, b in edges)

    def __init__(self, facts: Iterable[TypedFact], rules: Mapping[tuple[str, str], str] | None = None) -> None:
        from aethersearch.construct.chain_semantics import DEFAULT_RULES

        self.rules: dict[tuple[str, str], str] = {**DEFAULT_RULES, **(rules or {})}
        self.composable = frozenset(self.rules.values())
        self.edges: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
        self.out: dict[str, list[str]] = defaultdict(list)
        for fact in facts:
            edge = self.edges[(fact.subject, fact.object)]
            if not edge:
                self.out[fact.subject].append(fact.object)
            for relation in (fact.relation, *IMPLIED.get(fact.relation, ())):
                edge.setdefault(relation, fact.sentence)

    def relations(self, a: str, b: str) -> list[str]:
        """The typed relations of the link ``a -> b`` (empty: untyped)."""
        return list(self.edges.get((a, b), {}))

    def statement(self, a: str, b: str) -> str | None:
        """The sentence on ``a`` stating a typed relation to ``b`` (the hop statement of a typed hop)."""
        edge = self.edges.get((a, b))
        return next((sentence for sentence in edge.values() if sentence), None) if edge else None

    def hop_relations(self, path: Sequence[str]) -> list[list[str]]:
        """The typed relations of each hop of ``path``."""
        return [self.relations(a, b) for a, b in zip(path, path[1:], strict=False)]

    def entails(self, path: Sequence[str], target: str) -> frozenset[str]:
        """What the path's hops compose to (left fold); ``target`` in it means the chain entails the answer."""
        hops = self.hop_relations(path)
        if len(hops) == 1:
            return frozenset(hops[0])
        results, failed = compose(hops, self.rules)
        return frozenset() if failed is not None else results

    def walk(self, v0: str, max_hops: int) -> Iterator[tuple[list[str], frozenset[str]]]:
        """Every simple typed path from ``v0`` of ``1..max_hops`` hops whose relations still compose, with
        what they compose to (depth first, in fact order)."""
        stack: list[tuple[list[str], frozenset[str]]] = [([v0], frozenset())]
        while stack:
            path, composed = stack.pop()
            here = path[-1]
            for nxt in reversed(self.out.get(here, ())):
                if nxt in path:
                    continue
                step = self.relations(here, nxt)
                now = frozenset(step) if len(path) == 1 else frozenset(
                    self.rules[(a, b)] for a in composed for b in step if (a, b) in self.rules)
                if not now:
                    continue
                yield [*path, nxt], now
                if len(path) < max_hops:
                    stack.append(([*path, nxt], now))

    def composing_paths(self, v0: str, vn: str, target: str, *, min_hops: int, max_hops: int,
                        removed: tuple[str, str] | None = None) -> list[list[str]]:
        """Simple typed paths ``v0 -> ... -> vn`` of ``min_hops..max_hops`` hops that compose to ``target``.

        Shortest first (then in page-id order); a path through the direct edge
        ``removed`` or through ``vn`` is not used; at most :data:`PATH_LIMIT` paths.
        """
        found: list[list[str]] = []
        for path, composed in self.walk(v0, max_hops):
            if len(found) >= PATH_LIMIT:
                break
            if path[-1] != vn or len(path) - 1 < min_hops or target not in composed or vn in path[:-1] \
                    or (removed is not None and any(edge == removed for edge in zip(path, path[1:], strict=False))):
                continue
            found.append(path)
        return sorted(found, key=lambda p: (len(p), p))
