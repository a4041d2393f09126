"""Our hermes parser returns what verl's ``HermesToolParser.extract_tool_calls`` returned on every recorded case."""

from __future__ import annotations

import json
from pathlib import Path

from aethersearch.agents.hermes import VERL_COMMIT, parse_hermes
from tests.agents.hermes_cases import CASES

FIXTURE = Path(__file__).parent / "fixtures" / "verl_hermes_parser.json"


def test_every_case_parses_as_verl_parsed_it() -> None:
    recorded = json.loads(FIXTURE.read_text())
    assert recorded["their_commit"].startswith(VERL_COMMIT)
    assert set(recorded["cases"]) == set(CASES)
    for name, case in recorded["cases"].items():
        assert case["text"] == CASES[name], f"{name}: the case changed since it was recorded"
        content, calls = parse_hermes(case["text"])
        assert content == case["content"], name
        assert [c._asdict() for c in calls] == case["calls"], name


def test_a_call_inside_think_is_a_call_to_verls_hermes_parser() -> None:
    _, calls = parse_hermes(CASES["call_inside_think"])
    assert [c.name for c in calls] == ["search"]  # verl's hermes parser does not look at <think>
