"""``--agent verl-search``: verl's multi-turn tool agent loop with its search tool, as verl trains with it.

Read at verl ``b178a3cd5``: ``experimental/agent_loop/tool_agent_loop.py``
(``ToolAgentLoop``), ``tools/search_tool.py`` and ``tools/utils/search_r1_like_utils.py``
(the search tool), ``examples/data_preprocess/preprocess_search_r1_dataset.py`` (the
prompt) and ``examples/sglang_multiturn/config/tool_config/search_tool_config.yaml``
(the tool schema). The contract is ``agents/profiles/verl-search.json``.

* the prompt is a system message ("You are a helpful and harmless assistant.") and
  the Search-R1-style user message asking for ``<tool_call>`` searches, sent with
  the ``search`` tool (``query_list``: a list of queries) so the served chat
  template renders the tools as it does in training; no stop strings;
* each generation's text is parsed by verl's hermes parser
  (:func:`aethersearch.agents.hermes.parse_hermes`: a call written inside
  ``<think>`` is a call too); the loop ends after ``max_assistant_turns``
  generations (checked before parsing, so a call in the last one is never run) or
  at a generation with no call;
* the first ``max_parallel_calls`` calls run; the search tool searches every query
  of ``query_list`` and answers ``{"result": …}`` (JSON) with each query's documents
  written ``Doc i (Title: first line)\\nrest`` and the queries joined by ``\\n---\\n``;
  an unknown tool, non-object arguments or a missing/empty ``query_list`` answer
  verl's error texts; a response longer than ``max_tool_response_length``
  *characters* is cut (``middle`` by default: the first and last halves around
  ``...(truncated)...``); each result goes back as a ``tool`` message;
* the answer is the last ``<answer>`` of the response (the generations and the tool
  results in order), as the Search-R1 reward reads verl's decoded response.

Known differences, recorded in every step's notes: verl keeps the generated token ids
in the context; over an OpenAI-compatible chat endpoint the assistant turn is rendered
again by the server's template from its text, with the calls verl parsed passed as
``tool_calls`` (so the call's JSON is re-serialised). Each generation may write what
is left of ``response_length`` after the earlier generations; verl also counts the
tool turns' tokens, which a chat endpoint does not report, so a long episode may get
more room here than in training. A server that parses tool calls itself (vLLM's
``--tool-call-parser``) hides the text verl's parser reads and is refused.
"""

from __future__ import annotations

import json
from typing import Any

from aethersearch.agents.base import Agent, AgentOutput, Episode, finish_from_text
from aethersearch.agents.hermes import FunctionCall, parse_hermes
from aethersearch.errors import ConfigError
from aethersearch.records import Decoding

__all__ = ["SEARCH_TOOL", "SYSTEM_PROMPT", "TRUNCATE_SIDES", "USER_PROMPT", "VerlSearchAgent", "passages_text",
    "truncate_tool_response"]

SYSTEM_PROMPT = "You are a helpful and harmless assistant."
USER_PROMPT = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get "
    "new information. After reasoning, if you find you lack some knowledge, you can call a search engine by "
    "<tool_call> query </tool_call> and it will return the top searched results between <tool_response> and "
    "</tool_response>. You can search as many times as your want. If you find no further external knowledge "
    "needed, you can directly provide the answer inside <answer> and </answer>, without detailed illustrations. "
    "For example, <answer> Beijing </answer>. Question: {question}"
)
SEARCH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Searches the web for relevant information based on the given query.",
        "parameters": {"type": "object", "properties": {"query_list": {
            "type": "array", "item": {"type": "string"},
            "description": "A list of fully-formed semantic queries. The tool will return search results for each "
                           "query."}}, "required": ["query_list"]},
    },
}
TRUNCATE_SIDES = ("middle", "left", "right")
_QUERY_LIST_ERROR = "Error: 'query_list' is missing, empty, or not a list in parameters."


def truncate_tool_response(text: str, limit: int, side: str) -> str:
    """verl's ``_call_tool`` cut of a tool response longer than ``limit`` characters."""
    if len(text) <= limit:
        return text
    if side == "left":
        return text[:limit] + "...(truncated)"
    if side == "right":
        return "(truncated)..." + text[-limit:]
    half = limit // 2
    return text[:half] + "...(truncated)..." + text[-half:]


def passages_text(contents: list[str]) -> str:
    """verl's ``_passages2string``: ``Doc i (Title: first line)\\nrest``, blank-line separated, stripped."""
    out = ""
    for index, content in enumerate(contents, start=1):
        title, _, text = content.partition("\n")
        out += f"Doc {index} (Title: {title})\n{text}\n\n"
    return out.strip()


class VerlSearchAgent(Agent):
    """verl's ``ToolAgentLoop`` with its search tool over an OpenAI-compatible chat endpoint (module doc)."""

    name = "verl-search"

    def __init__(self, topk: int = 3, max_assistant_turns: int = 2, max_parallel_calls: int = 1,
                 max_tool_response_length: int = 256, tool_response_truncate_side: str = "middle",
                 response_length: int = 3000, system_prompt: str = SYSTEM_PROMPT,
                 user_prompt: str = USER_PROMPT) -> None:
        if tool_response_truncate_side not in TRUNCATE_SIDES:
            raise ConfigError(f"unknown tool_response_truncate_side {tool_response_truncate_side!r}",
                              fix=f"use one of: {', '.join(TRUNCATE_SIDES)} (verl's default: middle)")
        if min(topk, max_assistant_turns, max_parallel_calls, max_tool_response_length, response_length) < 1:
            raise ConfigError("topk, max_assistant_turns, max_parallel_calls, max_tool_response_length and "
                              "response_length must be >= 1", fix="verl's search example: 3, 2, 1, 256, 3000")
        self.topk = topk
        self.max_assistant_turns = max_assistant_turns
        self.max_parallel_calls = max_parallel_calls
        self.max_tool_response_length = max_tool_response_length
        self.tool_response_truncate_side = tool_response_truncate_side
        self.response_length = response_length
        self.system_prompt = system_prompt
        self.user_prompt = user_prompt

    def config(self) -> dict[str, Any]:
        """Every setting that changes what the model sees (run.json)."""
        return {"topk": self.topk, "max_assistant_turns": self.max_assistant_turns,
                "max_parallel_calls": self.max_parallel_calls,
                "max_tool_response_length": self.max_tool_response_length,
                "tool_response_truncate_side": self.tool_response_truncate_side,
                "response_length": self.response_length}

    def prompt_template(self) -> str:
        """The system and user prompts and the tool schema, hashed into run.json."""
        return "\x00".join([self.system_prompt, self.user_prompt, json.dumps(SEARCH_TOOL, sort_keys=True)])

    def effective_decoding(self, decoding: Decoding) -> Decoding:
        """No stop strings: verl's loop sends none."""
        return decoding.model_copy(update={"stop": []})

    async def _run_tool(self, call: FunctionCall, episode: Episode) -> tuple[str, list[Any]]:
        """verl's ``_call_tool`` + ``SearchTool.execute``: the tool message text and the search records."""
        if call.name != "search":
            return f"Error when executing tool: {call.name!r}", []
        arguments = json.loads(call.arguments)
        if not isinstance(arguments, dict):
            return f"Error when executing tool: {type(arguments).__name__!r} object has no attribute 'get'", []
        queries = arguments.get("query_list")
        if not queries or not isinstance(queries, list):
            return json.dumps({"result": _QUERY_LIST_ERROR}), []
        records, blocks = [], []
        for query in queries:
            result = await episode.env.search(str(query), self.topk)
            records.append(result.call)
            blocks.append(passages_text([doc.contents for doc in result.documents]))
        text = json.dumps({"result": "\n---\n".join(blocks)}, ensure_ascii=False)
        return truncate_tool_response(text, self.max_tool_response_length, self.tool_response_truncate_side), records

    async def solve(self, episode: Episode) -> AgentOutput:
        """Generate, parse with verl's hermes parser, run the tool calls, until no call or the turn limit."""
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": self.user_prompt.format(question=episode.question_seen)}]
        response, used = "", 0
        for turn in range(1, self.max_assistant_turns + 1):
            room = self.response_length - used
            if room <= 0:
                return finish_from_text(response, "response_length")
            decoding = episode.decoding.model_copy(update={"stop": [], "max_tokens": min(room, episode.decoding.max_tokens)})
            completion = await episode.llm.chat(messages, decoding, [SEARCH_TOOL])
            if completion.tool_calls:
                raise ConfigError("the model server parsed the tool calls itself, so the text verl's hermes parser "
                                  "reads never arrives", fix="serve the model without a tool-call parser (vLLM: "
                                  "no --tool-call-parser/--enable-auto-tool-choice)")
            used += completion.completion_tokens
            response += completion.text
            content, calls = parse_hermes(completion.text)
            notes: dict[str, Any] = {"continuation": "chat", "tool_calls_parsed": len(calls)}
            if turn == self.max_assistant_turns or not calls:
                episode.add_step(llm=completion.to_record(), notes=notes)
                return finish_from_text(response, "max_assistant_turns" if calls else "no_tool_call")
            executed = calls[:self.max_parallel_calls]
            ids = [f"call_{turn}_{index}" for index in range(len(calls))]
            messages.append({"role": "assistant", "content": content, "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for cid, c in zip(ids, calls, strict=True)]})
            observations, records = [], []
            for cid, call in zip(ids, executed, strict=False):
                text, searched = await self._run_tool(call, episode)
                records += searched
                observations.append(text)
                messages.append({"role": "tool", "tool_call_id": cid, "content": text})
            observation = "".join(f"\n<tool_response>\n{text}\n</tool_response>\n" for text in observations)
            response += observation
            episode.add_step(llm=completion.to_record(), tool_calls=records, observation=observation,
                             notes={**notes, "tool_calls_run": len(executed)})
        return finish_from_text(response, "max_assistant_turns")  # not reached: the last turn returns above
