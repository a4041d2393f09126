"""EvidenceLoop: WebDetective's verification-loop agent with a persistent evidence memory.

Reference: Song et al., WebDetective (arXiv:2510.05137), the EvidenceLoop
baseline. Each round r = 1..R_max:

1. **N parallel solvers** (``solver-0``..``solver-{N-1}``) each take up to B
   actions (``<search>``, ``<visit>``, or ``<fetch> EID </fetch>`` to read a
   remembered document in full) starting from the structured context C^r;
2. every document a tool returns enters the **evidence memory** and gets an
   Evidence ID (``E1``, ``E2``...); agents see one-line summaries, never the
   whole corpus text, but can fetch any document back by its EID;
3. an **extractor** distils the facts of each new document; every fact gets its
   own EID (``E2.1``, ``E2.2``...) that resolves to the full document it came from;
4. an **aggregator** builds C^{r+1} (the evidence index plus its analysis) and
   may propose an answer decomposed into **atomic claims**, each citing an EID;
5. a **verifier** checks that each claim is entailed by the full text of its EID;
   the answer is accepted only if every claim is; otherwise the loop continues
   (with the rejection in the context) or, after R_max rounds, refuses.

The tool budget is the runner's: ``episode.env`` and ``episode.llm`` are shared
by every sub-agent, so parallel solvers draw from one budget; a solver that
hits it stops, the round is finished with what was gathered, and no further
round starts. Every sub-agent call is one trace step with ``agent`` set to the
sub-agent's name and ``notes`` carrying the round, EIDs, claims and verdicts.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, ClassVar, NamedTuple

from aethersearch.abstention import is_abstention
from aethersearch.agents.base import Agent, AgentOutput, Episode, finish, finish_from_text
from aethersearch.agents.evidence_memory import EvidenceMemory
from aethersearch.agents.prompts import FORCED_FINAL_PROMPT, extract_answer
from aethersearch.errors import BudgetExhausted, ConfigError, ToolError
from aethersearch.records import Outcome, ToolCall

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
    "You are the verification agent of EvidenceLoop. For each claim, decide from its evidence "
    "document alone whether the claim is entailed. Reply with one line per claim: "
    "<verdict claim=\"1\"> entailed </verdict> or <verdict claim=\"1\"> not_entailed </verdict>."
    "\n\nProposed answer: {answer}\n\n{claims}\n\nQuestion: {question}\n"
)
FINAL_PROMPT = (
    "You are the aggregation agent of EvidenceLoop. " + FORCED_FINAL_PROMPT
    + " Use only the evidence memory below.\n\nEvidence memory:\n{memory}\n\nQuestion: {question}\n"
)
INVALID_ACTION = ("Invalid action. Reply with exactly one of <search> query </search>, "
                  "<visit> page </visit>, <fetch> E1 </fetch> or <done>.")
REFUSAL = "I don't know"

_ACTION = re.compile(r"<(search|visit|fetch)>(.*?)</\1>", re.DOTALL)
_DONE = re.compile(r"<done\s*/?>|<answer>", re.IGNORECASE)
_CONTEXT = re.compile(r"<context>(.*?)</context>", re.DOTALL)
_CLAIM = re.compile(r"<claim\s+eid\s*=\s*\"?\s*([A-Za-z]*\d+(?:\.\d+)?)\s*\"?\s*>(.*?)</claim>", re.DOTALL)
_VERDICT = re.compile(r"<verdict\s+claim\s*=\s*\"?(\d+)\"?\s*>\s*([A-Za-z_ ]+?)\s*</verdict>")
_FINDING = re.compile(r"^\W*(E\d+)\W*[:\-–]\s*(.+?)\s*$", re.MULTILINE)


class SolverResult(NamedTuple):
    """What one solver contributed in one round."""

    new_eids: list[str]
    budget_spent: bool


class Proposal(NamedTuple):
    """The aggregator's output: next context, and possibly an answer with its claims."""

    context: str
    answer: str | None
    claims: list[dict[str, str]]
    text: str


class Verification(NamedTuple):
    """The verifier's decision on a proposal."""

    accepted: bool
    verdicts: list[dict[str, str]]


def _positive(name: str, value: int) -> int:
    if not isinstance(value, int) or value < 1:
        raise ConfigError(f"evidenceloop: {name} must be a positive integer, got {value!r}",
                          fix=f"pass {name}=1 or more")
    return value


class EvidenceLoopAgent(Agent):
    """N parallel solvers × R_max rounds × B actions, extraction, aggregation and claim verification."""

    name: ClassVar[str] = "evidenceloop"
    environment: ClassVar[str] = "sandbox"

    def __init__(self, n_solvers: int = 2, max_rounds: int = 3, actions_per_round: int = 3,
                 topk: int = 3, snippet_chars: int = 240, doc_chars: int = 2000) -> None:
        self.n_solvers = _positive("n_solvers", n_solvers)
        self.max_rounds = _positive("max_rounds", max_rounds)
        self.actions_per_round = _positive("actions_per_round", actions_per_round)
        self.topk = _positive("topk", topk)
        self.snippet_chars = _positive("snippet_chars", snippet_chars)
        self.doc_chars = _positive("doc_chars", doc_chars)

    def config(self) -> dict[str, Any]:
        """N, R_max, B and the rendering limits: all of them change predictions."""
        return {"n_solvers": self.n_solvers, "max_rounds": self.max_rounds,
                "actions_per_round": self.actions_per_round, "topk": self.topk,
                "snippet_chars": self.snippet_chars, "doc_chars": self.doc_chars}

    def prompt_template(self) -> str:
        return "\n\x1e\n".join([SOLVER_PROMPT, EXTRACTOR_PROMPT, AGGREGATOR_PROMPT, VERIFIER_PROMPT,
                                FINAL_PROMPT, INVALID_ACTION])

    # ------------------------------------------------------------------------- the loop

    async def solve(self, episode: Episode) -> AgentOutput:
        memory = EvidenceMemory(snippet_chars=self.snippet_chars)
        episode.state["memory"] = memory
        context = "(nothing yet)"
        last = Proposal(context, None, [], "")
        for round_ in range(1, self.max_rounds + 1):
            results = await self._parallel(episode, memory, context, round_)
            new_eids = [eid for result in results for eid in result.new_eids]
            budget_spent = any(result.budget_spent for result in results)
            await self._extract(episode, memory, new_eids, round_)
            last = await self._aggregate(episode, memory, context, round_)
            context = last.context
            if last.answer is not None:
                verdict = await self._verify(episode, memory, last, round_)
                if verdict.accepted:
                    return finish(last.text, last.answer, "verified")
                rejected = "; ".join(f"claim {v['claim']} ({v['eid']}): {v['verdict']}"
                                     for v in verdict.verdicts) or "no claims cited evidence"
                context += f"\nRejected answer {last.answer!r}: {rejected}."
            if budget_spent:
                break
        response = last.text + f"\n<answer> {REFUSAL} </answer>"
        return AgentOutput(response, REFUSAL, Outcome.ABSTAINED, "unverified")

    async def final_answer(self, episode: Episode) -> AgentOutput:
        """One forced answer from the evidence memory after the budget ran out mid-round."""
        memory: EvidenceMemory = episode.state.get("memory") or EvidenceMemory()
        prompt = FINAL_PROMPT.format(memory=memory.summaries() or "(empty)",
                                     question=episode.question_seen)
        completion = await episode.llm.chat([{"role": "user", "content": prompt}], episode.decoding)
        episode.add_step(agent="aggregator", llm=completion.to_record(),
                         notes={"forced_final": True, "eids": memory.eids()})
        return finish_from_text(completion.text, "budget")

    # ------------------------------------------------------------------------- sub-agents

    async def _parallel(self, episode: Episode, memory: EvidenceMemory, context: str,
                        round_: int) -> list[SolverResult]:
        """Run the N solvers concurrently; if one fails (endpoint error), cancel the others first.

        The original exception is re-raised unchanged, so the runner records it as
        the episode's outcome and no solver keeps calling tools after the episode.
        """
        tasks = [asyncio.ensure_future(self._solver(episode, memory, context, round_, i))
                 for i in range(self.n_solvers)]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def _solver(self, episode: Episode, memory: EvidenceMemory, context: str,
                      round_: int, index: int) -> SolverResult:
        agent = f"solver-{index}"
        messages = [{"role": "user", "content": SOLVER_PROMPT.format(
            index=index, n=self.n_solvers, context=context, question=episode.question_seen)}]
        new_eids: list[str] = []
        for action_no in range(self.actions_per_round):
            try:
                completion = await episode.llm.chat(messages, episode.decoding)
            except BudgetExhausted as exc:
                episode.add_step(agent=agent, notes={"round": round_, "budget": exc.which})
                return SolverResult(new_eids, True)
            text = completion.text
            match = _ACTION.search(text)
            notes: dict[str, Any] = {"round": round_, "action_index": action_no}
            calls: list[ToolCall] = []
            if match is None:
                kind = "done" if _DONE.search(text) else "invalid"
                notes["action"] = kind
                observation = None if kind == "done" else INVALID_ACTION
                episode.add_step(agent=agent, llm=completion.to_record(), observation=observation,
                                 notes=notes)
                if kind == "done":
                    break
            else:
                kind, argument = match.group(1), match.group(2).strip()
                notes.update(action=kind, argument=argument)
                try:
                    observation, calls, eids, fresh = await self._act(episode, memory, kind,
                                                                      argument, round_, agent)
                except BudgetExhausted as exc:
                    notes["budget"] = exc.which
                    episode.add_step(agent=agent, llm=completion.to_record(), notes=notes)
                    return SolverResult(new_eids, True)
                notes["eids"] = eids
                new_eids += fresh
                notes["new_eids"] = fresh
                episode.add_step(agent=agent, llm=completion.to_record(), tool_calls=calls,
                                 observation=observation, notes=notes)
            messages += [{"role": "assistant", "content": text},
                         {"role": "user", "content": observation or INVALID_ACTION}]
        return SolverResult(new_eids, False)

    async def _act(self, episode: Episode, memory: EvidenceMemory, kind: str, argument: str,
                   round_: int, agent: str) -> tuple[str, list[ToolCall], list[str], list[str]]:
        """Run one solver action: (observation, tool calls, EIDs it touched, EIDs it created).

        ``fetch`` reads the memory, not the environment, so it costs no tool call.
        """
        if kind == "fetch":
            try:
                eid = memory.get(argument).eid
            except ToolError as exc:
                return str(exc), [], [], []
            return memory.full_text(eid)[: self.doc_chars], [], [eid], []
        if kind == "visit" and "visit" not in episode.env.tools:
            return "This environment has no visit tool; use <search>.", [], [], []
        result = (await episode.env.search(argument, self.topk) if kind == "search"
                  else await episode.env.visit(argument))
        if result.call.error is not None:
            return f"{kind} failed: {result.call.error}", [result.call], [], []
        eids: list[str] = []
        fresh: list[str] = []
        for doc in result.documents:
            eid, is_new = memory.add(doc, source=agent, round=round_)
            eids.append(eid)
            if is_new:
                fresh.append(eid)
        lines = memory.summaries(eids) if eids else "(no results)"
        return lines, [result.call], eids, fresh

    async def _extract(self, episode: Episode, memory: EvidenceMemory, eids: list[str],
                       round_: int) -> None:
        if not eids:
            return
        documents = "\n\n".join(memory.full_text(eid)[: self.doc_chars] for eid in eids)
        prompt = EXTRACTOR_PROMPT.format(documents=documents, question=episode.question_seen)
        completion = await episode.llm.chat([{"role": "user", "content": prompt}], episode.decoding)
        findings: dict[str, str] = {}
        facts: dict[str, str] = {}
        for eid, finding in _FINDING.findall(completion.text):
            if eid in eids and finding.casefold() != "irrelevant":
                fact_eid = memory.add_fact(eid, finding)
                facts[fact_eid] = memory.facts(eid)[fact_eid]
                findings.setdefault(eid, finding)
        episode.add_step(agent="extractor", llm=completion.to_record(),
                         notes={"round": round_, "eids": eids, "findings": findings, "facts": facts})

    async def _aggregate(self, episode: Episode, memory: EvidenceMemory, context: str,
                         round_: int) -> Proposal:
        prompt = AGGREGATOR_PROMPT.format(round=round_, max_rounds=self.max_rounds,
                                          memory=memory.summaries() or "(empty)", context=context,
                                          question=episode.question_seen)
        completion = await episode.llm.chat([{"role": "user", "content": prompt}], episode.decoding)
        text = completion.text
        analysis = _CONTEXT.search(text)
        index = memory.summaries() or "(no evidence yet)"
        next_context = f"Evidence index:\n{index}\nAnalysis:\n" + (
            analysis.group(1).strip() if analysis else "(none)")
        answer = extract_answer(text)
        if answer is not None and (not answer or is_abstention(answer)):
            answer = None
        claims = [{"eid": eid.strip().upper(), "text": " ".join(claim.split())}
                  for eid, claim in _CLAIM.findall(text)] if answer is not None else []
        episode.add_step(agent="aggregator", llm=completion.to_record(),
                         notes={"round": round_, "context": next_context, "proposed": answer,
                                "claims": claims, "eids": memory.eids(),
                                "eid_docs": memory.doc_ids()})
        return Proposal(next_context, answer, claims, text)

    async def _verify(self, episode: Episode, memory: EvidenceMemory, proposal: Proposal,
                      round_: int) -> Verification:
        """Accept only if there is at least one claim and every claim is entailed by its EID."""
        verdicts = [{"claim": str(i), "eid": c["eid"], "text": c["text"], "verdict": "pending"}
                    for i, c in enumerate(proposal.claims, start=1)]
        for verdict in verdicts:
            if verdict["eid"] not in memory:
                verdict["verdict"] = "unknown_eid"
        if not verdicts or any(v["verdict"] == "unknown_eid" for v in verdicts):
            for verdict in verdicts:
                if verdict["verdict"] == "pending":
                    verdict["verdict"] = "not_checked"
            episode.add_step(agent="verifier", notes={"round": round_, "answer": proposal.answer,
                                                      "verdicts": verdicts, "accepted": False})
            return Verification(False, verdicts)
        blocks = "\n\n".join(
            f"Claim {v['claim']} ({v['eid']}): {v['text']}\nEvidence {v['eid']}:\n"
            f"{memory.full_text(v['eid'])[: self.doc_chars]}" for v in verdicts)
        prompt = VERIFIER_PROMPT.format(answer=proposal.answer, claims=blocks,
                                        question=episode.question_seen)
        completion = await episode.llm.chat([{"role": "user", "content": prompt}], episode.decoding)
        said = {number: word.strip().lower().replace(" ", "_")
                for number, word in _VERDICT.findall(completion.text)}
        for verdict in verdicts:
            verdict["verdict"] = "entailed" if said.get(verdict["claim"]) == "entailed" else (
                said.get(verdict["claim"]) or "missing")
        accepted = all(v["verdict"] == "entailed" for v in verdicts)
        episode.add_step(agent="verifier", llm=completion.to_record(),
                         notes={"round": round_, "answer": proposal.answer, "verdicts": verdicts,
                                "accepted": accepted})
        return Verification(accepted, verdicts)
