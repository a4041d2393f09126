"""AetherSearch's min-max score fusion, against what their own ``_fuse_one`` returned (fixture, with commit)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aethersearch.errors import ConfigError
from aethersearch.search.hybrid import HybridConfig, minmax, minmax_fuse

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "aethersearch_fusion.json").read_text())


def test_fixture_is_pinned_to_their_commit() -> None:
    assert FIXTURE["commit"] == "d2a21bd23b414d81b38b19fcc2390ca060a5ba1b" and len(FIXTURE["cases"]) == 150


def test_minmax_equals_theirs() -> None:
    for values, theirs in zip(FIXTURE["minmax"]["inputs"], FIXTURE["minmax"]["outputs"], strict=True):
        assert minmax(values) == theirs


@pytest.mark.parametrize("case", [c for c in FIXTURE["cases"] if c["mode"] == "hybrid"], ids=lambda c: c["fused"][0][0])
def test_hybrid_fusion_equals_theirs(case: dict) -> None:  # type: ignore[type-arg]
    dense = [(d, s) for d, s in case["dense"]]
    sparse = [(d, s) for d, s in case["sparse"]]
    ours = minmax_fuse(dense, sparse, case["topk"], FIXTURE["alpha"])
    assert [d for d, _ in ours] == [d for d, _ in case["fused"]]
    assert [s for _, s in ours] == pytest.approx([s for _, s in case["fused"]], abs=1e-12)


def test_their_single_modes_are_each_sides_top_k() -> None:
    """Their ``dense``/``sparse`` modes return that side's hits unchanged, as our per-component modes do."""
    for case in FIXTURE["cases"]:
        if case["mode"] != "hybrid":
            side = case["dense"] if case["mode"] == "dense" else case["sparse"]
            assert case["fused"] == side[:case["topk"]]


hits = st.lists(st.tuples(st.sampled_from([f"d{i}" for i in range(12)]), st.floats(-50, 50)), max_size=12,
                unique_by=lambda h: h[0])


@given(hits, hits, st.integers(1, 30), st.floats(0, 1))
def test_fused_scores_are_bounded_unique_and_ranked(dense: list[tuple[str, float]], sparse: list[tuple[str, float]],
                                                   k: int, alpha: float) -> None:
    fused = minmax_fuse(dense, sparse, k, alpha)
    ids = [d for d, _ in fused]
    assert len(ids) == len(set(ids)) == min(k, len({d for d, _ in dense} | {d for d, _ in sparse}))
    assert all(-1e-9 <= s <= 1 + 1e-9 for _, s in fused)
    assert [s for _, s in fused] == sorted((s for _, s in fused), reverse=True)


def test_minmax_fusion_defaults_to_their_depth_and_alpha() -> None:
    config = HybridConfig(indexes=["a", "b"], fusion="aethersearch-minmax")
    assert (config.depth, config.alpha) == (20, 0.5)
    assert HybridConfig(indexes=["a", "b"]).depth == 100  # RRF keeps its own default
    assert HybridConfig(indexes=["a", "b"], fusion="aethersearch-minmax", depth=50).depth == 50
    with pytest.raises(ConfigError, match="2 indexes but 1 weights"):
        HybridConfig(indexes=["a", "b"], weights=[1.0])
