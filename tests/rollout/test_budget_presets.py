"""Budget presets (``--preset webdetective``) and the per-call context limit."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aethersearch.agents.llm import LLM, Completion
from aethersearch.errors import BudgetExhausted, ConfigError
from aethersearch.records import Budget, Decoding
from aethersearch.rollout.budget import BudgetedLLM, BudgetTracker, resolve_budget


def test_the_webdetective_preset_is_the_papers_budget_and_explicit_limits_override_it() -> None:
    paper = resolve_budget("webdetective")
    assert (paper.max_tool_calls, paper.max_context_tokens, paper.max_turns) == (40, 32768, None)
    assert resolve_budget(None) == Budget(max_tool_calls=8, max_turns=4)  # the standing default
    mixed = resolve_budget("webdetective", max_tool_calls=12, token_budget=900)
    assert (mixed.max_tool_calls, mixed.max_tokens, mixed.max_context_tokens) == (12, 900, 32768)
    assert resolve_budget(None, context_tokens=4096).max_context_tokens == 4096


def test_an_unknown_preset_names_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="webdetective"):
        resolve_budget("webdetectiv")


class EchoLLM(LLM):
    endpoint = "http://fake/v1"
    model = "fake"

    def __init__(self) -> None:
        self.sent: list[int] = []

    async def chat(self, messages: list[dict[str, Any]], decoding: Decoding,
                   tools: list[dict[str, Any]] | None = None) -> Completion:
        self.sent.append(decoding.max_tokens)
        return Completion("ok", "stop", None, 0, 1, [], 0.0, 1)

    async def complete(self, prompt: str, decoding: Decoding) -> Completion:
        self.sent.append(decoding.max_tokens)
        return Completion("ok", "stop", None, 0, 1, [], 0.0, 1)


def test_the_context_limit_clamps_the_reply_and_refuses_a_prompt_that_fills_it() -> None:
    inner = EchoLLM()
    llm = BudgetedLLM(inner, BudgetTracker(Budget(max_tool_calls=None, max_turns=None, max_context_tokens=100)))
    asyncio.run(llm.chat([{"role": "user", "content": "word " * 30}], Decoding(max_tokens=500)))
    asyncio.run(llm.complete("word " * 90, Decoding(max_tokens=5)))
    assert inner.sent == [70, 5]  # 100 - 30 prompt tokens; a reply that fits is left alone
    with pytest.raises(BudgetExhausted, match="context"):
        asyncio.run(llm.chat([{"role": "user", "content": "word " * 60}, {"role": "assistant", "content":
                                                                           "word " * 40}], Decoding()))
    unlimited = EchoLLM()
    asyncio.run(BudgetedLLM(unlimited, BudgetTracker(Budget())).complete("word " * 10_000, Decoding()))
    assert unlimited.sent == [500]
