"""The ``direct`` (no retrieval) and ``naive-rag`` (retrieve top-k once, then answer) baselines.

Why they exist: they bracket every agentic result. ``direct`` measures what a
checkpoint knows without search (parametric knowledge); ``naive-rag`` what one
retrieval of the question itself gives. An agent that searches many times should
beat both, and the gaps are what agentic search adds. Both make exactly one model
call and classify the reply with the one rule every agent shares
(:func:`~aethersearch.agents.base.finish_reply`); "I don't know" is an abstention.

``prompt_format`` (:mod:`.formatting`): ``chat`` sends the prompt as one user message
to ``/v1/chat/completions`` (or renders a named local ``chat_template`` and completes);
``raw`` sends it as text to ``/v1/completions`` with ``</answer>`` as a verified stop
(:mod:`.stops`); ``auto`` (default) is ``chat`` when the server reports a template.
"""

from __future__ import annotations

from typing import Any

from aethersearch.agents.base import Agent, AgentOutput, Episode, finish_reply
from aethersearch.agents.formatting import (
    SERVED,
    check_prompt_settings,
    render_chat_prompt,
    resolve_format,
    template_text,
)
from aethersearch.agents.prompts import (
    DIRECT_PROMPT,
    NAIVE_RAG_PROMPT,
    render_search_r1_docs,
)
from aethersearch.agents.stops import generate
from aethersearch.agents.tokenizers import check_tokenizer_spec, observation_tokenizer
from aethersearch.records import Decoding

__all__ = ["DirectAgent", "NaiveRagAgent"]

_ANSWER_STOP = ["</answer>"]


def _cut_after_answer(text: str) -> str:
    """Keep the reply up to its first ``</answer>`` (what a server-side stop would give)."""
    return text.split("</answer>")[0] + "</answer>" if "</answer>" in text else text


class _OneCall(Agent):
    """Shared: build one prompt, make one model call, classify the reply."""

    def __init__(self, prompt_format: str = "auto", chat_template: str = SERVED) -> None:
        check_prompt_settings(prompt_format, chat_template)
        self.prompt_format = prompt_format
        self.chat_template = chat_template

    def config(self) -> dict[str, Any]:
        """Prompt format and chat template."""
        return {"prompt_format": self.prompt_format, "chat_template": self.chat_template}

    def effective_decoding(self, decoding: Decoding) -> Decoding:
        """Text completions stop at ``</answer>`` (verified, see :mod:`.stops`)."""
        if "</answer>" not in decoding.stop:
            return decoding.model_copy(update={"stop": [*decoding.stop, "</answer>"]})
        return decoding

    async def _ask(self, episode: Episode, prompt: str, stop_reason: str) -> AgentOutput:
        chosen = await resolve_format(self.prompt_format, self.chat_template, episode.llm)
        notes: dict[str, Any] = {"prompt_format": chosen.format, "prompt_format_reason": chosen.reason}
        if chosen.format == "chat" and self.chat_template == SERVED:
            decoding = episode.decoding.model_copy(update={"stop": [s for s in episode.decoding.stop
                                                                    if s != "</answer>"]})
            assert episode.llm is not None  # needs_llm: the runner always gives one
            completion = await episode.llm.chat([{"role": "user", "content": prompt}], decoding)
            episode.add_step(llm=completion.to_record(), notes=notes)
            return finish_reply(completion.text, completion.finish_reason, stop_reason)
        if chosen.format == "chat":
            prompt = await render_chat_prompt(prompt, self.chat_template, "", episode.llm)
        turn = await generate(episode.llm, prompt, episode.decoding, _ANSWER_STOP, _cut_after_answer)
        notes.update(turn.notes)
        if turn.text != turn.completion.text:
            notes["context_text"] = turn.text
        record = turn.completion.to_record(turn.completion_tokens)
        episode.add_step(llm=record, notes=notes)
        return finish_reply(turn.text, turn.completion.finish_reason, stop_reason)


class DirectAgent(_OneCall):
    """Answer from parametric knowledge alone: no tools, one model call."""

    name = "direct"
    environment = "none"

    def prompt_template(self) -> str:
        """The direct prompt (and template)."""
        return DIRECT_PROMPT + "\x00" + template_text(self.chat_template)

    async def solve(self, episode: Episode) -> AgentOutput:
        """One call with the question."""
        return await self._ask(episode, DIRECT_PROMPT.format(question=episode.question_seen), "answer")


class NaiveRagAgent(_OneCall):
    """Retrieve the top-``k`` documents for the question once, then answer in one call."""

    name = "naive-rag"

    def __init__(self, topk: int = 3, max_obs_tokens: int = 500, tokenizer: str = "served",
                 prompt_format: str = "auto", chat_template: str = SERVED) -> None:
        super().__init__(prompt_format, chat_template)
        check_tokenizer_spec(tokenizer)
        self.topk = topk
        self.max_obs_tokens = max_obs_tokens
        self.tokenizer = tokenizer

    def config(self) -> dict[str, Any]:
        """Top-k, observation cut, tokenizer, prompt format and template."""
        return {**super().config(), "topk": self.topk, "max_obs_tokens": self.max_obs_tokens,
                "tokenizer": self.tokenizer}

    def prompt_template(self) -> str:
        """The RAG prompt (and template)."""
        return NAIVE_RAG_PROMPT + "\x00" + template_text(self.chat_template)

    async def solve(self, episode: Episode) -> AgentOutput:
        """One search with the question, then one call."""
        result = await episode.env.search(episode.question_seen, self.topk)
        cutter = observation_tokenizer(self.tokenizer, episode.llm)
        docs, tokens = await cutter.truncate(render_search_r1_docs(result.documents).strip(), self.max_obs_tokens)
        episode.add_step(tool_calls=[result.call], observation=docs,
                         notes={"observation_tokens": tokens, "observation_cut": tokens > self.max_obs_tokens,
                                "tokenizer": cutter.name})
        prompt = NAIVE_RAG_PROMPT.format(results=docs, question=episode.question_seen)
        return await self._ask(episode, prompt, "answer")
