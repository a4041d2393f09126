"""EvidenceLoop: WebDetective's verification-loop agent with a persistent evidence memory.

Reference: Song et al., WebDetective (arXiv:2510.05137), the EvidenceLoop
baseline. Each round r = 1..R_max:

1. **N parallel solvers** (``solver-0``..``solver-{N-1}``; solver i samples
   with decoding seed + i, so they differ at temperature > 0) each take up to B
   actions (``<search>``, ``<visit>``, or ``<fetch> EID </fetch>`` to read a
   remembered document in full) starting from the structured context C^r;
2. every document a tool returns enters the **evidence memory** and gets an
   Evidence ID (``E1``, ``E2``...); agents see one-line summaries, never the
   whole corpus text, but can fetch any document back by its EID;
3. an **extractor** distils the facts of each new document; every fact gets its
   own EID (``E2.1``, ``E2.2``...) that resolves to the full document it came from;
4. an **aggregator** builds C^{r+1} (the evidence index plus its analysis) and
   may propose an answer decomposed into **atomic claims**, each citing an EID;
5. a **verifier** checks three things, as the paper's verifier does: each claim
   is entailed by the full text of its EID, each is relevant to the question,
   and the claims jointly support the answer; the answer is accepted only if
   all hold; otherwise the loop continues with the rejection in the context.

After R_max rounds (or once the tool budget is spent) without an accepted
answer, a **synthesis-only** step answers from the evidence memory alone; the
loop refuses only when that synthesiser itself finds the evidence insufficient
(the paper's fallback; an out-of-rounds refusal is never made by the loop).

The tool budget is the runner's: ``episode.env`` and ``episode.llm`` are shared
by every sub-agent, so parallel solvers draw from one budget; a solver that
hits it stops, the round is finished with what was gathered, and no further
round starts. Every sub-agent call is one trace step with ``agent`` set to the
sub-agent's name and ``notes`` carrying the round, EIDs, claims and verdicts;
:func:`trace_summary` folds them into one per-round view (actions per solver,
EIDs given, claims and their verdicts).

Two protocols, chosen by the recorded ``structured`` option: ``off`` (default) is
a free-text one (tags such as ``<search>`` and ``<claim eid="E2">``);
``json_schema`` / ``json_object`` decode every sub-agent reply under a per-call
JSON schema (:mod:`aethersearch.agents.evidence_actions`), sent as the request's
``response_format`` in that form. Each protocol is one object
(:mod:`aethersearch.agents.evidence_replies`), chosen once per agent. Why off by
default: no one request form works on every server (llama-cpp-python refuses
``json_schema``; vLLM reads ``json_object`` as "any JSON" and drops the schema),
so the user must name the form their server takes. Turn it on for models that do
not follow the tag format (small or untuned checkpoints). The paper describes
the roles, not their prompts: every prompt here is this project's own wording.
N, R_max and B are the agent's ``config()``, so they are recorded in ``run.json``
(``agent_config``) and ``factorised.json`` (``run.agent_config``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

from aethersearch.abstention import is_abstention
from aethersearch.agents import evidence_actions as actions
from aethersearch.agents.base import Agent, AgentOutput, Episode, finish
from aethersearch.agents.evidence_memory import EvidenceMemory
from aethersearch.agents.evidence_replies import STRUCTURED, Prompts, replies_for
from aethersearch.agents.llm import Completion
from aethersearch.errors import BudgetExhausted, ConfigError, ToolError
from aethersearch.records import Decoding, ToolCall

__all__ = ["EvidenceLoopAgent", "Proposal", "SolverResult", "VALID_ACTIONS", "Verification", "trace_summary"]

#: solver actions that are valid moves (``invalid`` is the only other kind)
VALID_ACTIONS = ("search", "visit", "fetch", "done")


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
    states_budget: ClassVar[bool] = True  # "Round {round} of {max_rounds}" in every solver prompt

    def __init__(self, n_solvers: int = 2, max_rounds: int = 3, actions_per_round: int = 3,
                 topk: int = 3, snippet_chars: int = 240, doc_chars: int = 2000,
                 structured: str = "off") -> None:
        if structured not in STRUCTURED:
            raise ConfigError(f"evidenceloop: structured must be one of {', '.join(STRUCTURED)}, got {structured!r}",
                              fix="json_object for llama-cpp-python's server; json_schema for vLLM, SGLang, "
                                  "llama-server or OpenAI; off for the free-text tags")
        self.structured = structured
        self._replies = replies_for(structured)  # the one place the protocol is chosen
        self.n_solvers = _positive("n_solvers", n_solvers)
        self.max_rounds = _positive("max_rounds", max_rounds)
        self.actions_per_round = _positive("actions_per_round", actions_per_round)
        self.topk = _positive("topk", topk)
        self.snippet_chars = _positive("snippet_chars", snippet_chars)
        self.doc_chars = _positive("doc_chars", doc_chars)

    def config(self) -> dict[str, Any]:
        """N, R_max, B, the rendering limits and the protocol: all of them change predictions."""
        return {"n_solvers": self.n_solvers, "max_rounds": self.max_rounds,
                "actions_per_round": self.actions_per_round, "topk": self.topk,
                "snippet_chars": self.snippet_chars, "doc_chars": self.doc_chars,
                "structured": self.structured}

    def prompt_template(self) -> str:
        return self._replies.template()

    @property
    def _prompts(self) -> Prompts:
        return self._replies.prompts

    async def _chat(self, episode: Episode, prompt: str | list[dict[str, Any]], name: str,
                    schema: dict[str, Any], decoding: Decoding | None = None) -> Completion:
        """One sub-agent call; with ``structured`` on, its reply is constrained to ``schema``."""
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        decoding = self._replies.decoding(decoding or episode.decoding, name, schema)
        return await episode.llm.chat(messages, decoding)

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
                    return finish(self._replies.answered(last.text, last.answer), last.answer, "verified")
                rejected = "; ".join(f"claim {v['claim']} ({v['eid']}): {v['verdict']}"
                                     for v in verdict.verdicts) or "no claims cited evidence"
                context += f"\nRejected answer {last.answer!r}: {rejected}."
            if budget_spent:
                break
        return await self._synthesise(episode, "budget" if budget_spent else "rounds")

    async def final_answer(self, episode: Episode) -> AgentOutput:
        """The runner's forced final answer (a model or tool limit hit): the same synthesis from memory."""
        return await self._synthesise(episode, "budget", forced=True)

    async def _synthesise(self, episode: Episode, after: str, *, forced: bool = False) -> AgentOutput:
        """Answer from the evidence memory alone, or refuse if the synthesiser finds it insufficient.

        ``after`` says why no verified answer came (``rounds``: R_max rounds used;
        ``budget``: the tool or model budget spent); it is the step's note and the
        episode's stop reason is ``synthesis`` (``budget`` for the runner's forced call).
        """
        memory: EvidenceMemory = episode.state.get("memory") or EvidenceMemory()
        template = self._prompts.final
        prompt = template.format(memory=memory.summaries() or "(empty)", question=episode.question_seen)
        completion = await self._chat(episode, prompt, "final_answer", actions.final_schema())
        episode.add_step(agent="aggregator", llm=completion.to_record(),
                         notes={"forced_final": forced, "synthesis": after, "eids": memory.eids()})
        return self._replies.final(completion.text, "budget" if forced else "synthesis")

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
        template = self._prompts.solver
        invalid = self._prompts.invalid
        messages = [{"role": "user", "content": template.format(
            index=index, n=self.n_solvers, context=context, question=episode.question_seen)}]
        # solver i samples with seed + i: with one seed, N solvers at temperature > 0 would draw alike
        seed = episode.decoding.seed
        decoding = episode.decoding if seed is None else episode.decoding.model_copy(update={"seed": seed + index})
        new_eids: list[str] = []
        for action_no in range(self.actions_per_round):
            citable = memory.eids() + list(memory.facts())  # what a fetch may name right now
            try:
                completion = await self._chat(episode, messages, "solver_action",
                                              actions.solver_schema(citable, "visit" in episode.env.tools),
                                              decoding)
            except BudgetExhausted as exc:
                episode.add_step(agent=agent, notes={"round": round_, "budget": exc.which})
                return SolverResult(new_eids, True)
            text = completion.text
            kind, argument = self._replies.action(text, citable)
            notes: dict[str, Any] = {"round": round_, "action_index": action_no}
            calls: list[ToolCall] = []
            if argument is None:
                notes["action"] = kind
                observation = None if kind == "done" else invalid
                episode.add_step(agent=agent, llm=completion.to_record(), observation=observation,
                                 notes=notes)
                if kind == "done":
                    break
            else:
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
                         {"role": "user", "content": observation or invalid}]
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
        template = self._prompts.extractor
        prompt = template.format(documents=documents, question=episode.question_seen)
        completion = await self._chat(episode, prompt, "extracted_facts", actions.extractor_schema(eids))
        found = self._replies.facts(completion.text, eids)
        findings: dict[str, str] = {}
        facts: dict[str, str] = {}
        for eid, finding in found:
            if eid in eids and finding.casefold() != "irrelevant":
                fact_eid = memory.add_fact(eid, finding)
                facts[fact_eid] = memory.facts(eid)[fact_eid]
                findings.setdefault(eid, finding)
        episode.add_step(agent="extractor", llm=completion.to_record(),
                         notes={"round": round_, "eids": eids, "findings": findings, "facts": facts})

    async def _aggregate(self, episode: Episode, memory: EvidenceMemory, context: str,
                         round_: int) -> Proposal:
        template = self._prompts.aggregator
        prompt = template.format(round=round_, max_rounds=self.max_rounds,
                                 memory=memory.summaries() or "(empty)", context=context,
                                 question=episode.question_seen)
        citable = memory.eids() + list(memory.facts())
        completion = await self._chat(episode, prompt, "aggregation", actions.aggregator_schema(citable))
        text = completion.text
        analysis, answer, claims = self._replies.proposal(text)
        index = memory.summaries() or "(no evidence yet)"
        next_context = f"Evidence index:\n{index}\nAnalysis:\n" + (analysis or "(none)")
        if answer is not None and (not answer or is_abstention(answer)):
            answer = None
        claims = claims if answer is not None else []
        episode.add_step(agent="aggregator", llm=completion.to_record(),
                         notes={"round": round_, "context": next_context, "proposed": answer,
                                "claims": claims, "eids": memory.eids(),
                                "eid_docs": memory.doc_ids()})
        return Proposal(next_context, answer, claims, text)

    async def _verify(self, episode: Episode, memory: EvidenceMemory, proposal: Proposal,
                      round_: int) -> Verification:
        """Accept only if there are claims, each entailed by its EID and relevant, and together they support the answer."""
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
        template = self._prompts.verifier
        prompt = template.format(answer=proposal.answer, claims=blocks, question=episode.question_seen)
        completion = await self._chat(episode, prompt, "verdicts", actions.verifier_schema(len(verdicts)))
        said = self._replies.verdicts(completion.text)
        for verdict in verdicts:
            verdict["verdict"] = said.get(verdict["claim"]) or "missing"
        support = said.get("support") or "missing"
        accepted = all(v["verdict"] == "entailed" for v in verdicts) and support == "supported"
        if not accepted and support != "supported":
            verdicts.append({"claim": "all", "eid": "", "text": "the claims jointly support the answer",
                             "verdict": support})
        episode.add_step(agent="verifier", llm=completion.to_record(),
                         notes={"round": round_, "answer": proposal.answer, "verdicts": verdicts,
                                "support": support, "accepted": accepted})
        return Verification(accepted, verdicts)


def trace_summary(steps: Sequence[Mapping[str, Any] | Any]) -> dict[str, Any]:
    """One EvidenceLoop episode's trace steps folded per round, plus totals.

    Why: an episode is dozens of sub-agent steps; this is the view a reader (or a
    test) checks: per round, each solver's actions (kind, argument, the EIDs it was
    shown and the new EIDs it caused), the fact EIDs extracted, the proposed answer,
    its claims and each claim's verdict. ``steps`` are trace steps as stored in
    ``traces.jsonl`` (dicts) or :class:`~aethersearch.records.Step` records.
    Totals: ``valid_actions`` (search/visit/fetch/done), ``invalid_actions``,
    ``tool_actions`` (search/visit that reached the environment), ``eids``
    (documents given an EID), ``fact_eids``, ``claims``, ``verified_claims``
    (verdict ``entailed``), ``accepted``, ``solvers_with_valid_action``, ``forced_final`` and
    ``synthesis`` (why the synthesis-only fallback ran: ``rounds`` or ``budget``; ``None`` if it did not).
    """
    rounds: dict[int, dict[str, Any]] = {}
    forced_final = False
    synthesis = None
    for raw in steps:
        step = raw if isinstance(raw, Mapping) else raw.model_dump(mode="json")
        agent, notes = str(step.get("agent") or ""), step.get("notes") or {}
        if notes.get("forced_final") or notes.get("synthesis"):
            forced_final = forced_final or bool(notes.get("forced_final"))
            synthesis = notes.get("synthesis") or synthesis
            continue
        number = notes.get("round")
        if number is None:
            continue
        entry = rounds.setdefault(number, {"round": number, "solvers": {}, "facts": {}, "proposed": None,
                                           "claims": [], "verdicts": [], "accepted": None})
        if agent.startswith("solver-"):
            entry["solvers"].setdefault(agent, []).append(
                {"action": notes.get("action", "budget"), "argument": notes.get("argument"),
                 "eids": list(notes.get("eids") or []), "new_eids": list(notes.get("new_eids") or [])})
        elif agent == "extractor":
            entry["facts"].update(notes.get("facts") or {})
        elif agent == "aggregator":
            entry["proposed"], entry["claims"] = notes.get("proposed"), list(notes.get("claims") or [])
        elif agent == "verifier":
            entry["verdicts"], entry["accepted"] = list(notes.get("verdicts") or []), notes.get("accepted")
    moves = [(solver, a["action"]) for r in rounds.values() for solver, acts in r["solvers"].items() for a in acts]
    verdicts = [v for r in rounds.values() for v in r["verdicts"]]
    return {
        "rounds": [rounds[k] for k in sorted(rounds)],
        "valid_actions": sum(kind in VALID_ACTIONS for _, kind in moves),
        "invalid_actions": sum(kind == "invalid" for _, kind in moves),
        "tool_actions": sum(kind in ("search", "visit") for _, kind in moves),
        "solvers_with_valid_action": sorted({solver for solver, kind in moves if kind in VALID_ACTIONS}),
        "eids": sorted({e for r in rounds.values() for acts in r["solvers"].values() for a in acts
                        for e in a["new_eids"]}, key=lambda e: int(e[1:])),
        "fact_eids": [fid for r in rounds.values() for fid in r["facts"]],
        "claims": sum(len(r["claims"]) for r in rounds.values()),
        "verified_claims": sum(v.get("verdict") == "entailed" for v in verdicts),
        "accepted": any(r["accepted"] for r in rounds.values()),
        "forced_final": forced_final,
        "synthesis": synthesis,
    }
