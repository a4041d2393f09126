"""Serving noise: flip rates, the floor they put under a delta, compare's marking, and a real rerun measurement."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from aethersearch.compare.checkpoints import compare_runs
from aethersearch.compare.noise import (
    NOISE_FILE,
    MetricNoise,
    NoiseBinding,
    NoiseFile,
    concurrency_levels,
    flip_rates,
    measure_noise,
    noise_floor,
    read_noise,
)
from aethersearch.errors import DataError
from aethersearch.jsonl import atomic_write_json, sha256_file
from aethersearch.scoring.api import score_run
from aethersearch.scoring.scores_file import MetricEstimate
from tests.scoring.factory import eval_rows, write_release, write_run


def test_the_flip_rate_is_the_share_of_disagreeing_run_pairs() -> None:
    for row in ([1, 1, 1], [0, 0], [1, 0], [1, 1, 0, 0], [1, 0, 0, None]):
        usable = [v for v in row if v is not None]
        pairs = list(itertools.combinations(usable, 2))
        assert flip_rates([row]) == [pytest.approx(sum(a != b for a, b in pairs) / len(pairs))]
    assert flip_rates([[1, None, None]]) == [None]
    # K-sample runs: mean@K scores; twice their variance is the mean squared difference over run pairs
    means = [0.2, 0.6, 0.4]
    pairs = list(itertools.combinations(means, 2))
    assert flip_rates([means]) == [pytest.approx(sum((a - b) ** 2 for a, b in pairs) / len(pairs))]


def test_default_concurrencies_vary_from_the_first_rerun_on() -> None:
    assert concurrency_levels(1) == [1, 4]  # not 1, 1, 4: two reruns of a concurrency-1 run must differ
    assert concurrency_levels(4) == [1, 4, 16]
    assert concurrency_levels(4, [2, 2]) == [2, 2]  # given levels are used as given


def test_the_floor_scales_with_one_over_root_n() -> None:
    assert noise_floor(0.1, None, 400) == pytest.approx(1.96 * (0.1 / 400) ** 0.5, rel=1e-3)
    assert noise_floor(0.1, 0.3, 100) == pytest.approx(1.96 * (0.2 / 100) ** 0.5, rel=1e-3)


def _noise_file(run: Path, flip_rate: float, by_metric: tuple[str, ...] = ()) -> NoiseFile:
    """A measured ``noise.json`` of ``run`` (``em`` at the top level); ``by_metric=()``: one written before
    ``by_metric`` existed, whose top level is its one metric (such files must still load)."""
    rate = MetricEstimate(mean=flip_rate, ci_low=flip_rate, ci_high=flip_rate, n=30)
    measured = MetricNoise(flip_rate=rate, questions_flipping=3, questions_measured=30, floor_at_run_size=0.1)
    noise = NoiseFile(convention="serving_noise", metric="em", reruns=2, sample=30, seed=0, concurrencies=[1, 4],
                      errors=0, run_size=30, **measured.model_dump(), per_question=[],
                      by_metric={metric: measured for metric in by_metric},
                      bound_to=NoiseBinding(scores_sha256=sha256_file(run / "scores.json"),
                                            run_json_sha256=sha256_file(run / "run.json"), reruns=[]))
    payload = noise.model_dump(mode="json")
    if not by_metric:
        del payload["by_metric"]  # as the first version wrote it
    atomic_write_json(run / NOISE_FILE, payload)
    return noise


def _two_scored_runs(tmp_path: Path) -> tuple[Path, Path]:
    """A base run and an RL run on 30 questions, RL right on two more: a delta of 2/90 in overall EM."""
    rows = eval_rows(30)
    release = write_release(tmp_path / "release", rows)
    base_correct = {r.id for i, r in enumerate(rows) if i % 2 == 0}
    base = write_run(tmp_path / "base", rows, base_correct, model="base")
    rl = write_run(tmp_path / "rl", rows, base_correct | {rows[1].id, rows[3].id}, model="rl")
    for run in (base, rl):
        score_run(run, release, resamples=100)
    return base, rl


def test_compare_marks_a_delta_below_the_measured_floor_as_within_serving_noise(tmp_path: Path) -> None:
    base, rl = _two_scored_runs(tmp_path)
    plain = compare_runs([base, rl], resamples=100)["pairs"][0]["results"]["overall"]["em"]
    assert "within_noise" not in plain  # nothing measured: nothing claimed
    _noise_file(base, 0.30)  # a noisy server: reruns disagree on 30% of question pairs (a file without by_metric)
    noisy = compare_runs([base, rl], resamples=100)["pairs"][0]["results"]["overall"]["em"]
    assert noisy["delta"] == pytest.approx(2 / 90)
    assert noisy["noise_floor"] == pytest.approx(noise_floor(0.30, None, 90)) and noisy["within_noise"] is True
    _noise_file(base, 0.001)
    quiet = compare_runs([base, rl], resamples=100)["pairs"][0]["results"]["overall"]["em"]
    assert quiet["within_noise"] is False
    f1 = compare_runs([base, rl], resamples=100)["pairs"][0]["results"]["overall"]["f1"]
    assert f1["noise_floor"] is None and f1["within_noise"] is None  # measured for em only: said so, not blank


def test_every_metric_measured_gets_its_own_floor_and_the_report_shows_every_verdict(tmp_path: Path) -> None:
    from aethersearch.report.html import write_report

    base, rl = _two_scored_runs(tmp_path)
    _noise_file(base, 0.30, by_metric=("em", "f1"))
    results = compare_runs([base, rl], resamples=100)["pairs"][0]["results"]
    for scope in results.values():
        for metric in ("em", "f1"):
            assert scope[metric]["noise_floor"] == pytest.approx(noise_floor(0.30, None, scope[metric]["n"]))
    html = write_report([base, rl], tmp_path / "report.html").read_text(encoding="utf-8")
    table = html.split('<table class="comparison">', 1)[1].split("</table>", 1)[0]
    rows_html = table.split("<tr>")[2:]
    assert len(rows_html) == sum(len(by_metric) for by_metric in results.values())
    for row in rows_html:  # every metric shown carries all three verdicts
        assert "significant" in row and "serving noise" in row and row.count("<td>") >= 9, row
    assert "within serving noise" in table
    assert str(tmp_path) not in html  # no absolute path of the machine that wrote it


def test_a_noise_file_for_other_scores_is_refused(tmp_path: Path) -> None:
    rows = eval_rows(3)
    release = write_release(tmp_path / "release", rows)
    run = write_run(tmp_path / "run", rows, set())
    score_run(run, release, resamples=20)
    _noise_file(run, 0.1)
    score_run(run, release, resamples=30)  # rescored: scores.json changed
    with pytest.raises(DataError, match="scores.json changed"):
        read_noise(run)


def test_a_noise_file_is_read_through_its_record(tmp_path: Path) -> None:
    rows = eval_rows(3)
    release = write_release(tmp_path / "release", rows)
    run = write_run(tmp_path / "run", rows, set())
    score_run(run, release, resamples=20)
    written = _noise_file(run, 0.1, by_metric=("em", "f1"))
    assert read_noise(run) == written
    assert _noise_file(run, 0.1).by_metric == {} and read_noise(run) is not None  # a file from before by_metric
    atomic_write_json(run / NOISE_FILE, {"metric": "em", "bound_to": {"scores_sha256": sha256_file(run / "scores.json")}})
    with pytest.raises(DataError, match="not a noise.json this version reads") as refused:
        read_noise(run)  # a field missing: named, never a KeyError later in compare
    assert refused.value.field == "flip_rate"  # the first missing field


@pytest.mark.slow
def test_measure_noise_reruns_the_sample_with_the_runs_settings(tmp_path: Path) -> None:
    from aethersearch import demo, pipeline

    release, index = demo.build_demo_inputs(tmp_path / "demo")
    run = tmp_path / "run"
    pipeline.run_agent(release, run, pipeline.index_search(index), agent="lexical", concurrency=4)
    score_run(run, release, resamples=50)
    result = measure_noise(run, release, pipeline.index_search(index), reruns=2, sample=12, seed=1)
    assert result.sample == 12 and result.concurrencies == [1, 4]
    assert result.flip_rate is not None and result.flip_rate.mean == 0.0  # a deterministic agent: no flips
    f1 = result.by_metric["f1"].flip_rate
    assert set(result.by_metric) == {"em", "f1"} and f1 is not None and f1.mean == 0.0
    assert result.questions_measured == 12 and result.errors == 0
    assert [len(q.correct) for q in result.per_question] == [3] * 12
    assert read_noise(run) == result
    for rerun in result.bound_to.reruns:
        assert sha256_file(run / rerun.dir / "traces.jsonl") == rerun.traces_sha256
    again = measure_noise(run, release, pipeline.index_search(index), reruns=2, sample=12, seed=1)
    assert again.per_question == result.per_question  # resumed: nothing was rerun twice
