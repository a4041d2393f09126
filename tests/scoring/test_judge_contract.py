"""A judge is a pinned contract whose failures are never grades (issue 51), against scripted judges.

Each published failure mode is reproduced: an unparseable reply scored as a wrong answer, a
grader API error scored "correct: no", a BrowseComp-style grader whose regex marks every
answer wrong, a verdict re-rolled until it changes, a judge that is the model under test.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from aethersearch.errors import ConfigError, DataError, JudgeErrors
from aethersearch.jsonl import read_jsonl
from aethersearch.scoring.api import score_run
from aethersearch.scoring.judge import JudgeCase, JudgeConfig, build_judges, cache_key, load_prompt_file
from aethersearch.scoring.judges import cohen_kappa
from aethersearch.testing.scripted_server import Faults, ScriptedRequest, ScriptedServer
from tests.scoring.factory import eval_rows, write_release, write_run, write_sampled_run

ROWS = eval_rows(4)  # 12 questions over 3 sources
RIGHT = {r.id for r in ROWS[:6]}


def _prediction(text: str) -> str:
    for marker in ("Predicted answer: ", "[response]: ", "Predicted: "):
        if marker in text:
            return text.split(marker, 1)[1].split("\n", 1)[0]
    raise AssertionError(f"no prediction in the judge prompt: {text[:200]}")


def three_way_or_gibberish(request: ScriptedRequest) -> str:
    """CORRECT for gold answers, INCORRECT for 'wrong guess', and a sentence with no verdict for one case."""
    prediction = _prediction(request.text)
    if prediction.startswith("answer"):
        return "The answer looks fine to me." if prediction.endswith("1") else "CORRECT"
    return "INCORRECT"


@pytest.fixture()
def run(tmp_path: Path) -> tuple[Path, Path]:
    release = write_release(tmp_path / "release", ROWS)
    return release, write_run(tmp_path / "run", ROWS, RIGHT, model="policy-7b")


def test_an_unparseable_reply_is_a_judge_error_out_of_the_denominator_never_a_wrong_answer(
        run: tuple[Path, Path]) -> None:
    release, run_dir = run
    with ScriptedServer(three_way_or_gibberish) as judge:
        scores = score_run(run_dir, release, judge=JudgeConfig(base_url=judge.url, model="grader"))
    gibberish = [r.id for r in ROWS[:6] if r.answers[0].endswith("1")]
    assert gibberish, "the fixture must have a case the judge cannot grade"
    summary = scores.judge
    assert summary is not None and summary.error_count == len(gibberish)
    assert summary.questions_without_verdict == len(gibberish)
    micro = scores.overall.micro.metrics["judge"]
    assert micro.n == 12 - len(gibberish)  # out of the denominator, not scored 0
    assert micro.mean == pytest.approx((6 - len(gibberish)) / (12 - len(gibberish)))
    rows = {row["id"]: row for row in read_jsonl(run_dir / "scores_questions.jsonl")}
    assert all("judge" not in rows[qid]["values"] and rows[qid]["judge_verdicts"]["grader"] == "error"
               for qid in gibberish)


def test_judge_errors_fail_exits_non_zero_after_writing_the_scores(run: tuple[Path, Path]) -> None:
    release, run_dir = run
    with ScriptedServer(three_way_or_gibberish) as judge:
        with pytest.raises(JudgeErrors, match="rows without a verdict"):
            score_run(run_dir, release, judge=JudgeConfig(base_url=judge.url, model="grader"), judge_errors="fail")
        done = subprocess.run([sys.executable, "-m", "aethersearch.cli", "score", str(run_dir), "--release",
                               str(release), "--judge", judge.url, "--judge-model", "grader"],
                              capture_output=True, text=True)
    assert (run_dir / "scores.json").is_file()
    assert done.returncode == 0 and "judge errors:" in done.stdout and "never scored as wrong" in done.stdout


def test_an_api_error_after_retries_is_an_error_not_correct_no(run: tuple[Path, Path]) -> None:
    release, run_dir = run
    with ScriptedServer(lambda r: "CORRECT", faults=Faults(rate=1.0, kinds=("500",))) as judge:
        scores = score_run(run_dir, release, judge=JudgeConfig(base_url=judge.url, model="grader", max_retries=1))
        assert judge.stats.requests == 2 * 12  # each answered row: one try and one retry, no more
    assert scores.judge is not None and scores.judge.error_count == 12
    written = orjson.loads((run_dir / "scores.json").read_bytes())["overall"]["micro"]["metrics"]["judge"]
    assert written["n"] == 0 and written["mean"] is None  # no figure at all, not a 0


def test_a_refusal_to_grade_is_an_error(run: tuple[Path, Path]) -> None:
    release, run_dir = run
    with ScriptedServer(lambda r: "I'm sorry, I can't help with deciding whether this is correct.") as judge:
        scores = score_run(run_dir, release, judge=JudgeConfig(base_url=judge.url, model="grader"))
    assert scores.judge is not None and scores.judge.error_count == 12


BROWSECOMP_STYLE = """Judge whether the following [response] to [question] is correct based on [correct_answer].

[question]: {question}

[response]: {response}

[correct_answer]: {correct_answer}

Answer in the format:
extracted_final_answer: ...
reasoning: ...
correct: yes or no
confidence: 0-100%
"""


def browsecomp_grader(request: ScriptedRequest) -> str:
    right = _prediction(request.text).startswith("answer")
    return (f"extracted_final_answer: {_prediction(request.text)}\nreasoning: compared with the gold.\n"
            f"Correct: {'Yes' if right else 'No'}\nconfidence: 90%")


def test_a_published_grader_format_pins_its_prompt_and_parses_every_verdict(run: tuple[Path, Path],
                                                                           tmp_path: Path) -> None:
    release, run_dir = run
    prompt = tmp_path / "browsecomp_grader.txt"
    prompt.write_text(BROWSECOMP_STYLE, encoding="utf-8")
    with ScriptedServer(browsecomp_grader) as judge:
        [config] = build_judges([judge.url], models=["grader"], prompts=[prompt], parsers=["yes-no"], seed=7)
        scores = score_run(run_dir, release, judges=[config])
        sent = judge.stats.requests
    summary = scores.judge
    assert summary is not None and summary.error_count == 0 and summary.parser == "yes-no"
    assert summary.prompt_source == "browsecomp_grader.txt" and summary.seed == 7 and summary.max_tokens == 1024
    assert summary.prompt_sha256 == config.prompt_sha256 != JudgeConfig(base_url="", model="grader").prompt_sha256
    assert scores.overall.micro.metrics["judge"].mean == pytest.approx(6 / 12)  # not every answer wrong
    assert sent == 12
    written = orjson.loads((run_dir / "scores.json").read_bytes())["judges"][0]
    assert written["temperature"] == 0.0 and written["parser"] == "yes-no"


def test_a_prompt_with_a_field_this_project_does_not_fill_is_refused(tmp_path: Path) -> None:
    prompt = tmp_path / "grader.txt"
    prompt.write_text("Grade {question} against {gold_answer}.", encoding="utf-8")
    with pytest.raises(DataError, match="gold_answer"):
        load_prompt_file(prompt)


def test_the_contract_is_in_the_cache_key_and_a_parsed_verdict_is_never_re_asked(run: tuple[Path, Path]) -> None:
    release, run_dir = run
    case = JudgeCase("q", "who?", ["a"], "b")
    base = JudgeConfig(base_url="u", model="m")
    keys = {cache_key(base, case), cache_key(base.model_copy(update={"seed": 1}), case),
            cache_key(base.model_copy(update={"temperature": 0.7}), case),
            cache_key(base.model_copy(update={"parser": "letter"}), case),
            cache_key(base.model_copy(update={"prompt": "other {question} {golds} {prediction}"}), case)}
    assert len(keys) == 5
    bodies: list[dict[str, Any]] = []

    def abstaining(request: ScriptedRequest) -> str:
        bodies.append(request.body)
        return "NOT_ATTEMPTED"

    with ScriptedServer(abstaining) as judge:
        score_run(run_dir, release, judge=JudgeConfig(base_url=judge.url, model="grader", seed=3))
        assert judge.stats.requests == 12  # NOT_ATTEMPTED is a verdict: asked once, never re-rolled
    assert {(b["temperature"], b["seed"], b["max_tokens"]) for b in bodies} == {(0.0, 3, 16)}


def test_the_model_under_test_is_refused_as_its_own_judge_unless_asked(run: tuple[Path, Path]) -> None:
    release, run_dir = run
    with ScriptedServer(three_way_or_gibberish) as judge:
        with pytest.raises(ConfigError, match="model under test"):
            score_run(run_dir, release, judge=JudgeConfig(base_url=judge.url, model="policy-7b"))
        scores = score_run(run_dir, release, judge=JudgeConfig(base_url=judge.url, model="policy-7b"),
                           judge_self=True)
    assert scores.judge is not None and scores.judge.judge_self is True


def test_two_judges_give_one_number_each_their_kappa_delta_and_disagreements(run: tuple[Path, Path]) -> None:
    release, run_dir = run
    lenient = {r.id for r in ROWS[6:8]}  # the second judge also accepts two wrong guesses

    def strict(request: ScriptedRequest) -> str:
        return "CORRECT" if _prediction(request.text).startswith("answer") else "INCORRECT"

    def generous(request: ScriptedRequest) -> str:
        question = request.text.split("Question: ", 1)[1].split("\n", 1)[0]
        accepted = any(r.question == question for r in ROWS if r.id in lenient)
        return "CORRECT" if accepted or _prediction(request.text).startswith("answer") else "INCORRECT"

    with ScriptedServer(strict) as a, ScriptedServer(generous) as b:
        judges = build_judges([a.url, b.url], models=["judge-a", "judge-b"])
        scores = score_run(run_dir, release, judges=judges)
    assert {"judge", "judge:judge-b"} <= set(scores.metrics)
    assert scores.overall.micro.metrics["judge"].mean == pytest.approx(6 / 12)
    assert scores.overall.micro.metrics["judge:judge-b"].mean == pytest.approx(8 / 12)
    [pair] = scores.judge_agreement
    assert (pair.a, pair.b, pair.n) == ("judge-a", "judge-b", 12)
    assert sorted(pair.disagree) == sorted(lenient)
    assert pair.delta == pytest.approx(2 / 12) and pair.ci_low is not None and pair.ci_low <= pair.delta
    assert pair.kappa == pytest.approx(cohen_kappa([i < 6 for i in range(12)], [i < 8 for i in range(12)]))
    assert [j.kappa_vs_em for j in scores.judges][0] == pytest.approx(1.0)


def test_cohen_kappa_matches_the_textbook_example() -> None:
    # 50 items: both yes 20, a yes b no 5, a no b yes 10, both no 15 -> p_o 0.7, p_e 0.5, kappa 0.4
    a = [True] * 25 + [False] * 25
    b = [True] * 20 + [False] * 5 + [True] * 10 + [False] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert cohen_kappa([True, True], [True, True]) is None


def test_k_samples_are_judged_one_by_one_and_reduced_like_em(tmp_path: Path) -> None:
    release = write_release(tmp_path / "release", ROWS)
    run_dir = write_sampled_run(tmp_path / "run", ROWS, 3,
                                lambda row, k: row.answers[0] if (row.id in RIGHT and k < 2) else "wrong guess")

    def strict(request: ScriptedRequest) -> str:
        return "CORRECT" if _prediction(request.text).startswith("answer") else "INCORRECT"

    with ScriptedServer(strict) as judge:
        scores = score_run(run_dir, release, judge=JudgeConfig(base_url=judge.url, model="grader"))
        assert judge.stats.requests == 36
    micro = scores.overall.micro
    assert micro.metrics["judge"].mean == pytest.approx(micro.metrics["em"].mean)
    assert micro.reducers["judge"]["pass@3"].mean == pytest.approx(micro.reducers["em"]["pass@3"].mean)


def test_cost_from_a_price_table_and_unpriced_models_say_so(run: tuple[Path, Path], tmp_path: Path) -> None:
    release, run_dir = run
    prices = tmp_path / "prices.yaml"
    prices.write_text("currency: USD\nmodels:\n  grader: {input_per_million: 1.0, output_per_million: 2.0}\n",
                      encoding="utf-8")
    with ScriptedServer(three_way_or_gibberish) as judge:
        scores = score_run(run_dir, release, judge=JudgeConfig(base_url=judge.url, model="grader"), prices=prices)
    cost = scores.cost
    assert cost is not None and cost["currency"] == "USD"
    tokens = scores.judge.tokens if scores.judge else {}
    assert tokens["prompt_tokens"] > 0
    assert cost["judges"][0]["cost"] == pytest.approx((tokens["prompt_tokens"] * 1.0
                                                       + tokens["completion_tokens"] * 2.0) / 1e6)
    assert cost["agent"]["cost"] is None and "policy-7b" in cost["agent"]["why"]
    assert cost["total"] is None and "understate" in cost["total_why"]


def test_the_viewer_shows_both_judges_verdicts_and_raw_replies_where_they_disagree(run: tuple[Path, Path]) -> None:
    from fastapi.testclient import TestClient

    from aethersearch.report.viewer.app import create_app, load_viewer

    release, run_dir = run

    def strict(request: ScriptedRequest) -> str:
        return "CORRECT" if _prediction(request.text).startswith("answer") else "INCORRECT"

    with ScriptedServer(strict) as a, ScriptedServer(lambda r: "Verdict: CORRECT") as b:
        scores = score_run(run_dir, release, judges=build_judges([a.url, b.url], models=["judge-a", "judge-b"]))
    [pair] = scores.judge_agreement
    qid = pair.disagree[0]
    client = TestClient(create_app(load_viewer([run_dir], release=release)))
    html = client.get(f"/q/{qid}").text
    assert "(they disagree)" in html and "judge-a" in html and "judge-b" in html
    assert "Verdict: CORRECT" in html and ">INCORRECT</pre>" in html


def test_the_report_and_compare_carry_every_judge_its_errors_and_the_cost(run: tuple[Path, Path],
                                                                         tmp_path: Path) -> None:
    from aethersearch.compare.checkpoints import compare_runs
    from aethersearch.report.html import write_report

    release, run_dir = run
    prices = tmp_path / "prices.yaml"
    prices.write_text("models:\n  grader: {input_per_million: 1.0, output_per_million: 2.0}\n"
                      "  other: {input_per_million: 0.5, output_per_million: 0.5}\n  policy-7b: "
                      "{input_per_million: 0.0, output_per_million: 0.0}\n", encoding="utf-8")
    with ScriptedServer(three_way_or_gibberish) as a, ScriptedServer(lambda r: "INCORRECT") as b:
        score_run(run_dir, release, judges=build_judges([a.url, b.url], models=["grader", "other"]), prices=prices)
    html = write_report([run_dir], tmp_path / "report.html").read_text(encoding="utf-8")
    judges = html.split('<table class="judges">', 1)[1].split("</table>", 1)[0]
    assert "grader" in judges and "other" in judges and "judge:other" in judges
    assert "other vs grader on" in html and '<table class="cost">' in html and "total" in html
    assert "USD" in html
    import shutil

    shutil.copytree(run_dir, tmp_path / "again" / "run")  # same name in another folder: named a/run-style
    first, second = compare_runs([run_dir, tmp_path / "again" / "run"])["runs"]
    assert first["cost"]["total"] is not None and first["usage"]["prompt_tokens"] >= 0
    assert first["name"] != second["name"] and not first["name"].startswith("/")
