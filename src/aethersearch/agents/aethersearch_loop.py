"""``--agent aethersearch``: AetherSearch's own evaluation loop (``runtime/async_eval_worker.py`` at d2a21bd).

Why a loop of its own: the Eval-1400 card's publisher evaluates with a loop that
differs from Search-R1's in every place that changes a score, so its numbers can
only be reproduced by its rules (``docs/aethersearch-compat.md`` cites each one):

* the user turn is Search-R1's prompt, always wrapped in the model's chat
  template (their ``apply_chat_template(..., add_generation_prompt=True)``);
* **no stop strings**: an action ends at end-of-sequence or after 500 new tokens,
  and the end-of-sequence token stays in the context for the next turn;
* each action is parsed by their strict parser (:func:`check_action`); the
  episode **ends at the first invalid action** and at the answer;
* at most 6 generations and 5 retrievals: a sixth search is not executed;
* a search returns the top 3 documents rendered ``<information>`` + their
  ``contents`` joined by ``\\n`` + ``</information>`` (no ``Doc i(Title: …)``,
  no surrounding blank lines), cut to 500 tokens *with both tags kept*: the body
  is cut to 500 minus the tags' tokens and the ids are detokenized together;
* nothing is ever cut from the left: each generation may write
  ``min(500, 6144 - response, 8192 - prompt - response)`` tokens (none left ends
  the episode), and an observation that would pass either cap is their
  retrieval failure (``system_valid`` false, R_task 0).

**Continuation.** Their loop feeds token ids back, so the EOS id stays in the
context. With ``continuation="auto"`` (the default) the loop asks the server once
(:meth:`~aethersearch.agents.served.ServedModel.token_route`) whether it continues
by token ids: llama-server's ``POST /completion`` (and ``scripts/serve_gguf.py``'s),
SGLang's native ``POST /generate`` and vLLM's ``/v1/completions`` with
``return_token_ids`` take a token-id prompt and return the generated ids. Then the
context is kept as ids exactly as theirs: the prompt's ids, each action's generated
ids plus the id that ended it (the EOS, or the end id the server names), each
observation's ids as cut (never re-tokenized), and every step records
``continuation: "token_ids"`` and the route (``continuation_route``). Otherwise (or with
``continuation="text"``) the loop continues by text over ``/v1/completions``: it
appends ``eos_text`` (default Qwen2.5's ``<|im_end|>``, the model family
AetherSearch trains) to the text context after every action that ended at
end-of-sequence, counts it as one token, and records ``continuation: "text"`` with
the appended text. A tokenizer that does not round-trip the text may tokenize a
boundary differently from their ids; that is the text fallback's known gap. Which
mode ran and why is in ``run.json`` (``served_model.continuation``) and in every
step's notes (``continuation``, ``continuation_reason``).

Token counts come from the served model's tokenizer (``/tokenize``,
``/detokenize``), which the observation cut needs anyway.
"""

from __future__ import annotations

from typing import Any

from aethersearch.agents.aethersearch_protocol import INFORMATION_CLOSE, INFORMATION_OPEN, check_action
from aethersearch.agents.base import Agent, AgentOutput, Episode, finish
from aethersearch.agents.formatting import check_prompt_settings, render_chat_prompt, resolve_format, template_text
from aethersearch.agents.llm import LLM
from aethersearch.agents.prompts import SEARCH_R1_PROMPT, search_r1_question
from aethersearch.agents.served import ServedModel, TokenRoute
from aethersearch.errors import ConfigError
from aethersearch.records import Decoding, Outcome

__all__ = ["AetherSearchAgent", "CONTINUATIONS"]

#: ``auto``: token ids where the server is probed to allow it, else text; ``text``: always text
CONTINUATIONS = ("auto", "text")


class AetherSearchAgent(Agent):
    """AetherSearch's fixed-eval loop over an OpenAI-compatible completion endpoint (see the module doc)."""

    name = "aethersearch"

    def __init__(self, topk: int = 3, max_searches: int = 5, max_action_tokens: int = 500,
                 max_information_tokens: int = 500, max_prompt_tokens: int = 2048,
                 max_response_tokens: int = 6144, max_context_tokens: int = 8192,
                 eos_text: str = "<|im_end|>", chat_template: str = "served", continuation: str = "auto") -> None:
        check_prompt_settings("chat", chat_template)
        if continuation not in CONTINUATIONS:
            raise ConfigError(f"unknown continuation {continuation!r}",
                              fix=f"use one of: {', '.join(CONTINUATIONS)} (auto: token ids where the server "
                                  "allows it, else text)")
        if min(topk, max_searches, max_action_tokens, max_information_tokens) < 1:
            raise ConfigError("topk, max_searches, max_action_tokens and max_information_tokens must be >= 1",
                              fix="AetherSearch's own values are 3, 5, 500 and 500")
        self.topk = topk
        self.max_searches = max_searches
        self.max_action_tokens = max_action_tokens
        self.max_information_tokens = max_information_tokens
        self.max_prompt_tokens = max_prompt_tokens
        self.max_response_tokens = max_response_tokens
        self.max_context_tokens = max_context_tokens
        self.eos_text = eos_text
        self.chat_template = chat_template
        self.continuation = continuation

    def config(self) -> dict[str, Any]:
        """Every setting that changes what the model sees (recorded in run.json)."""
        return {"topk": self.topk, "max_searches": self.max_searches, "max_action_tokens": self.max_action_tokens,
                "max_information_tokens": self.max_information_tokens, "max_prompt_tokens": self.max_prompt_tokens,
                "max_response_tokens": self.max_response_tokens, "max_context_tokens": self.max_context_tokens,
                "eos_text": self.eos_text, "chat_template": self.chat_template, "continuation": self.continuation,
                "tokenizer": "served"}

    def prompt_template(self) -> str:
        """The prompt and chat template, hashed into run.json."""
        return "\x00".join([SEARCH_R1_PROMPT, template_text(self.chat_template), "aethersearch-loop"])

    def question_seen(self, question: str) -> str:
        """The question as their export's prompt holds it (Search-R1's ``?`` appended)."""
        return search_r1_question(question)

    def effective_decoding(self, decoding: Decoding) -> Decoding:
        """No stop strings, whatever the run asked: their loop sends none."""
        return decoding.model_copy(update={"stop": []})

    def _served(self, episode: Episode) -> ServedModel:
        served = episode.llm.served
        if served is None:
            raise ConfigError("--agent aethersearch counts tokens with the model server's tokenizer, and this "
                              "endpoint has none", fix="serve the model with vLLM, SGLang or llama.cpp's server")
        return served

    async def _prompt(self, episode: Episode) -> str:
        chosen = await resolve_format("chat", self.chat_template, episode.llm)
        prompt = SEARCH_R1_PROMPT.format(question=episode.question_seen)
        if chosen.format == "chat":
            prompt = await render_chat_prompt(prompt, self.chat_template, "served", episode.llm)
        return prompt

    async def observation(self, served: Any, contents: list[str]) -> tuple[str, list[int]]:
        """Their ``_information_token_ids``: tags kept, body cut to what the tags leave of the cap (text, ids)."""
        opening = await served.tokenize(INFORMATION_OPEN)
        closing = await served.tokenize(INFORMATION_CLOSE)
        budget = self.max_information_tokens - len(opening) - len(closing)
        if budget < 0:
            raise ConfigError("max_information_tokens is smaller than the <information> tags",
                              fix="raise max_information_tokens (AetherSearch uses 500)")
        body = await served.tokenize("\n".join(contents))
        ids = [*opening, *body[:budget], *closing]
        return await served.detokenize(ids), ids

    async def route(self, episode: Episode) -> TokenRoute:
        """How this episode continues its context: token ids when asked for and possible, else text (why)."""
        if self.continuation == "text":
            return TokenRoute(mode="text", reason="continuation=text was asked for")
        found: TokenRoute = await self._served(episode).token_route(self.eos_text)
        if found.mode == "token_ids" and not episode.llm.supports_token_ids:
            return found.model_copy(update={"mode": "text", "reason": f"the server allows token ids, but the "
                                            f"model client ({type(episode.llm).__name__}) cannot send them"})
        return found

    async def probe_server(self, llm: LLM) -> dict[str, Any]:
        """What ``run.json`` records about the continuation before the run (``served_model.continuation``)."""
        served = llm.served
        if self.continuation == "text" or served is None:
            reason = "continuation=text was asked for" if self.continuation == "text" else "no served model"
            return {"continuation": TokenRoute(mode="text", reason=reason).model_dump(mode="json")}
        found: TokenRoute = await served.token_route(self.eos_text)
        if found.mode == "token_ids" and not llm.supports_token_ids:
            found = found.model_copy(update={"mode": "text", "reason": f"the server allows token ids, but the "
                                             f"model client ({type(llm).__name__}) cannot send them"})
        return {"continuation": found.model_dump(mode="json")}

    async def solve(self, episode: Episode) -> AgentOutput:
        """Generate, parse, search until an answer, an invalid action or a limit (see the module doc)."""
        served = self._served(episode)
        route = await self.route(episode)
        eos_id = route.eos_token_id if route.mode == "token_ids" else None
        prompt = await self._prompt(episode)
        prompt_ids = list(await served.tokenize(prompt))
        prompt_tokens = len(prompt_ids)
        if prompt_tokens > self.max_prompt_tokens:
            return AgentOutput("", None, Outcome.REQUEST_REJECTED, "prompt_over_limit")
        response, response_tokens, searches = "", 0, 0
        response_ids: list[int] = []  # the context after the prompt, in ids (token-id continuation only)
        for _ in range(self.max_searches + 1):
            room = min(self.max_action_tokens, self.max_response_tokens - response_tokens,
                       self.max_context_tokens - prompt_tokens - response_tokens)
            if room <= 0:
                return AgentOutput(response, None, Outcome.NO_ANSWER_TAG, "token_cap")
            decoding = episode.decoding.model_copy(update={"stop": [], "max_tokens": room})
            if eos_id is not None and route.route is not None:  # a token-id route was found
                reply = await episode.llm.complete_ids(
                    prompt_ids + response_ids, decoding, route=route.route, eos_token_id=eos_id)
                completion, ended = reply.completion, reply.ended_eos
                end_id = reply.end_id if reply.end_id is not None else eos_id
                eos = "" if not ended else str(route.eos_text) if end_id == eos_id else \
                    await served.detokenize([end_id])
                response_ids += [*reply.token_ids, *([end_id] if ended and end_id is not None else [])]
                response_tokens = len(response_ids)
            else:
                completion = await episode.llm.complete(prompt + response, decoding)
                ended = completion.finish_reason == "stop"
                eos = self.eos_text if ended else ""
                response_tokens += completion.completion_tokens + (1 if ended else 0)
            response += completion.text + eos
            record = completion.to_record()
            check = check_action(completion.text)
            notes: dict[str, Any] = {"continuation": route.mode, "continuation_route": route.route,
                                     "continuation_reason": route.reason,
                                     "eos_appended": eos, "response_tokens": response_tokens,
                                     "action": check.kind, "action_error": check.error}
            if not check.valid or check.kind == "answer":
                episode.add_step(llm=record, notes=notes)
                if check.kind == "answer":
                    return finish(response, check.value, "answer")
                return AgentOutput(response, None, Outcome.NO_ANSWER_TAG, "invalid_action")
            if searches >= self.max_searches:
                episode.add_step(llm=record, notes={**notes, "search_not_executed": True})
                return AgentOutput(response, None, Outcome.NO_ANSWER_TAG, "max_searches")
            searches += 1
            try:
                result = await episode.env.search(str(check.value), self.topk)
            except BaseException:
                episode.add_step(llm=record, notes=notes)
                raise
            observation, observation_ids = await self.observation(served, [doc.contents for doc in result.documents])
            tokens = len(observation_ids)
            over = (response_tokens + tokens > self.max_response_tokens
                    or prompt_tokens + response_tokens + tokens > self.max_context_tokens)
            if over:  # their RuntimeError inside the retrieval try: a system failure, R_task 0
                episode.add_step(llm=record, tool_calls=[result.call],
                                 notes={**notes, "system_valid": False, "observation_tokens": tokens})
                return AgentOutput(response, None, Outcome.NO_ANSWER_TAG, "information_over_token_cap")
            response += observation
            response_ids += observation_ids
            response_tokens += tokens
            episode.add_step(llm=record, tool_calls=[result.call], observation=observation,
                             notes={**notes, "observation_tokens": tokens})
        return AgentOutput(response, None, Outcome.NO_ANSWER_TAG, "max_generations")
