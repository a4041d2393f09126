"""``lexical``: a no-LLM baseline that really searches and extracts a span — named as a baseline.

Why it exists: it is the embedded default agent, so ``aether eval`` (and ``make
demo``) runs end to end with no model server, and it gives every benchmark a
floor that involves no parametric knowledge at all.

How it answers (classic IR-QA, no learning):

1. **Search** the question's content words (BM25 through the episode's ``search`` tool).
2. **Candidates**: in each retrieved sentence, maximal runs of capitalised words,
   numbers/years, and (for "what did … do"-style questions) single lower-case
   content words — never spans made only of question words.
3. **Score** each candidate occurrence by question-term proximity (Σ over question
   terms present in its sentence of 1 / (1 + token distance)), times a rank
   discount of its document and an answer-type prior from the wh-word (years for
   "when"/"what year", numbers for "how many", names for "who"/"where"/"which");
   candidates vote across occurrences.
4. **Reformulate** (iterative BM25): when the question nests an entity ("the author
   of X", "the organisation that X worked for") and the best *bridge* candidate (a
   name sharing no word with the question) sits in a sentence that leaves question
   words uncovered, the next query — and the sub-question the next round answers —
   is that name plus the uncovered words; this follows one hop of a multi-hop
   question. Up to ``rounds`` searches, all charged to the budget.
5. **Abstain** ("I don't know") when no candidate reaches ``min_score``.

**Sampling** (``--samples K --temperature T``): at a temperature above 0 the two
choices (the bridge entity to follow, the answer to give) are drawn among the
candidates that qualify, with probability proportional to ``score ** (1 / T)``
(T → 0 is the greedy choice, T = 1 follows the candidates' votes), from a random
generator seeded by the sample's own seed (``rollout.samples``): K samples of a
question differ, and a resumed or rerun sample makes the same choices. This is
what lets the demo show pass@k, maj@k and a noise floor with no model at all.
At temperature 0 the agent is exactly the greedy baseline.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, NamedTuple

from aethersearch.agents.base import Agent, AgentOutput, Episode, finish
from aethersearch.records import Document

__all__ = ["Candidate", "LexicalAgent", "SAMPLED_CHOICES", "STOPWORDS", "WH_WORDS", "answer_type", "candidates",
    "choose", "content_terms"]

STOPWORDS = frozenset("""a an the of in on at to for from by with and or is was were are be been being
as that this these those which who whom whose what when where why how did do does done it its into
than then there their they he she his her him them name named also has have had not no yes one
year years city country institution""".split())
WH_WORDS = frozenset("who whom whose what when where which how".split())
_WORD = re.compile(r"[A-Za-z0-9][\w'’\-]*")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_YEAR = re.compile(r"^(1\d{3}|20\d{2})$")
_NUMBER = re.compile(r"^\d+([.,]\d+)?$")
_CONNECTORS = frozenset({"of", "the", "de", "von", "van"})
#: "the author of X", "the organisation that X worked for": a question with a bridge entity.
_NESTED = re.compile(r"\bthe \w+ (of|that|who|which|whose)\b", re.IGNORECASE)
_TOKEN = re.compile(r"[A-Za-z0-9][\w'’\-]*|[^\w\s]")


class Candidate(NamedTuple):
    """An answer span found in a sentence, with the question terms the sentence covered."""

    text: str
    score: float
    covered: frozenset[str]


def content_terms(text: str) -> list[str]:
    """Lower-cased content words of ``text`` (stopwords and wh-words removed), in order."""
    return [w.lower() for w in _WORD.findall(text) if w.lower() not in STOPWORDS]


def answer_type(question: str) -> str:
    """A coarse expected answer type from the wh-phrase: year, number, name or any."""
    q = question.lower()
    if re.search(r"\b(what|which) year\b|\bwhen\b|\bin what year\b", q):
        return "year"
    if re.search(r"\bhow (many|much|old|long)\b", q):
        return "number"
    if re.search(r"\bwhat did .* do\b|\b(occupation|profession|job)\b", q):
        return "word"
    if re.search(r"\b(who|whom|whose|where|which)\b", q):
        return "name"
    return "any"


def _is_word(token: str) -> bool:
    return token[:1].isalnum()


def _spans(tokens: list[str]) -> list[tuple[int, int]]:
    """Candidate token spans: capitalised runs (with inner connectors), numbers, single words.

    Punctuation tokens end a run and are never candidates, so a comma-separated list of
    names gives one candidate per name.
    """
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not _is_word(token):
            i += 1
            continue
        if token[:1].isupper():
            j = i + 1
            while j < len(tokens) and _is_word(tokens[j]) and (tokens[j][:1].isupper() or (
                    tokens[j].lower() in _CONNECTORS and j + 1 < len(tokens) and tokens[j + 1][:1].isupper())):
                j += 1
            spans.append((i, j))
            i = j
            continue
        spans.append((i, i + 1))
        i += 1
    return spans


def _type_prior(span: str, kind: str) -> float:
    first = span.split()[0]
    is_year, is_number, is_name = bool(_YEAR.match(span)), bool(_NUMBER.match(span)), first[:1].isupper()
    if kind == "year":
        return 1.0 if is_year else 0.05
    if kind == "number":
        return 1.0 if is_number else 0.05
    if kind == "name":
        return 1.0 if is_name and not is_number else 0.05
    if kind == "word":
        return 1.0 if span.islower() and span.lower() not in STOPWORDS else 0.1
    return 1.0 if (is_name or is_number) else 0.3


def candidates(question: str, documents: list[Document], kind: str) -> list[Candidate]:
    """Score every candidate span in ``documents`` by proximity to question terms (votes summed).

    A span made only of question words is skipped; one that shares a content word with
    the question ("Zorul Observatory" for a question about "Balriri Observatory") is
    down-weighted, since an answer rarely repeats the question.
    """
    q_terms = set(content_terms(question))
    q_lower = {w.lower() for w in _WORD.findall(question)}
    scores: dict[str, float] = defaultdict(float)
    covered: dict[str, frozenset[str]] = {}
    surface: dict[str, str] = {}
    for rank, doc in enumerate(documents):
        discount = 1.0 / (1.0 + 0.5 * rank)
        for sentence in _SENTENCE.split(f"{doc.title}. {doc.text}"):
            tokens = _TOKEN.findall(sentence)
            lowered = [t.lower() for t in tokens]
            positions = defaultdict(list)
            for index, token in enumerate(lowered):
                if token in q_terms:
                    positions[token].append(index)
            if not positions:
                continue
            hit = frozenset(positions)
            for start, end in _spans(tokens):
                words = [w for w in lowered[start:end] if _is_word(w)]
                if all(w in q_lower or w in STOPWORDS for w in words):
                    continue
                text = " ".join(tokens[start:end])
                prior = _type_prior(text, kind)
                if any(w in q_terms for w in words):
                    prior *= 0.2
                proximity = sum(1.0 / (1.0 + min(min(abs(p - start), abs(p - (end - 1))) for p in pos))
                                for pos in positions.values())
                key = text.lower()
                scores[key] += discount * prior * proximity
                surface.setdefault(key, text)
                if len(hit) > len(covered.get(key, frozenset())):
                    covered[key] = hit
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    return [Candidate(surface[k], s, covered[k]) for k, s in ranked]


#: how many of the best candidates a sampled choice draws among
SAMPLED_CHOICES = 5


def choose(ranked: Sequence[Candidate], temperature: float, seed: int | None, purpose: str) -> Candidate:
    """The best of ``ranked`` at temperature 0, else a draw weighted by ``score ** (1 / temperature)``.

    The generator is seeded by the sample's seed and the choice's ``purpose`` alone, so the draw does
    not depend on how many draws came before it (a resumed sample draws the same). With no seed the
    draw is unreproducible, as a model server's own sampling is.
    """
    if temperature <= 0 or len(ranked) == 1:
        return ranked[0]
    pool = list(ranked[:SAMPLED_CHOICES])
    rng = random.Random(f"{seed}/{purpose}") if seed is not None else random.Random()
    weights = [max(c.score, 1e-9) ** (1.0 / temperature) for c in pool]
    return rng.choices(pool, weights=weights, k=1)[0]


def _shares_words(text: str, terms: list[str]) -> bool:
    """True if ``text`` contains one of the question's content words (an answer rarely does)."""
    return bool({w.lower() for w in _WORD.findall(text)} & set(terms))


class LexicalAgent(Agent):
    """No-LLM baseline: iterative BM25 query reformulation plus proximity-scored span extraction."""

    name = "lexical"
    needs_llm = False

    def __init__(self, topk: int = 5, rounds: int = 2, min_score: float = 0.3) -> None:
        self.topk = topk
        self.rounds = rounds
        self.min_score = min_score

    def config(self) -> dict[str, Any]:
        """Documents per search, search rounds and the abstention threshold."""
        return {"topk": self.topk, "rounds": self.rounds, "min_score": self.min_score}

    async def solve(self, episode: Episode) -> AgentOutput:
        """Search, extract, follow one bridge entity per round; answer the best candidate or abstain."""
        question = episode.question_seen
        kind = answer_type(question)
        terms = content_terms(question)
        focus = question  # the (sub-)question the current round answers
        query = " ".join(terms) or question
        for round_number in range(self.rounds):
            result = await episode.env.search(query, self.topk)
            episode.state.update(focus=focus, documents=list(result.documents))
            found = candidates(focus, result.documents, kind)
            episode.add_step(tool_calls=[result.call], notes={
                "round": round_number, "query": query,
                "top_candidates": [[c.text, round(c.score, 4)] for c in found[:3]]})
            if round_number + 1 >= self.rounds or not _NESTED.search(question):
                break
            bridges = [c for c in found if c.text[:1].isupper() and c.covered and not _shares_words(c.text, terms)]
            if not bridges:
                break
            bridge = choose(bridges, episode.decoding.temperature, episode.decoding.seed, f"bridge{round_number}")
            missing = [t for t in terms if t not in bridge.covered]
            if not missing:
                break  # the best sentence already covers the whole question: a single hop
            focus = query = " ".join([bridge.text, *missing])
        return self._decide(episode)

    def _decide(self, episode: Episode) -> AgentOutput:
        question = episode.question_seen
        focus = episode.state.get("focus", question)
        found = candidates(focus, episode.state.get("documents", []), answer_type(question))
        focus_terms = content_terms(focus)
        found = [c for c in found if not _shares_words(c.text, focus_terms)] or found
        if not found or found[0].score < self.min_score:
            return finish("I don't know", "I don't know", "abstain")
        qualified = [c for c in found if c.score >= self.min_score]
        best = choose(qualified, episode.decoding.temperature, episode.decoding.seed, "answer").text
        return finish(best, best, "answer")

    async def final_answer(self, episode: Episode) -> AgentOutput:
        """Out of searches: answer from what was already retrieved (no further tool call)."""
        return self._decide(episode)._replace(stop_reason="budget")
