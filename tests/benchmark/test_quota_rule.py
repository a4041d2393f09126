"""The quota rule is ONE specification, shared by the builder, the replay and the shipped verifier.

Three copies of the rule had drifted (``compute_quotas`` and ``replay_quotas``
disagreed on 6,558 of 192,109 random capped plans, so a correct capped build
failed its own replay). Every entry point is checked here against a literal
reading of the card: deal the shortfall one question at a time, round-robin over
the other sources in plan order, skipping a source whose cap is reached.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from hypothesis import given, settings
from hypothesis import strategies as st

from aethersearch.errors import ConfigError
from aethersearch.release.manifest import verifier_source
from aethersearch.release.replay import replay_quotas
from aethersearch.selection.sampling import PlanEntry, compute_quotas


def deal(plan: list[tuple[str, int, int | None]]) -> tuple[dict[str, int], int]:
    """The card's words as a slow oracle: one question at a time, round-robin, skip full sources."""
    quota = {d: p if c is None or c >= p else c for d, p, c in plan}
    shortfall = sum(p - c for _, p, c in plan if c is not None and c < p)
    receivers = [(d, c) for d, p, c in plan if c is None or c >= p]
    while shortfall:
        dealt = False
        for d, cap in receivers:
            if shortfall and (cap is None or quota[d] < cap):
                quota[d] += 1
                shortfall -= 1
                dealt = True
        if not dealt:
            break
    return quota, shortfall


def shipped_verifier(tmp: Path) -> ModuleType:
    """The verify_release.py bytes a release ships, imported as a module."""
    path = tmp / "verify_release.py"
    path.write_bytes(verifier_source())
    spec = importlib.util.spec_from_file_location("shipped_verify_release", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


plans = st.lists(st.tuples(st.integers(0, 250), st.one_of(st.none(), st.integers(0, 260))),
                 min_size=1, max_size=9)


@settings(max_examples=1500, deadline=None)
@given(plans)
def test_builder_replay_and_shipped_verifier_all_equal_the_literal_deal(raw: list[tuple[int, int | None]]) -> None:
    plan = [(f"s{i}", planned, cap) for i, (planned, cap) in enumerate(raw)]
    expected, unplaced = deal(plan)
    module = _SHIPPED
    assert module.card_quotas(plan) == (expected, unplaced)
    assert list(expected) == [d for d, _, _ in plan]
    if unplaced:
        try:
            compute_quotas([PlanEntry(*e) for e in plan])
        except ConfigError as exc:
            assert f"({unplaced} short)" in exc.message
        else:
            raise AssertionError("an infeasible plan must be a ConfigError")
    else:
        assert compute_quotas([PlanEntry(*e) for e in plan]) == expected
    assert replay_quotas(plan) == expected


def test_the_card_and_the_capped_popqa_deviation() -> None:
    card = ["nq", "triviaqa", "popqa", "hotpotqa", "2wikimultihopqa", "musique", "bamboogle"]
    plan = [(n, 200, 125 if n == "bamboogle" else None) for n in card]
    assert list(replay_quotas(plan).values()) == [213, 213, 213, 212, 212, 212, 125]
    capped = [(n, 200, 125 if n == "bamboogle" else 200 if n == "popqa" else None) for n in card]
    assert list(replay_quotas(capped).values()) == [215, 215, 200, 215, 215, 215, 125]
    assert deal(capped)[0] == replay_quotas(capped)


def test_plans_on_which_the_old_copies_disagreed() -> None:
    # found by a random search against the old replay copy (it gave b 8 and c 6 here: a receiver that
    # filled up mid-deal sent its leftover back to the front of the order instead of on down it)
    for plan in ([("a", 5, 6), ("b", 5, None), ("c", 5, 7), ("d", 5, 0)],
                 [("s0", 10, 11), ("s1", 20, 8), ("s2", 26, None), ("s3", 26, None), ("s4", 12, 26),
                  ("s5", 8, 10)]):
        assert replay_quotas(plan) == deal(plan)[0]
        assert compute_quotas([PlanEntry(*e) for e in plan]) == deal(plan)[0]


_SHIPPED = shipped_verifier(Path(__import__("tempfile").mkdtemp(prefix="aether-quota-")))
