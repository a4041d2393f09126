"""The agent protocol, the per-episode context and the agent name map.

Why this shape: the runner (``rollout/``) owns everything that must be the same
for every agent — the tool budget, timing, error outcomes, the trace on disk —
and hands an agent one :class:`Episode` per question. The episode's
``env`` and ``llm`` are already wrapped by the runner's budget, so an agent
cannot exceed it: a call past the limit raises ``BudgetExhausted``, the runner
catches it and asks the agent for exactly one forced final answer
(:meth:`Agent.final_answer`).

An agent only ever sees the rollout projection (``id``, ``question``); this
module imports nothing that can read gold (an architecture test enforces it).

Writing a new agent (e.g. ``agents/evidenceloop.py``): subclass :class:`Agent`,
set ``name``, implement :meth:`Agent.solve` (record each turn with
:meth:`Episode.add_step`), optionally :meth:`Agent.final_answer`, and return
:func:`finish`'s result. Register it in :data:`AGENTS`.
"""

from __future__ import annotations

import hashlib
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

from aethersearch.abstention import is_abstention
from aethersearch.agents.llm import LLM, Completion
from aethersearch.agents.prompts import extract_answer
from aethersearch.environment import Environment
from aethersearch.errors import ConfigError
from aethersearch.records import (
    Decoding,
    LLMCall,
    Outcome,
    RolloutQuestion,
    Step,
    ToolCall,
)
from aethersearch.registry import resolve

__all__ = ["AGENTS", "Agent", "AgentOutput", "Episode", "NO_MODEL", "finish", "finish_from_text", "finish_reply",
    "make_agent"]

AGENTS: dict[str, str] = {
    "search-r1": "aethersearch.agents.search_r1:SearchR1Agent",
    "aethersearch": "aethersearch.agents.aethersearch_loop:AetherSearchAgent",
    "verl-search": "aethersearch.agents.verl_search:VerlSearchAgent",
    "react": "aethersearch.agents.react:ReactAgent",
    "direct": "aethersearch.agents.baselines:DirectAgent",
    "naive-rag": "aethersearch.agents.baselines:NaiveRagAgent",
    "lexical": "aethersearch.agents.lexical:LexicalAgent",
    "lexical-browse": "aethersearch.agents.browse:LexicalBrowseAgent",
    "evidenceloop": "aethersearch.agents.evidenceloop:EvidenceLoopAgent",
}


class AgentOutput(NamedTuple):
    """How an episode ended, as the agent sees it (the runner adds timing, usage and ids)."""

    response: str
    prediction: str | None
    outcome: Outcome
    stop_reason: str


class _NoModel(LLM):
    """The model slot of an episode whose agent needs none (``needs_llm = False``).

    Why not ``None``: every agent can then call ``episode.llm`` without a None
    check, and a no-LLM agent that calls a model anyway fails loudly with the fix.
    """

    endpoint: str | None = None
    model: str | None = None

    def _refuse(self) -> ConfigError:
        return ConfigError("this episode has no model: its agent declared needs_llm = False but called one",
                           fix="give the run an --endpoint and --model, or set needs_llm = True on the agent")

    async def complete(self, prompt: str, decoding: Decoding) -> Completion:
        """Always refuses (see the class docstring)."""
        raise self._refuse()

    async def chat(self, messages: list[dict[str, Any]], decoding: Decoding,
                   tools: list[dict[str, Any]] | None = None) -> Completion:
        """Always refuses (see the class docstring)."""
        raise self._refuse()


#: The model of episodes run without one; see :class:`_NoModel`.
NO_MODEL: LLM = _NoModel()


@dataclass
class Episode:
    """Everything one agent needs for one question, plus the growing list of steps.

    ``env`` and ``llm`` are budget-enforcing wrappers supplied by the runner;
    ``state`` is the agent's scratch space (e.g. the rolling Search-R1 prompt)
    so that :meth:`Agent.final_answer` can continue where :meth:`Agent.solve`
    was interrupted.
    """

    question: RolloutQuestion
    question_seen: str
    env: Environment
    #: The budget-wrapped model; :data:`NO_MODEL` (which refuses every call) for no-LLM agents.
    llm: LLM
    decoding: Decoding
    steps: list[Step] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    #: Budget hook set by the runner: charges one tool call that never reached the
    #: environment (a malformed call). Raises ``BudgetExhausted`` when none is left.
    charge: Callable[[str], None] | None = None
    #: Budget hook set by the runner: the tool calls left (None: no limit); see :meth:`tool_calls_left`.
    calls_left: Callable[[], int | None] | None = None

    def __post_init__(self) -> None:
        if self.llm is None:  # callers written before NO_MODEL existed
            self.llm = NO_MODEL

    def tool_calls_left(self) -> int | None:
        """Tool calls this episode may still make (None: no limit, or no budget attached)."""
        return self.calls_left() if self.calls_left is not None else None

    def charge_invalid_tool_call(self, tool: str) -> None:
        """Charge a malformed tool call to the budget (it counts, though the tool never ran)."""
        if self.charge is not None:
            self.charge(tool)

    def add_step(
        self,
        *,
        llm: LLMCall | None = None,
        tool_calls: list[ToolCall] | None = None,
        observation: str | None = None,
        agent: str = "main",
        notes: dict[str, Any] | None = None,
    ) -> int:
        """Append a step and return its index (so tool results can be attached later).

        The arguments are records and values the agent already holds typed (a model
        call from :meth:`Completion.to_record`, tool calls from the environment), so
        the step is not validated again (:meth:`Record.trusted`); the lists and the
        notes are copied, as validation did, so a caller reusing them cannot change
        a recorded step.
        """
        index = len(self.steps)
        self.steps.append(Step.trusted(index=index, agent=agent, llm=llm,
                                       tool_calls=list(tool_calls) if tool_calls else [],
                                       observation=observation, notes=dict(notes) if notes else {}))
        return index

    def update_step(self, index: int, **changes: Any) -> None:
        """Replace fields of a recorded step (steps are frozen records; this swaps in a copy)."""
        current = self.steps[index]
        if "tool_calls" in changes:
            changes["tool_calls"] = [*current.tool_calls, *changes["tool_calls"]]
        if "notes" in changes:
            changes["notes"] = {**current.notes, **changes["notes"]}
        self.steps[index] = current.model_copy(update=changes)


class Agent(ABC):
    """An agent loop. Stateless across episodes: per-question state lives in the Episode."""

    name: ClassVar[str]
    #: False for agents that never call a model (``lexical``); the runner then needs no endpoint.
    needs_llm: ClassVar[bool] = True
    #: True when K samples at a temperature above 0 can differ: a model's sampled decoding, or a no-LLM
    #: agent's own seeded choices (``lexical``). False for agents whose K samples are always identical.
    can_sample: ClassVar[bool] = True
    #: The environment kind the agent expects (recorded in the fingerprint).
    environment: ClassVar[str] = "search"
    #: True when the agent's prompt states its budget (rounds, calls): its behaviour before a smaller
    #: budget then depends on the budget, so accuracy at smaller budgets cannot be read off one run.
    states_budget: ClassVar[bool] = False

    def config(self) -> dict[str, Any]:
        """Settings that determine predictions (recorded as ``agent_config`` in run.json)."""
        return {}

    def prompt_template(self) -> str | None:
        """The prompt text(s) the agent uses, or None; hashed into the fingerprint."""
        return None

    def prompt_template_hash(self) -> str | None:
        """sha256 of :meth:`prompt_template` (None for prompt-free agents)."""
        template = self.prompt_template()
        return None if template is None else hashlib.sha256(template.encode("utf-8")).hexdigest()

    def question_seen(self, question: str) -> str:
        """The exact question text the agent will put in front of the model (recorded in the trace)."""
        return question

    def effective_decoding(self, decoding: Decoding) -> Decoding:
        """The decoding actually sent (e.g. with the agent's stop strings added); recorded in run.json."""
        return decoding

    def retrieval_topk(self) -> int | None:
        """Documents per search, recorded as ``retrieval_topk`` in ``run.json``: the ``topk`` of
        :meth:`config` (every search agent's), None when the agent fixes none."""
        topk = self.config().get("topk")
        return topk if isinstance(topk, int) else None

    async def probe_server(self, llm: LLM) -> dict[str, Any]:
        """What the agent found out about the model server before the run, merged into ``served_model``
        in ``run.json`` (default: nothing; ``--agent aethersearch`` records how it continues)."""
        return {}

    @abstractmethod
    async def solve(self, episode: Episode) -> AgentOutput:
        """Answer ``episode.question`` using ``episode.env`` and ``episode.llm``.

        May raise ``BudgetExhausted`` (from the wrappers) at any tool or model call;
        the runner then calls :meth:`final_answer` once.
        """

    async def final_answer(self, episode: Episode) -> AgentOutput:
        """The one forced final-answer request after the budget ran out.

        The default gives up with ``Outcome.BUDGET``; LLM agents override it to make
        exactly one more model call asking for the answer.
        """
        return AgentOutput("", None, Outcome.BUDGET, "budget")


def finish(response: str, answer: str | None, stop_reason: str) -> AgentOutput:
    """Classify a final answer: None → no answer tag, a refusal → abstained, else answered."""
    if answer is None:
        return AgentOutput(response, None, Outcome.NO_ANSWER_TAG, stop_reason)
    answer = answer.strip()
    if is_abstention(answer):
        return AgentOutput(response, answer, Outcome.ABSTAINED, stop_reason)
    return AgentOutput(response, answer, Outcome.ANSWERED, stop_reason)


def finish_from_text(response: str, stop_reason: str) -> AgentOutput:
    """:func:`finish` on the last ``<answer>…</answer>`` of ``response``."""
    return finish(response, extract_answer(response), stop_reason)


def finish_reply(text: str, finish_reason: str | None, stop_reason: str) -> AgentOutput:
    """THE rule for a final reply, applied by every agent (direct, naive-rag, react, search-r1's tags).

    * the answer is the content of the last *closed* ``<answer>…</answer>``: an
      untagged reply is never taken as the answer, whatever the agent (Search-R1's
      rule: ``extract_solution`` finds nothing, the question scores 0);
    * no closed answer tag and ``finish_reason == "length"`` → ``truncated`` (the
      reply was cut at ``max_tokens``; it may be garbage or a runaway);
    * no closed answer tag otherwise → ``no_answer_tag``;
    * a closed tag holding a refusal ("I don't know", …) → ``abstained``.

    None of these non-answers is ever scored as a wrong answer.
    """
    answer = extract_answer(text)
    if answer is None and finish_reason == "length":
        return AgentOutput(text, None, Outcome.TRUNCATED, stop_reason)
    return finish(text, answer, stop_reason)


def make_agent(name: str, **config: Any) -> Agent:
    """Build the agent registered as ``name`` (unknown names list the valid ones).

    A setting the agent does not take, or one it rejects, is a ConfigError naming the
    agent's accepted settings (``--agent-config`` passes user text straight here).
    """
    cls = resolve("agent", name, AGENTS)
    accepted = [p for p in inspect.signature(cls.__init__).parameters.values()
                if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    takes_any = any(p.kind is p.VAR_KEYWORD for p in inspect.signature(cls.__init__).parameters.values())
    names = [p.name for p in accepted]
    unknown = sorted(set(config) - set(names))
    settings = ", ".join(f"{p.name}={p.default!r}" for p in accepted) or "none"
    if unknown and not takes_any:
        raise ConfigError(f"agent {name!r} has no setting(s) {', '.join(map(repr, unknown))}",
                          fix=f"its settings (with defaults) are: {settings}")
    for param in accepted:  # a value of the wrong kind would fail every question, not here
        default, value = param.default, config.get(param.name, param.default)
        if isinstance(default, (bool, int, float, str)) and default is not None:
            kinds = (int, float) if type(default) is float else (type(default),)
            if not isinstance(value, kinds) or (isinstance(value, bool) and type(default) is not bool):
                raise ConfigError(f"agent {name!r} setting {param.name}={value!r} should be a "
                                  f"{type(default).__name__} (default {default!r})",
                                  fix=f"its settings (with defaults) are: {settings}")
    try:
        agent: Agent = cls(**config)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"agent {name!r} rejected its settings {config!r}: {exc}",
                          fix=f"its settings (with defaults) are: {settings}") from None
    return agent
