"""verl's hermes tool-call parser (``verl/experimental/agent_loop/tool_parser.py``, ``HermesToolParser``).

Why reproduced rule by rule: verl's multi-turn agent loop decides from this parser
whether a generation called a tool, so an evaluation of a model trained with it
must read calls exactly as it does. Read at verl commit ``b178a3cd5`` and checked
against what that code returns on recorded cases
(``tests/agents/fixtures/verl_hermes_parser.json``, ``scripts/record_verl_tool_parser.py``):

* a text without both ``<tool_call>`` and ``</tool_call>`` has no calls and is its own content;
* otherwise every non-greedy ``<tool_call>…</tool_call>`` span (across lines) is a call
  when its body is JSON with a string ``name`` and an ``arguments`` key; the arguments
  are re-serialised (``json.dumps``, non-ASCII kept); a span that fails is skipped;
* the content is the text with every span removed (failed spans too).

A span written inside ``<think>…</think>`` is a call to this parser: it does not
look at ``<think>`` (verl's gpt-oss parser drops the reasoning channel first; the
hermes one does not). The recorded fixture holds such a case.
"""

from __future__ import annotations

import json
import re
from typing import NamedTuple

__all__ = ["FunctionCall", "VERL_COMMIT", "parse_hermes"]

VERL_COMMIT = "b178a3cd5"
TOOL_CALL_START, TOOL_CALL_END = "<tool_call>", "</tool_call>"
_SPAN = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


class FunctionCall(NamedTuple):
    """One call as verl hands it to the tool: its name and its arguments as a JSON string."""

    name: str
    arguments: str


def _call(body: str) -> FunctionCall | None:
    try:
        value = json.loads(body)
        name, arguments = value["name"], value["arguments"]
    except (ValueError, KeyError, TypeError, IndexError):
        return None
    if not isinstance(name, str):  # their pydantic FunctionCall(name: str) refuses other types
        return None
    return FunctionCall(name, json.dumps(arguments, ensure_ascii=False))


def parse_hermes(text: str) -> tuple[str, list[FunctionCall]]:
    """``(content, calls)`` of one generation's decoded text, as verl's ``extract_tool_calls`` returns them."""
    if TOOL_CALL_START not in text or TOOL_CALL_END not in text:
        return text, []
    calls = [call for call in (_call(body) for body in _SPAN.findall(text)) if call is not None]
    return _SPAN.sub("", text), calls
