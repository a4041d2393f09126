"""Paired statistics for two checkpoints answering the same questions.

Why paired: Base and RL see identical questions, so question difficulty cancels
when each question is compared with itself. That makes a 2-point change on
1,400 questions detectable where two unpaired CIs would overlap.

* EM (0/1): McNemar's test on the discordant pairs, exact (binomial,
  ``scipy.stats.binomtest``) when there are fewer than ``EXACT_LIMIT`` of them,
  chi-square with continuity correction otherwise. Identical runs have no
  discordant pairs and get p = 1.
* F1 (continuous): a paired bootstrap of the mean per-question difference, two-sided
  p = 2 (k + 1) / (B + 1) with k the resamples on the far side of 0.
* Holm's step-down correction across every source x metric tested for a pair,
  so "significant somewhere" is not an artefact of testing eight times.
* Minimum detectable effect (two-sided alpha, 80% power by default): the
  smallest true delta this sample size and discordance would detect.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple, TypeVar

import numpy as np
from scipy import stats

from aethersearch.scoring.aggregate import bootstrap_means, percentile_interval, rng_for

__all__ = ["DEFAULT_ALPHA", "DEFAULT_POWER", "EXACT_LIMIT", "McNemar", "PairedBootstrap", "flips", "holm", "mcnemar",
    "mde_binary", "mde_continuous", "paired_bootstrap"]

EXACT_LIMIT = 25
DEFAULT_ALPHA = 0.05
DEFAULT_POWER = 0.8

K = TypeVar("K")


class McNemar(NamedTuple):
    """McNemar test of run b against run a (``wrong_to_right``: a wrong, b right)."""

    n: int
    wrong_to_right: int
    right_to_wrong: int
    statistic: float
    p_value: float
    method: str


class PairedBootstrap(NamedTuple):
    """Mean difference b - a with its paired-bootstrap 95% CI and two-sided p-value."""

    n: int
    delta: float
    ci_low: float
    ci_high: float
    p_value: float


def mcnemar(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> McNemar:
    """McNemar's test on paired 0/1 outcomes (exact binomial below ``EXACT_LIMIT`` discordant pairs)."""
    x = np.asarray(a, dtype=float) >= 0.5
    y = np.asarray(b, dtype=float) >= 0.5
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in length: {x.shape[0]} vs {y.shape[0]}")
    up = int(np.sum(~x & y))
    down = int(np.sum(x & ~y))
    discordant = up + down
    if discordant == 0:
        return McNemar(len(x), 0, 0, 0.0, 1.0, "exact")
    if discordant < EXACT_LIMIT:
        result = stats.binomtest(up, discordant, 0.5, alternative="two-sided")
        return McNemar(len(x), up, down, float(up), min(1.0, float(result.pvalue)), "exact")
    statistic = (abs(up - down) - 1) ** 2 / discordant
    return McNemar(len(x), up, down, float(statistic), float(stats.chi2.sf(statistic, 1)), "chi2-cc")


def paired_bootstrap(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *,
                     resamples: int = 2000, seed: int = 0, name: str = "") -> PairedBootstrap:
    """Paired bootstrap of mean(b - a): questions resampled with replacement, pairs kept together."""
    diffs = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    n = len(diffs)
    if n == 0:
        return PairedBootstrap(0, float("nan"), float("nan"), float("nan"), float("nan"))
    delta = float(diffs.mean())
    if np.ptp(diffs) == 0:
        return PairedBootstrap(n, delta, delta, delta, 1.0 if delta == 0 else 0.0)
    boots = bootstrap_means(diffs, resamples, rng_for(seed, name))
    low, high = percentile_interval(delta, boots)
    # (k + 1) / (B + 1): a bootstrap p-value is never reported as exactly 0
    below, above = int(np.sum(boots <= 0)), int(np.sum(boots >= 0))
    p_value = min(1.0, 2.0 * (min(below, above) + 1) / (resamples + 1))
    return PairedBootstrap(n, delta, low, high, p_value)


def holm(p_values: Mapping[K, float]) -> dict[K, float]:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1)."""
    items = sorted(p_values.items(), key=lambda kv: (kv[1], str(kv[0])))
    m = len(items)
    adjusted: dict[K, float] = {}
    running = 0.0
    for rank, (key, p) in enumerate(items):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[key] = running
    return adjusted


def _z(alpha: float, power: float) -> float:
    return float(stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power))


def mde_binary(n: int, discordance: float, *, alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER) -> float:
    """Smallest detectable accuracy delta for McNemar: ``(z_a/2 + z_b) * sqrt(psi / n)``.

    ``psi`` is the discordant-pair rate; with none observed the floor ``1/n``
    (one discordant question) is used, so the MDE is never a misleading 0.
    """
    if n <= 0:
        return float("nan")
    psi = max(discordance, 1.0 / n)
    return _z(alpha, power) * math.sqrt(psi / n)


def mde_continuous(diffs: Sequence[float] | np.ndarray, *, alpha: float = DEFAULT_ALPHA,
                   power: float = DEFAULT_POWER) -> float:
    """Smallest detectable mean delta of a paired continuous metric: ``(z_a/2 + z_b) * sd / sqrt(n)``."""
    array = np.asarray(diffs, dtype=float)
    n = len(array)
    if n < 2:
        return float("nan")
    sd = float(array.std(ddof=1)) or 1.0 / n
    return _z(alpha, power) * sd / math.sqrt(n)


def flips(ids: Sequence[str], a: Sequence[float], b: Sequence[float]) -> dict[str, list[str]]:
    """Question ids that flipped between runs: ``wrong_to_right`` (a wrong, b right) and ``right_to_wrong``."""
    up = [qid for qid, x, y in zip(ids, a, b, strict=True) if x < 0.5 <= y]
    down = [qid for qid, x, y in zip(ids, a, b, strict=True) if y < 0.5 <= x]
    return {"wrong_to_right": up, "right_to_wrong": down}
