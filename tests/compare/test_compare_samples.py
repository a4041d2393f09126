"""compare of K-sample runs: a reducer is required across different K; the paired test is clustered."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from aethersearch.compare.checkpoints import compare_runs
from aethersearch.compare.paired import paired_bootstrap
from aethersearch.errors import ConfigError, IntegrityError
from aethersearch.scoring.api import score_run
from tests.scoring.factory import eval_rows, write_release, write_run, write_sampled_run


def _right(row, k: int, rate: int) -> str:
    """Sample k of a question is right for ``rate`` of every 5 (question, sample) slots."""
    number = int(row.id.split("_")[1])
    return row.answers[0] if (number + k) % 5 < rate else "wrong guess"


@pytest.fixture()
def runs(tmp_path: Path):
    rows = eval_rows(20)
    release = write_release(tmp_path / "release", rows)
    one = write_run(tmp_path / "one", rows, {r.id for i, r in enumerate(rows) if i % 5 < 2})
    three = write_sampled_run(tmp_path / "three", rows, 3, lambda r, k: _right(r, k, 2), model="rl")
    five = write_sampled_run(tmp_path / "five", rows, 5, lambda r, k: _right(r, k, 3), model="rl2")
    for run in (one, three, five):
        score_run(run, release, resamples=200)
    return one, three, five


def test_runs_of_different_k_are_refused_until_a_reducer_is_chosen(runs) -> None:
    one, three, five = runs
    with pytest.raises(IntegrityError, match="samples per question") as info:
        compare_runs([one, three])
    assert "--reducer mean" in (info.value.fix or "")
    with pytest.raises(ConfigError, match="--allow samples"):
        compare_runs([one, three], allow=["samples"])
    result = compare_runs([three, five], reducer="mean", resamples=300)
    assert [r["figure"] for r in result["runs"]] == ["mean@3", "mean@5"]
    overall = result["pairs"][0]["results"]["overall"]["em"]
    assert overall["method"] == "paired-clustered-bootstrap"
    assert overall["delta"] == pytest.approx(3 / 5 - 2 / 5, abs=0.04)
    assert result["pairs"][0]["flips"] == {}  # flips are per answer: not defined for K-sample figures
    with pytest.raises(ConfigError, match="0/1 metric"):
        compare_runs([three, five], reducer="pass@2")  # f1, a default metric, has no "correct"
    with pytest.raises(ConfigError, match="pass@1..pass@3"):
        compare_runs([three, five], reducer="pass@4", metrics=["em"])
    pass2 = compare_runs([three, five], reducer="pass@2", metrics=["em"], resamples=300)
    assert pass2["pairs"][0]["results"]["overall"]["em"]["a_mean"] > overall["a_mean"]  # pass@2 >= mean


def test_same_k_runs_compare_mean_at_k_with_the_paired_clustered_bootstrap(runs, tmp_path: Path) -> None:
    _, three, _ = runs
    rows = eval_rows(20)
    other = write_sampled_run(tmp_path / "other", rows, 3, lambda r, k: _right(r, k, 4), model="rl3")
    score_run(other, tmp_path / "release", resamples=200)
    result = compare_runs([three, other], resamples=500)
    entry = result["pairs"][0]["results"]["overall"]["em"]
    assert entry["method"] == "paired-clustered-bootstrap"
    # the test is over question means (clusters), not over the 3 x 60 traces
    a = np.array([((int(r.id.split("_")[1]) + np.arange(3)) % 5 < 2).mean() for r in rows])
    b = np.array([((int(r.id.split("_")[1]) + np.arange(3)) % 5 < 4).mean() for r in rows])
    expected = paired_bootstrap(a, b, resamples=500, seed=0, name="em/overall")
    assert entry["n"] == len(rows)
    assert (entry["ci_low"], entry["ci_high"]) == pytest.approx((expected.ci_low, expected.ci_high))
