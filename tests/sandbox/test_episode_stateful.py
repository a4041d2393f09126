"""Stateful property test: interleaved search/visit across episodes never leak a masked page.

Four episodes run side by side: two of question q1 (same chain, separate
state), one of q2 (whose chain shares masked pages with q1 but unlocks them
from a different predecessor) and one more of q1 in another run. A model keeps
each episode's visited set; after every action the sandbox must agree with it.
"""

from __future__ import annotations

import asyncio
import re

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from aethersearch.environment import Environment
from aethersearch.sandbox.episode import Sandbox
from tests.sandbox.conftest import PAGES, TITLES, make_masks

EPISODES = [("q1", "run-a"), ("q1", "run-b"), ("q2", "run-a"), ("q1", "run-c")]
QUERIES = ["Graham Cornes", "Kane Cornes father", "Nicole Cornes husband", "Chad Cornes stepmother", "Adelaide",
           "football coach", "Glenelg club players", "media personality", "brother"]
PAGE_NAMES = [d.id for d in PAGES] + [d.title for d in PAGES] + ["graham cornes", "missing_page", "../etc/passwd",
                                                                   "a/b", "bad\x00name", ""]


def _visible(mask, doc) -> None:
    """Served ``doc`` shows no masked page's mention or link unless it is that page's predecessor (or itself)."""
    for page, terms in mask.hidden_terms.items():
        if doc.id in (page, mask.predecessor[page]):
            continue
        assert page not in doc.links, (doc.id, page)
        for term in terms:
            assert not re.search(rf"(?<!\w){re.escape(term)}(?!\w)", doc.text, re.IGNORECASE), (doc.id, term)


def make_machine(sandbox_factory):
    class MaskedSandboxMachine(RuleBasedStateMachine):
        @initialize()
        def open_episodes(self) -> None:
            self.sandbox: Sandbox = sandbox_factory()
            self.episodes = [self.sandbox.episode(q, run_id=r) for q, r in EPISODES]
            self.model = [set() for _ in EPISODES]
            self.calls = [0 for _ in EPISODES]
            assert all(isinstance(ep, Environment) for ep in self.episodes)

        @rule(which=st.integers(0, len(EPISODES) - 1), query=st.sampled_from(QUERIES), k=st.integers(1, 6))
        def search(self, which: int, query: str, k: int) -> None:
            ep, visited = self.episodes[which], self.model[which]
            mask = ep.mask
            result = asyncio.run(ep.search(query, k))
            self.calls[which] += 1
            call = result.call
            assert call.tool == "search" and call.error is None and len(result.documents) <= k
            assert [d.id for d in result.documents] == call.returned_ids
            for doc in result.documents:
                assert not mask.is_locked(doc.id, visited), f"locked {doc.id} returned before its predecessor"
                _visible(mask, doc)
            assert call.suppressed_ids == []  # agent-facing: nothing about masked pages
            for hidden in ep.trace[-1].suppressed_ids:  # the action log keeps them
                assert hidden in mask.predecessor and mask.predecessor[hidden] not in visited

        @rule(which=st.integers(0, len(EPISODES) - 1), name=st.sampled_from(PAGE_NAMES))
        def visit(self, which: int, name: str) -> None:
            ep, visited = self.episodes[which], self.model[which]
            mask = ep.mask
            result = asyncio.run(ep.visit(name))
            self.calls[which] += 1
            page = next((d.id for d in PAGES if name in (d.id, d.title) or name == d.title.lower()), None)
            allowed = page is not None and not mask.is_locked(page, visited)
            if allowed:
                assert result.call.error is None and [d.id for d in result.documents] == [page]
                _visible(mask, result.documents[0])
                visited.add(page)
            else:
                assert result.documents == [] and result.call.error
                assert result.call.suppressed_ids == []
                if page is not None:  # masked: same refusal as a missing page, logged as suppressed
                    assert ep.trace[-1].suppressed_ids == [page]
                    assert "no page named" in result.call.error

        @invariant()
        def episodes_agree_with_the_model(self) -> None:
            for ep, visited, calls in zip(self.episodes, self.model, self.calls, strict=True):
                assert ep.visited == visited  # no unlock ever leaks in from another episode
                assert len(ep.trace) == calls  # every action is logged

    return MaskedSandboxMachine


def test_masked_pages_never_leak_across_interleaved_episodes(mini_index) -> None:
    machine = make_machine(lambda: Sandbox(make_masks(), mini_index.index, mini_index.store))
    machine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None,
                                         suppress_health_check=[HealthCheck.too_slow])
    machine.TestCase().runTest()


def test_trace_records_tool_arguments_ids_suppressions_and_time(mini_sandbox) -> None:
    ep = mini_sandbox.episode("q1", run_id="r")
    first = asyncio.run(ep.search("Graham Cornes", 5))
    assert first.call.suppressed_ids == [] and "graham" not in first.call.returned_ids
    assert "graham" in ep.trace[0].suppressed_ids
    assert asyncio.run(ep.visit("Nicole Cornes")).call.error  # locked: chad not visited
    for page in ("kane", "Chad Cornes", "nicole"):
        assert asyncio.run(ep.visit(page)).call.error is None
    final = asyncio.run(ep.search("Graham Cornes", 5))
    assert "graham" in final.call.returned_ids and final.call.suppressed_ids == []
    served = asyncio.run(ep.visit("graham")).documents[0]
    assert served.title == TITLES["graham"]
    trace = ep.trace
    assert [c.tool for c in trace] == ["search", "visit", "visit", "visit", "visit", "search", "visit"]
    assert trace[0].arguments == {"query": "Graham Cornes", "k": 5}
    assert trace[1].suppressed_ids == ["nicole"] and all(c.elapsed_s >= 0 for c in trace)
    stamps = [c.started_at for c in trace]
    assert all(stamp is not None for stamp in stamps) and stamps == sorted(stamps)
    asyncio.run(ep.close())
    assert ep.closed


def test_a_malformed_k_is_a_logged_refusal_not_a_crash(mini_sandbox) -> None:
    ep = mini_sandbox.episode("q1", run_id="k")
    for bad in ("5", 2.5, None, 0, 51):
        result = asyncio.run(ep.search("Kane Cornes", bad))  # type: ignore[arg-type]
        assert result.documents == [] and "k must be an integer between 1 and 50" in (result.call.error or "")
    assert asyncio.run(ep.search("Kane Cornes", 2)).call.error is None
    assert len(ep.trace) == 6 and ep.trace[0].arguments == {"query": "Kane Cornes", "k": "5"}
