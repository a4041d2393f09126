"""EvidenceLoop's two reply protocols: our free-text tags, or JSON under a per-call schema.

Neither is the paper's: WebDetective describes its agents' roles, not their
prompts, so every prompt here is this project's own wording.

Why one object per protocol: the loop talks to the model in eight places (prompts,
request constraint, the solver's action, the extractor's facts, the aggregator's
proposal, the verifier's verdicts, the forced final answer and the verified
answer's text); asking "JSON or text?" at each, a ninth place could forget to ask. :func:`replies_for` picks the protocol once, from the recorded
``structured`` option, and the loop calls it without branching.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple, Protocol

from aethersearch.agents import evidence_actions as actions
from aethersearch.agents.base import AgentOutput, finish, finish_from_text
from aethersearch.agents.llm import RESPONSE_FORMS, ConstrainedDecoding, response_format
from aethersearch.agents.prompts import FORCED_FINAL_PROMPT, extract_answer
from aethersearch.records import Decoding

__all__ = ["AGGREGATOR_PROMPT", "EXTRACTOR_PROMPT", "FINAL_PROMPT", "INVALID_ACTION", "JSON_PROMPTS", "JsonReplies",
    "Prompts", "REFUSAL", "Replies", "SOLVER_PROMPT", "STRUCTURED", "TEXT_PROMPTS", "TextReplies", "VERIFIER_PROMPT",
    "replies_for", "tag_answer"]

#: What the loop answers when no proposal survives verification.
REFUSAL = "I don't know"


def tag_answer(text: str, answer: str) -> str:
    """``text`` with ``answer`` tagged after it, as Search-R1-style scoring reads a response."""
    return text + f"\n<answer> {answer} </answer>"

SOLVER_PROMPT = (
    "You are solver {index} of {n} in EvidenceLoop, a team that answers questions by searching "
    "a Wikipedia-like collection. Take ONE action per reply: <search> keywords </search> to "
    "search, <visit> page title or id </visit> to open a page, <fetch> E3 </fetch> to reread a "
    "remembered document in full, or <done> when you have gathered what you can this round. "
    "Every document you retrieve is remembered under an evidence id (E1, E2, ...). Explore "
    "differently from the other solvers.\n\nContext so far:\n{context}\n\nQuestion: {question}\n"
)
EXTRACTOR_PROMPT = (
    "You are the extraction agent of EvidenceLoop. For each document below, write one line per "
    "fact in it that helps answer the question, 'E<id>: <the fact>' (several lines for several "
    "facts), or 'E<id>: irrelevant'. Each fact is remembered under its own evidence id.\n\n"
    "{documents}\n\nQuestion: {question}\n"
)
AGGREGATOR_PROMPT = (
    "You are the aggregation agent of EvidenceLoop. Build the structured context for the next "
    "round inside <context> and </context>: what is established (cite evidence ids), what is "
    "still missing, and which pages to explore next. If the evidence answers the question, "
    "also give <answer> short answer </answer> and decompose it into atomic claims, each citing "
    "exactly one evidence id, a document's (E2) or a fact's (E2.1): "
    "<claim eid=\"E2.1\"> claim text </claim>. Otherwise write "
    "<continue>.\n\nRound {round} of {max_rounds}.\n\nEvidence memory:\n{memory}\n\n"
    "Previous context:\n{context}\n\nQuestion: {question}\n"
)
VERIFIER_PROMPT = (
    "You are the verification agent of EvidenceLoop. Check three things. For each claim: is it "
    "entailed by its evidence document alone, and is it relevant to the question? Reply with one "
    "line per claim: <verdict claim=\"1\"> entailed </verdict>, <verdict claim=\"1\"> not_entailed "
    "</verdict> or <verdict claim=\"1\"> irrelevant </verdict> (entailed but beside the question). "
    "Then say whether the claims, taken together, support the proposed answer: <support> supported "
    "</support> or <support> not_supported </support>."
    "\n\nProposed answer: {answer}\n\n{claims}\n\nQuestion: {question}\n"
)
FINAL_PROMPT = (
    "You are the aggregation agent of EvidenceLoop. " + FORCED_FINAL_PROMPT
    + " Use only the evidence memory below.\n\nEvidence memory:\n{memory}\n\nQuestion: {question}\n"
)
INVALID_ACTION = ("Invalid action. Reply with exactly one of <search> query </search>, "
                  "<visit> page </visit>, <fetch> E1 </fetch> or <done>.")


class Prompts(NamedTuple):
    """The sub-agents' prompts of one reply protocol (chosen once, by ``structured``)."""

    solver: str
    extractor: str
    aggregator: str
    verifier: str
    final: str
    invalid: str


TEXT_PROMPTS = Prompts(SOLVER_PROMPT, EXTRACTOR_PROMPT, AGGREGATOR_PROMPT, VERIFIER_PROMPT, FINAL_PROMPT,
                       INVALID_ACTION)
JSON_PROMPTS = Prompts(actions.SOLVER_JSON_PROMPT, actions.EXTRACTOR_JSON_PROMPT, actions.AGGREGATOR_JSON_PROMPT,
                       actions.VERIFIER_JSON_PROMPT, actions.FINAL_JSON_PROMPT, actions.INVALID_JSON_ACTION)
#: ``structured`` values: our free-text tags, or JSON-schema decoding in one of the request forms
STRUCTURED = ("off", *RESPONSE_FORMS)
_ACTION = re.compile(r"<(search|visit|fetch)>(.*?)</\1>", re.DOTALL)
_DONE = re.compile(r"<done\s*/?>|<answer>", re.IGNORECASE)
_CONTEXT = re.compile(r"<context>(.*?)</context>", re.DOTALL)
_CLAIM = re.compile(r"<claim\s+eid\s*=\s*\"?\s*([A-Za-z]*\d+(?:\.\d+)?)\s*\"?\s*>(.*?)</claim>", re.DOTALL)
_VERDICT = re.compile(r"<verdict\s+claim\s*=\s*\"?(\d+)\"?\s*>\s*([A-Za-z_ ]+?)\s*</verdict>")
_SUPPORT = re.compile(r"<support>\s*([A-Za-z_ ]+?)\s*</support>")
_FINDING = re.compile(r"^\W*(E\d+)\W*[:\-–]\s*(.+?)\s*$", re.MULTILINE)


class Replies(Protocol):
    """What the loop asks of a reply protocol (:class:`TextReplies`, :class:`JsonReplies`)."""

    prompts: Prompts

    def template(self) -> str:
        """Everything the protocol puts in front of the model, hashed into run.json."""
        ...

    def decoding(self, decoding: Decoding, name: str, schema: dict[str, Any]) -> Decoding:
        """The decoding of one sub-agent call whose reply must fit ``schema`` (named ``name``)."""
        ...

    def action(self, text: str, citable: list[str]) -> tuple[str, str | None]:
        """A solver reply's ``(kind, argument)``; argument None for ``done`` and ``invalid``."""
        ...

    def facts(self, text: str, eids: list[str]) -> list[tuple[str, str]]:
        """The extractor's ``(eid, fact)`` pairs."""
        ...

    def proposal(self, text: str) -> tuple[str | None, str | None, list[dict[str, str]]]:
        """The aggregator's ``(analysis, answer, claims)``."""
        ...

    def verdicts(self, text: str) -> dict[str, str]:
        """The verifier's verdict word per claim number, and its joint verdict under ``support``."""
        ...

    def final(self, text: str, stop_reason: str) -> AgentOutput:
        """The outcome of the forced final answer's reply."""
        ...

    def answered(self, text: str, answer: str) -> str:
        """The response recorded for a verified ``answer`` (its reply ``text``, the answer tagged once)."""
        ...


class TextReplies:
    """The free-text protocol: tags such as ``<search>``, ``<claim eid="E2">``, ``<verdict>``, ``<support>``."""

    prompts = TEXT_PROMPTS

    def template(self) -> str:
        """The prompts."""
        return "\n\x1e\n".join(self.prompts)

    def decoding(self, decoding: Decoding, name: str, schema: dict[str, Any]) -> Decoding:
        """Unconstrained: the tags are asked for in the prompts."""
        return decoding

    def action(self, text: str, citable: list[str]) -> tuple[str, str | None]:
        """The first action tag; ``<done>`` (or an answer) ends the solver's round, anything else is invalid."""
        match = _ACTION.search(text)
        if match is None:
            return ("done" if _DONE.search(text) else "invalid"), None
        return match.group(1), match.group(2).strip()

    def facts(self, text: str, eids: list[str]) -> list[tuple[str, str]]:
        """``E<id>: fact`` lines."""
        return [(eid, fact) for eid, fact in _FINDING.findall(text)]

    def proposal(self, text: str) -> tuple[str | None, str | None, list[dict[str, str]]]:
        """``<context>``, the last closed ``<answer>`` and the ``<claim eid=...>`` tags."""
        tagged = _CONTEXT.search(text)
        claims = [{"eid": eid.strip().upper(), "text": " ".join(claim.split())} for eid, claim in _CLAIM.findall(text)]
        return (tagged.group(1).strip() if tagged else None), extract_answer(text), claims

    def verdicts(self, text: str) -> dict[str, str]:
        """``<verdict claim="n"> word </verdict>`` tags and the last ``<support>``, lower-cased with underscores."""
        out = {number: word.strip().lower().replace(" ", "_") for number, word in _VERDICT.findall(text)}
        support = _SUPPORT.findall(text)
        if support:
            out["support"] = support[-1].strip().lower().replace(" ", "_")
        return out

    def final(self, text: str, stop_reason: str) -> AgentOutput:
        """The reply's answer tag, by the rule every agent applies."""
        return finish_from_text(text, stop_reason)

    def answered(self, text: str, answer: str) -> str:
        """The aggregator's reply already holds the ``<answer>`` tag."""
        return text


class JsonReplies:
    """Every reply decoded under a per-call JSON schema, sent as ``response_format`` in ``form``."""

    prompts = JSON_PROMPTS

    def __init__(self, form: str) -> None:
        self.form = form

    def template(self) -> str:
        """The prompts and the schema templates."""
        return "\n\x1e\n".join([*self.prompts, actions.schema_templates()])

    def decoding(self, decoding: Decoding, name: str, schema: dict[str, Any]) -> Decoding:
        """``decoding`` constrained to ``schema`` in this protocol's request form."""
        return ConstrainedDecoding(**decoding.model_dump(), response_format=response_format(self.form, name, schema))

    def action(self, text: str, citable: list[str]) -> tuple[str, str | None]:
        """The JSON action (see :func:`aethersearch.agents.evidence_actions.parse_action`)."""
        return actions.parse_action(text, citable)

    def facts(self, text: str, eids: list[str]) -> list[tuple[str, str]]:
        """The JSON facts."""
        return actions.parse_facts(text, eids)

    def proposal(self, text: str) -> tuple[str | None, str | None, list[dict[str, str]]]:
        """The JSON proposal."""
        return actions.parse_proposal(text)

    def verdicts(self, text: str) -> dict[str, str]:
        """The JSON verdicts."""
        return actions.parse_verdicts(text)

    def final(self, text: str, stop_reason: str) -> AgentOutput:
        """The JSON answer (an empty one is a refusal), tagged into the response."""
        answer = actions.parse_final(text)
        answer = REFUSAL if answer == "" else answer
        return finish(tag_answer(text, answer) if answer is not None else text, answer, stop_reason)

    def answered(self, text: str, answer: str) -> str:
        """The JSON reply with the answer tagged after it (as the text protocol's reply holds it)."""
        return tag_answer(text, answer)


def replies_for(structured: str) -> Replies:
    """The protocol of the ``structured`` option: ``off`` for the text tags, else the JSON request form."""
    return TextReplies() if structured == "off" else JsonReplies(structured)
