"""Record what verl's hermes tool parser returns on ``tests/agents/hermes_cases.py`` (run by hand).

Usage: python scripts/record_verl_tool_parser.py VERL_SRC COMMIT OUT.json

Loads ``verl/experimental/agent_loop/tool_parser.py`` from VERL_SRC, a tree of verl at COMMIT (its own
source, never copied here) with two stand-ins for imports that need a Ray/verl
install (``get_event_loop``, ``rollout_trace_op``) and a tokenizer whose ``decode``
hands back the case text, then writes each case's ``(content, calls)`` and the
commit. Needs ``regex`` and ``pydantic``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _load(checkout: Path) -> Any:
    ray_utils = types.ModuleType("verl.utils.ray_utils")
    ray_utils.get_event_loop = asyncio.get_event_loop  # type: ignore[attr-defined]
    trace = types.ModuleType("verl.utils.rollout_trace")
    trace.rollout_trace_op = lambda fn: fn  # type: ignore[attr-defined]
    for name in ("verl", "verl.utils"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["verl.utils.ray_utils"] = ray_utils
    sys.modules["verl.utils.rollout_trace"] = trace
    source = (checkout / "verl/experimental/agent_loop/tool_parser.py").read_text()
    module = types.ModuleType("verl_tool_parser")
    module.__file__ = str(checkout / "verl/experimental/agent_loop/tool_parser.py")
    exec(compile(source, "tool_parser.py", "exec"), module.__dict__)  # noqa: S102 - their code, run to record
    return module


class _Tokenizer:
    """``decode`` of a one-element list holding the text: the case text itself."""

    def decode(self, ids: list[str], **_: Any) -> str:
        return ids[0]


def main() -> None:
    from tests.agents.hermes_cases import CASES

    checkout, commit, out = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    parser = _load(checkout).HermesToolParser(_Tokenizer())
    cases = {}
    for name, text in CASES.items():
        content, calls = asyncio.run(parser.extract_tool_calls([text]))
        cases[name] = {"text": text, "content": content,
                       "calls": [{"name": c.name, "arguments": c.arguments} for c in calls]}
    out.write_text(json.dumps({"their_repo": "volcengine/verl", "their_commit": commit,
                               "their_function": "verl.experimental.agent_loop.tool_parser.HermesToolParser"
                                                 ".extract_tool_calls", "cases": cases},
                              indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
