"""EvidenceLoop's two reply protocols read equivalent replies the same way (the loop no longer branches on them)."""

from __future__ import annotations

import orjson
import pytest

from aethersearch.agents.evidence_replies import JsonReplies, TextReplies, replies_for
from aethersearch.agents.llm import ConstrainedDecoding
from aethersearch.records import Decoding, Outcome

TEXT, JSON = TextReplies(), JsonReplies("json_object")


def _json(**fields: object) -> str:
    return orjson.dumps(fields).decode()


@pytest.mark.parametrize(("text", "json", "expected"), [
    ("<search> Paris mayor </search>", _json(action="search", query="Paris mayor"), ("search", "Paris mayor")),
    ("<fetch> E2 </fetch>", _json(action="fetch", eid="E2"), ("fetch", "E2")),
    ("<done>", _json(action="done"), ("done", None)),
    ("I think I will look around.", "not json", ("invalid", None)),
])
def test_a_solver_action_reads_the_same_in_both_protocols(text: str, json: str,
                                                          expected: tuple[str, str | None]) -> None:
    assert TEXT.action(text, ["E2"]) == JSON.action(json, ["E2"]) == expected


def test_facts_proposals_and_verdicts_read_the_same_in_both_protocols() -> None:
    assert TEXT.facts("E1: born 1900\nE2: irrelevant", ["E1", "E2"]) == JSON.facts(
        _json(facts=[{"eid": "E1", "fact": "born 1900"}, {"eid": "E2", "fact": "irrelevant"}]), ["E1", "E2"])
    text = '<context>Established: x</context><answer> Lyon </answer><claim eid="e2.1"> Lyon is big </claim>'
    json = _json(established="x", decision="answer", answer="Lyon", claims=[{"eid": "e2.1", "claim": "Lyon is big"}])
    assert TEXT.proposal(text)[1:] == JSON.proposal(json)[1:] == ("Lyon", [{"eid": "E2.1", "text": "Lyon is big"}])
    assert TEXT.verdicts('<verdict claim="1"> not entailed </verdict>') == JSON.verdicts(
        _json(claim_1={"verdict": "Not Entailed"})) == {"1": "not_entailed"}


def test_answers_are_tagged_once_and_a_refusal_abstains_in_both_protocols() -> None:
    assert TEXT.answered("<answer> Lyon </answer>", "Lyon").count("<answer>") == 1
    assert JSON.answered(_json(answer="Lyon"), "Lyon").count("<answer> Lyon </answer>") == 1
    for final in (TEXT.final("<answer> I don't know </answer>", "budget"),
                  JSON.final(_json(decision="refuse", answer=""), "budget")):
        assert final.outcome is Outcome.ABSTAINED and final.stop_reason == "budget"
    assert TEXT.final("no tag", "budget").outcome is JSON.final("not json", "budget").outcome


def test_only_the_json_protocol_constrains_the_request_and_the_option_picks_it() -> None:
    schema = {"type": "object"}
    assert TEXT.decoding(Decoding(), "x", schema) == Decoding()
    constrained = JSON.decoding(Decoding(seed=3), "x", schema)
    assert isinstance(constrained, ConstrainedDecoding) and constrained.seed == 3
    assert constrained.response_format == {"type": "json_object", "schema": schema}
    assert isinstance(replies_for("off"), TextReplies)
    assert isinstance(replies_for("json_schema"), JsonReplies) and replies_for("json_schema").template() == JSON.template()
