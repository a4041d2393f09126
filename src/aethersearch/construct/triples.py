"""Single-hop QA triples ``(question, v0, vn)``: the input of hint-free construction.

A triple is a question about page ``v0`` whose answer is page ``vn``, with the
direct link ``v0 -> vn`` in the graph. Two derivations:

* **Demo world** (:func:`demo_triples`): every ``world.facts`` entry with an
  ``answer_id`` (the relations whose answer is itself a page). The fact's own
  sentence sits on ``v0``'s page by design; the masked sandbox withholds it.
* **Wikispeedia** (:func:`wikispeedia_triples`): link-anchored facts in the
  first prose paragraph of the real 2007 Schools Wikipedia articles. A
  sentence about the article's subject ("Paris is the capital city of France",
  "He was born in Ulm", "... was written by Homer") matches a relation
  pattern, and the words right after the pattern must *begin with the title of
  a page the article links to* (longest such title wins). The question is the
  relation's template filled with the subject's title only: no path and no
  attribute hints.

``page_aliases`` (page id -> surface forms) tells the sandbox what counts as a
mention of a page; for the demo world people are also mentioned by surname.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from aethersearch.corpus.demo_world import DemoWorld
from aethersearch.records import Document, Record

__all__ = ["QATriple", "RELATION_PATTERNS", "SENTENCE_SPLIT", "TripleSet", "about_subject", "demo_triples",
    "object_page", "wikispeedia_triples"]


class QATriple(Record):
    """One single-hop question about ``subject`` (v0) answered by page ``answer_page`` (vn)."""

    id: str
    question: str
    answers: list[str]
    subject: str
    answer_page: str
    relation: str
    evidence: str | None = None
    source_dataset: str
    source_split: str
    source_id: str | None
    source_row_number: int
    source_file: str


class TripleSet(NamedTuple):
    """Triples, extra mention forms per page, and how many candidates each step saw."""

    triples: list[QATriple]
    page_aliases: dict[str, list[str]]
    stats: dict[str, int]


# ----------------------------------------------------------------------------- demo world


def demo_triples(world: DemoWorld) -> TripleSet:
    """Triples from the demo world's facts that have an ``answer_id``, in fact order."""
    titles = {doc.id: doc.title for doc in world.documents}
    aliases: dict[str, list[str]] = {}
    triples: list[QATriple] = []
    for row, fact in enumerate(world.facts, start=1):
        if fact.answer_id is None:
            continue
        forms = aliases.setdefault(fact.answer_id, [titles[fact.answer_id]])
        forms.extend(a for a in fact.answers if a not in forms)
        triples.append(QATriple(
            id=fact.id, question=fact.question, answers=list(fact.answers), subject=fact.subject_id,
            answer_page=fact.answer_id, relation=fact.relation, source_dataset="demo-world",
            source_split=f"seed-{world.seed}", source_id=fact.id, source_row_number=row,
            source_file=f"demo_world(seed={world.seed})/facts.jsonl",
        ))
    stats = {"facts": len(world.facts), "facts_with_answer_page": len(triples)}
    return TripleSet(triples, aliases, stats)


# ----------------------------------------------------------------------------- Wikispeedia

# (relation, pattern ending right before the object, question template). Patterns
# are matched case-insensitively against one sentence, anywhere after its start.
_RELATIONS: tuple[tuple[str, str, str], ...] = (
    ("capital_of", r"\bis the (?:capital|capital city) of (?:the )?", "Of what is {s} the capital?"),
    ("largest_city_of", r"\bis the (?:largest|biggest) city (?:in|of) (?:the )?",
     "Of what is {s} the largest city?"),
    ("born_in", r"\bwas born (?:on [^,.;]{1,40}? )?(?:in|at) (?:the )?", "Where was {s} born?"),
    ("died_in", r"\bdied (?:on [^,.;]{1,40}? )?(?:in|at) (?:the )?", "Where did {s} die?"),
    ("founded_by", r"\b(?:was|were) founded by (?:the )?", "Who founded {s}?"),
    ("written_by", r"\b(?:was|is) (?:an? |the )?(?:[\w-]+ ){0,4}?written by ", "Who wrote {s}?"),
    ("composed_by", r"\b(?:was|is) (?:an? |the )?(?:[\w-]+ ){0,4}?composed by ", "Who composed {s}?"),
    ("designed_by", r"\b(?:was|is) (?:an? |the )?(?:[\w-]+ ){0,4}?designed by ", "Who designed {s}?"),
    ("painted_by", r"\b(?:was|is) (?:an? |the )?(?:[\w-]+ ){0,4}?(?:painted|painting) by ", "Who painted {s}?"),
    ("discovered_by", r"\b(?:was|were) (?:first )?discovered by ", "Who discovered {s}?"),
    ("flows_into", r"\bflows? (?:[\w-]+ ){0,3}?into (?:the )?", "Into what does {s} flow?"),
    ("member_of", r"\bis (?:a )?member (?:state )?of (?:the )?", "What is {s} a member of?"),
    ("located_in",
     r"\b(?:is|was) (?:an? |the )?(?:[\w-]+ ){0,4}?(?P<kind>city|town|village|port|island|river|lake|region|"
     r"province|state|country|mountain|municipality|county|archipelago|peninsula|kingdom|territory) "
     r"(?:located |situated )?(?:in|of|on) (?:the )?(?:[\w-]+ of (?:the )?)?",
     "Where is {s}?"),
)
_COMPILED = tuple((rel, re.compile(pat, re.IGNORECASE), template) for rel, pat, template in _RELATIONS)
#: (relation, compiled pattern, question template): the project's relation patterns, shared with
#: ``construct.typed_facts`` (typed facts of every page); ``located_in`` names the kind of place in ``kind``
RELATION_PATTERNS = _COMPILED
#: a sentence ends at ".", "!" or "?" before a capital, but not after a name's initial ("Samuel A. Ward", "J. R. R.
#: Tolkien": a split there cut the object's name off the sentence that states it); an abbreviation's last letter
#: ("the U.S. About", "6th century B.C. The") still ends one
SENTENCE_SPLIT = re.compile(r"(?<=[.!?])(?<![\s(][A-Z]\.)\s+(?=[A-Z(\"'])")
_PRONOUNS = ("he ", "she ", "it ", "they ")


def _prose_paragraphs(doc: Document, limit: int = 3) -> list[str]:
    """The first ``limit`` paragraphs that read as prose about the subject (not infobox rows)."""
    title = doc.title.casefold()
    head = title.split(" (")[0]
    out: list[Any] = []
    for paragraph in doc.text.split("\n\n"):
        words = paragraph.split()
        if len(words) < 12 or "." not in paragraph:
            continue
        if not out and head not in paragraph[:200].casefold():
            continue  # the first prose paragraph names its subject near the start
        out.append(paragraph)
        if len(out) >= limit:
            break
    return out


def about_subject(sentence: str, doc: Document) -> bool:
    start = sentence.casefold()
    head = doc.title.split(" (")[0].casefold()
    return start.startswith((head, "the " + head, "a " + head)) or start.startswith(_PRONOUNS)


def object_page(rest: str, link_titles: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
    """The linked page whose title begins ``rest`` at a word boundary, not a hyphen (longest title first).

    ("Africa-Eurasia" does not begin with the page "Africa".)
    """
    folded = rest.casefold()
    for title, page in link_titles:
        if folded.startswith(title) and (len(folded) == len(title) or not (folded[len(title)].isalnum()
                                                                    or folded[len(title)] == "-")):
            return page, rest[: len(title)]
    return None


def wikispeedia_triples(documents: Iterable[Document], *, source_file: str = "wikispeedia/plaintext_articles.tar.gz",
                        max_per_page: int = 2) -> TripleSet:
    """Link-anchored single-hop triples from the first prose paragraphs of Wikispeedia articles.

    At most ``max_per_page`` triples per article and one per relation, in
    sentence order; ``stats`` counts articles scanned, sentences matched by a
    relation, matches whose object was not a linked page, and objects already
    named by the subject's title (which would put the answer in the question).
    """
    docs = list(documents)
    titles = {doc.id: doc.title for doc in docs}
    triples: list[QATriple] = []
    stats = {"articles": len(docs), "pattern_matches": 0, "object_not_linked": 0, "answer_in_subject_title": 0,
             "triples": 0}
    for row, doc in enumerate(docs, start=1):
        link_titles = sorted(((titles[p].casefold(), p) for p in doc.links if p in titles),
                             key=lambda item: (-len(item[0]), item[0]))
        if not link_titles:
            continue
        seen_relations: set[str] = set()
        found = 0
        for paragraph in _prose_paragraphs(doc):
            for sentence in SENTENCE_SPLIT.split(paragraph):
                if found >= max_per_page or not about_subject(sentence, doc):
                    continue
                for relation, pattern, template in _COMPILED:
                    if relation in seen_relations:
                        continue
                    match = pattern.search(sentence)
                    if match is None:
                        continue
                    stats["pattern_matches"] += 1
                    obj = object_page(sentence[match.end():], link_titles)
                    if obj is None or obj[0] == doc.id:
                        stats["object_not_linked"] += 1
                        continue
                    page, surface = obj
                    if re.search(rf"(?<!\w){re.escape(titles[page])}(?!\w)", doc.title, re.IGNORECASE):
                        stats["answer_in_subject_title"] += 1  # "Great Spotted Woodpecker" -> "Woodpecker"
                        continue
                    answers = list(dict.fromkeys([titles[page], surface]))
                    triples.append(QATriple(
                        id=f"wsp_{len(triples) + 1:05d}", question=template.format(s=doc.title), answers=answers,
                        subject=doc.id, answer_page=page, relation=relation, evidence=sentence.strip(),
                        source_dataset="wikispeedia", source_split="plaintext_articles",
                        source_id=f"{doc.id}#{relation}", source_row_number=row, source_file=source_file,
                    ))
                    seen_relations.add(relation)
                    found += 1
                    break
    stats["triples"] = len(triples)
    return TripleSet(triples, {}, stats)
