"""``lexical-browse``: a no-LLM reader that browses the masked sandbox (the demo's baseline).

Why a browsing baseline of its own: the masked sandbox locks every chain page
until its predecessor has been *visited*, so a search-only agent (the ``lexical``
baseline) can never get past the first hop. :class:`LexicalBrowseAgent`
searches the question's subject, visits it, follows the links of
*relation-consistent* sentences (a small hand-written reading grammar, see the
class docstring) and answers with the span of the sentence that states the
answer; otherwise it abstains.

Honest by construction: it reads only what the tools served (search snippets,
visited pages), never the release, and it never opens a page for the sake of
the evidence count -- once a served sentence states the answer it answers. So
its factorised metrics measure its reading: an abstention after it was served
the whole chain is a bad refusal, a wrong link followed is a wrong answer with
or without the evidence.
"""

from __future__ import annotations

import heapq
import re
from typing import Any, ClassVar, NamedTuple

from aethersearch.agents.base import Agent, AgentOutput, Episode, finish
from aethersearch.agents.lexical import answer_type, candidates, content_terms
from aethersearch.errors import ConfigError
from aethersearch.records import Document

__all__ = ["ANSWER", "LexicalBrowseAgent", "Statement", "question_intent", "read_statements"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[A-Za-z0-9]+")


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


# ----------------------------------------------------------------------------- the reading grammar

#: How a sentence states ``relation(page, object)``: the object is a link mentioned inside group ``o``.
#: Phrasings are those of encyclopedic prose ("X lies in Y", "The father of X was Y", "X married Y").
_READ: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("located_in", ((r"\b(?:is a city in|lies in|is located in|stands in|is a region of|is a district of|"
                     r"is a landmark in|is a town in|is part of)\b(?P<o>.*)"),)),
    ("based_in_country", (r"\b(?:is registered in|is an organisation based in)\b(?P<o>.*)",)),
    ("headquartered_in", (r"\b(?:is based in|has its headquarters in)\b(?P<o>.*)",
                          r"\bthe seat of .+? is in\b(?P<o>.*)")),
    ("inverse:headquartered_in", (r"\bis home to\b(?P<o>.*)",)),
    ("father", (r"^the father of .+? was\b(?P<o>.*)", r"^.+?'s father was\b(?P<o>.*)",
                r"^(?P<o>.+?) was the father of\b")),
    ("mother", (r"^the mother of .+? was\b(?P<o>.*)", r"^.+?'s mother was\b(?P<o>.*)",
                r"^(?P<o>.+?) was the mother of\b")),
    ("stepmother", (r"^the stepmother of .+? was\b(?P<o>.*)", r"^.+?'s stepmother was\b(?P<o>.*)")),
    ("spouse", (r"\bmarried\b(?P<o>.*)",)),
    ("sibling", (r"\bgrew up with a sibling\b(?P<o>.*)", r"\bwas a sibling of\b(?P<o>.*)",
                 r"^.+?'s sibling was\b(?P<o>.*)", r"^the siblings of .+? were\b(?P<o>.*)")),
)
_READ_COMPILED = tuple((rel, tuple(re.compile(p, re.IGNORECASE) for p in pats)) for rel, pats in _READ)

ANSWER = "answer"
#: What a question asks (first matching pattern wins) ...
_INTENTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("country", re.compile(r"\bwhich country\b", re.IGNORECASE)),
    ("father", re.compile(r"\bfather\b", re.IGNORECASE)),
    ("mother", re.compile(r"\bmother\b", re.IGNORECASE)),
)
_INTENT_WORDS = frozenset({"country", "father", "mother", "based", "located", "stand"})
#: ... and, per intent, the reading plan: in each state (the visited page's role relative to the
#: subject), which relations to follow, best first, and into which state; ANSWER = the object is the
#: answer. "self" covers the subject and its siblings (who share its parents); a stepmother is the
#: father's wife. Country questions climb containment ("place") until a page says it is a country.
_PLANS: dict[str, dict[str, tuple[tuple[str, str], ...]]] = {
    "country": {"place": (("located_in", "place"), ("based_in_country", "place"), ("headquartered_in", "place"),
                          ("inverse:headquartered_in", "place"))},
    "father": {"self": (("father", ANSWER), ("sibling", "self"), ("stepmother", "stepmother")),
               "stepmother": (("spouse", ANSWER),)},
    "mother": {"self": (("mother", ANSWER), ("sibling", "self"))},
}
_START = {"country": "place", "father": "self", "mother": "self"}
#: Intents whose answer is the page reached, once that page describes itself as the asked type.
_SELF_TYPED = {"country": "country"}


class Statement(NamedTuple):
    """``relation(page, link)`` read from one sentence; ``span`` is the link's mention as written."""

    relation: str
    link: str
    span: str
    sentence: str


def _link_pattern(link: str) -> re.Pattern[str]:
    parts = [re.escape(p) for p in re.split(r"[_\W]+", link) if p]
    return re.compile(r"(?<![A-Za-z0-9])" + r"[\W_]+".join(parts) + r"(?![A-Za-z0-9])", re.IGNORECASE)


def read_statements(page: Document) -> list[Statement]:
    """Every typed statement the reading grammar finds on ``page`` (as served), in text order.

    A sentence counts only if it names the page's own title outside the object
    part (it is about this page), and its object must be a link of the page.
    """
    title = re.compile(rf"(?<!\w){re.escape(page.title)}(?!\w)", re.IGNORECASE)
    links = [(link, _link_pattern(link)) for link in page.links if re.split(r"[_\W]+", link)]
    found: list[Statement] = []
    for sentence in _SENTENCE.split(page.text):
        sentence = sentence.strip()
        for relation, patterns in _READ_COMPILED:
            for pattern in patterns:
                match = pattern.search(sentence)
                if match is None:
                    continue
                lo, hi = match.span("o")
                if not title.search(sentence[:lo] + " " + sentence[hi:]):
                    continue
                hits = sorted((m.start(), link, m.group(0)) for link, lp in links
                              for m in lp.finditer(sentence, lo, hi))
                found.extend(Statement(relation, link, span, sentence) for _, link, span in hits)
                break
    return found


def question_intent(question: str) -> str | None:
    """``country``, ``father``, ``mother`` or None (a question the reading grammar does not cover)."""
    for intent, pattern in _INTENTS:
        if pattern.search(question):
            return intent
    return None


class LexicalBrowseAgent(Agent):
    """No-LLM sandbox baseline: search the subject, follow relation-consistent links, read the answer.

    1. **Intent** from the question's wording (:func:`question_intent`):
       which country / father / mother; anything else falls back to generic
       link-following (below).
    2. **Search** the question's content words (intent words dropped) and
       visit the result whose title shares most words with the question.
    3. **Follow** typed statements (:func:`read_statements`: "X lies in Y",
       "X grew up with a sibling, Y", "The stepmother of X was Y", "X married
       Y", ...) according to the intent's plan, best-first by (relation rank,
       depth): country questions climb containment (located in / registered
       in / based in, then "home to" as a witness); father questions read a
       father sentence on the subject or a sibling, or go sibling ->
       stepmother -> her husband.
    4. **Answer** with the object span of the answering statement, after
       opening the answer's page (the evidence chain ends there); for country
       questions, the span of the link to a visited page that says "... is a
       country". **Abstain** ("I don't know") when the plan runs out or
       ``max_visits`` is reached.

    Coverage is the grammar's: a chain sentence phrased otherwise ("T belongs
    to the R region", "X and Y were raised together") is not followed, so
    longer chains fail more often; that, not a tuned score, is what the
    demo's factorised metrics measure for this baseline.

    It sees only what the sandbox tools return (search hits, served pages);
    never the release, its paths or its gold. Generic fallback for other
    questions: follow the links whose sentences share most words with the
    question and extract with the ``lexical`` baseline's proximity scorer,
    abstaining below ``min_score``.
    """

    name: ClassVar[str] = "lexical-browse"
    needs_llm: ClassVar[bool] = False
    can_sample: ClassVar[bool] = False  # every choice is deterministic: K samples are K copies
    environment: ClassVar[str] = "sandbox"

    def __init__(self, topk: int = 5, max_visits: int = 8, min_score: float = 0.3) -> None:
        if topk < 1 or max_visits < 1:
            raise ConfigError("lexical-browse needs topk >= 1 and max_visits >= 1",
                              fix="pass positive values")
        self.topk = topk
        self.max_visits = max_visits
        self.min_score = min_score

    def config(self) -> dict[str, Any]:
        """Documents per search, visit limit and the abstention threshold."""
        return {"topk": self.topk, "max_visits": self.max_visits, "min_score": self.min_score}

    @staticmethod
    def _link_scores(page: Document, terms: set[str]) -> list[tuple[int, str]]:
        sentences = [_words(s) for s in _SENTENCE.split(page.text)]
        scored = []
        for link in page.links:
            target = _words(link.replace("_", " ").replace("-", " "))
            best = max((len(terms & s) for s in sentences if target and target <= s), default=-1)
            scored.append((best, link))
        return sorted(scored, key=lambda item: (-item[0], page.links.index(item[1])))

    async def _visit(self, episode: Episode, page: str, **notes: Any) -> Document | None:
        opened = await episode.env.visit(page)
        episode.add_step(tool_calls=[opened.call], notes={"action": "visit", "page": page, **notes})
        if opened.call.error is not None or not opened.documents:
            return None
        doc = opened.documents[0]
        episode.state.setdefault("visited", []).append(doc)
        return doc

    async def solve(self, episode: Episode) -> AgentOutput:
        """Search once, then follow the intent's plan (or generic links); answer or abstain."""
        question = episode.question_seen
        intent = question_intent(question)
        terms = [t for t in content_terms(question) if intent is None or t not in _INTENT_WORDS]
        terms = [re.sub(r"['’]s$", "", t) for t in terms]
        result = await episode.env.search(" ".join(terms) or question, self.topk)
        episode.add_step(tool_calls=[result.call], notes={"action": "search", "intent": intent})
        episode.state["visited"] = []
        ranked = [doc.id for doc in sorted(result.documents, key=lambda d: -len(_words(d.title) & _words(question)))]
        if intent is None:
            await self._browse_generic(episode, ranked, set(terms))
            return self._decide(episode)
        if not ranked:
            return finish("I don't know", "I don't know", "abstain")
        answer = await self._follow_plan(episode, intent, ranked[0])
        if answer is None:  # the plan ran out: a best guess from the pages it read, else abstain
            return self._decide(episode)
        return finish(answer, answer, "answer")

    async def _follow_plan(self, episode: Episode, intent: str, start: str) -> str | None:
        plan, typed = _PLANS[intent], _SELF_TYPED.get(intent)
        frontier: list[tuple[int, int, int, str, str, str, str]] = [(0, 0, 0, start, _START[intent], "", "")]
        seen: set[str] = set()
        order = 0
        visits = 0
        while frontier and visits < self.max_visits:
            _rank, depth, _seq, page, state, via, span = heapq.heappop(frontier)
            if page in seen:
                continue
            seen.add(page)
            visits += 1
            doc = await self._visit(episode, page, state=state, via=via or None)
            if doc is None:
                continue
            if typed is not None and depth > 0 and re.match(
                    rf"{re.escape(doc.title)} is an? {typed}\b", doc.text, re.IGNORECASE):
                episode.state["answer_sentence"] = doc.text.split(".")[0]
                return span or doc.title
            steps = plan.get(state, ())
            for statement in read_statements(doc):
                for rank, (relation, target) in enumerate(steps):
                    if statement.relation != relation:
                        continue
                    if target == ANSWER:  # the served sentence states the answer: answer from it
                        episode.state["answer_sentence"] = statement.sentence
                        return statement.span
                    if statement.link not in seen:
                        order += 1
                        heapq.heappush(frontier, (rank, depth + 1, order, statement.link, target, relation,
                                                  statement.span))
        return None

    async def _browse_generic(self, episode: Episode, ranked: list[str], terms: set[str]) -> None:
        frontier = list(ranked)
        seen: set[str] = set()
        while frontier and len(episode.state["visited"]) < self.max_visits:
            page = frontier.pop(0)
            if page in seen:
                continue
            seen.add(page)
            doc = await self._visit(episode, page)
            if doc is None:
                continue
            links = [link for score, link in self._link_scores(doc, terms) if score > 0 and link not in seen]
            frontier = links + [p for p in frontier if p not in links]

    def _decide(self, episode: Episode) -> AgentOutput:
        question = episode.question_seen
        visited: list[Document] = episode.state.get("visited", [])
        subject = visited[0].title if visited else None
        found = [c for c in candidates(question, list(reversed(visited)), answer_type(question))
                 if c.text != subject]
        if not found or found[0].score < self.min_score:
            return finish("I don't know", "I don't know", "abstain")
        return finish(found[0].text, found[0].text, "answer")

    async def final_answer(self, episode: Episode) -> AgentOutput:
        """Out of budget: answer from the pages already visited (generic scorer) or abstain."""
        if question_intent(episode.question_seen) is not None:
            return finish("I don't know", "I don't know", "budget")
        return self._decide(episode)._replace(stop_reason="budget")


