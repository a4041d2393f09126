"""Top-level diagnostics orchestration: the sandbox demo and the environments probes rerun in.

``run_sandbox_demo(out_dir)`` is what ``aether eval`` (``make demo``) calls to add
a sandbox evaluation on the embedded demo world: it builds the demo hint-free
sandbox release, runs a no-LLM browsing baseline in the masked sandbox through
the ordinary runner, scores the run, computes the factorised metrics and both
probes, and writes ``scores.json``, ``factorised.json`` and ``probes.json`` into
the run directory. Everything is seeded; it takes a few seconds.

Why a browsing baseline of its own: the masked sandbox locks every chain page
until its predecessor has been *visited*, so a search-only agent (the ``lexical``
baseline) can never get past the first hop, and WebDetective counts evidence as
gathered only when its page was visited. :class:`LexicalBrowseAgent` searches
the question, visits the best-matching page and then follows the links whose
anchor sentences share most words with the question, and finally extracts an
answer span with the ``lexical`` baseline's proximity scorer (no model at all).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from aethersearch.agents.base import Agent, AgentOutput, Episode, finish
from aethersearch.agents.lexical import answer_type, candidates, content_terms
from aethersearch.environment import Environment
from aethersearch.errors import ConfigError
from aethersearch.records import Budget, Document, RolloutQuestion

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[A-Za-z0-9]+")


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


class LexicalBrowseAgent(Agent):
    """No-LLM sandbox baseline: search, visit the subject page, follow question-matching links, extract.

    Link choice: for each link of a visited page, the score is the largest number
    of question content words in a sentence of that page mentioning the link's
    target (its id's words), so "X was born in Y" is followed for "where was X
    born". Up to ``max_visits`` visits, all charged to the runner's budget.
    """

    name: ClassVar[str] = "lexical-browse"
    needs_llm: ClassVar[bool] = False
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

    async def solve(self, episode: Episode) -> AgentOutput:
        """Search once, then visit pages along the best-matching links; answer or abstain."""
        question = episode.question_seen
        terms = set(content_terms(question))
        result = await episode.env.search(" ".join(sorted(terms, key=question.lower().find)) or question,
                                          self.topk)
        episode.add_step(tool_calls=[result.call], notes={"action": "search"})
        visited: list[Document] = []
        episode.state["visited"] = visited
        frontier = [doc.id for doc in sorted(result.documents,
                                             key=lambda d: -len(_words(d.title) & _words(question)))]
        seen: set[str] = set()
        while frontier and len(visited) < self.max_visits:
            page = frontier.pop(0)
            if page in seen:
                continue
            seen.add(page)
            opened = await episode.env.visit(page)
            episode.add_step(tool_calls=[opened.call], notes={"action": "visit", "page": page})
            if opened.call.error is not None or not opened.documents:
                continue
            doc = opened.documents[0]
            visited.append(doc)
            links = [link for score, link in self._link_scores(doc, terms) if score > 0 and link not in seen]
            frontier = links + [p for p in frontier if p not in links]
        return self._decide(episode)

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
        """Out of budget: answer from the pages already visited."""
        return self._decide(episode)._replace(stop_reason="budget")


def agent_for(run_dir: Path) -> Agent:
    """The agent a run used, rebuilt from its run.json (the registry's agents plus this module's baseline)."""
    from aethersearch.agents.base import make_agent
    from aethersearch.scoring.probes import load_fingerprint

    fingerprint = load_fingerprint(run_dir)
    if fingerprint.agent == LexicalBrowseAgent.name:
        return LexicalBrowseAgent(**fingerprint.agent_config)
    return make_agent(fingerprint.agent, **fingerprint.agent_config)


def environment_factory_for(run_dir: Path, release_dir: Path, store: Any,
                            index_dir: Path | None) -> Callable[[RolloutQuestion], Environment]:
    """The clean environment a run used, rebuilt from its run.json (for probes that rerun it).

    ``sandbox`` runs reopen the masked sandbox of the release over the index;
    ``search`` runs an in-process index environment.
    """
    from aethersearch.scoring.probes import load_fingerprint
    from aethersearch.search.environment import IndexEnvironment
    from aethersearch.search.index_dir import open_index

    fingerprint = load_fingerprint(run_dir)
    if fingerprint.environment == "none":
        from aethersearch.rollout.runner import NoEnvironment

        return lambda _q: NoEnvironment()
    if index_dir is None:
        raise ConfigError(f"rerunning a {fingerprint.environment!r} run needs its search index",
                          fix="pass --index DIR (the index the run searched)")
    index = open_index(index_dir, store).index
    if fingerprint.environment == "sandbox":
        from aethersearch.sandbox.episode import open_sandbox

        sandbox = open_sandbox(release_dir, index, store)
        return lambda q: sandbox.episode(q.id, run_id="lead-astray")
    return lambda _q: IndexEnvironment(index, store)


DEMO_BUDGET = Budget(max_tool_calls=10, max_turns=None)


def run_sandbox_demo(out_dir: Path, *, seed: int = 0, ratio: float = 0.5, concurrency: int = 8) -> dict[str, Any]:
    """Sandbox evaluation on the demo world: release, no-LLM browse run, scores, factorised metrics, probes.

    Writes under ``out_dir``: ``sandbox_release/`` (the hint-free release),
    ``sandbox_corpus/`` and ``sandbox_index/`` (store and BM25 index of the demo
    world), and ``sandbox_run/`` (run.json, traces.jsonl, scores.json,
    factorised.json, probes.json). Returns a summary for the caller to print
    and to include in its own report. Rerunning resumes (finished questions are
    not redone); the release, corpus and index are rebuilt deterministically.
    """
    from aethersearch.construct.hintfree import build_demo_sandbox_release
    from aethersearch.corpus.importers import import_corpus
    from aethersearch.rollout.fingerprint import build_fingerprint, load_rollout_questions, release_info
    from aethersearch.rollout.runner import run_questions
    from aethersearch.sandbox.episode import open_sandbox
    from aethersearch.scoring.api import score_run
    from aethersearch.scoring.probes import factorise_run, forget_probe, lead_astray_probe
    from aethersearch.search.index_dir import build_index

    out = Path(out_dir)
    release_dir = build_demo_sandbox_release(out / "sandbox_release", seed=seed)
    store = import_corpus("demo", "demo", out / "sandbox_corpus", seed=seed, overwrite=True).store
    # 752 pages: plain numpy scoring beats paying numba's JIT compile on every demo run
    opened = build_index(store, "bm25", out / "sandbox_index", config={"numba": False}, overwrite=True)
    sandbox = open_sandbox(release_dir, opened.index, store)
    questions = load_rollout_questions(release_dir / "rollout_questions.jsonl")
    agent = LexicalBrowseAgent()
    fingerprint = build_fingerprint(release_info(release_dir), question_count=len(questions), agent=agent,
                                    budget=DEMO_BUDGET, decoding=_no_decoding(), endpoint=None, model=None,
                                    corpus_hash=store.content_hash, index_hash=opened.index.index_hash,
                                    environment="sandbox", retrieval_topk=agent.topk)
    run_dir = out / "sandbox_run"
    summary = run_questions(questions, agent, lambda q: sandbox.episode(q.id, run_id="demo"), DEMO_BUDGET,
                            run_dir, fingerprint, concurrency=concurrency)
    scores = score_run(run_dir, release_dir)
    factorised = factorise_run(run_dir, release_dir, store=store)
    forget = forget_probe(run_dir, release_dir, llm=None)
    lead_astray = lead_astray_probe(run_dir, release_dir, store=store, ratio=ratio, seed=seed, agent=agent,
                                    environment_factory=lambda q: sandbox.episode(q.id, run_id="demo-noisy"),
                                    concurrency=concurrency)
    return {
        "run_dir": str(run_dir),
        "release_dir": str(release_dir),
        "agent": agent.name,
        "questions": summary.total,
        "outcomes": summary.outcomes,
        "em": scores["overall"]["micro"]["metrics"]["em"]["mean"],
        "factorised": factorised["overall"],
        "factorised_by_hops": factorised["by_hops"],
        "probes": {"forget": forget, "lead_astray": lead_astray},
    }


def _no_decoding() -> Any:
    from aethersearch.records import Decoding

    return Decoding()
