"""Quotas (the card's rule as a general algorithm) and seeded, exclusion-stable sampling."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aethersearch.errors import ConfigError, ShortageError
from aethersearch.selection.sampling import PlanEntry, compute_quotas, sample, sampling_order
from aethersearch.sources.base import Candidate
from aethersearch.text import question_key

CARD = ["nq", "triviaqa", "popqa", "hotpotqa", "2wikimultihopqa", "musique", "bamboogle"]


def test_card_composition_213_213_213_212_212_212_125() -> None:
    plan = [PlanEntry(name, 200, 125 if name == "bamboogle" else None) for name in CARD]
    assert list(compute_quotas(plan).values()) == [213, 213, 213, 212, 212, 212, 125]


def test_remainder_follows_the_fixed_source_order_not_the_names() -> None:
    plan = [PlanEntry(name, 200, 125 if name == "bamboogle" else None) for name in reversed(CARD)]
    quotas = compute_quotas(plan)
    assert quotas["bamboogle"] == 125
    assert [quotas[n] for n in ["musique", "2wikimultihopqa", "hotpotqa"]] == [213, 213, 213]
    assert [quotas[n] for n in ["popqa", "triviaqa", "nq"]] == [212, 212, 212]


def test_a_receiving_source_that_hits_its_cap_passes_the_rest_on() -> None:
    plan = [PlanEntry("a", 10), PlanEntry("b", 10, cap=11), PlanEntry("c", 10, cap=2)]
    # shortfall 8 -> 4 each; b can take only 1, so 3 go round again to a
    assert compute_quotas(plan) == {"a": 17, "b": 11, "c": 2}


def test_an_impossible_plan_says_by_how_much() -> None:
    with pytest.raises(ConfigError, match="needs 20 questions but the caps allow only 13"):
        compute_quotas([PlanEntry("a", 10, cap=10), PlanEntry("b", 10, cap=3)])


plans = st.lists(
    st.tuples(st.integers(0, 300), st.one_of(st.none(), st.integers(0, 300))), min_size=1, max_size=9)


@settings(max_examples=300, deadline=None)
@given(plans)
def test_quota_properties_hold_for_any_plan(raw: list[tuple[int, int | None]]) -> None:
    plan = [PlanEntry(f"s{i}", planned, cap) for i, (planned, cap) in enumerate(raw)]
    total = sum(e.planned for e in plan)
    try:
        quotas = compute_quotas(plan)
    except ConfigError:
        # only when the caps really cannot supply the plan
        room = sum(e.cap if e.cap is not None else total for e in plan)
        assert room < total
        return
    assert list(quotas) == [e.dataset for e in plan]
    assert sum(quotas.values()) == total  # redistribution never loses or invents questions
    for e in plan:
        if e.cap is not None:
            assert quotas[e.dataset] <= e.cap
        if e.cap is not None and e.cap < e.planned:
            assert quotas[e.dataset] == e.cap  # a short source gives all it has, and receives nothing
        else:
            assert quotas[e.dataset] >= e.planned  # others only ever receive
    # an even split: uncapped receivers' extras differ by at most one, earlier sources never get less
    receivers = [e for e in plan if e.cap is None]
    if receivers:
        extras = [quotas[e.dataset] - e.planned for e in receivers]
        assert max(extras) - min(extras) <= 1
        assert extras == sorted(extras, reverse=True)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 12), st.integers(1, 400), st.integers(0, 399))
def test_even_split_with_one_short_source(n_sources: int, planned: int, cap: int) -> None:
    cap = min(cap, planned)
    plan = [PlanEntry(f"s{i}", planned) for i in range(n_sources)] + [PlanEntry("short", planned, cap)]
    quotas = compute_quotas(plan)
    share, remainder = divmod(planned - cap, n_sources)
    assert [quotas[f"s{i}"] for i in range(n_sources)] == [
        planned + share + (1 if i < remainder else 0) for i in range(n_sources)]


def _candidates(dataset: str, n: int, *, ids: bool = True) -> list[Candidate]:
    out = []
    for row in range(1, n + 1):
        question = f"question number {row:03d} of {dataset}?"
        out.append(Candidate(dataset, "dev", f"id{row:03d}" if ids else None, row, "f.jsonl", question, ["a"],
                             question_key(question), {}))
    return out


def test_sampling_order_is_deterministic_independent_of_input_order_and_seeded_per_source() -> None:
    cands = _candidates("nq", 50)
    first = sampling_order(cands, seed=42, dataset="nq")
    assert first == sampling_order(list(reversed(cands)), seed=42, dataset="nq")
    assert first != sampling_order(cands, seed=43, dataset="nq")
    assert first != sampling_order(cands, seed=42, dataset="other")
    # pinned: the draw order must not change between releases of this code (a changed sort key, seed
    # string or shuffle would silently change every release built from the same sources)
    assert [c.source_row_number for c in first[:8]] == [10, 21, 8, 24, 7, 37, 18, 15]


def test_null_source_ids_sort_before_strings_then_by_key_then_row() -> None:
    from aethersearch.isolation.training import sort_key

    a = Candidate("x", "dev", None, 9, "f", "b?", ["a"], "b", {})
    b = Candidate("x", "dev", None, 2, "f", "c", ["a"], "c", {})
    c = Candidate("x", "dev", "", 1, "f", "a", ["a"], "a", {})
    assert sorted([c, b, a], key=sort_key) == [a, b, c]


def test_an_exclusion_reruns_the_same_selection_and_replaces_only_the_excluded_question() -> None:
    cands = _candidates("nq", 40)
    order = {"nq": sampling_order(cands, seed=42, dataset="nq")}
    before = sample(order, {"nq": lambda c: True}, {"nq": 10})["nq"]
    dropped = before[3]
    after = sample(order, {"nq": lambda c: c.key != dropped.key}, {"nq": 10})["nq"]
    assert [c for c in before if c != dropped] == after[:9]
    assert after[9] == order["nq"][10]  # the next candidate in the fixed order takes its place


def test_shortage_names_source_needed_and_available() -> None:
    order = {"popqa": sampling_order(_candidates("popqa", 16), seed=42, dataset="popqa")}
    with pytest.raises(ShortageError, match=r"'popqa' is short: needed 213 eligible questions, available 16"):
        sample(order, {"popqa": lambda c: True}, {"popqa": 213})
