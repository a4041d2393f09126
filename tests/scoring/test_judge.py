"""LLM judge: pinned prompt, temperature 0, three verdicts, on-disk cache, retries, EM-vs-judge table."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from aethersearch.scoring.api import score_run
from aethersearch.scoring.judge import (
    PROMPT_HASH,
    JudgeCase,
    JudgeConfig,
    Verdict,
    cache_key,
    disagreement_table,
    judge_cases,
    parse_verdict,
)
from tests.scoring.factory import eval_rows, write_release, write_run


def _grader(prompt: str) -> str:
    """A deterministic fake judge: 'alias' answers are paraphrases it accepts."""
    prediction = prompt.split("Predicted answer: ", 1)[1].split("\n", 1)[0]
    if prediction.startswith("alias") or prediction.startswith("answer"):
        return "CORRECT"
    if "know" in prediction:
        return "NOT_ATTEMPTED"
    return "INCORRECT"


class FakeOpenAI:
    """An httpx.MockTransport speaking the chat-completions API, counting calls, failing on demand."""

    def __init__(self, fail_first: int = 0) -> None:
        self.bodies: list[dict] = []
        self.fail_first = fail_first

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/chat/completions"
        body = json.loads(request.content)
        self.bodies.append(body)
        if self.fail_first > 0:
            self.fail_first -= 1
            return httpx.Response(503, json={"error": "busy"})
        text = _grader(body["messages"][0]["content"])
        return httpx.Response(200, json={"choices": [{"message": {"role": "assistant", "content": text}}]})


CASES = [JudgeCase("q1", "who was president?", ["John F. Kennedy"], "alias JFK"),
         JudgeCase("q2", "who was president?", ["John F. Kennedy"], "Nixon"),
         JudgeCase("q3", "who was president?", ["John F. Kennedy"], "I don't know")]


def test_three_verdicts_temperature_zero_and_pinned_prompt(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    config = JudgeConfig(base_url="http://judge.test/v1", model="judge-1", cache_path=tmp_path / "cache.jsonl")
    got = judge_cases(CASES, config, transport=httpx.MockTransport(fake))
    assert {k: v.verdict for k, v in got.items()} == {"q1": "correct", "q2": "incorrect", "q3": "not_attempted"}
    assert all(body["temperature"] == 0 and body["model"] == "judge-1" for body in fake.bodies)
    assert any("Predicted answer: Nixon" in b["messages"][0]["content"] for b in fake.bodies)
    assert len(PROMPT_HASH) == 64


def test_cache_prevents_repeat_calls_and_is_keyed_by_judge_and_inputs(tmp_path: Path) -> None:
    config = JudgeConfig(base_url="http://judge.test/v1", model="judge-1", cache_path=tmp_path / "cache.jsonl")
    first = FakeOpenAI()
    judge_cases(CASES, config, transport=httpx.MockTransport(first))
    again = FakeOpenAI()
    got = judge_cases(CASES, config, transport=httpx.MockTransport(again))
    assert again.bodies == [] and all(v.cached for v in got.values())
    other_judge = FakeOpenAI()
    judge_cases(CASES, config.model_copy(update={"model": "judge-2"}), transport=httpx.MockTransport(other_judge))
    assert len(other_judge.bodies) == 3
    changed = FakeOpenAI()
    judge_cases([CASES[0]._replace(prediction="alias Kennedy")], config, transport=httpx.MockTransport(changed))
    assert len(changed.bodies) == 1
    assert cache_key("judge-1", CASES[0]) != cache_key("judge-1", CASES[0]._replace(golds=["JFK"]))


def test_transient_errors_are_retried_and_hard_errors_recorded(tmp_path: Path) -> None:
    config = JudgeConfig(base_url="http://judge.test/v1", model="j", max_retries=3, concurrency=1)
    flaky = FakeOpenAI(fail_first=2)
    got = judge_cases(CASES[:1], config, transport=httpx.MockTransport(flaky))
    assert got["q1"].verdict == "correct" and len(flaky.bodies) == 3

    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": "bad key"})

    got = judge_cases(CASES[:1], config, transport=httpx.MockTransport(refuse))
    assert got["q1"].verdict is None and "401" in got["q1"].error


@pytest.mark.parametrize(("reply", "want"), [("CORRECT", "correct"), ("incorrect.", "incorrect"),
                                              ("Verdict: NOT_ATTEMPTED", "not_attempted"), ("maybe", None)])
def test_parse_verdict(reply: str, want: str | None) -> None:
    assert parse_verdict(reply) == want


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server API)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = _grader(body["messages"][0]["content"])
        data = json.dumps({"choices": [{"message": {"content": text}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def test_score_run_with_judge_adds_metric_and_disagreement_table(tmp_path: Path) -> None:
    rows = eval_rows(4)
    release_dir = write_release(tmp_path / "release", rows)
    correct = {r.id for r in rows[:6]}  # answered with answers[0] ("answer ...") -> EM 1
    run = write_run(tmp_path / "run", rows, correct)
    traces = [json.loads(line) for line in (run / "traces.jsonl").read_text().splitlines()]
    # question 7 answered with a paraphrase EM misses but the judge accepts
    traces[6]["response"] = "<answer>alias paraphrase</answer>"
    (run / "traces.jsonl").write_text("".join(json.dumps(t) + "\n" for t in traces))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        config = JudgeConfig(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", model="fake-judge")
        scores = score_run(run, release_dir, judge=config)
    finally:
        server.shutdown()
    assert "judge" in scores.metrics
    assert scores.overall.micro.metrics["judge"].mean == pytest.approx(7 / 12)
    assert scores.judge is not None
    table = scores.judge.disagreement
    assert table.judge_correct_em_not == [rows[6].id]
    assert table.em_vs_verdict["1"]["correct"] == 6
    assert (run / "judge_cache.jsonl").is_file()
    assert scores.judge.prompt_sha256 == PROMPT_HASH


def test_cli_prints_the_em_vs_judge_disagreement_table(capsys: pytest.CaptureFixture[str]) -> None:
    from rich.console import Console

    from aethersearch.commands.scoring import print_disagreement
    from aethersearch.scoring.scores_file import JudgeSummary

    verdicts = {"q1": Verdict("correct", False, None), "q2": Verdict("correct", False, None),
                "q3": Verdict("incorrect", False, None)}
    judge = JudgeSummary(model="fake-judge", base_url="http://127.0.0.1:1/v1", prompt_sha256=PROMPT_HASH,
                         temperature=0, judged=3, cached=0, errors={},
                         disagreement=disagreement_table({"q1": 1.0, "q2": 0.0, "q3": 1.0}, verdicts))
    print_disagreement(Console(width=200), judge)
    out = capsys.readouterr().out
    assert "EM vs judge fake-judge" in out and "agreement 33.3%" in out
    assert "judge correct, EM 0: q2" in out and "EM 1, judge not: q3" in out
