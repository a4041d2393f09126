"""Adversarial: an agent that only reads responses learns nothing about masked pages.

World A is the masked sandbox. World B is built before every action from A's
state: the pages A still locks *do not exist* in B (gone from the store, the
title map and search results); every other page is served with the same mask
rendering (the withheld sentences are the allowed content difference). For
random sessions of searches and visits (masked titles and ids, nonexistent
names, malformed names), A's agent-facing responses must equal B's byte for
byte, timing fields aside -- in-process and over HTTP. Also: search serves
snippets only, so a chain page's full text is served only by a visit the mask
allows; and every HTTP request of an episode, malformed or not, is logged.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator, Sequence
from typing import Any

from fastapi.testclient import TestClient

from aethersearch.environment import ToolResult
from aethersearch.records import Document, ToolCall
from aethersearch.sandbox.action_log import read_episodes
from aethersearch.sandbox.episode import Sandbox, SandboxEpisode
from aethersearch.sandbox.mask import ChainMask, drop_sentences
from aethersearch.sandbox.server import create_app
from aethersearch.sandbox.serving import SNIPPET_SENTENCES, render_page, search_hit, sentences, snippet
from aethersearch.sandbox.tools import PageResolver
from tests.sandbox.conftest import PAGES, TITLES

TIMING = {"elapsed_s", "started_at"}
QUERIES = ["Graham Cornes", "Kane Cornes father", "Nicole Cornes husband", "Chad Cornes stepmother", "Adelaide",
           "football coach", "Glenelg club players", "media personality", "brother", "Cornes", "married",
           "son of", "zzz nothing"]
NAMES = ([d.id for d in PAGES] + [d.title for d in PAGES] + ["graham cornes", "NICOLE CORNES", "missing_page",
                                                             "Ghost Page", "a/b", "..", "x" * 300])


class _Absent:
    """Store/backend of world B: the pages in ``absent`` do not exist; the rest are served rendered."""

    def __init__(self, sandbox: Sandbox, mask: ChainMask, absent: set[str]) -> None:
        self._store = sandbox.store
        self._backend = sandbox.backend
        self._mask = mask
        self._absent = absent
        self._extra = len(mask.masked)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id not in self._absent and doc_id in self._store

    def get(self, doc_id: str) -> Document:
        if doc_id in self._absent:
            raise LookupError(doc_id)
        return render_page(self._mask, self._store.get(doc_id))

    def __iter__(self) -> Iterator[Document]:
        return (doc for doc in self._store if doc.id not in self._absent)

    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        # same over-fetch as the masked episode, then the absent pages simply are not there
        hits = self._backend.search(list(queries), k + self._extra)
        return [[h for h in row if h[0] not in self._absent][:k] for row in hits]


class _AbsentEpisode(SandboxEpisode):
    """World B's episode: a page that does not exist is named in no search snippet either.

    (A visited page may name it: the paper's rule lets page v(i-1) state v(i); what it
    must not do is announce v(i) through a search snippet before that visit.)
    """

    def __init__(self, view: _Absent, mask: ChainMask, absent: set[str], question_id: str) -> None:
        super().__init__(question_id=question_id, run_id="b", mask=None, backend=view, resolver=PageResolver(view))
        self._absent_patterns = [p for page in absent if (p := mask.pattern_of(page)) is not None]

    def search_sync(self, query: str, k: int = 5) -> ToolResult:
        result = super().search_sync(query, k)
        docs = []
        for doc in result.documents:
            text = self._resolver.store.get(doc.id).text
            for pattern in self._absent_patterns:
                text = drop_sentences(text, pattern)
            docs.append(doc.model_copy(update={"text": snippet(text, query.strip())}))
        return ToolResult(docs, result.call)


def _world_b(sandbox: Sandbox, a: SandboxEpisode) -> SandboxEpisode:
    assert a.mask is not None
    absent = {p for p in a.mask.masked if a.is_locked(p)}
    return _AbsentEpisode(_Absent(sandbox, a.mask, absent), a.mask, absent, a.question_id)


def _call_json(call: ToolCall) -> dict[str, Any]:
    return call.model_dump(mode="json", exclude=TIMING | {"suppressed_ids"})


def _view(documents: list[Document], call: ToolCall) -> str:
    assert call.suppressed_ids == [], "an agent-facing call carries masked ids"
    return json.dumps({"documents": [d.model_dump(mode="json") for d in documents], "call": _call_json(call)},
                      sort_keys=True)


def _actions(rng: random.Random, n: int) -> list[tuple[str, Any, int]]:
    out = []
    for _ in range(n):
        if rng.random() < 0.5:
            out.append(("search", rng.choice(QUERIES + [TITLES[p] for p in TITLES]), rng.randint(1, 6)))
        else:
            out.append(("visit", rng.choice(NAMES), 0))
    return out


def test_masked_pages_are_indistinguishable_from_nonexistent_ones(mini_sandbox: Sandbox) -> None:
    rng = random.Random(13)
    compared = locked_probes = 0
    for session in range(300):
        qid = rng.choice(["q1", "q2"])
        a = mini_sandbox.episode(qid, run_id=f"a{session}")
        for tool, arg, k in _actions(rng, 12):
            b = _world_b(mini_sandbox, a)
            assert a.mask is not None
            locked_probes += tool == "visit" and any(
                a.is_locked(p) and arg in (p, TITLES[p], TITLES[p].lower(), TITLES[p].upper()) for p in a.mask.masked)
            if tool == "search":
                got, want = asyncio.run(a.search(arg, k)), asyncio.run(b.search(arg, k))
            else:
                got, want = asyncio.run(a.visit(arg)), asyncio.run(b.visit(arg))
            assert _view(*got) == _view(*want), (session, tool, arg, a.visited)
            compared += 1
        # the server-side action log still knows what was withheld (for scoring)
        assert len(a.trace) == 12
    assert compared == 3600 and locked_probes > 100


def test_search_serves_snippets_and_full_chain_text_only_by_an_allowed_visit(mini_sandbox: Sandbox) -> None:
    rng = random.Random(5)
    full_by_search = 0
    for session in range(200):
        a = mini_sandbox.episode(rng.choice(["q1", "q2"]), run_id=f"s{session}")
        assert a.mask is not None
        for tool, arg, k in _actions(rng, 10):
            locked_before = {p for p in a.mask.masked if a.is_locked(p)}
            result = asyncio.run(a.search(arg, k) if tool == "search" else a.visit(arg))
            for doc in result.documents:
                full = render_page(a.mask, mini_sandbox.store.get(doc.id))
                if tool == "search":
                    assert doc.links == [] and len(sentences(doc.text)) <= SNIPPET_SENTENCES
                    full_by_search += doc.text == full.text and len(sentences(full.text)) > SNIPPET_SENTENCES
                else:
                    assert doc.id not in locked_before and doc == full
    assert full_by_search == 0


def test_http_responses_match_the_nonexistent_world_and_carry_no_masked_ids(mini_sandbox: Sandbox) -> None:
    rng = random.Random(29)
    app = create_app(mini_sandbox)
    with TestClient(app) as client:
        for session in range(60):
            qid = rng.choice(["q1", "q2"])
            created = client.post("/episodes", json={"question_id": qid, "run_id": f"h{session}"}).json()
            a: SandboxEpisode = app.state.episodes[created["episode_id"]]
            for tool, arg, k in _actions(rng, 10):
                b = _world_b(mini_sandbox, a)
                body = {"query": arg, "k": k} if tool == "search" else {"page": arg}
                response = client.post(f"/episodes/{created['episode_id']}/{tool}", json=body)
                assert "suppressed" not in response.text
                want = asyncio.run(b.search(arg, k) if tool == "search" else b.visit(arg))
                data = response.json()
                call = ToolCall.model_validate(data["call"])
                assert _call_json(call) == _call_json(want.call)
                if want.call.error is None:
                    assert response.status_code == 200
                    assert data["documents"] == [d.model_dump(mode="json") for d in want.documents]
                else:
                    assert response.status_code in (404, 422) and data["detail"] == want.call.error
            trace = client.get(f"/episodes/{created['episode_id']}/trace")
            assert "suppressed" not in trace.text and len(trace.json()["trace"]) == 10


def test_every_http_request_of_an_episode_is_logged_valid_or_not(mini_sandbox: Sandbox, tmp_path) -> None:
    log = tmp_path / "actions.jsonl"
    app = create_app(mini_sandbox, action_log=log)
    bad = [("search", b"not json"), ("search", b"[1, 2]"), ("search", b'{"query": "x", "k": "5"}'),
           ("search", b'{"query": "x", "extra": 1}'), ("search", b'{"k": 3}'), ("search", b'{"query": 7}'),
           ("search", json.dumps({"query": "q" * 5000}).encode()), ("search", b'{"query": "", "k": 2}'),
           ("search", b'{"query": "x", "k": true}'), ("visit", b'{"page": ["kane"]}'), ("visit", b"{}"),
           ("visit", b'{"page": "../etc/passwd"}'), ("visit", b'{"page": "graham"}'), ("visit", b'{"page": 1}')]
    with TestClient(app) as client:
        episode_id = client.post("/episodes", json={"question_id": "q1"}).json()["episode_id"]
        for tool, raw in bad:
            response = client.post(f"/episodes/{episode_id}/{tool}", content=raw,
                                   headers={"content-type": "application/json"})
            assert response.status_code in (404, 422), (raw, response.status_code)
            assert response.json()["call"]["error"]
        ok = client.post(f"/episodes/{episode_id}/search", json={"query": "Kane Cornes", "k": 2})
        assert ok.status_code == 200
        ep: SandboxEpisode = app.state.episodes[episode_id]
        assert len(ep.trace) == len(bad) + 1 and all(c.error for c in ep.trace[:-1])
        assert ep.trace[12].suppressed_ids == ["graham"]  # the masked visit is known server-side only
        client.post(f"/episodes/{episode_id}/close")
    (logged,) = read_episodes(log).values()
    assert logged.closed and len(logged.calls) == len(bad) + 1
    assert logged.calls[12].suppressed_ids == ["graham"]
    assert all(len(json.dumps(c.arguments)) < 3000 for c in logged.calls)


def _locked_mentions(episode: SandboxEpisode, documents: list[Document]) -> int:
    """Search snippets that name a page the episode still locks (by any of its hidden terms)."""
    assert episode.mask is not None
    patterns = [p for page in episode.mask.masked if episode.is_locked(page)
                and (p := episode.mask.pattern_of(page)) is not None]
    return sum(any(p.search(doc.text) for p in patterns) for doc in documents)


def test_no_search_snippet_names_a_locked_page(mini_sandbox: Sandbox) -> None:
    """The paper's rule for snippets: v(i) is discoverable only after page(v(i-1)) was *visited*.

    Counted over random sessions, with the count the previous policy (snippets of the
    visit rendering) would have given beside it, so the probe itself is shown to see leaks.
    """
    rng = random.Random(41)
    mentions = old_policy = unlocked_statements = 0
    for session in range(200):
        a = mini_sandbox.episode(rng.choice(["q1", "q2"]), run_id=f"n{session}")
        assert a.mask is not None
        for tool, arg, k in _actions(rng, 10):
            if tool != "search":
                asyncio.run(a.visit(arg))
                continue
            result = asyncio.run(a.search(arg, k))
            mentions += _locked_mentions(a, result.documents)
            old = [search_hit(None, render_page(a.mask, mini_sandbox.store.get(d.id)), arg)
                   for d in result.documents]
            old_policy += _locked_mentions(a, old)
            unlocked_statements += sum("Nicole Cornes" in d.text for d in result.documents
                                       if d.id == "chad" and not a.is_locked("nicole"))
    assert mentions == 0
    assert old_policy > 20  # the visit rendering does quote v(i)'s name in snippets of v(i-1)
    assert unlocked_statements > 0  # once v(i-1) was visited, its snippet may state the hop again
