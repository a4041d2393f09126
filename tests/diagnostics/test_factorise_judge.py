"""`factorise --correct judge:NAME`: the factorised metrics take correctness from a scored judge's verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from aethersearch.corpus.store import open_store
from aethersearch.demo import run_sandbox_demo
from aethersearch.diagnostics.probes import factorise_run
from aethersearch.errors import ConfigError
from aethersearch.scoring.api import score_run
from aethersearch.scoring.judge import JudgeConfig
from aethersearch.testing.scripted_server import ScriptedRequest, ScriptedServer


def test_factorised_metrics_take_correctness_from_a_named_scored_judge(tmp_path: Path) -> None:
    run_sandbox_demo(tmp_path)
    run, release = tmp_path / "sandbox_run", tmp_path / "sandbox_release"
    store = open_store(tmp_path / "sandbox_corpus")
    by_em = factorise_run(run, release, store=store, write=False)

    def accepts_everything(request: ScriptedRequest) -> str:
        return "CORRECT"

    with ScriptedServer(accepts_everything) as judge:
        scores = score_run(run, release, judge=JudgeConfig(base_url=judge.url, model="lenient", name="lenient"))
    answered = scores.outcomes.get("answered", 0)
    by_judge = factorise_run(run, release, store=store, correct_from="judge:lenient", write=False)
    assert by_judge["correctness"]["from"] == "judge:lenient"
    # every answered question is correct for this judge: Pass@1 is the answered share, above EM's
    assert by_judge["overall"]["pass_at_1"] == pytest.approx(answered / by_judge["n"])
    assert by_judge["overall"]["pass_at_1"] > by_em["overall"]["pass_at_1"]
    with pytest.raises(ConfigError, match="judge:lenient"):
        factorise_run(run, release, store=store, correct_from="judge:nobody", write=False)
