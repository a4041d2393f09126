"""The Search-R1 agent: the tag protocol of Search-R1's ``LLMGenerationManager``, bit-compatible.

Behaviour copied from ``search_r1/llm_agent/generation.py`` (PeterGriffinJin/Search-R1):

* one text prompt (DESIGN.md) with the question as Search-R1 preprocesses it
  (stripped, ``?`` appended when missing; recorded as ``Trace.question_seen``);
* generation stops at ``</search>`` or ``</answer>``; the reply is then cut after
  the first ``</search>`` if it has one, else after the first ``</answer>``
  (``_postprocess_responses``); the stop string an OpenAI server strips is put back;
* the action is the first ``<(search|answer)>(.*?)</\\1>`` match, content stripped
  (``postprocess_predictions``); a search appends
  ``\\n\\n<information>{docs}</information>\\n\\n`` with the top-``k`` (3) documents
  rendered ``Doc {i}(Title: {title}) {text}\\n``; anything else appends the
  invalid-action message and the loop goes on;
* each observation is cut to ``max_obs_tokens`` (500) tokens of the configured
  tokenizer (``_process_next_obs``);
* ``max_turns`` (4) search turns come from the runner's budget; when they are
  spent, the runner's forced final answer is Search-R1's final rollout: one more
  generation on the same context, in which a search is not executed.

Text-completion mode throughout (Search-R1 trains base models on raw text); a chat
checkpoint gets its template applied by ``chat_template`` (``raw`` by default).
Known, documented difference: Search-R1 concatenates token ids, we concatenate
text, so a tokenizer that does not round-trip the text may tokenize a boundary
differently; it also left-truncates the rolling context at ``max_prompt_length``,
which we leave to the server's context limit.
"""

from __future__ import annotations

import re
from typing import Any

from aethersearch.agents.base import Agent, AgentOutput, Episode, finish
from aethersearch.agents.prompts import (
    CHAT_TEMPLATES,
    SEARCH_R1_INVALID_ACTION,
    SEARCH_R1_PROMPT,
    SEARCH_R1_STOP,
    apply_chat_template,
    render_search_r1_docs,
    search_r1_observation,
    search_r1_question,
)
from aethersearch.agents.tokenizers import get_tokenizer
from aethersearch.records import Decoding, Outcome

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


def restore_stop(text: str, finish_reason: str | None, stop_reason: str | None) -> str:
    """Put back the stop string an OpenAI-compatible server removed from ``text``.

    vLLM reports the matched string as ``stop_reason``; without it we infer it from
    the tag left open (the last ``<search>``/``<answer>`` without its closing tag).
    """
    if finish_reason != "stop":
        return text
    if stop_reason in SEARCH_R1_STOP:
        return text if text.endswith(stop_reason) else text + stop_reason
    open_search = text.rfind("<search>") > text.rfind("</search>")
    open_answer = text.rfind("<answer>") > text.rfind("</answer>")
    if open_search and open_answer:
        return text + ("</search>" if text.rfind("<search>") > text.rfind("<answer>") else "</answer>")
    if open_search:
        return text + "</search>"
    if open_answer:
        return text + "</answer>"
    return text


class SearchR1Agent(Agent):
    """Search-R1's multi-turn ``<search>``/``<answer>`` loop over a text-completion endpoint."""

    name = "search-r1"

    def __init__(self, topk: int = 3, max_obs_tokens: int = 500, tokenizer: str = "regex",
                 chat_template: str = "raw") -> None:
        self.topk = topk
        self.max_obs_tokens = max_obs_tokens
        self.tokenizer_spec = tokenizer
        self.chat_template = chat_template
        apply_chat_template(chat_template, "")  # a bad template fails here, not once per question
        self._tokenizer = get_tokenizer(tokenizer)

    def config(self) -> dict[str, Any]:
        """Top-k, observation cut, tokenizer and chat template (all change predictions)."""
        return {"topk": self.topk, "max_obs_tokens": self.max_obs_tokens,
                "tokenizer": self._tokenizer.name, "chat_template": self.chat_template}

    def prompt_template(self) -> str:
        """Prompt, chat template and invalid-action text, hashed into run.json."""
        return "\x00".join([SEARCH_R1_PROMPT, CHAT_TEMPLATES.get(self.chat_template, self.chat_template),
                            SEARCH_R1_INVALID_ACTION])

    def question_seen(self, question: str) -> str:
        """The question with Search-R1's appended ``?``."""
        return search_r1_question(question)

    def effective_decoding(self, decoding: Decoding) -> Decoding:
        """``decoding`` with ``</search>`` and ``</answer>`` added to its stop strings."""
        stop = list(decoding.stop) + [s for s in SEARCH_R1_STOP if s not in decoding.stop]
        return decoding.model_copy(update={"stop": stop})

    def initial_prompt(self, question_seen: str) -> str:
        """The full first prompt sent to the model."""
        return apply_chat_template(self.chat_template, SEARCH_R1_PROMPT.format(question=question_seen))

    async def _generate(self, episode: Episode) -> tuple[int, str]:
        """One generation on the rolling context; records the step and returns (index, response)."""
        context = episode.state["prompt"] + episode.state["response"]
        completion = await episode.llm.complete(context, episode.decoding)
        text = postprocess_response(restore_stop(completion.text, completion.finish_reason,
                                                 completion.stop_reason))
        record = completion.to_record().model_copy(update={"text": text})
        index = episode.add_step(llm=record)
        episode.state["response"] += text
        return index, text

    async def solve(self, episode: Episode) -> AgentOutput:
        """Generate, act, observe until an answer (the runner's budget ends the search turns)."""
        episode.state.setdefault("prompt", self.initial_prompt(episode.question_seen))
        episode.state.setdefault("response", "")
        while True:
            index, text = await self._generate(episode)
            action, content = parse_action(text)
            if action == "answer":
                return finish(episode.state["response"], content, "answer")
            if action == "search":
                result = await episode.env.search(content, self.topk)
                observation = search_r1_observation(render_search_r1_docs(result.documents))
                observation = self._tokenizer.truncate(observation, self.max_obs_tokens)
                episode.update_step(index, tool_calls=[result.call], observation=observation)
            else:
                observation = SEARCH_R1_INVALID_ACTION
                episode.update_step(index, observation=observation, notes={"invalid_action": True})
            episode.state["response"] += observation

    async def final_answer(self, episode: Episode) -> AgentOutput:
        """Search-R1's final rollout: one more generation; a search in it is not executed."""
        episode.state.setdefault("prompt", self.initial_prompt(episode.question_seen))
        episode.state.setdefault("response", "")
        index, text = await self._generate(episode)
        episode.update_step(index, notes={"forced_final": True})
        action, content = parse_action(text)
        if action == "answer":
            return finish(episode.state["response"], content, "budget")
        return AgentOutput(episode.state["response"], None, Outcome.BUDGET, "budget")
