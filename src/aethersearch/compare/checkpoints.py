"""``compare_runs``: checkpoints side by side (e.g. Base, SFT, DPO, RL) on one frozen contract.

Why this shape: every run after the first is compared, question by question,
with the first (the reference, normally Base). Runs must share their contract
fields (``run.json``) and must have been scored against the same release
(``scores.json``); otherwise the comparison is refused with the differing field
named, unless the caller allowed it explicitly, in which case the result
records the override so nobody reads an apples-to-oranges table unawares.

Runs of K samples per question compare per-question values that are already
cluster means (mean@K, or the chosen ``reducer``: ``mean``, ``pass@k``, ``maj``),
so the paired bootstrap over questions is the paired *clustered* bootstrap: a
question's K samples move together. McNemar stays for two one-sample runs of a
0/1 metric. Runs of different K are refused unless a reducer is chosen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aethersearch.compare.factorised_pairs import compare_factorised
from aethersearch.compare.fingerprints import check_contract, load_fingerprint
from aethersearch.compare.noise import NoiseFile, read_noise, serving_noise_mark
from aethersearch.compare.paired import (
    DEFAULT_ALPHA,
    flips,
    holm,
    mcnemar,
    mde_binary,
    mde_continuous,
    paired_bootstrap,
)
from aethersearch.errors import ConfigError, IntegrityError
from aethersearch.jsonl import atomic_write_json
from aethersearch.scoring.metrics import BINARY_METRICS
from aethersearch.scoring.reducers import MAJ, MEAN, parse_reducer
from aethersearch.scoring.risk_coverage import RiskInputs, aurc_bootstrap_difference, ece_bootstrap_difference
from aethersearch.scoring.run_confidence import run_inputs
from aethersearch.scoring.scores_file import Scores, read_scores

__all__ = ["DEFAULT_METRICS", "OVERALL", "compare_aurc", "compare_pair", "compare_runs", "mark_serving_noise",
    "noise_verdict", "reducer_for", "run_names"]

DEFAULT_METRICS: tuple[str, ...] = ("em", "f1")
OVERALL = "overall"


def run_names(run_dirs: Sequence[Path]) -> list[str]:
    """Short unique names of run directories: the last path parts that tell them apart, never absolute paths.

    ``runs/a/rl`` and ``runs/b/rl`` are ``a/rl`` and ``b/rl``: the report and the viewer name runs the
    same way, and a report shared with a colleague shows no path of the machine that wrote it.
    """
    parts = [Path(d).resolve().parts for d in run_dirs]
    for depth in range(1, max((len(p) for p in parts), default=1) + 1):
        names = ["/".join(p[-depth:]).lstrip("/") for p in parts]
        if len(set(names)) == len(names):
            return names
    return names  # the same directory twice: equal names, as the directory is equal


def reducer_for(reducer: str | None, samples: int) -> str | None:
    """A run's reducer name for ``--reducer``: ``mean``/``maj`` take the run's own K, ``pass@k`` stays as given."""
    if reducer is None:
        return None
    if reducer in (MEAN, MAJ):
        return f"{reducer}@{samples}"
    parse_reducer(reducer)  # a clear error for anything else; a K that does not fit is refused per question
    return reducer


def _vectors(scores: Scores, metric: str, reducer: str | None = None) -> dict[str, tuple[str, float]]:
    return scores.per_question_values(metric, reducer_for(reducer, scores.samples))


def _check_same_questions(names: list[str], all_scores: list[Scores]) -> None:
    ref = all_scores[0]
    ref_ids = [row.id for row in ref.per_question]
    for name, scores in zip(names[1:], all_scores[1:], strict=True):
        if scores.gold.eval_sha256 != ref.gold.eval_sha256:
            raise IntegrityError(
                f"{name} was scored against a different release than {names[0]} "
                f"(eval.jsonl sha256 {scores.gold.eval_sha256[:12]} vs {ref.gold.eval_sha256[:12]})",
                fix="rescore both runs with the same --release")
        if scores.compat != ref.compat:
            raise IntegrityError(f"{name} was scored with compat={scores.compat!r} but {names[0]} with "
                                 f"compat={ref.compat!r}", fix="rescore both runs the same way")
        if [row.id for row in scores.per_question] != ref_ids:
            raise IntegrityError(f"{name} and {names[0]} do not cover the same questions",
                                 fix="rescore both runs against the same release")


def _compare_metric(ids: list[str], a: np.ndarray, b: np.ndarray, metric: str, *, resamples: int,
                    seed: int, name: str, sampled: bool = False) -> dict[str, Any]:
    n = len(ids)
    out: dict[str, Any] = {"n": n, "a_mean": float(a.mean()) if n else None,
                           "b_mean": float(b.mean()) if n else None,
                           "delta": float((b - a).mean()) if n else None}
    if metric in BINARY_METRICS and not sampled:
        test = mcnemar(a, b)
        discordance = (test.wrong_to_right + test.right_to_wrong) / n if n else 0.0
        # the test is McNemar's; the delta's CI (what a paper table shows beside it) is a paired bootstrap
        interval = paired_bootstrap(a, b, resamples=resamples, seed=seed, name=name) if n else None
        out.update(method=f"mcnemar-{test.method}", statistic=test.statistic, p_value=test.p_value,
                   wrong_to_right=test.wrong_to_right, right_to_wrong=test.right_to_wrong,
                   mde=mde_binary(n, discordance), ci_low=interval.ci_low if interval else None,
                   ci_high=interval.ci_high if interval else None)
    else:
        boot = paired_bootstrap(a, b, resamples=resamples, seed=seed, name=name)
        out.update(method="paired-clustered-bootstrap" if sampled else "paired-bootstrap", ci_low=boot.ci_low,
                   ci_high=boot.ci_high, p_value=boot.p_value, mde=mde_continuous(b - a))
    return out


def compare_pair(a_scores: Scores, b_scores: Scores, metrics: Sequence[str], *,
                 alpha: float = DEFAULT_ALPHA, resamples: int = 2000, seed: int = 0,
                 reducer: str | None = None) -> dict[str, Any]:
    """Per-source and overall paired tests of run b against run a, Holm-corrected over sources x metrics.

    With K > 1 samples in either run (or a ``reducer``), every metric gets the paired
    clustered bootstrap; two one-sample runs keep McNemar for 0/1 metrics.
    """
    results: dict[str, dict[str, Any]] = {}
    flip_tables: dict[str, Any] = {}
    sampled = a_scores.samples > 1 or b_scores.samples > 1
    for metric in metrics:
        va, vb = _vectors(a_scores, metric, reducer), _vectors(b_scores, metric, reducer)
        ids = list(va)
        scopes: dict[str, list[str]] = {OVERALL: ids}
        for qid in ids:
            scopes.setdefault(va[qid][0], []).append(qid)
        for scope in [OVERALL, *sorted(s for s in scopes if s != OVERALL)]:
            scope_ids = scopes[scope]
            a = np.array([va[q][1] for q in scope_ids])
            b = np.array([vb[q][1] for q in scope_ids])
            results.setdefault(scope, {})[metric] = _compare_metric(
                scope_ids, a, b, metric, resamples=resamples, seed=seed, name=f"{metric}/{scope}", sampled=sampled)
            if metric in BINARY_METRICS and scope == OVERALL and not sampled:
                table = flips(scope_ids, a.tolist(), b.tolist())
                flip_tables[metric] = {
                    direction: [{"id": q, "source": va[q][0]} for q in found]
                    for direction, found in table.items()}
    adjusted = holm({(scope, metric): entry["p_value"] for scope, by_metric in results.items()
                     for metric, entry in by_metric.items()})
    for (scope, metric), p in adjusted.items():
        entry = results[scope][metric]
        entry["p_holm"] = p
        entry["significant"] = bool(p < alpha)
    return {"results": results, "flips": flip_tables, "tests_corrected": len(adjusted)}


def mark_serving_noise(results: dict[str, dict[str, Any]], noise_a: NoiseFile | None,
                       noise_b: NoiseFile | None) -> None:
    """Add ``noise_floor`` and ``within_noise`` to every entry (``compare.noise``), for each metric measured.

    The floor is the delta serving noise alone would give over the entry's ``n`` questions; a
    delta whose size is below it is marked ``within_noise``, beside the MDE. With a noise file
    that did not measure a metric, its entries get ``noise_floor: None`` (not measured), so no
    reader mistakes a missing verdict for a delta above the noise.
    """
    if noise_a is None and noise_b is None:
        return
    for by_metric in results.values():
        for metric, entry in by_metric.items():
            if entry.get("delta") is None:
                entry["noise_floor"], entry["within_noise"] = None, None
            else:
                entry.update(serving_noise_mark(entry["delta"], noise_a, noise_b, metric, entry["n"]))


def noise_verdict(entry: Mapping[str, Any]) -> str:
    """The serving-noise verdict on one delta, in words (the report's column; the CLI prints the floor)."""
    if "noise_floor" not in entry:
        return "noise not measured (run `aether noise`)"
    floor = entry["noise_floor"]
    if floor is None:
        return "noise not measured for this metric"
    side = "within" if entry["within_noise"] else "beyond"
    return f"{side} serving noise (floor ±{floor:.3f})"


def compare_aurc(a: tuple[str, RiskInputs], b: tuple[str, RiskInputs], *, resamples: int,
                 seed: int) -> dict[str, Any]:
    """Paired difference in AURC (b - a) over the same questions, with a bootstrap CI (``scoring.risk_coverage``).

    ``a`` and ``b`` are each run's signal and inputs (``run_confidence.run_inputs``), read once per run.
    When both runs stated their confidence, ``ece`` holds each run's ECE and the paired
    difference with its CI (same draws); otherwise it is None (ECE needs a stated confidence).
    """
    both_stated = a[0] == b[0] == "stated"
    ece = ece_bootstrap_difference(a[1], b[1], resamples=resamples, seed=seed) if both_stated else None
    return {"signal": [a[0], b[0]], **aurc_bootstrap_difference(a[1], b[1], resamples=resamples, seed=seed),
            "ece": ece}


def compare_runs(run_dirs: Sequence[Path], *, allow: Sequence[str] = (),
                 metrics: Sequence[str] = DEFAULT_METRICS, alpha: float = DEFAULT_ALPHA,
                 resamples: int = 2000, seed: int = 0, out_path: Path | None = None,
                 reducer: str | None = None) -> dict[str, Any]:
    """Compare scored runs against the first one; refuses contract mismatches unless ``allow``-ed.

    Each run must already have ``scores.json`` (``aether score``). ``reducer``
    (``mean``, ``pass@k``, ``maj``) compares that K-sample figure and is required
    when the runs differ in K. Writes ``out_path`` atomically when given and
    returns the comparison dict.
    """
    if len(run_dirs) < 2:
        raise ConfigError("compare needs at least two runs", fix="pass the reference run first, then the others")
    run_dirs = [Path(d) for d in run_dirs]
    names = run_names(run_dirs)
    fingerprints = [load_fingerprint(d) for d in run_dirs]
    check = check_contract(list(zip(names, fingerprints, strict=True)), allow, reducer=reducer)
    all_scores = [read_scores(d) for d in run_dirs]
    _check_same_questions(names, all_scores)
    noises = [read_noise(d) for d in run_dirs]
    confidence = [run_inputs(s) for s in all_scores]
    pairs = []
    for name, scores, noise, inputs in zip(names[1:], all_scores[1:], noises[1:], confidence[1:], strict=True):
        pair = compare_pair(all_scores[0], scores, metrics, alpha=alpha, resamples=resamples, seed=seed,
                            reducer=reducer)
        mark_serving_noise(pair["results"], noises[0], noise)
        pair["risk_coverage"] = compare_aurc(confidence[0], inputs, resamples=resamples, seed=seed)
        if all(fp.environment == "sandbox" for fp in fingerprints):  # the paper's metrics, paired
            pair["factorised"] = compare_factorised(run_dirs[0], run_dirs[names.index(name)], resamples=resamples,
                                                    seed=seed, alpha=alpha, noise=noises[0] or noise)
        pairs.append({"a": names[0], "b": name, **pair})
    result = {
        "runs": [{"name": n, "run_dir": str(d), "model": fp.model, "endpoint": fp.endpoint,
                  "errors": sc.errors.count, "missing": sc.errors.missing, "samples": sc.samples,
                  "figure": reducer_for(reducer, sc.samples) or f"mean@{sc.samples}",
                  "usage": {"prompt_tokens": sc.usage.prompt_tokens.total,
                            "completion_tokens": sc.usage.completion_tokens.total},
                  "cost": sc.cost}
                 for n, d, fp, sc in zip(names, run_dirs, fingerprints, all_scores, strict=True)],
        "reference": names[0],
        "metrics": list(metrics),
        "alpha": alpha,
        "correction": "holm across sources x metrics, per pair",
        "allowed_overrides": check.allowed,
        "contract_differences": [d._asdict() for d in check.differences],
        "pairs": pairs,
    }
    if out_path is not None:
        atomic_write_json(out_path, result)
    return result
