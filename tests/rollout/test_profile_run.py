"""``--agent NAME`` runs with its profile's budget unless a flag overrides it, ``--profile FILE`` runs a
user's own profile, run.json records both, and ``compare`` refuses to mix profiles."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from aethersearch.cli import app
from aethersearch.compare.fingerprints import check_contract
from aethersearch.demo import build_demo_inputs
from aethersearch.errors import ConfigError, IntegrityError
from aethersearch.records import RunFingerprint, Trace
from aethersearch.rollout.profile_run import apply_profile
from aethersearch.testing.scripted_server import Reply, ScriptedRequest, ScriptedServer, search_r1_rule
from tests.agents.aethersearch_behaviours import behaviours

PROFILES = Path(__file__).parents[2] / "src" / "aethersearch" / "agents" / "profiles"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build_demo_inputs(tmp_path_factory.mktemp("demo"))


def _always_searches(request: ScriptedRequest) -> Reply:
    return Reply(behaviours({})["always_searches"](request.text))


def _run(release: Path, index: Path, out: Path, url: str, *extra: str) -> tuple[RunFingerprint, list[Trace]]:
    result = CliRunner().invoke(app, ["run", str(release), "--out", str(out), "--endpoint", url, "--model", "m",
                                      "--index", str(index), "--no-progress", *extra], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    fingerprint = RunFingerprint.model_validate(orjson.loads((out / "run.json").read_bytes()))
    traces = [Trace.model_validate_json(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    return fingerprint, traces


def _calls(trace: Trace) -> tuple[int, int]:
    return (sum(step.llm is not None for step in trace.steps),
            sum(call.tool == "search" for step in trace.steps for call in step.tool_calls))


def test_aethersearch_with_no_budget_flags_gives_6_calls_and_5_searches(demo: tuple[Path, Path],
                                                                        tmp_path: Path) -> None:
    release, index = demo
    with ScriptedServer(_always_searches, chat_template="chatml") as server:
        fingerprint, traces = _run(release, index, tmp_path / "run", server.url, "--agent", "aethersearch")
        capped, capped_traces = _run(release, index, tmp_path / "capped", server.url, "--agent", "aethersearch",
                                     "--max-turns", "4")
    assert {_calls(trace) for trace in traces} == {(6, 5)}  # their loop: the sixth search is not executed
    assert {trace.stop_reason for trace in traces} == {"max_searches"}
    assert (fingerprint.budget.max_turns, fingerprint.budget.max_tool_calls) == (6, 5)
    assert fingerprint.profile is not None and fingerprint.profile["name"] == "aethersearch"
    assert fingerprint.profile["budget_sources"]["max_turns"] == "profile"
    assert fingerprint.profile_sha256 == fingerprint.profile["sha256"]
    # a flag overrides the profile, and run.json records both
    assert {_calls(trace) for trace in capped_traces} == {(4, 4)}
    assert capped.budget.max_turns == 4 and capped.profile is not None
    assert capped.profile["budget"]["max_turns"] == 6 and capped.profile["run_budget"]["max_turns"] == 4
    assert capped.profile["budget_sources"]["max_turns"] == "flag"
    assert capped.profile["budget_sources"]["max_tool_calls"] == "profile"


def test_a_users_profile_file_runs_and_is_recorded(demo: tuple[Path, Path], tmp_path: Path) -> None:
    release, index = demo
    data = json.loads((PROFILES / "search-r1.json").read_text())
    data.update(name="my-trainer", trainer="our lab's Search-R1 fork")
    data["observation"]["topk"] = 2
    data["budget"] = {"max_turns": 3, "max_tool_calls": 2}
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps(data))
    with ScriptedServer(search_r1_rule(lambda q: "Paris", searches=1)) as server:
        fingerprint, traces = _run(release, index, tmp_path / "run", server.url, "--profile", str(mine))
        moved = tmp_path / "elsewhere" / "same.yaml"
        moved.parent.mkdir()
        moved.write_text(mine.read_text())  # the same profile by another path resumes the run
        resumed = CliRunner().invoke(app, ["run", str(release), "--out", str(tmp_path / "run"), "--endpoint",
                                           server.url, "--model", "m", "--index", str(index), "--no-progress",
                                           "--profile", str(moved)], catch_exceptions=False)
        assert resumed.exit_code == 0 and "already finished" in resumed.output, resumed.output
        data["budget"]["max_turns"] = 4  # another profile does not
        moved.write_text(json.dumps(data))
        with pytest.raises(IntegrityError, match="profile_sha256"):
            CliRunner().invoke(app, ["run", str(release), "--out", str(tmp_path / "run"), "--endpoint", server.url,
                                     "--model", "m", "--index", str(index), "--no-progress", "--profile",
                                     str(moved)], catch_exceptions=False)
    assert fingerprint.agent == "search-r1" and fingerprint.agent_config["topk"] == 2
    assert fingerprint.retrieval_topk == 2
    assert (fingerprint.budget.max_turns, fingerprint.budget.max_tool_calls) == (3, 2)
    assert fingerprint.profile is not None and fingerprint.profile["source"] == str(mine)
    assert fingerprint.profile["name"] == "my-trainer"
    assert traces and all(_calls(trace)[1] <= 2 for trace in traces)


def test_agent_and_profile_must_agree() -> None:
    with pytest.raises(ConfigError, match="run by 'search-r1'"):
        apply_profile("aethersearch", profile_file=PROFILES / "search-r1.json")


def test_an_agent_without_a_profile_keeps_the_run_defaults() -> None:
    chosen = apply_profile("lexical")
    assert chosen.profile is None and (chosen.budget.max_turns, chosen.budget.max_tool_calls) == (4, 8)
    topk = apply_profile("aethersearch", {"topk": 5})
    assert topk.profile is not None and topk.profile["settings_overridden"] == {"topk": 5}
    assert topk.agent_config["topk"] == 5


def test_compare_refuses_runs_of_different_profiles() -> None:
    base = {"release_id": "r", "release_data_sha256": "a", "rollout_sha256": "b", "question_count": 1,
            "corpus_hash": None, "index_hash": None, "agent": "x", "prompt_template_hash": None,
            "budget": {}, "endpoint": None, "model": "m", "decoding": {}, "software_version": "0"}
    one = RunFingerprint.model_validate({**base, "profile_sha256": "1" * 64})
    two = RunFingerprint.model_validate({**base, "profile_sha256": "2" * 64})
    with pytest.raises(IntegrityError, match="profile_sha256"):
        check_contract([("a", one), ("b", two)])
    assert check_contract([("a", one), ("b", one)]).differences == []
