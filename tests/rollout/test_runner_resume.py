"""Run directory behaviour: resume skips finished ids, retries errored ones, refuses other settings."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from aethersearch.agents.llm import OpenAIClient
from aethersearch.agents.search_r1 import SearchR1Agent
from aethersearch.errors import DataError, IntegrityError
from aethersearch.jsonl import read_jsonl, sha256_file
from aethersearch.records import Budget, Outcome
from aethersearch.rollout.fingerprint import load_rollout_questions, release_info
from aethersearch.rollout.runner import run_questions
from aethersearch.testing.scripted_server import ScriptedRequest, ScriptedServer
from tests.agents.fakes import FakeSearchEnv
from tests.rollout import helpers


def _run(tmp: Path, url: str, qs, *, budget: Budget | None = None, retries: int = 0):
    rollout = helpers.write_rollout(tmp / "rollout_questions.jsonl", qs)
    agent = SearchR1Agent()
    fp = helpers.fingerprint(rollout, agent, url, budget=budget, count=len(qs))
    llm = OpenAIClient(url, "m", max_retries=retries, deadline_s=10)
    return run_questions(qs, agent, lambda q: FakeSearchEnv(), budget or Budget(), tmp / "run", fp,
                         llm=llm, concurrency=4)


def test_resume_skips_finished_ids_and_makes_no_calls_for_them(tmp_path: Path) -> None:
    qs = helpers.questions(6)
    with ScriptedServer(helpers.MODEL) as server:
        first = _run(tmp_path, server.url, qs)
        calls = server.stats.requests
        again = _run(tmp_path, server.url, qs)
        assert server.stats.requests == calls  # nothing regenerated
    assert (first.attempted, first.skipped, first.outcomes) == (6, 0, {"answered": 6})
    assert (again.attempted, again.skipped) == (0, 6)
    preds = read_jsonl(tmp_path / "run" / "predictions.jsonl")
    assert preds[0] == {"id": "q000", "outcome": "answered", "prediction": "answer 0", "sample": 0}
    assert [p["id"] for p in preds] == [q.id for q in qs]
    run_json = orjson.loads((tmp_path / "run" / "run.json").read_bytes())
    assert run_json["agent"] == "search-r1" and run_json["decoding"]["stop"] == ["</search>", "</answer>"]
    assert run_json["agent_config"]["tokenizer"] == "served"
    assert len(read_jsonl(tmp_path / "run" / "traces.jsonl")) == 6


def test_errored_ids_are_retried_on_resume_and_only_they(tmp_path: Path) -> None:
    qs = helpers.questions(4)
    broken = {"on": True}

    def flaky(request: ScriptedRequest):
        if broken["on"] and "case 2 " in request.text:
            raise RuntimeError("model crashed")  # aiohttp answers 500
        return helpers.MODEL(request)

    with ScriptedServer(flaky) as server:
        first = _run(tmp_path, server.url, qs)
        assert first.outcomes == {"answered": 3, "endpoint_error": 1}
        broken["on"] = False
        before = server.stats.by_key.copy()
        second = _run(tmp_path, server.url, qs)
        new_calls = server.stats.by_key - before
    assert (second.attempted, second.skipped, second.outcomes) == (1, 3, {"answered": 1})
    assert set(new_calls) == {qs[2].question + "?"}
    traces = read_jsonl(tmp_path / "run" / "traces.jsonl")
    errored = [t for t in traces if t["id"] == "q002"]
    assert [(t["outcome"], t["attempt"]) for t in errored] == [("endpoint_error", 1), ("answered", 2)]
    assert "HTTP 500" in errored[0]["error"]
    preds = {p["id"]: p for p in read_jsonl(tmp_path / "run" / "predictions.jsonl")}
    assert preds["q002"]["prediction"] == "answer 2" and len(preds) == 4


def test_a_run_with_different_settings_refuses_to_resume(tmp_path: Path) -> None:
    qs = helpers.questions(2)
    with ScriptedServer(helpers.MODEL) as server:
        _run(tmp_path, server.url, qs)
        with pytest.raises(IntegrityError) as info:
            _run(tmp_path, server.url, qs, budget=Budget(max_turns=2))
    assert "refusing to resume" in str(info.value) and "budget" in str(info.value)
    assert "new --out directory" in str(info.value)


def test_a_torn_last_line_is_set_aside_and_the_question_redone(tmp_path: Path) -> None:
    qs = helpers.questions(3)
    with ScriptedServer(helpers.MODEL) as server:
        _run(tmp_path, server.url, qs)
        traces = tmp_path / "run" / "traces.jsonl"
        lines = traces.read_bytes().splitlines(keepends=True)
        last_id = orjson.loads(lines[-1])["id"]
        whole, torn = b"".join(lines[:-1]), lines[-1][:40]  # a crash in the middle of the last append
        traces.write_bytes(whole + torn)
        summary = _run(tmp_path, server.url, qs)
    assert summary.torn_tail_path is not None and summary.torn_tail_path.read_bytes() == torn
    assert traces.read_bytes().startswith(whole)
    assert len(read_jsonl(traces)) == 3  # every line whole again (read_jsonl is strict)
    assert (summary.skipped, summary.attempted) == (2, 1)
    assert [t["id"] for t in read_jsonl(traces)][-1] == last_id
    assert [p["id"] for p in read_jsonl(tmp_path / "run" / "predictions.jsonl")] == ["q000", "q001", "q002"]


def test_release_whose_rollout_file_fails_its_checksum_is_refused(tmp_path: Path) -> None:
    release = tmp_path / "release"
    release.mkdir()
    rollout = helpers.write_rollout(release / "rollout_questions.jsonl", helpers.questions(3))
    (release / "manifest.json").write_text('{"release_id": "demo", "data_sha256": "' + "ab" * 32 + '"}')
    (release / "checksums.sha256").write_text(f"{sha256_file(rollout)}  rollout_questions.jsonl\n")
    info = release_info(release)
    assert (info.release_id, info.data_sha256) == ("demo", "ab" * 32)
    rollout.write_bytes(rollout.read_bytes().replace(b"case 1", b"case 7"))
    with pytest.raises(IntegrityError, match="fails verification"):
        release_info(release)


def test_rollout_rows_with_gold_or_duplicate_ids_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"id": "a", "question": "q?", "answers": ["x"]}\n')
    with pytest.raises(DataError, match=r"r.jsonl:1"):
        load_rollout_questions(path)
    path.write_text('{"id": "a", "question": "q?"}\n{"id": "a", "question": "r?"}\n')
    with pytest.raises(DataError, match="duplicate id 'a'"):
        load_rollout_questions(path)
    assert Outcome.ENDPOINT_ERROR.value == "endpoint_error"


def test_predictions_can_be_re_exported_from_traces_alone(tmp_path: Path) -> None:
    from aethersearch.rollout.store import export_predictions

    qs = helpers.questions(3)
    with ScriptedServer(helpers.MODEL) as server:
        _run(tmp_path, server.url, qs)
    run = tmp_path / "run"
    exported = run / "predictions.jsonl"
    expected = sorted(exported.read_bytes().splitlines())
    exported.unlink()
    with (run / "traces.jsonl").open("ab") as handle:
        handle.write(b'{"id": "q0')  # a torn tail is ignored
    assert sorted(export_predictions(run).read_bytes().splitlines()) == expected  # traces order
