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
  ``max_tokens`` is clamped to what is left, so even one long reply cannot overrun.

After ``BudgetExhausted`` the runner calls :meth:`BudgetTracker.grant_final`: exactly
one more model call (the forced final answer) is allowed, with no tools, and it is
recorded as such in the trace. Nothing else is ever allowed past the limits.
"""

from __future__ import annotations

from typing import Any

from aethersearch.agents.llm import LLM, Completion
from aethersearch.agents.tokenizers import get_tokenizer
from aethersearch.environment import Environment, ToolResult
from aethersearch.errors import BudgetExhausted
from aethersearch.records import Budget, Decoding


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

    def charge_tool(self, tool: str) -> None:
        """Count one tool call, or raise ``BudgetExhausted`` if none is left."""
        if self.final_granted:
            raise self._exhaust("tool_calls (forced final answer allows none)", self.tool_calls)
        limit = self.budget.max_tool_calls
        if limit is not None and self.tool_calls >= limit:
            raise self._exhaust("tool_calls", limit)
        self.tool_calls += 1

    def before_llm(self, decoding: Decoding) -> Decoding:
        """Admit one model call (clamping ``max_tokens``) or raise ``BudgetExhausted``."""
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
        """Charge, then search."""
        self.tracker.charge_tool("search")
        return await self._env.search(query, k)

    async def visit(self, page: str) -> ToolResult:
        """Charge, then visit."""
        self.tracker.charge_tool("visit")
        return await self._env.visit(page)

    async def close(self) -> None:
        """Close the wrapped environment."""
        await self._env.close()


class BudgetedLLM:
    """An LLM whose every call is admitted (and its max_tokens clamped) by a BudgetTracker."""

    def __init__(self, llm: LLM, tracker: BudgetTracker) -> None:
        self._llm = llm
        self.tracker = tracker
        self.endpoint = llm.endpoint
        self.model = llm.model
        #: the server's template/tokenizer queries (``agents/served.py``): not model turns, never charged
        self.served = getattr(llm, "served", None)

    async def complete(self, prompt: str, decoding: Decoding) -> Completion:
        """Admit, then complete."""
        result = await self._llm.complete(prompt, self.tracker.before_llm(decoding))
        self.tracker.after_llm(result)
        return result

    async def chat(self, messages: list[dict[str, Any]], decoding: Decoding,
                   tools: list[dict[str, Any]] | None = None) -> Completion:
        """Admit, then chat (no tools are offered for the forced final answer)."""
        decoding = self.tracker.before_llm(decoding)
        if self.tracker.final_granted:
            tools = None
        result = await self._llm.chat(messages, decoding, tools)
        self.tracker.after_llm(result)
        return result
