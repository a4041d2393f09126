"""Rule-based responders that play every EvidenceLoop sub-agent on the scripted LLM server.

The rules read only what the real prompts show (the question line, observations,
the evidence memory and claim blocks), so the agent's plumbing — EIDs, findings,
claims, verdicts, the shared budget — is exercised over real loopback HTTP.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from aethersearch.testing.scripted_server import Reply, ScriptedRequest, question_of
from aethersearch.text import normalize_answer

_SUMMARY = re.compile(r"^\[(E\d+)\] (.+?): (.*)$", re.MULTILINE)
_DOC = re.compile(r"^\[(E\d+)\] ([^\n]+)\n(.*?)(?=\n\n\[E\d+\] |\n\nQuestion: )", re.MULTILINE | re.DOTALL)
_CLAIM = re.compile(r"Claim (\d+) \((E\d+)\): [^\n]*\nEvidence E\d+:\n\[E\d+\] [^\n]*\n(.*?)(?=\n\nClaim |\n\nQuestion: )",
                    re.DOTALL)


def _contains(text: str, answer: str) -> bool:
    return f" {normalize_answer(answer)} " in f" {normalize_answer(text)} "


def evidenceloop_rule(answers: Mapping[str, str], *, query: Callable[[str], str] | None = None,
                      wrong: Mapping[str, str] | None = None, visits: int = 1,
                      confirm_page: bool = False) -> Callable[[ScriptedRequest], Reply]:
    """Solvers search then visit result ``solver index``; the aggregator answers once memory holds it.

    ``wrong`` maps a question to an answer the aggregator proposes instead (citing the
    first EID), which a truthful verifier must reject. With ``confirm_page`` the
    aggregator only answers once the answer's own page is in memory (and cites it).
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
                if confirm_page and answer and normalize_answer(title) != normalize_answer(answer):
                    continue
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
            joint = "supported" if verdicts and all("> entailed <" in v for v in verdicts) else "not_supported"
            return Reply("\n".join(verdicts) + f"\n<support> {joint} </support>")
        return Reply("<answer> I don't know </answer>")

    return respond


_VISIT = re.compile(r"<visit>(.*?)</visit>", re.DOTALL)


def sandbox_path_rule(paths: Mapping[str, list[str]], answers: Mapping[str, str], *,
                      wrong: Mapping[str, str] | None = None,
                      direct: Mapping[str, str] | None = None) -> Callable[[ScriptedRequest], Reply]:
    """Like :func:`evidenceloop_rule`, but solvers walk a known chain of page titles in the masked sandbox.

    Solver 0 visits the next chain page not yet in the evidence index or its own
    visits; other solvers first search the question (a masked search cannot
    shortcut the chain), then do the same. The other sub-agents follow
    :func:`evidenceloop_rule`; the aggregator answers only from the answer page. ``direct`` answers the no-search ``direct`` agent's
    prompt (the Forget probe) from a question -> answer map, else "I don't know".
    """
    generic = evidenceloop_rule(answers, visits=0, wrong=wrong, confirm_page=True)

    def respond(request: ScriptedRequest) -> Reply:
        messages = request.body.get("messages") or []
        first = messages[0]["content"] if messages else str(request.body.get("prompt", ""))
        if first.startswith("Answer the given question directly"):  # chat or raw (prompt_format=auto)
            answer = (direct or {}).get(question_of(request) or "", "I don't know")
            return Reply(f"<answer> {answer} </answer>")
        if not first.startswith("You are solver"):
            return generic(request)
        question = question_of(request) or ""
        index = int(re.search(r"solver (\d+) of", first).group(1))
        turns = sum(m["role"] == "assistant" for m in messages)
        if index > 0 and turns == 0:
            return Reply(f"<search> {question.rstrip('?')} </search>")
        context = first.split("Context so far:\n", 1)[1].split("\n\nQuestion: ", 1)[0]
        known = {title for _, title, _ in _SUMMARY.findall(context)}
        known |= {v.strip() for m in messages if m["role"] == "assistant" for v in _VISIT.findall(m["content"])}
        following = [title for title in paths.get(question, []) if title not in known]
        return Reply(f"<visit> {following[0]} </visit>" if following else "<done>")

    return respond
