"""The ``direct`` (no retrieval) and ``naive-rag`` (retrieve top-k once, then answer) baselines.

Why they exist: they bracket every agentic result. ``direct`` measures what a
checkpoint knows without search (parametric knowledge); ``naive-rag`` what one
retrieval of the question itself gives. An agent that searches many times should
beat both, and the gaps are what agentic search adds. Both make exactly one model
call and parse the last ``<answer>…</answer>``; "I don't know" is an abstention.

``mode="chat"`` sends the prompt as one user message; ``mode="completion"`` sends
it as raw text (optionally wrapped by ``chat_template``) with ``</answer>`` as stop.
"""

from __future__ import annotations

from typing import Any

from aethersearch.agents.base import Agent, AgentOutput, Episode, finish_from_text
from aethersearch.agents.prompts import (
    CHAT_TEMPLATES,
    DIRECT_PROMPT,
    NAIVE_RAG_PROMPT,
    apply_chat_template,
    render_search_r1_docs,
)
from aethersearch.agents.tokenizers import get_tokenizer
from aethersearch.errors import ConfigError
from aethersearch.records import Decoding

_MODES = ("chat", "completion")


class _OneCall(Agent):
    """Shared: build one prompt, make one model call, parse the answer."""

    def __init__(self, mode: str = "chat", chat_template: str = "raw") -> None:
        if mode not in _MODES:
            raise ConfigError(f"unknown mode {mode!r} for agent {self.name!r}", fix=f"use one of {_MODES}")
        self.mode = mode
        self.chat_template = chat_template

    def config(self) -> dict[str, Any]:
        """Mode and chat template."""
        return {"mode": self.mode, "chat_template": self.chat_template}

    def effective_decoding(self, decoding: Decoding) -> Decoding:
        """Completion mode stops at ``</answer>``."""
        if self.mode == "completion" and "</answer>" not in decoding.stop:
            return decoding.model_copy(update={"stop": [*decoding.stop, "</answer>"]})
        return decoding

    async def _ask(self, episode: Episode, prompt: str, stop_reason: str) -> AgentOutput:
        if self.mode == "chat":
            completion = await episode.llm.chat([{"role": "user", "content": prompt}], episode.decoding)
            text = completion.text
        else:
            completion = await episode.llm.complete(apply_chat_template(self.chat_template, prompt),
                                                    episode.decoding)
            text = completion.text
            if completion.finish_reason == "stop" and text.rfind("<answer>") > text.rfind("</answer>"):
                text += "</answer>"
        episode.add_step(llm=completion.to_record().model_copy(update={"text": text}))
        return finish_from_text(text, stop_reason)


class DirectAgent(_OneCall):
    """Answer from parametric knowledge alone: no tools, one model call."""

    name = "direct"
    environment = "none"

    def prompt_template(self) -> str:
        """The direct prompt (and template)."""
        return DIRECT_PROMPT + "\x00" + CHAT_TEMPLATES.get(self.chat_template, self.chat_template)

    async def solve(self, episode: Episode) -> AgentOutput:
        """One call with the question."""
        return await self._ask(episode, DIRECT_PROMPT.format(question=episode.question_seen), "answer")


class NaiveRagAgent(_OneCall):
    """Retrieve the top-``k`` documents for the question once, then answer in one call."""

    name = "naive-rag"

    def __init__(self, topk: int = 3, max_obs_tokens: int = 500, tokenizer: str = "regex",
                 mode: str = "chat", chat_template: str = "raw") -> None:
        super().__init__(mode, chat_template)
        self.topk = topk
        self.max_obs_tokens = max_obs_tokens
        self._tokenizer = get_tokenizer(tokenizer)

    def config(self) -> dict[str, Any]:
        """Top-k, observation cut, tokenizer, mode and template."""
        return {**super().config(), "topk": self.topk, "max_obs_tokens": self.max_obs_tokens,
                "tokenizer": self._tokenizer.name}

    def prompt_template(self) -> str:
        """The RAG prompt (and template)."""
        return NAIVE_RAG_PROMPT + "\x00" + CHAT_TEMPLATES.get(self.chat_template, self.chat_template)

    async def solve(self, episode: Episode) -> AgentOutput:
        """One search with the question, then one call."""
        result = await episode.env.search(episode.question_seen, self.topk)
        docs = self._tokenizer.truncate(render_search_r1_docs(result.documents).strip(), self.max_obs_tokens)
        episode.add_step(tool_calls=[result.call], observation=docs)
        prompt = NAIVE_RAG_PROMPT.format(results=docs, question=episode.question_seen)
        return await self._ask(episode, prompt, "answer")
