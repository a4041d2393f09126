"""EvidenceLoop's structured protocol: JSON prompts, per-call JSON schemas and their parsers.

Why: our free-text tag protocol (``<search> q </search>``, ``<claim eid="E2">``)
needs a model that follows a tag format; a small model mostly does not (SmolLM2-135M
gave no valid action, EID or claim in 2 rounds × 2 solvers × 4 questions). With
``structured`` on, every sub-agent reply is decoded under a JSON schema sent as the
request's ``response_format`` (vLLM, SGLang, llama.cpp servers), so every solver
reply *is* an action, and every cited evidence id is one the memory holds: the
schemas are built per call and list the EIDs that exist at that moment as an enum.
The loop itself (N solvers × R rounds × B actions, extraction, aggregation,
verification) is the same in both protocols; only how a reply is asked for and read
differs. Strings are length-capped so a runaway reply cannot exhaust ``max_tokens``.

A reply that is still not a valid object (cut at ``max_tokens``, or a server that
ignored the constraint) is read as an invalid action / no facts / no proposal /
missing verdicts, exactly as an unreadable tag reply is.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["AGGREGATOR_JSON_PROMPT", "ANALYSIS_CHARS", "ANSWER_CHARS", "CLAIM_CHARS", "EXTRACTOR_JSON_PROMPT",
    "FACTS_PER_DOC", "FACT_CHARS", "FINAL_JSON_PROMPT", "INVALID_JSON_ACTION", "MAX_CLAIMS", "QUERY_CHARS",
    "SOLVER_JSON_PROMPT", "SUPPORT", "VERDICTS", "VERIFIER_JSON_PROMPT", "aggregator_schema", "extractor_schema",
    "final_schema", "parse_action", "parse_facts", "parse_final", "parse_object", "parse_proposal", "parse_verdicts",
    "schema_templates", "solver_schema", "verifier_schema"]

#: longest search query / page title, fact, answer, claim and analysis a reply may hold (characters)
QUERY_CHARS = 100
FACT_CHARS = 200
ANSWER_CHARS = 80
CLAIM_CHARS = 200
ANALYSIS_CHARS = 200
#: most claims per proposed answer, and facts per document, a reply may hold
MAX_CLAIMS = 3
FACTS_PER_DOC = 2
VERDICTS = ("entailed", "not_entailed", "irrelevant")
#: the verifier's joint verdict: do the claims, taken together, establish the proposed answer?
SUPPORT = ("supported", "not_supported")

SOLVER_JSON_PROMPT = (
    "You are solver {index} of {n} in EvidenceLoop, a team that answers questions by searching "
    "a Wikipedia-like collection. Reply with ONE action as JSON: "
    "{{\"action\": \"search\", \"query\": ...}} to search with words from the question, "
    "{{\"action\": \"visit\", \"page\": ...}} to open a page by its title, "
    "{{\"action\": \"fetch\", \"eid\": ...}} to reread a remembered document (E1, E2, ...) in full, or "
    "{{\"action\": \"done\"}} when you have gathered what you can this round. Every document you "
    "retrieve is remembered under an evidence id. Explore differently from the other solvers."
    "\n\nContext so far:\n{context}\n\nQuestion: {question}\n"
)
EXTRACTOR_JSON_PROMPT = (
    "You are the extraction agent of EvidenceLoop. Reply in JSON with \"facts\": one entry per "
    "fact in the documents below that helps answer the question, {{\"eid\": the document's "
    "evidence id, \"fact\": the fact}}; leave irrelevant documents out. Each fact is remembered "
    "under its own evidence id.\n\n{documents}\n\nQuestion: {question}\n"
)
AGGREGATOR_JSON_PROMPT = (
    "You are the aggregation agent of EvidenceLoop. Reply in JSON: \"established\": what the "
    "evidence shows, citing evidence ids; \"missing\": what is still needed; \"decision\": "
    "\"answer\" if the evidence answers the question, else \"continue\". With \"answer\", give "
    "the short \"answer\" and \"claims\": atomic claims that together support it, each with the "
    "one evidence id (a document's E2 or a fact's E2.1) whose text states it."
    "\n\nRound {round} of {max_rounds}.\n\nEvidence memory:\n{memory}\n\n"
    "Previous context:\n{context}\n\nQuestion: {question}\n"
)
VERIFIER_JSON_PROMPT = (
    "You are the verification agent of EvidenceLoop. Check three things. For each claim: is it "
    "entailed by its evidence document alone, and is it relevant to the question? Then: do the "
    "claims, taken together, support the proposed answer? Reply in JSON with, for each claim_N, a "
    "short \"reason\" and the \"verdict\": \"entailed\", \"not_entailed\" or \"irrelevant\" "
    "(entailed but beside the question); and \"support\": \"supported\" or \"not_supported\"."
    "\n\nProposed answer: {answer}\n\n{claims}\n\nQuestion: {question}\n"
)
FINAL_JSON_PROMPT = (
    "You are the aggregation agent of EvidenceLoop. You have used all of your search budget. "
    "Reply in JSON with \"decision\": \"answer\" and the short \"answer\", or \"decision\": "
    "\"refuse\" if the evidence memory below does not answer the question."
    "\n\nEvidence memory:\n{memory}\n\nQuestion: {question}\n"
)
INVALID_JSON_ACTION = ("Invalid action. Reply with one JSON action: {\"action\": \"search\", \"query\": ...}, "
                       "{\"action\": \"visit\", \"page\": ...}, {\"action\": \"fetch\", \"eid\": ...} or "
                       "{\"action\": \"done\"}.")


def _string(max_chars: int) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": max_chars}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def solver_schema(eids: list[str], can_visit: bool) -> dict[str, Any]:
    """One action: search, visit (when the environment has it), fetch (a known EID) or done."""
    options = [_object({"action": {"const": "search"}, "query": _string(QUERY_CHARS)})]
    if can_visit:
        options.append(_object({"action": {"const": "visit"}, "page": _string(QUERY_CHARS)}))
    if eids:
        options.append(_object({"action": {"const": "fetch"}, "eid": {"enum": eids}}))
    options.append(_object({"action": {"const": "done"}}))
    return {"anyOf": options}


def extractor_schema(eids: list[str]) -> dict[str, Any]:
    """Facts of the documents ``eids``, each naming its document (an empty list is allowed)."""
    item = _object({"eid": {"enum": eids}, "fact": _string(FACT_CHARS)})
    return _object({"facts": {"type": "array", "items": item, "maxItems": FACTS_PER_DOC * len(eids)}})


def aggregator_schema(eids: list[str]) -> dict[str, Any]:
    """Analysis, a decision, and (when there is evidence) an answer with claims citing known EIDs."""
    properties: dict[str, Any] = {"established": _string(ANALYSIS_CHARS), "missing": _string(ANALYSIS_CHARS)}
    if not eids:  # nothing to cite: no answer can be verified, so none can be proposed
        return _object({**properties, "decision": {"enum": ["continue"]}})
    claim = _object({"eid": {"enum": eids}, "claim": _string(CLAIM_CHARS)})
    return _object({**properties, "decision": {"enum": ["answer", "continue"]},
                    "answer": {"type": "string", "maxLength": ANSWER_CHARS},
                    "claims": {"type": "array", "items": claim, "maxItems": MAX_CLAIMS}})


def verifier_schema(claims: int) -> dict[str, Any]:
    """One ``claim_N`` object (reason, verdict) per claim, all required, and the joint ``support`` verdict."""
    verdict = _object({"reason": _string(FACT_CHARS), "verdict": {"enum": list(VERDICTS)}})
    return _object({**{f"claim_{i}": verdict for i in range(1, claims + 1)}, "support": {"enum": list(SUPPORT)}})


def final_schema() -> dict[str, Any]:
    """The forced final answer: answer or refuse."""
    return _object({"decision": {"enum": ["answer", "refuse"]},
                    "answer": {"type": "string", "maxLength": ANSWER_CHARS}})


def schema_templates() -> str:
    """Every schema with placeholder EIDs, for the prompt-template hash (the caps change predictions)."""
    return json.dumps({"solver": solver_schema(["E1"], True), "extractor": extractor_schema(["E1"]),
                       "aggregator": aggregator_schema(["E1"]), "verifier": verifier_schema(1),
                       "final": final_schema()}, sort_keys=True)


def parse_object(text: str) -> dict[str, Any] | None:
    """The reply as a JSON object, or None (not JSON, cut short, or not an object)."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _text(value: Any) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""


def parse_action(text: str, eids: list[str]) -> tuple[str, str | None]:
    """``(kind, argument)``: search/visit/fetch with its argument, ``done``, or ``invalid``."""
    reply = parse_object(text)
    if reply is None:
        return "invalid", None
    kind = reply.get("action")
    if kind == "done":
        return "done", None
    field = {"search": "query", "visit": "page", "fetch": "eid"}.get(kind) if isinstance(kind, str) else None
    argument = _text(reply.get(field)) if field else ""
    if not field or not argument or (kind == "fetch" and argument not in eids):
        return "invalid", None
    return str(kind), argument


def parse_facts(text: str, eids: list[str]) -> list[tuple[str, str]]:
    """``(document EID, fact)`` pairs naming one of ``eids``, in reply order."""
    reply = parse_object(text) or {}
    facts = reply.get("facts")
    out = []
    for item in facts if isinstance(facts, list) else []:
        if isinstance(item, dict) and item.get("eid") in eids and _text(item.get("fact")):
            out.append((str(item["eid"]), _text(item["fact"])))
    return out


def parse_proposal(text: str) -> tuple[str | None, str | None, list[dict[str, str]]]:
    """``(analysis, answer, claims)``; answer and claims only when the decision is ``answer``."""
    reply = parse_object(text)
    if reply is None:
        return None, None, []
    analysis = "\n".join(f"{key.capitalize()}: {_text(reply.get(key))}" for key in ("established", "missing")
                         if _text(reply.get(key)))
    if reply.get("decision") != "answer":
        return analysis or None, None, []
    claims = [{"eid": str(c["eid"]).strip().upper(), "text": _text(c.get("claim"))}
              for c in reply.get("claims") or [] if isinstance(c, dict) and isinstance(c.get("eid"), str)]
    return analysis or None, _text(reply.get("answer")) or None, claims


def parse_verdicts(text: str) -> dict[str, str]:
    """Claim number → verdict word, for the ``claim_N`` entries the reply holds; the joint verdict under ``support``."""
    reply = parse_object(text) or {}
    out = {}
    for key, value in reply.items():
        if key.startswith("claim_") and isinstance(value, dict) and isinstance(value.get("verdict"), str):
            out[key.removeprefix("claim_")] = value["verdict"].strip().lower().replace(" ", "_")
    if isinstance(reply.get("support"), str):
        out["support"] = reply["support"].strip().lower().replace(" ", "_")
    return out


def parse_final(text: str) -> str | None:
    """The forced final answer (a refusal is returned as the refusal text by the caller), or None."""
    reply = parse_object(text)
    if reply is None or reply.get("decision") not in ("answer", "refuse"):
        return None
    return _text(reply.get("answer")) if reply["decision"] == "answer" else ""
