"""The ``react`` agent: OpenAI function calling with ``search`` (and ``visit``/``access`` in the sandbox).

Why tool calls are validated here: a model's tool call can be malformed — arguments
that are not JSON, an unknown tool, a wrong argument type, or JSON cut off because
the reply hit ``max_tokens``. Each becomes a *tool error*: it is charged to the
budget like a real call (so a model cannot spin for free), it is kept in the trace
(raw text included), and it is *never* sent back to the server: the assistant message
replayed in the conversation carries only the valid calls (their arguments
re-serialised from the parsed value), and the model is told what was wrong in a user
message after the tool results. Replaying an invalid call — its broken text, an
unknown tool name, or placeholder arguments such as ``{}`` that miss a required
field — is rejected by real servers or poisons every later turn of the conversation.

The tool descriptions are the docstrings of the functions below: they are written
for the model.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import orjson

from aethersearch.agents.base import Agent, AgentOutput, Episode, finish_reply
from aethersearch.agents.prompts import (
    FORCED_FINAL_PROMPT,
    REACT_SYSTEM_PROMPT,
    render_search_r1_docs,
)
from aethersearch.agents.tokenizers import check_tokenizer_spec, observation_tokenizer
from aethersearch.environment import ToolResult
from aethersearch.records import Outcome, ToolCall

__all__ = ["ReactAgent", "TOOL_FUNCTIONS", "access", "search", "tool_error_message", "tool_schema",
    "validate_tool_call", "visit"]


def search(query: str) -> None:
    """Search the document collection and return the most relevant passages, each with its title.

    Use a short keyword query (a name, a title, a few distinctive words), not a whole
    question. Search again with different words if the passages do not mention what you
    need; each search costs one step of your budget.
    """


def visit(page: str) -> None:
    """Open a page by its title or id and return its full text, including its links.

    Use it on a title that appeared in search results or in a link of a page you read.
    Some pages may be unavailable; you will then get an error message instead.
    """


def access(page: str) -> None:
    """Open a page by its URL, title or id and return its text (the same as visit).

    Use it on a URL or title that appeared in earlier results.
    """


TOOL_FUNCTIONS: dict[str, Callable[..., None]] = {"search": search, "visit": visit, "access": access}
_ARGUMENT = {"search": "query", "visit": "page", "access": "page"}


def tool_schema(name: str) -> dict[str, Any]:
    """The OpenAI ``tools`` entry for ``name``, its description taken from the docstring."""
    func = TOOL_FUNCTIONS[name]
    doc = inspect.getdoc(func) or ""
    argument = _ARGUMENT[name]
    hint = "Keyword query." if argument == "query" else "Title, id or URL of the page."
    return {"type": "function",
            "function": {"name": name, "description": doc,
                         "parameters": {"type": "object",
                                        "properties": {argument: {"type": "string", "description": hint}},
                                        "required": [argument], "additionalProperties": False}}}


def validate_tool_call(raw: dict[str, Any], tools: tuple[str, ...], truncated: bool) -> tuple[str, str, str | None]:
    """Check one raw tool call: (tool name, argument value, error message or None)."""
    function = raw.get("function") if isinstance(raw, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(function, dict) or not isinstance(name, str) or name not in tools:
        return str(name), "", f"unknown tool {name!r}; available tools: {', '.join(tools)}"
    text = function.get("arguments") if isinstance(function, dict) else None
    try:
        arguments = orjson.loads(text) if isinstance(text, (str, bytes)) else text
    except orjson.JSONDecodeError as exc:
        if truncated:  # the reply hit max_tokens inside this call's arguments
            return name, "", ("the tool call was cut off at the max_tokens limit; "
                              "call the tool again with shorter arguments")
        return name, "", f"the arguments are not valid JSON ({exc}); send a JSON object"
    argument = _ARGUMENT[name]
    if not isinstance(arguments, dict):
        return name, "", f"the arguments must be a JSON object with a string {argument!r}"
    extra = sorted(set(arguments) - {argument})
    if extra:
        return name, "", f"unexpected argument(s) {extra}; {name} takes only {argument!r}"
    value = arguments.get(argument)
    if not isinstance(value, str) or not value.strip():
        return name, "", f"argument {argument!r} must be a non-empty string, got {value!r}"
    return name, value, None


class ReactAgent(Agent):
    """Function-calling loop: the model calls tools until it replies with an answer."""

    name = "react"

    def __init__(self, topk: int = 3, max_obs_tokens: int = 500, tokenizer: str = "served",
                 system_prompt: str = REACT_SYSTEM_PROMPT) -> None:
        check_tokenizer_spec(tokenizer)
        self.topk = topk
        self.max_obs_tokens = max_obs_tokens
        self.system_prompt = system_prompt
        self.tokenizer = tokenizer

    def config(self) -> dict[str, Any]:
        """Top-k, observation cut and tokenizer."""
        return {"topk": self.topk, "max_obs_tokens": self.max_obs_tokens, "tokenizer": self.tokenizer}

    def prompt_template(self) -> str:
        """System prompt, tool descriptions and the forced-final message."""
        tools = orjson.dumps([tool_schema(n) for n in TOOL_FUNCTIONS], option=orjson.OPT_SORT_KEYS)
        return "\x00".join([self.system_prompt, tools.decode(), FORCED_FINAL_PROMPT])

    def _tools(self, episode: Episode) -> tuple[str, ...]:
        offered = tuple(episode.env.tools)
        names: list[str] = [n for n in ("search", "visit") if n in offered]
        if "visit" in offered:
            names.append("access")
        return tuple(names)

    async def _run_tool(self, episode: Episode, name: str, value: str) -> tuple[ToolCall, str, dict[str, Any]]:
        if name == "search":
            result: ToolResult = await episode.env.search(value, self.topk)
        else:
            result = await episode.env.visit(value)
        if result.call.error:
            text = f"error: {result.call.error}"
        elif not result.documents:
            text = "no results"
        else:
            text = render_search_r1_docs(result.documents).strip()
        cutter = observation_tokenizer(self.tokenizer, episode.llm)
        cut, tokens = await cutter.truncate(text, self.max_obs_tokens)
        return result.call, cut, {"observation_tokens": tokens, "observation_cut": tokens > self.max_obs_tokens,
                                  "tokenizer": cutter.name}

    async def solve(self, episode: Episode) -> AgentOutput:
        """Chat with tools until a reply without tool calls (the answer)."""
        tools = self._tools(episode)
        schemas = [tool_schema(n) for n in tools]
        messages: list[dict[str, Any]] = episode.state.setdefault("messages", [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": f"Question: {episode.question_seen}\n"},
        ])
        while True:
            assert episode.llm is not None  # needs_llm: the runner always gives one
            completion = await episode.llm.chat(messages, episode.decoding, schemas)
            index = episode.add_step(llm=completion.to_record())
            if not completion.tool_calls:
                return finish_reply(completion.text, completion.finish_reason, "answer")
            truncated = completion.finish_reason == "length"
            calls = []
            for number, raw in enumerate(completion.tool_calls):
                call_id = raw.get("id") if isinstance(raw, dict) and raw.get("id") else f"call_{index}_{number}"
                name, value, problem = validate_tool_call(raw, tools, truncated)
                calls.append((call_id, name, value, problem, raw))
            valid = [(cid, name, value) for cid, name, value, problem, _ in calls if problem is None]
            # content "" (not null) with tool calls: llama.cpp's servers reject a null content (HTTP 500)
            assistant: dict[str, Any] = {"role": "assistant", "content": completion.text}
            if valid:  # only valid calls are replayed; malformed ones never reach the server
                assistant["tool_calls"] = [
                    {"id": cid, "type": "function",
                     "function": {"name": name, "arguments": orjson.dumps({_ARGUMENT[name]: value}).decode()}}
                    for cid, name, value in valid]
            messages.append(assistant)
            pending = episode.state["pending"] = [cid for cid, *_ in valid]
            problems: list[str] = []
            episode.state["tool_errors"] = problems
            for number, (call_id, name, value, problem, raw) in enumerate(calls, start=1):
                if problem is not None:
                    episode.charge_invalid_tool_call(name)
                    record = ToolCall(tool=name, arguments={"raw": _raw_arguments(raw)},
                                      error=problem)
                    episode.update_step(index, tool_calls=[record])
                    problems.append(f"tool call {number} ({name}) was not run: {problem}")
                    continue
                record, text, cut_notes = await self._run_tool(episode, name, value)
                episode.update_step(index, tool_calls=[record], notes=cut_notes)
                messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
                pending.remove(call_id)
            if problems:
                messages.append({"role": "user", "content": tool_error_message(problems)})
                episode.state["tool_errors"] = []

    async def final_answer(self, episode: Episode) -> AgentOutput:
        """One chat call without tools asking for the final answer."""
        messages = episode.state.setdefault("messages", [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": f"Question: {episode.question_seen}\n"}])
        for call_id in episode.state.get("pending", []):
            messages.append({"role": "tool", "tool_call_id": call_id,
                             "content": "error: not run, the tool budget is spent"})
        episode.state["pending"] = []
        problems = episode.state.pop("tool_errors", None)
        prefix = tool_error_message(problems) + "\n\n" if problems else ""
        messages.append({"role": "user", "content": prefix + FORCED_FINAL_PROMPT})
        assert episode.llm is not None
        completion = await episode.llm.chat(messages, episode.decoding, None)
        episode.add_step(llm=completion.to_record(), notes={"forced_final": True})
        output = finish_reply(completion.text, completion.finish_reason, "budget")
        if output.outcome == Outcome.NO_ANSWER_TAG:
            return output._replace(outcome=Outcome.BUDGET)
        return output


def tool_error_message(problems: list[str]) -> str:
    """The user message telling the model which of its tool calls were malformed, and why."""
    return "error: " + "; ".join(problems) + ". Call the tools again with valid arguments, or answer."


def _raw_arguments(raw: Any) -> str:
    """The model's argument text as it came (kept in the trace, never sent back)."""
    function = raw.get("function") if isinstance(raw, dict) else None
    arguments = function.get("arguments") if isinstance(function, dict) else None
    return arguments if isinstance(arguments, str) else repr(arguments)
