"""The serving-noise floor of a run: rerun some of its questions under its exact settings and count flips.

Why: greedy decoding on vLLM, SGLang or llama.cpp is not bit-reproducible. Batch
composition, concurrency and prefix caching change the logits, so the same
checkpoint rerun at temperature 0 answers some questions differently (verl users
see validation scores move with ``val_batch_size``, verl #1515). A 1-point "gain"
between two checkpoints can be pure serving noise; the paired tests of
``compare`` assume one run per checkpoint is the truth. ``measure_noise`` measures
instead: it reruns ``sample`` questions ``reruns`` times with the run's own
``run.json`` settings and endpoint, varying only the concurrency (which changes
batch composition), and writes ``noise.json`` beside the run.

Statistics (named ``serving_noise``, this project's):

* Per question, with ``c`` correct of ``m`` runs (the original and the reruns), the
  **flip rate** ``d = 2c(m-c) / (m(m-1))`` is the share of run pairs that disagree:
  an unbiased estimate of ``2p(1-p)``, the chance that two runs of the same
  checkpoint disagree on it. The overall flip rate is its mean over the sampled
  questions, with a 95% bootstrap interval over questions.
* The **noise floor** of an accuracy delta over ``n`` questions between two
  checkpoints with flip rates ``dA`` and ``dB`` is ``1.96 * sqrt((dA + dB) / (2n))``:
  the 95% half-width of the difference two reruns of the same checkpoints would show
  (each run's accuracy has variance ``sum p(1-p) / n^2``). With one noise file the
  other checkpoint is assumed as noisy. ``compare`` marks a delta below it as
  ``within serving noise``.
* A K-sample run is rerun with its K samples, and its per-question scores are mean@K: the
  flip rate is then the mean squared difference of those scores over run pairs (for 0/1
  scores exactly the share of disagreeing pairs), the same estimate of ``2 Var``.
* One measurement serves every metric ``compare`` shows: the reruns are scored once and
  ``by_metric`` holds the rate and floor of each (``em`` and ``f1`` by default; for F1 the
  "flip rate" is the same mean squared difference of per-question scores). The top-level
  fields are those of ``--metric``.
* A rerun question that ended in an error outcome is left out of that question's
  count (``errors`` says how many); a question with fewer than two usable runs is
  left out of the rate.

The file is one :class:`NoiseFile`, written by :func:`measure_noise` and read by
:func:`read_noise` (``tests/test_artefact_records.py`` freezes its fields).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field, ValidationError

from aethersearch.errors import ConfigError, DataError
from aethersearch.jsonl import atomic_write_json, loads, sha256_file
from aethersearch.records import ERROR_OUTCOMES, Record, RunLimits
from aethersearch.scoring.aggregate import estimate
from aethersearch.scoring.scores_file import MetricEstimate

__all__ = ["MetricNoise", "NOISE_FILE", "NOISE_METRICS", "NoiseBinding", "NoiseFile", "QuestionNoise",
    "RerunBinding", "concurrency_levels", "flip_rates", "measure_noise", "metric_flip_rate", "noise_floor",
    "read_noise", "serving_noise_mark"]

NOISE_FILE = "noise.json"
#: the metrics a measurement also scores its reruns on: those ``compare`` shows by default
NOISE_METRICS: tuple[str, ...] = ("em", "f1")
Z95 = 1.959963984540054
_ERRORS = frozenset({*(o.value for o in ERROR_OUTCOMES), "missing"})


# ----------------------------------------------------------------------------- noise.json
# Written with ``trusted`` (the values are this module's own, already of their types: validating
# would turn an integer score into a float and change the file's bytes); validated where read back.


class MetricNoise(Record):
    """One metric's flip rate (mean over the measured questions, with its 95% interval) and floor."""

    #: None when no question had two usable runs
    flip_rate: MetricEstimate | None
    questions_flipping: int
    questions_measured: int
    #: the floor of a delta over the run's own size (``run_size``), one measured run standing for both
    floor_at_run_size: float | None


class QuestionNoise(Record):
    """One sampled question: its score in each run (the original first; None = an error) and its flip rate."""

    id: str
    correct: list[float | None]
    flip_rate: float | None


class RerunBinding(Record):
    """One rerun directory (relative to the run) with the concurrency it ran at and its traces' sha256."""

    dir: str
    concurrency: int
    traces_sha256: str


class NoiseBinding(Record):
    """The files the measurement was made from: a changed ``scores.json`` makes the file stale."""

    scores_sha256: str
    run_json_sha256: str
    reruns: list[RerunBinding]


class NoiseFile(MetricNoise):
    """``noise.json``: the measurement's settings, ``--metric``'s figures at the top level, every metric's in
    ``by_metric``, per question, and what it is bound to."""

    convention: str
    metric: str
    reruns: int
    sample: int
    seed: int
    concurrencies: list[int]
    errors: int
    run_size: int
    #: absent in files measured before ``by_metric`` (their top level is their one metric, still read)
    by_metric: dict[str, MetricNoise] = Field(default_factory=dict)
    per_question: list[QuestionNoise]
    bound_to: NoiseBinding


def flip_rates(matrix: Sequence[Sequence[float | None]]) -> list[float | None]:
    """Per question (its score in each run, None = error), the mean squared difference over run pairs.

    For 0/1 scores that is the share of run pairs that disagree, ``2c(m-c) / (m(m-1))``; for a
    K-sample run's mean@K scores it is twice their sample variance, the same estimate of ``2 Var``.
    """
    rates: list[float | None] = []
    for row in matrix:
        usable = [v for v in row if v is not None]
        m = len(usable)
        if m < 2:
            rates.append(None)
            continue
        rates.append(2.0 * float(np.var(usable, ddof=1)))
    return rates


def metric_flip_rate(noise: NoiseFile, metric: str) -> float | None:
    """``noise.json``'s mean flip rate for ``metric`` (None: not measured for that metric)."""
    measured: MetricNoise | None = noise.by_metric.get(metric)
    if measured is None and noise.metric == metric:
        measured = noise  # a measurement made before ``by_metric``: its top level is its one metric
    rate = measured.flip_rate if measured is not None else None
    return float(rate.mean) if rate is not None and rate.mean is not None else None


def serving_noise_mark(delta: float, noise_a: NoiseFile | None, noise_b: NoiseFile | None, metric: str,
                       n: int) -> dict[str, Any]:
    """``noise_floor`` and ``within_noise`` of one delta over ``n`` questions, from either run's noise file.

    The one rule ``compare`` applies to every metric (answer metrics and the factorised Pass@1 alike): the
    floor from the measured flip rates (one measured run stands for both), and the delta within it when
    its size is at most the floor; both ``None`` when neither file measured ``metric``.
    """
    rates = [r for r in (metric_flip_rate(noise_a, metric) if noise_a else None,
                         metric_flip_rate(noise_b, metric) if noise_b else None) if r is not None]
    if not rates:
        return {"noise_floor": None, "within_noise": None}
    floor = noise_floor(rates[0], rates[1] if len(rates) > 1 else None, n)
    return {"noise_floor": floor, "within_noise": bool(abs(delta) <= floor)}


def noise_floor(flip_rate_a: float, flip_rate_b: float | None, n: int) -> float:
    """95% half-width of an accuracy delta over ``n`` questions that serving noise alone would produce."""
    b = flip_rate_a if flip_rate_b is None else flip_rate_b
    return Z95 * float(np.sqrt((flip_rate_a + b) / (2.0 * n))) if n else float("nan")


def read_noise(run_dir: Path) -> NoiseFile | None:
    """A run's ``noise.json`` (None when it has none), refused when it no longer matches the run's scores."""
    path = Path(run_dir) / NOISE_FILE
    if not path.is_file():
        return None
    try:
        raw: Any = loads(path.read_bytes())
    except ValueError as exc:
        raise DataError(path, f"invalid JSON: {exc}", fix=f"rerun `aether noise {run_dir}`") from None
    try:
        noise = NoiseFile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise DataError(path, f"not a noise.json this version reads: {first['msg']}",
                        field=".".join(str(part) for part in first["loc"]) or None,
                        fix=f"rerun `aether noise {run_dir}`") from None
    scores = Path(run_dir) / "scores.json"
    if not scores.is_file() or sha256_file(scores) != noise.bound_to.scores_sha256:
        raise DataError(path, "measured against other scores of this run (scores.json changed since)",
                        fix=f"rerun `aether noise {run_dir} ...` after rescoring")
    return noise


def _sample_ids(ids: list[str], sample: int | None, seed: int) -> list[str]:
    if sample is None or sample >= len(ids):
        return list(ids)
    if sample < 2:
        raise ConfigError(f"--sample {sample} is too small to measure a rate", fix="sample at least 2 questions")
    chosen = set(random.Random(f"noise:{seed}").sample(sorted(ids), sample))
    return [qid for qid in ids if qid in chosen]  # release order


def _rerun_correctness(rerun_dir: Path, release_dir: Path, ids: list[str], metrics: Sequence[str],
                       samples: int) -> dict[str, dict[str, float | None]]:
    """Per metric, each sampled question's value (mean@K for K samples) in one rerun (None: an error or no row)."""
    from aethersearch.scoring.api import per_question_rows, score_row
    from aethersearch.scoring.join import join, load_release, load_run

    joined = join(load_release(release_dir), load_run(rerun_dir), samples)
    wanted = set(ids)
    rows = [row for row in joined.rows if row.id in wanted]
    scored = per_question_rows(rows, [score_row(row, compat=None) for row in rows], samples=samples)
    return {metric: {q.id: (None if q.outcome in _ERRORS else q.values[metric]) for q in scored}
            for metric in metrics}


def _measured(matrix: list[list[float | None]], seed: int, run_size: int,
              metric: str) -> tuple[MetricNoise, list[float | None]]:
    """One metric's flip rate (with its 95% interval), the questions flipping and its floor at the run's size;
    and each question's rate."""
    rates = flip_rates(matrix)
    usable = [r for r in rates if r is not None]
    overall = estimate(usable, seed=seed, name=f"noise/flip_rate/{metric}") if usable else None
    flip_rate = MetricEstimate.trusted(**overall.as_dict()) if overall is not None else None
    return MetricNoise.trusted(
        flip_rate=flip_rate, questions_flipping=sum(1 for r in usable if r > 0), questions_measured=len(usable),
        floor_at_run_size=noise_floor(overall.mean, None, run_size) if overall is not None else None), rates


def concurrency_levels(base: int, given: Sequence[int] | None = None) -> list[int]:
    """The concurrencies the reruns cycle over: ``given``, else 1, the run's own and 4x it, each once.

    Each once: a run made at concurrency 1 would otherwise be rerun at 1 and 1 again by
    ``--reruns 2``, varying nothing. On llama.cpp it is the interleaving of questions that
    changes greedy text (a cached prefix vs a cold evaluation of the same prompt).
    """
    return list(given) if given else list(dict.fromkeys([1, base, 4 * base]))


def measure_noise(run_dir: Path, release_dir: Path, search: Any, *, reruns: int = 3, sample: int | None = 50,
                  seed: int = 0, concurrencies: Sequence[int] | None = None, metric: str = "em",
                  api_key: str | None = None, progress: Callable[[str], None] | None = None) -> NoiseFile:
    """Rerun ``sample`` questions ``reruns`` times with ``run_dir``'s settings; write and return ``noise.json``.

    Each rerun is an ordinary resumable run directory under ``<run_dir>/noise/rerun-<r>``
    (a killed measurement resumes where it stopped). ``concurrencies`` cycles over the
    reruns (default: 1, the run's own, and 4 x the run's own), since the number of
    requests in flight is what changes batch composition on a serving engine.
    """
    from aethersearch.compare.fingerprints import load_fingerprint
    from aethersearch.rollout.fingerprint import load_rollout_questions, release_info
    from aethersearch.rollout.session import RunSettings, execute_run, prepare_run
    from aethersearch.scoring.scores_file import read_scores

    if reruns < 1:
        raise ConfigError(f"--reruns {reruns}: at least one rerun is needed", fix="pass --reruns 3 (or more)")
    run_dir, release_dir = Path(run_dir), Path(release_dir)
    scores = read_scores(run_dir)
    if metric not in scores.metrics:
        raise ConfigError(f"{run_dir} has no {metric!r} scores", fix=f"use one of: {', '.join(scores.metrics)}")
    fingerprint = load_fingerprint(run_dir)
    metrics = [metric, *(m for m in NOISE_METRICS if m != metric and m in scores.metrics)]
    original = {m: {q.id: (None if q.outcome in _ERRORS else q.values[m]) for q in scores.per_question}
                for m in metrics}
    ids = _sample_ids([q.id for q in scores.per_question], sample, seed)
    info = release_info(release_dir)
    wanted = set(ids)
    questions = [q for q in load_rollout_questions(info.rollout_path) if q.id in wanted]
    base = fingerprint.concurrency or 1
    levels = concurrency_levels(base, concurrencies)
    settings = RunSettings(agent=fingerprint.agent, agent_config=fingerprint.agent_config,
                           endpoint=fingerprint.endpoint, model=fingerprint.model, budget=fingerprint.budget,
                           decoding=fingerprint.decoding, concurrency=base,
                           limits=fingerprint.limits or RunLimits(), samples=fingerprint.samples)
    runs: list[dict[str, dict[str, float | None]]] = []
    bound: list[RerunBinding] = []
    for index in range(reruns):
        level = max(1, min(levels[index % len(levels)], len(questions)))
        rerun_dir = run_dir / "noise" / f"rerun-{index + 1}"
        if progress is not None:
            progress(f"rerun {index + 1}/{reruns}: {len(questions)} questions at concurrency {level}")
        prepared = prepare_run(info, settings.model_copy(update={"concurrency": level}), search,
                               questions=questions, api_key=api_key)
        execute_run(prepared, rerun_dir, enforce=False)
        runs.append(_rerun_correctness(rerun_dir, release_dir, ids, metrics, scores.samples))
        bound.append(RerunBinding.trusted(dir=str(rerun_dir.relative_to(run_dir)), concurrency=level,
                                          traces_sha256=sha256_file(rerun_dir / "traces.jsonl")))
    matrices = {m: [[original[m][qid], *(r[m][qid] for r in runs)] for qid in ids] for m in metrics}
    run_size = len(scores.per_question)
    by_metric = {m: _measured(matrices[m], seed, run_size, m) for m in metrics}
    (primary, rates), matrix = by_metric[metric], matrices[metric]
    result = NoiseFile.trusted(
        convention="serving_noise: flip rate = share of run pairs (original + reruns) disagreeing on a question; "
                   "floor = 1.96*sqrt((dA+dB)/(2n))",
        metric=metric, reruns=reruns, sample=len(ids), seed=seed,
        concurrencies=[b.concurrency for b in bound],
        flip_rate=primary.flip_rate,
        questions_flipping=primary.questions_flipping,
        questions_measured=primary.questions_measured,
        errors=sum(1 for row in matrix for v in row if v is None),
        floor_at_run_size=primary.floor_at_run_size,
        run_size=run_size,
        by_metric={m: measured for m, (measured, _) in by_metric.items()},
        per_question=[QuestionNoise.trusted(id=qid, correct=row, flip_rate=rate)
                      for qid, row, rate in zip(ids, matrix, rates, strict=True)],
        bound_to=NoiseBinding.trusted(scores_sha256=sha256_file(run_dir / "scores.json"),
                                      run_json_sha256=sha256_file(run_dir / "run.json"), reruns=bound),
    )
    atomic_write_json(run_dir / NOISE_FILE, result)
    return result
