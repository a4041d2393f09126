"""The tool budget, enforced outside the agent by wrapping its Environment and its LLM.

Why wrappers: an agent cannot be trusted to count its own calls (and a bug in one
agent must not make its numbers incomparable with another's). The runner gives
every episode a :class:`BudgetTracker` and hands the agent only the wrapped
environment and model. A call past a limit raises ``BudgetExhausted`` *before*
anything is sent, so the limits are never exceeded:

* ``max_tool_calls`` — tool calls, including malformed ones the agent charges
  through ``Episode.charge`` (they never reach the environment);
* ``max_turns`` — model calls;
* ``max_tokens`` — completion tokens over the episode: each request's
  ``max_tokens`` is clamped to what is left, so even one long reply cannot overrun;
* ``max_context_tokens`` — one call's context: its prompt (counted by the word
  regex, the count the budget uses wherever no server count exists yet) plus its
  reply; the reply's ``max_tokens`` is clamped to what the prompt leaves, and a
  prompt that fills the context is refused.

After ``BudgetExhausted`` the runner calls :meth:`BudgetTracker.grant_final`: exactly
one more model call (the forced final answer) is allowed, with no tools, and it is
recorded as such in the trace. Nothing else is ever allowed past the limits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aethersearch.agents.llm import LLM, Completion, TokenCompletion
from aethersearch.agents.tokenizers import get_tokenizer
from aethersearch.environment import Environment, ToolResult, tool_failure
from aethersearch.errors import BudgetExhausted, ConfigError, EndpointError
from aethersearch.records import Budget, Decoding

__all__ = ["BudgetTracker", "BudgetedEnvironment", "BudgetedLLM", "DEFAULT_BUDGET", "PRESETS", "resolve_budget"]


class BudgetTracker:
    """Counts one episode's tool calls, model calls and completion tokens against a Budget."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.tool_calls = 0
        self.turns = 0
        self.completion_tokens = 0
        self.final_granted = False
        self.final_used = False
        self.exhausted: str | None = None

    def _exhaust(self, which: str, limit: int) -> BudgetExhausted:
        self.exhausted = self.exhausted or which
        return BudgetExhausted(which, limit)

    def tool_calls_left(self) -> int | None:
        """Tool calls left under the budget (None: no limit)."""
        limit = self.budget.max_tool_calls
        return None if limit is None else max(0, limit - self.tool_calls)

    def charge_tool(self, tool: str) -> None:
        """Count one tool call, or raise ``BudgetExhausted`` if none is left."""
        if self.final_granted:
            raise self._exhaust("tool_calls (forced final answer allows none)", self.tool_calls)
        limit = self.budget.max_tool_calls
        if limit is not None and self.tool_calls >= limit:
            raise self._exhaust("tool_calls", limit)
        self.tool_calls += 1

    def _fit_context(self, decoding: Decoding, prompt_tokens: int) -> Decoding:
        """``decoding`` with ``max_tokens`` clamped to what the prompt leaves of the context."""
        limit = self.budget.max_context_tokens
        if limit is None:
            return decoding
        left = limit - prompt_tokens
        if left <= 0:
            raise self._exhaust("context", limit)
        return decoding.model_copy(update={"max_tokens": left}) if decoding.max_tokens > left else decoding

    def before_llm(self, decoding: Decoding, prompt_tokens: int = 0) -> Decoding:
        """Admit one model call (clamping ``max_tokens``) or raise ``BudgetExhausted``."""
        decoding = self._fit_context(decoding, prompt_tokens)
        if self.final_granted:
            if self.final_used:
                raise self._exhaust("turns (forced final answer already made)", self.turns)
            self.final_used = True
            return decoding
        if self.budget.max_turns is not None and self.turns >= self.budget.max_turns:
            raise self._exhaust("turns", self.budget.max_turns)
        if self.budget.max_tokens is not None:
            left = self.budget.max_tokens - self.completion_tokens
            if left <= 0:
                raise self._exhaust("tokens", self.budget.max_tokens)
            if decoding.max_tokens > left:
                decoding = decoding.model_copy(update={"max_tokens": left})
        self.turns += 1
        return decoding

    def after_llm(self, completion: Completion) -> None:
        """Add the reply's completion tokens (server usage, else a regex count)."""
        tokens = completion.completion_tokens or get_tokenizer("regex").count(completion.text)
        if not self.final_used:
            self.completion_tokens += tokens

    def grant_final(self) -> None:
        """Allow exactly one more model call: the forced final answer."""
        self.final_granted = True


class BudgetedEnvironment:
    """An Environment whose every tool call is charged to a BudgetTracker first."""

    def __init__(self, env: Environment, tracker: BudgetTracker) -> None:
        self._env = env
        self.tracker = tracker

    @property
    def tools(self) -> tuple[str, ...]:
        """The wrapped environment's tools."""
        return self._env.tools

    async def search(self, query: str, k: int) -> ToolResult:
        """Charge, then search; a failed server is :class:`ToolUnavailable`, never an observation."""
        self.tracker.charge_tool("search")
        try:
            return await self._env.search(query, k)
        except EndpointError as exc:
            raise tool_failure("search", exc) from None

    async def visit(self, page: str) -> ToolResult:
        """Charge, then visit; a failed server is :class:`ToolUnavailable`, never an observation."""
        self.tracker.charge_tool("visit")
        try:
            return await self._env.visit(page)
        except EndpointError as exc:
            raise tool_failure("visit", exc) from None

    async def close(self) -> None:
        """Close the wrapped environment."""
        await self._env.close()


class BudgetedLLM(LLM):
    """An LLM whose every call is admitted (and its max_tokens clamped) by a BudgetTracker."""

    def __init__(self, llm: LLM, tracker: BudgetTracker) -> None:
        self._llm = llm
        self.tracker = tracker
        self.endpoint = llm.endpoint
        self.model = llm.model
        #: the server's template/tokenizer queries (``agents/served.py``): not model turns, never charged
        self.served = llm.served

    def _prompt_tokens(self, text: str) -> int:
        return get_tokenizer("regex").count(text) if self.tracker.budget.max_context_tokens is not None else 0

    async def complete(self, prompt: str, decoding: Decoding) -> Completion:
        """Admit, then complete."""
        result = await self._llm.complete(prompt, self.tracker.before_llm(decoding, self._prompt_tokens(prompt)))
        self.tracker.after_llm(result)
        return result

    @property
    def supports_token_ids(self) -> bool:
        """Whether the wrapped client can continue a token-id context (:meth:`complete_ids`)."""
        return self._llm.supports_token_ids

    async def complete_ids(self, ids: Sequence[int], decoding: Decoding, *, route: str = "/completion",
                           eos_token_id: int | None = None) -> TokenCompletion:
        """Admit (the context counted in ids), then continue the token-id context (``route``: the client's)."""
        if not self._llm.supports_token_ids:
            raise ConfigError(f"the model client {type(self._llm).__name__} cannot send token-id prompts",
                              fix="check supports_token_ids first and continue by text")
        context = len(ids) if self.tracker.budget.max_context_tokens is not None else 0
        result = await self._llm.complete_ids(ids, self.tracker.before_llm(decoding, context), route=route,
                                              eos_token_id=eos_token_id)
        self.tracker.after_llm(result.completion)
        return result

    async def chat(self, messages: list[dict[str, Any]], decoding: Decoding,
                   tools: list[dict[str, Any]] | None = None) -> Completion:
        """Admit, then chat (no tools are offered for the forced final answer)."""
        text = "\n".join(str(message.get("content") or "") for message in messages)
        decoding = self.tracker.before_llm(decoding, self._prompt_tokens(text))
        if self.tracker.final_granted:
            tools = None
        result = await self._llm.chat(messages, decoding, tools)
        self.tracker.after_llm(result)
        return result


#: Named budgets. ``webdetective``: the paper's agents ran with 40 tool calls and a 32K context; it states no
#: turn limit, so none is set (invalid actions are charged as tool calls, so 40 still bounds an episode).
PRESETS: dict[str, Budget] = {
    "webdetective": Budget(max_tool_calls=40, max_turns=None, max_tokens=None, max_context_tokens=32768),
}
#: The budget of ``aether run``/``eval`` without a preset (Search-R1's eval: 4 turns).
DEFAULT_BUDGET = Budget(max_tool_calls=8, max_turns=4)


def resolve_budget(preset: str | None, *, max_tool_calls: int | None = None, max_turns: int | None = None,
                   token_budget: int | None = None, context_tokens: int | None = None,
                   base: Budget | None = None) -> Budget:
    """The budget of a preset (or ``base``, an agent profile's, or the default one) with every explicitly
    given limit overriding it.

    An unknown preset is a ConfigError listing the valid names.
    """
    if preset is not None and preset not in PRESETS:
        raise ConfigError(f"unknown budget preset {preset!r}", fix=f"use one of: {', '.join(sorted(PRESETS))}")
    base = PRESETS[preset] if preset is not None else base or DEFAULT_BUDGET
    given = {"max_tool_calls": max_tool_calls, "max_turns": max_turns, "max_tokens": token_budget,
             "max_context_tokens": context_tokens}
    return base.model_copy(update={k: v for k, v in given.items() if v is not None})
