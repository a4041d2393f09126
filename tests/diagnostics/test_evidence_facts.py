"""Per-fact Evidence IDs: each distilled fact has its own EID that resolves to its full document."""

from __future__ import annotations

import asyncio
import re

import pytest

from aethersearch.agents.base import make_agent
from aethersearch.agents.evidence_memory import EvidenceMemory
from aethersearch.errors import ToolError
from aethersearch.records import Budget, Outcome
from aethersearch.testing.scripted_server import Reply, ScriptedRequest, ScriptedServer
from tests.diagnostics.evidenceloop_rules import evidenceloop_rule
from tests.diagnostics.test_evidenceloop import PAGES, QUESTION, _run

_DOC = re.compile(r"^\[(E\d+)\] ([^\n]+)\n(.*?)(?=\n\n\[E\d+\] |\n\nQuestion: )", re.MULTILINE | re.DOTALL)
_FACT = re.compile(r"^  - \[(E\d+\.\d+)\] (.*)$", re.MULTILINE)
_CLAIM = re.compile(r"Claim (\d+) \((E[\d.]+)\): [^\n]*\nEvidence E[\d.]+:\n\[E\d+\] [^\n]*\n(.*?)(?=\n\nClaim |\n\nQuestion: )",
                    re.DOTALL)


def test_memory_gives_each_fact_an_eid_that_fetches_the_full_document() -> None:
    memory = EvidenceMemory()
    eid, _ = memory.add(PAGES[1], source="solver-0", round=1)
    first = memory.add_fact(eid, "Chad played for Port Adelaide")
    second = memory.add_fact(eid, "Chad's stepmother is Nicole Cornes")
    assert (first, second) == ("E1.1", "E1.2")
    assert memory.add_fact(eid, "Chad's  stepmother is Nicole Cornes") == "E1.2"  # same fact, same EID
    assert "E1.2" in memory and memory.document_eid("E1.2") == "E1"
    assert memory.full_text("E1.2") == memory.full_text("E1") and "Port Adelaide" in memory.full_text("E1.2")
    assert memory.summary_line("E1").endswith("Chad played for Port Adelaide")  # first fact summarises
    assert "  - [E1.2] Chad's stepmother is Nicole Cornes" in memory.summaries()
    assert memory.doc_ids()["E1.2"] == "chad"
    with pytest.raises(ToolError, match="E1.1, E1.2"):
        memory.get("E1.3")


def _fact_rule():
    """Extractor: one line per sentence; aggregator cites the *fact* EID stating the answer."""
    answer = "Graham Cornes"
    base = evidenceloop_rule({QUESTION: answer}, query=lambda q: "Nicole Cornes married")

    def respond(request: ScriptedRequest) -> Reply:
        messages = request.body.get("messages") or []
        first = messages[0]["content"] if messages else request.text
        if first.startswith("You are the extraction agent"):
            lines = [f"{eid}: {s.strip()}" for eid, _, text in _DOC.findall(first)
                     for s in re.split(r"(?<=\.)\s+", " ".join(text.split())) if s.strip()]
            return Reply("\n".join(lines))
        if first.startswith("You are the aggregation agent of EvidenceLoop. Build"):
            for fid, text in _FACT.findall(first):
                if answer in text:
                    return Reply(f"<context>[{fid}] states it.</context>\n<answer> {answer} </answer>\n"
                                 f"<claim eid=\"{fid}\"> The answer is {answer}. </claim>")
            return Reply("<context>Not yet.</context>\n<continue>")
        if first.startswith("You are the verification agent"):
            return Reply("\n".join(f"<verdict claim=\"{n}\"> {'entailed' if answer in ev else 'not_entailed'} </verdict>"
                                   for n, _, ev in _CLAIM.findall(first)) + "\n<support> supported </support>")
        return base(request)

    return respond


def test_claims_cite_fact_eids_and_are_verified_against_the_full_document() -> None:
    agent = make_agent("evidenceloop", n_solvers=1, max_rounds=3, actions_per_round=2)
    with ScriptedServer(_fact_rule()) as server:
        output, episode, _, _ = asyncio.run(_run(agent, server, Budget(max_tool_calls=20, max_turns=40)))
    assert output.outcome is Outcome.ANSWERED and output.prediction == "Graham Cornes"
    extractor = [s for s in episode.steps if s.agent == "extractor"]
    facts = {fid: text for s in extractor for fid, text in s.notes["facts"].items()}
    assert len(facts) > len({fid.split(".")[0] for fid in facts})  # several facts per document
    aggregator = [s for s in episode.steps if s.agent == "aggregator" and s.notes["claims"]][-1]
    claim = aggregator.notes["claims"][0]
    assert re.fullmatch(r"E\d+\.\d+", claim["eid"]) and "Graham Cornes" in facts[claim["eid"]]
    assert aggregator.notes["eid_docs"][claim["eid"]] == "nicole"
    verifier = [s for s in episode.steps if s.agent == "verifier"][-1]
    assert verifier.notes["accepted"] is True and verifier.notes["verdicts"][0]["eid"] == claim["eid"]
