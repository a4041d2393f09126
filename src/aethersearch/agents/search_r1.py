"""The Search-R1 agent: the tag protocol of Search-R1's ``LLMGenerationManager``, bit-compatible.

Behaviour matched to ``search_r1/llm_agent/generation.py`` and ``infer.py``
(PeterGriffinJin/Search-R1), each point tested against its exact strings:

* one prompt (docs/design/conventions.md) with the question as Search-R1 preprocesses it (stripped,
  ``?`` appended when missing; recorded as ``Trace.question_seen``), wrapped in the
  model's chat template when it has one (``prompt_format``: :mod:`.formatting`);
* the reply is cut after the first ``</search>`` if it has one, else after the
  first ``</answer>`` (``_postprocess_responses``). Stops are sent to the server
  for speed and verified so the text is the one a client-side cut gives
  (:mod:`.stops`); ``stop_mode="client"`` sends none;
* the action is the first ``<(search|answer)>(.*?)</\\1>`` match, content stripped
  (``postprocess_predictions``). A tag that is never closed — end of text, or
  ``finish_reason: length`` — is an *invalid action*, as in Search-R1; the trace
  keeps the server's text byte for byte (``LLMCall.text``) and never a closing tag
  the model did not write;
* a search appends ``\\n\\n<information>{docs}</information>\\n\\n`` with the top-``k``
  (3) documents rendered ``Doc {i}(Title: {title}) {text}\\n``; an invalid action
  appends the invalid-action message and the loop goes on;
* each observation is cut to ``max_obs_tokens`` (500) tokens of the *served*
  model's tokenizer by default (``_process_next_obs``; :mod:`.tokenizers`);
* the rolling context is cut from the left to its last ``max_prompt_tokens``
  (4096, Search-R1's ``max_prompt_length``) tokens before each generation, as
  ``_update_rolling_state`` does; the cut is noted in the step;
* ``max_turns`` (4) search turns come from the runner's budget; when they are
  spent, the runner's forced final answer is Search-R1's final rollout: one more
  generation on the same context, in which a search is not executed.

``prompt_variant="stated-confidence"`` (opt-in, recorded in ``run.json``'s
``agent_config`` and prompt hash, so ``compare`` never pairs it with the plain
prompt) asks for a confidence inside the answer tags
(:mod:`aethersearch.stated_confidence`); the recorded prediction is the answer
without it, and the final step's notes keep what was read (``stated_confidence``).

Known, documented difference: Search-R1 concatenates token ids, we concatenate
text, so a tokenizer that does not round-trip the text may tokenize a boundary
differently.
"""

from __future__ import annotations

import re
from typing import Any

from aethersearch.agents.base import Agent, AgentOutput, Episode, finish
from aethersearch.agents.formatting import (
    check_prompt_settings,
    render_chat_prompt,
    resolve_format,
    template_text,
)
from aethersearch.agents.prompts import (
    SEARCH_R1_INVALID_ACTION,
    SEARCH_R1_STOP,
    render_search_r1_docs,
    search_r1_observation,
    search_r1_prompt_for,
    search_r1_question,
)
from aethersearch.agents.stops import STOP_MODES, generate
from aethersearch.agents.tokenizers import check_tokenizer_spec, observation_tokenizer
from aethersearch.errors import ConfigError
from aethersearch.records import Decoding, LLMCall, Outcome
from aethersearch.stated_confidence import (
    PROMPT_VARIANT_KEY,
    PROMPT_VARIANTS,
    STATED_CONFIDENCE,
    split_confidence,
)

__all__ = ["SearchR1Agent", "parse_action", "postprocess_response"]

_ACTION = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)


def postprocess_response(text: str) -> str:
    """Search-R1 ``_postprocess_responses``: cut after the first ``</search>``, else ``</answer>``."""
    if "</search>" in text:
        return text.split("</search>")[0] + "</search>"
    if "</answer>" in text:
        return text.split("</answer>")[0] + "</answer>"
    return text


def parse_action(text: str) -> tuple[str | None, str]:
    """Search-R1 ``postprocess_predictions``: (``search``/``answer``/None, stripped content)."""
    match = _ACTION.search(text)
    if not match:
        return None, ""
    return match.group(1), match.group(2).strip()


class SearchR1Agent(Agent):
    """Search-R1's multi-turn ``<search>``/``<answer>`` loop over a text-completion endpoint."""

    name = "search-r1"

    def __init__(self, topk: int = 3, max_obs_tokens: int = 500, tokenizer: str = "served",
                 prompt_format: str = "auto", chat_template: str = "served", max_prompt_tokens: int = 4096,
                 stop_mode: str = "server", prompt_variant: str = PROMPT_VARIANTS[0]) -> None:
        check_prompt_settings(prompt_format, chat_template)
        check_tokenizer_spec(tokenizer)
        if stop_mode not in STOP_MODES:
            raise ConfigError(f"unknown stop_mode {stop_mode!r}", fix=f"use one of {STOP_MODES}")
        self.topk = topk
        self.max_obs_tokens = max_obs_tokens
        self.tokenizer = tokenizer
        self.prompt_format = prompt_format
        self.chat_template = chat_template
        self.max_prompt_tokens = max_prompt_tokens
        self.stop_mode = stop_mode
        self.prompt = search_r1_prompt_for(prompt_variant)  # refuses an unknown variant by name
        self.prompt_variant = prompt_variant

    def config(self) -> dict[str, Any]:
        """Every setting that changes what the model sees.

        The prompt variant is recorded only when it is not Search-R1's own prompt, so
        every run made before the variant existed keeps its contract.
        """
        config: dict[str, Any] = {
            "topk": self.topk, "max_obs_tokens": self.max_obs_tokens, "tokenizer": self.tokenizer,
            "prompt_format": self.prompt_format, "chat_template": self.chat_template,
            "max_prompt_tokens": self.max_prompt_tokens, "stop_mode": self.stop_mode}
        if self.prompt_variant != PROMPT_VARIANTS[0]:
            config[PROMPT_VARIANT_KEY] = self.prompt_variant
        return config

    def prompt_template(self) -> str:
        """Prompt, chat template and invalid-action text, hashed into run.json."""
        return "\x00".join([self.prompt, template_text(self.chat_template), SEARCH_R1_INVALID_ACTION])

    def question_seen(self, question: str) -> str:
        """The question with Search-R1's appended ``?``."""
        return search_r1_question(question)

    def effective_decoding(self, decoding: Decoding) -> Decoding:
        """``decoding`` with the stops sent to the server (none with ``stop_mode="client"``)."""
        if self.stop_mode == "client":
            return decoding.model_copy(update={"stop": []})
        stop = list(decoding.stop) + [s for s in SEARCH_R1_STOP if s not in decoding.stop]
        return decoding.model_copy(update={"stop": stop})

    async def _start(self, episode: Episode) -> None:
        """The first prompt (format decided and rendered once per episode) and the observation cut.

        Called by :meth:`_generate` on an episode's first turn only.
        """
        chosen = await resolve_format(self.prompt_format, self.chat_template, episode.llm)
        prompt = self.prompt.format(question=episode.question_seen)
        if chosen.format == "chat":
            prompt = await render_chat_prompt(prompt, self.chat_template, self.tokenizer, episode.llm)
        # the stops of this episode's decoding in Search-R1's priority order, chosen once (not per turn)
        stops = [s for s in episode.decoding.stop if s in SEARCH_R1_STOP] or SEARCH_R1_STOP
        episode.state.update(prompt=prompt, response="", cut=observation_tokenizer(self.tokenizer, episode.llm),
                             stops=stops,
                             format_notes={"prompt_format": chosen.format, "prompt_format_reason": chosen.reason})

    async def _generate(self, episode: Episode) -> tuple[LLMCall, dict[str, Any], str]:
        """One generation on the rolling context: (the call's record, the step's notes, the cut text).

        The step itself is recorded by the caller once its observation is known
        (:meth:`_record`), so each turn builds one ``Step`` instead of adding one
        and copying it again for the observation.
        """
        state = episode.state
        if "prompt" not in state:  # first turn: no coroutine per later turn
            await self._start(episode)
        # the first turn's notes are the format notes (popped: no one else holds them)
        notes: dict[str, Any] = state.pop("format_notes", None) or {}
        context = state["prompt"] + state["response"]
        limit = self.max_prompt_tokens
        # a token covers at least one byte, so a text of at most ``limit`` bytes cannot be over the limit;
        # an ASCII text has as many bytes as characters (no encoding needed to know)
        if limit and (len(context) > limit or (not context.isascii() and len(context.encode("utf-8")) > limit)):
            context, tokens = await state["cut"].keep_last(context, limit)
            if tokens > limit:
                notes["context_truncated"] = {"tokens": tokens, "kept": limit}
        turn = await generate(episode.llm, context, episode.decoding, state["stops"], postprocess_response,
                              mode=self.stop_mode)
        record = turn.completion.to_record(turn.completion_tokens)
        notes.update(turn.notes)
        if turn.text != turn.completion.text:
            notes["context_text"] = turn.text  # what went into the context (restored stop, Search-R1's cut)
        state["response"] += turn.text
        return record, notes, turn.text

    async def _observe(self, episode: Episode, record: LLMCall, notes: dict[str, Any], query: str) -> str:
        """Search, render, cut to ``max_obs_tokens`` tokens; record the step with the call and the cut.

        A search that fails or is cut short (budget, deadline) still records the
        model call, without an observation, before the exception goes on.
        """
        try:
            result = await episode.env.search(query, self.topk)
            observation = search_r1_observation(render_search_r1_docs(result.documents))
            cut, tokens = await episode.state["cut"].truncate(observation, self.max_obs_tokens)
        except BaseException:
            episode.add_step(llm=record, notes=notes)
            raise
        notes.update(observation_tokens=tokens, observation_cut=tokens > self.max_obs_tokens,
                     tokenizer=episode.state["cut"].name)
        episode.add_step(llm=record, tool_calls=[result.call], observation=cut, notes=notes)
        return str(cut)

    def _answer(self, content: str, notes: dict[str, Any]) -> str:
        """The answer without its stated confidence (stated-confidence variant; noted in the step), else as is."""
        if self.prompt_variant != STATED_CONFIDENCE:
            return content
        stated = split_confidence(content)
        notes["stated_confidence"] = {"value": stated.confidence, "status": stated.status}
        return stated.answer

    async def solve(self, episode: Episode) -> AgentOutput:
        """Generate, act, observe until an answer (the runner's budget ends the search turns)."""
        while True:
            record, notes, text = await self._generate(episode)
            action, content = parse_action(text)
            if action == "answer":
                answer = self._answer(content, notes)
                episode.add_step(llm=record, notes=notes)
                return finish(episode.state["response"], answer, "answer")
            if action == "search":
                observation = await self._observe(episode, record, notes, content)
            else:
                observation = SEARCH_R1_INVALID_ACTION
                notes["invalid_action"] = True
                episode.add_step(llm=record, observation=observation, notes=notes)
            episode.state["response"] += observation

    async def final_answer(self, episode: Episode) -> AgentOutput:
        """Search-R1's final rollout: one more generation; a search in it is not executed."""
        record, notes, text = await self._generate(episode)
        notes["forced_final"] = True
        action, content = parse_action(text)
        answer = self._answer(content, notes) if action == "answer" else content
        episode.add_step(llm=record, notes=notes)
        if action == "answer":
            return finish(episode.state["response"], answer, "budget")
        return AgentOutput(episode.state["response"], None, Outcome.BUDGET, "budget")
