"""Seed triples ``(q, v0, vn)`` from real single-hop questions, resolved to pages of a link graph.

WebDetective starts from real single-hop QA pairs: a human-written question
about an entity ``v0`` whose answer is the entity ``vn``; the question text stays
the minimal information need. Here the questions come from the public question
lists in ``../shared/data`` (NQ-Open dev, TriviaQA dev, PopQA test slices,
HotpotQA dev, 2WikiMultiHopQA dev, MuSiQue-Ans dev), read through the
benchmark's own source adapters, and are resolved to pages by this rule
(:data:`MATCH_RULE`, recorded in the release manifest):

* **answer page vn**: a gold answer equals a page title after Search-R1 answer
  normalisation (lower case, ASCII punctuation and articles dropped, spaces
  collapsed; ``_`` read as a space), or equals a title with its trailing
  parenthetical removed ("Georgia (country)" -> "georgia") when that short form
  names exactly one page and no page has it as its full title;
* **subject page v0**: the longest page title (at most :data:`MAX_TITLE_TOKENS`
  tokens, normalised the same way) occurring as a whole-token span of the
  normalised question, whose span in the question as written contains a
  capitalised word (a proper-noun mention: "Which **France** ..." yes, a
  lower-case "water" no), other than the answer page; ties go to the earlier
  span.

Every question is accounted for: resolved (a triple), or rejected with a reason
(``answer_not_a_page``, ``no_subject_page``, ``subject_is_answer``); each
resolved seed goes to the review file (``<release>.seed_review.jsonl`` beside the release)
with the matched spans, so a reviewer can check the rule's calls.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from aethersearch.construct.triples import QATriple
from aethersearch.errors import DataError
from aethersearch.records import Document
from aethersearch.text import normalize_answer

__all__ = ["MATCH_RULE", "MAX_TITLE_TOKENS", "SEED_SOURCES", "SeedQuestion", "SeedResolution", "TitleIndex",
    "read_seed_questions", "resolve_seeds"]

MAX_TITLE_TOKENS = 6
MATCH_RULE = (
    "answer: a gold answer equals a page title after Search-R1 normalisation (lower, no ASCII punctuation, no "
    "articles, '_' as space), or a title minus its trailing parenthetical when that short form is unique and "
    "not itself a title; subject: the longest page title (<= 6 tokens) that is a whole-token span of the "
    "normalised question with a capitalised word in the question as written, other than the answer page "
    "(a whole capitalised run, not after a determiner; pages linking to the answer first, then longer, then earlier); "
    "a page's redirect titles (aliases) name it as its title does, unless two pages share the alias"
)

#: (dataset, adapter format, path under ../shared/data, split) of the seed question lists.
SEED_SOURCES: tuple[tuple[str, str, str, str], ...] = (
    ("nq_open", "nq_open_jsonl", "qa/nq_open/NQ-open.dev.jsonl", "dev"),
    ("triviaqa", "triviaqa_dpr_tsv", "qa/triviaqa/topics.dpr.trivia.test.txt", "dev"),
    ("popqa", "searchr1_parquet", "search_r1_processed/graphrag_r2_popqa_test_200.parquet", "test"),
    ("popqa", "flashrag_jsonl", "flashrag_format/from_searchr1_test_sample/popqa.jsonl", "test"),
    ("hotpotqa", "qa_list_json", "qa/hotpotqa/hotpotqa_dev_questions_and_answers.json", "dev"),
    ("2wikimultihopqa", "qa_list_json", "qa/2wikimultihopqa/dev_questions_and_answers.json", "dev"),
    ("musique", "qa_list_json", "qa/musique/musique_ans_dev_questions_and_answers.json", "dev"),
)


class SeedQuestion(NamedTuple):
    """One real question with its provenance."""

    dataset: str
    split: str
    source_file: str
    source_id: str | None
    row_number: int
    question: str
    answers: list[str]


class SeedResolution(NamedTuple):
    """Triples for resolved seeds, review rows, rejection counts, and what was read per file."""

    triples: list[QATriple]
    review: list[dict[str, Any]]
    rejected: dict[str, int]
    read: list[dict[str, Any]]


def _norm(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).replace("_", " ").replace("\u2019", "'").replace("\u2018", "'")
    return normalize_answer(text)


_PAREN = re.compile(r"\s*\([^()]*\)\s*$")
_CAPITAL = re.compile(r"(?<![\w'])[A-Z0-9][\w'-]*")


def read_seed_questions(data_root: str | Path, sources: Sequence[tuple[str, str, str, str]] = SEED_SOURCES
                        ) -> tuple[list[SeedQuestion], list[dict[str, Any]]]:
    """Every question of the seed lists that exist under ``data_root``, and a record per file (read or why not).

    A missing file is recorded as skipped (the shared data is optional); a file
    that exists but cannot be read is recorded with the reason, never dropped
    silently.
    """
    from aethersearch.sources import read_source

    root = Path(data_root)
    questions: list[SeedQuestion] = []
    read: list[dict[str, Any]] = []
    for dataset, fmt, rel, split in sources:
        path = root / rel
        if not path.is_file():
            read.append({"dataset": dataset, "file": rel, "status": "missing"})
            continue
        try:
            rows = read_source(fmt, path, dataset=dataset, split=split, source_file=rel)
        except (DataError, ImportError) as exc:
            read.append({"dataset": dataset, "file": rel, "status": f"unreadable: {exc}"})
            continue
        for c in rows.candidates:
            questions.append(SeedQuestion(dataset, split, rel, c.source_id, c.source_row_number, c.question,
                                          list(c.answers)))
        read.append({"dataset": dataset, "file": rel, "status": "read", "questions": len(rows.candidates)})
    return questions, read


def _one_page(named: Mapping[str, str | None], key: str, page: str) -> str | None:
    """``page`` if ``key`` names no other page so far, else None (ambiguous, and stays so)."""
    return page if named.get(key, page) == page else None


class TitleIndex:
    """Normalised page titles -> page id, with unique parenthetical-free short forms for answers.

    ``aliases`` (page id -> other names: a dump's redirect titles, "ANOVA" for "Analysis of variance") name
    their page too, for answers and subjects alike: a redirect is the wiki's own statement that the name
    means that page. A page's title wins over another page's alias of the same form; an alias that two
    pages share names neither (it is ambiguous).
    """

    def __init__(self, pages: Iterable[Document], aliases: Mapping[str, Sequence[str]] | None = None) -> None:
        self._index(((doc.id, doc.title) for doc in pages), aliases)

    @classmethod
    def from_titles(cls, titles: Mapping[str, str], aliases: Mapping[str, Sequence[str]] | None = None
                    ) -> TitleIndex:
        """The index of pages given as id -> title (no page text read: a page store's titles suffice)."""
        index = cls.__new__(cls)
        index._index(titles.items(), aliases)
        return index

    def _index(self, pages: Iterable[tuple[str, str]], aliases: Mapping[str, Sequence[str]] | None) -> None:
        # a name's one page, or None once a second page has it: a set per name cost about 550 bytes an
        # article on a dump (1.6 redirect titles an article), the largest part of construction's peak
        self.full: dict[str, str] = {}
        short: dict[str, str | None] = {}
        ids: set[str] = set()
        for page, title in pages:
            ids.add(page)
            key = _norm(title)
            if key:
                self.full.setdefault(key, page)
            base = _norm(_PAREN.sub("", title))
            if base and base != key:
                short[base] = _one_page(short, base, page)
        named: dict[str, str | None] = {}
        for page, names in (aliases or {}).items():
            if page not in ids:
                continue
            for name in names:
                key = _norm(name)
                if key and key not in self.full:
                    named[key] = _one_page(named, key, page)
        self.full.update({key: page for key, page in named.items() if page is not None})
        self.short = {k: page for k, page in short.items() if page is not None and k not in self.full}

    def answer_page(self, answers: Sequence[str]) -> tuple[str, str, str] | None:
        """``(page id, the gold answer matched, "title"|"short_title")`` or None."""
        for kind, table in (("title", self.full), ("short_title", self.short)):
            for answer in answers:
                page = table.get(_norm(answer))
                if page is not None:
                    return page, answer, kind
        return None

    def subject_page(self, question: str, exclude: str, linked: frozenset[str] = frozenset()
                     ) -> tuple[str, str] | None:
        """``(page id, the span as written)`` of the question's subject (see the module rule), or None."""
        words = [(m.group(0), m.start(), m.end()) for m in re.finditer(r"\S+", question)]
        normed = [_norm(w) for w, _, _ in words]
        capital = [bool(_CAPITAL.match(w.lstrip("\"'(“‘"))) for w, _, _ in words]
        found: list[tuple[bool, int, int, str, str]] = []
        for i in range(len(words)):
            if not normed[i]:
                continue
            for n in range(min(MAX_TITLE_TOKENS, len(words) - i), 0, -1):
                key = " ".join(t for t in normed[i:i + n] if t)
                page = self.full.get(key)
                if page is None or page == exclude:
                    continue
                span = question[words[i][1]:words[i + n - 1][2]]
                if not any(capital[i:i + n]) or (n == 1 and key in _QUESTION_WORDS):
                    continue
                # a proper-noun mention is a whole capitalised run: "Park" inside "Candlestick Park" is not one
                inside_run = (i > 0 and capital[i - 1] and not words[i - 1][0].endswith((",", ";", ":"))) or (
                    i + n < len(words) and capital[i + n] and not words[i + n - 1][0].endswith((",", ";", ":")))
                if inside_run or (n == 1 and i > 0 and normed[i - 1] in _DETERMINERS):
                    continue
                found.append((page in linked, len(key.split()), -i, page, span.strip(" ?.,;:!\"'()")))
                break
        if not found:
            return None
        best = max(found)
        return best[3], best[4]


_DETERMINERS = frozenset({"", "which", "what", "this", "that", "these", "those", "whose", "each", "every", "any"})
_QUESTION_WORDS = frozenset({"who", "what", "which", "where", "when", "how", "why", "whose", "whom", "in", "the",
                             "name", "on", "this", "a", "an", "is", "was", "are", "did", "does", "do"})


def resolve_seeds(questions: Sequence[SeedQuestion], pages: Mapping[str, Document],
                  aliases: Mapping[str, Sequence[str]] | None = None) -> SeedResolution:
    """Resolve each seed question to ``(v0, vn)`` by :data:`MATCH_RULE`; count every rejection by reason.

    ``aliases`` (page id -> redirect titles) are matched as page names (see :class:`TitleIndex`).
    """
    from aethersearch.corpus.page_texts import page_titles

    index = TitleIndex.from_titles(page_titles(pages), aliases)
    answer_pages = [index.answer_page(q.answers) for q in questions]
    # pages linking to an answer page, in one streamed pass (only answer pages' in-links are kept)
    wanted = {found[0] for found in answer_pages if found is not None}
    inbound: dict[str, set[str]] = {}
    for doc in pages.values():
        for link in doc.links:
            if link in wanted:
                inbound.setdefault(link, set()).add(doc.id)
    linking = {page: frozenset(sources) for page, sources in inbound.items()}
    rejected: Counter[str] = Counter()
    triples: list[QATriple] = []
    review: list[dict[str, Any]] = []
    for q, found in zip(questions, answer_pages, strict=True):
        if found is None:
            rejected["answer_not_a_page"] += 1
            continue
        answer_page, matched_answer, answer_rule = found
        # pages that link to the answer are preferred: the seed pair needs the direct link v0 -> vn
        subject = index.subject_page(q.question, exclude=answer_page, linked=linking.get(answer_page, frozenset()))
        if subject is None:
            rejected["no_subject_page"] += 1
            continue
        subject_page, span = subject
        tid = f"{q.dataset}:{q.split}:{q.source_id if q.source_id is not None else q.row_number}"
        answers = list(dict.fromkeys([*q.answers, pages[answer_page].title]))
        triples.append(QATriple(
            id=tid, question=q.question, answers=answers, subject=subject_page, answer_page=answer_page,
            relation=f"seed:{q.dataset}", source_dataset=q.dataset, source_split=q.split, source_id=q.source_id,
            source_row_number=q.row_number, source_file=q.source_file))
        review.append({"triple_id": tid, "dataset": q.dataset, "question": q.question, "answers": q.answers,
                       "subject_page": subject_page, "subject_span": span, "answer_page": answer_page,
                       "answer_matched": matched_answer, "answer_rule": answer_rule})
    return SeedResolution(triples, review, dict(sorted(rejected.items())), [])
