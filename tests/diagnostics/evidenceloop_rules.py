"""Rule-based responders that play every EvidenceLoop sub-agent on the scripted LLM server.

The rules read only what the real prompts show (the question line, observations,
the evidence memory and claim blocks), so the agent's plumbing — EIDs, findings,
claims, verdicts, the shared budget — is exercised over real loopback HTTP.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from aethersearch.agents.scripted_server import Reply, ScriptedRequest, question_of
from aethersearch.text import normalize_answer

_SUMMARY = re.compile(r"^\[(E\d+)\] (.+?): (.*)$", re.MULTILINE)
_DOC = re.compile(r"^\[(E\d+)\] ([^\n]+)\n(.*?)(?=\n\n\[E\d+\] |\n\nQuestion: )", re.MULTILINE | re.DOTALL)
_CLAIM = re.compile(r"Claim (\d+) \((E\d+)\): [^\n]*\nEvidence E\d+:\n\[E\d+\] [^\n]*\n(.*?)(?=\n\nClaim |\n\nQuestion: )",
                    re.DOTALL)


def _contains(text: str, answer: str) -> bool:
    return f" {normalize_answer(answer)} " in f" {normalize_answer(text)} "


def evidenceloop_rule(answers: Mapping[str, str], *, query: Callable[[str], str] | None = None,
                      wrong: Mapping[str, str] | None = None, visits: int = 1) -> Callable[[ScriptedRequest], Reply]:
    """Solvers search then visit result ``solver index``; the aggregator answers once memory holds it.

    ``wrong`` maps a question to an answer the aggregator proposes instead (citing the
    first EID), which a truthful verifier must reject.
    """
    wrong = wrong or {}

    def respond(request: ScriptedRequest) -> Reply:
        messages = request.body.get("messages") or []
        first = messages[0]["content"] if messages else request.text
        question = question_of(request) or ""
        if first.startswith("You are solver"):
            index = int(re.search(r"solver (\d+) of", first).group(1))
            turns = sum(m["role"] == "assistant" for m in messages)
            if turns == 0:
                return Reply(f"<search> {query(question) if query else question.rstrip('?')} </search>")
            titles = [t for _, t, _ in _SUMMARY.findall(messages[-1]["content"])]
            if turns <= visits and titles:
                return Reply(f"<visit> {titles[(index + turns - 1) % len(titles)]} </visit>")
            return Reply("<done>")
        if first.startswith("You are the extraction agent"):
            answer = answers.get(question, "")
            lines = []
            for eid, _, text in _DOC.findall(first):
                sentences = [s.strip() for s in re.split(r"(?<=\.)\s+", " ".join(text.split())) if s.strip()]
                hit = [s for s in sentences if answer and _contains(s, answer)]
                lines.append(f"{eid}: {(hit or sentences or ['irrelevant'])[0]}")
            return Reply("\n".join(lines))
        if first.startswith("You are the aggregation agent of EvidenceLoop. Build"):
            memory = first.split("Evidence memory:\n", 1)[1].split("\n\nPrevious context:", 1)[0]
            summaries = _SUMMARY.findall(memory)
            if question in wrong and summaries:
                eid = summaries[0][0]
                return Reply(f"<context>Guessing.</context>\n<answer> {wrong[question]} </answer>\n"
                             f"<claim eid=\"{eid}\"> The answer is {wrong[question]}. </claim>")
            answer = answers.get(question)
            for eid, title, text in summaries:
                if answer and _contains(f"{title} {text}", answer):
                    return Reply(f"<context>[{eid}] states the answer.</context>\n"
                                 f"<answer> {answer} </answer>\n"
                                 f"<claim eid=\"{eid}\"> The answer is {answer}. </claim>")
            return Reply("<context>The answer is not in memory yet; explore linked pages.</context>\n<continue>")
        if first.startswith("You are the verification agent"):
            answer = re.search(r"Proposed answer: (.*)\n", first).group(1)
            verdicts = []
            for number, _, evidence in _CLAIM.findall(first):
                word = "entailed" if _contains(evidence, answer) else "not_entailed"
                verdicts.append(f"<verdict claim=\"{number}\"> {word} </verdict>")
            return Reply("\n".join(verdicts))
        return Reply("<answer> I don't know </answer>")

    return respond
