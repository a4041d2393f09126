"""A real served model as the LLM judge: whatever it replies, a verdict is read or the row is a judge error.

SmolLM2-135M is a weak grader: it often answers with a sentence instead of one verdict word. That is
the point of the test: on a real model's replies, every row is either a parsed verdict (a grade) or a
counted judge error out of the denominator, never a silent 0, and the contract is recorded.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from aethersearch.demo import build_demo_inputs
from aethersearch.pipeline import index_search, run_agent
from aethersearch.scoring.api import score_run
from aethersearch.scoring.judge import JudgeConfig

from .conftest import RealServer

pytestmark = pytest.mark.realmodel


def test_the_real_model_judges_the_demo_and_its_failures_are_never_grades(real_server: RealServer,
                                                                          tmp_path: Path) -> None:
    release, index = build_demo_inputs(tmp_path / "demo")
    run = tmp_path / "run"
    run_agent(release, run, index_search(index), agent="lexical", concurrency=4)
    judge = JudgeConfig(base_url=real_server.url, model=real_server.model, name="smollm2", concurrency=2,
                        max_tokens=8)
    scores = score_run(run, release, judge=judge)
    summary = scores.judge
    assert summary is not None and summary.judged == scores.outcomes["answered"]
    written = orjson.loads((run / "scores.json").read_bytes())["judges"][0]
    assert written["model"] == real_server.model and written["parser"] == "three-way"
    assert written["seed"] == 0 and written["max_tokens"] == 8 and written["temperature"] == 0.0
    rows = [orjson.loads(line) for line in (run / "scores_questions.jsonl").read_bytes().splitlines()]
    verdicts = [row["judge_verdicts"]["smollm2"] for row in rows]
    errors = sum(v == "error" for v in verdicts)
    assert errors == summary.error_count == summary.questions_without_verdict
    with_value = [row for row in rows if "judge" in row["values"]]
    assert len(with_value) == len(rows) - errors == scores.overall.micro.metrics["judge"].n
    assert all(row["judge_verdicts"]["smollm2"] != "error" for row in with_value)
    print(f"real judge: {len(rows) - errors} graded, {errors} judge errors of {len(rows)} "
          f"(kappa vs EM {summary.kappa_vs_em})")
