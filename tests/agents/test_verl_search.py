"""``--agent verl-search``: verl's multi-turn hermes tool loop, end to end against a scripted chat model."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from aethersearch.agents.verl_search import passages_text, truncate_tool_response
from aethersearch.cli import app
from aethersearch.demo import build_demo_inputs
from aethersearch.records import RunFingerprint, Trace
from aethersearch.scoring.api import score_run
from aethersearch.scoring.join import load_release
from aethersearch.testing.scripted_server import Reply, ScriptedRequest, ScriptedServer, question_of
from tests.agents.hermes_cases import CALL


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build_demo_inputs(tmp_path_factory.mktemp("demo"))


def _call(query: str) -> str:
    return CALL.replace("capital of France", query)


def _run(demo: tuple[Path, Path], out: Path, respond, *extra: str) -> tuple[RunFingerprint, list[Trace]]:  # type: ignore[no-untyped-def]
    release, index = demo
    with ScriptedServer(respond, chat_template="chatml") as server:
        result = CliRunner().invoke(app, ["run", str(release), "--out", str(out), "--agent", "verl-search",
                                          "--endpoint", server.url, "--model", "m", "--index", str(index),
                                          "--no-progress", *extra], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    fingerprint = RunFingerprint.model_validate(orjson.loads((out / "run.json").read_bytes()))
    return fingerprint, [Trace.model_validate_json(line) for line in (out / "traces.jsonl").read_text().splitlines()]


def test_search_then_answer_runs_end_to_end_and_scores(demo: tuple[Path, Path], tmp_path: Path) -> None:
    gold = {row.question.rstrip("?"): row.answers[0] for row in load_release(demo[0])}

    def respond(request: ScriptedRequest) -> Reply:
        question = (question_of(request) or "").rstrip("?")
        if '"result"' not in request.text:  # no tool result yet
            return Reply("<think>I need to look it up.</think>\n" + _call(question))
        return Reply(f"<think>Found it.</think>\n<answer> {gold.get(question, 'unknown')} </answer>")

    fingerprint, traces = _run(demo, tmp_path / "run", respond)
    assert fingerprint.profile is not None and fingerprint.profile["name"] == "verl-search"
    assert fingerprint.budget.max_turns == 2 and fingerprint.decoding.stop == []
    assert fingerprint.decoding.max_tokens == 3000  # the profile's per-call tokens (verl: response_length)
    for trace in traces:
        assert [step.llm is not None for step in trace.steps] == [True, True]
        assert [len(step.tool_calls) for step in trace.steps] == [1, 0]
        observation = trace.steps[0].observation or ""
        body = observation.strip().removeprefix("<tool_response>\n").removesuffix("\n</tool_response>")
        assert body.startswith('{"result": "Doc 1 (Title: ')
        assert len(body) <= 256 + len("...(truncated)...")  # verl's 256-character cut, middle
        assert trace.stop_reason == "no_tool_call"
    scores = score_run(tmp_path / "run", demo[0], resamples=10)
    assert scores.overall.micro.metrics["em"].mean == 1.0


def test_a_call_inside_think_is_run_and_the_last_turn_call_is_not(demo: tuple[Path, Path], tmp_path: Path) -> None:
    def respond(request: ScriptedRequest) -> Reply:
        question = (question_of(request) or "").rstrip("?")
        return Reply(f"<think>Perhaps {_call(question)} is wise.</think>\nI will search.")  # always calls

    _, traces = _run(demo, tmp_path / "run", respond)
    for trace in traces:
        assert [len(step.tool_calls) for step in trace.steps] == [1, 0]  # the second turn's call never runs
        assert [step.notes["tool_calls_parsed"] for step in trace.steps] == [1, 1]
        assert trace.stop_reason == "max_assistant_turns" and trace.prediction is None


def test_the_search_tool_and_the_cut_are_verls() -> None:
    assert passages_text(['"Paris"\nThe capital.', '"Lyon"\nA city.\nOn the Rhone.']) == \
        'Doc 1 (Title: "Paris")\nThe capital.\n\nDoc 2 (Title: "Lyon")\nA city.\nOn the Rhone.'
    text = "x" * 100 + "y" * 300
    assert truncate_tool_response(text, 256, "middle") == "x" * 100 + "y" * 28 + "...(truncated)..." + "y" * 128
    assert truncate_tool_response(text, 256, "left") == text[:256] + "...(truncated)"
    assert truncate_tool_response(text, 256, "right") == "(truncated)..." + text[-256:]
    assert truncate_tool_response("short", 256, "middle") == "short"
    assert json.loads(truncate_tool_response(json.dumps({"result": "ok"}), 256, "middle")) == {"result": "ok"}
