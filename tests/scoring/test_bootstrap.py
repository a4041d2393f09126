"""The bootstrap shortcuts (binomial for 0/1, multinomial over distinct values) match plain index resampling."""

from __future__ import annotations

import numpy as np
import pytest

from aethersearch.scoring.aggregate import bootstrap_means


def _index_resampling(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(axis=1)


@pytest.mark.parametrize("kind", ["binary", "f1-like"])
def test_shortcut_distribution_equals_index_resampling(kind: str) -> None:
    rng = np.random.default_rng(3)
    if kind == "binary":
        values = (rng.uniform(size=2000) < 0.37).astype(float)
    else:
        values = rng.choice([0.0, 0.4, 0.5, 2 / 3, 0.8, 1.0], size=2000, p=[0.4, 0.1, 0.1, 0.1, 0.1, 0.2])
    fast = bootstrap_means(values, 4000, np.random.default_rng(1))
    slow = _index_resampling(values, 4000, 2)
    se = values.std() / np.sqrt(len(values))
    assert abs(fast.mean() - values.mean()) < 0.1 * se * 4
    assert fast.std() == pytest.approx(se, rel=0.06)
    assert slow.std() == pytest.approx(se, rel=0.06)
    assert np.quantile(fast, 0.025) == pytest.approx(np.quantile(slow, 0.025), abs=0.2 * se)
    assert np.quantile(fast, 0.975) == pytest.approx(np.quantile(slow, 0.975), abs=0.2 * se)


def test_continuous_values_use_index_resampling_and_stay_in_range() -> None:
    values = np.random.default_rng(0).uniform(size=300)
    boots = bootstrap_means(values, 500, np.random.default_rng(0))
    assert values.min() <= boots.min() and boots.max() <= values.max()
    assert boots.std() == pytest.approx(values.std() / np.sqrt(300), rel=0.15)
