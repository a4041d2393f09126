"""Quotas with shortfall redistribution, seeded per-source sampling, and the audit hook types.

The card's rule, as a general algorithm (``compute_quotas``): every source has a
planned count (200) and, optionally, a plan-level cap (Bamboogle has 125). A
capped source supplies its cap; the total shortfall is dealt round-robin over the
other sources in the fixed source order (NQ, TriviaQA, PopQA, ...), skipping a
source whose cap is reached, so the receivers' extras stay within one and a
remainder goes to the earliest. 200 x 7 with Bamboogle capped at 125 gives
213/213/213/212/212/212/125. The rule itself has ONE implementation,
``card_quotas`` in the standalone verifier (standard library only, shipped in
every release); this module, the replay and the shipped verifier all call it.

Sampling (``sample``): each source's *complete* candidate list (every row read)
is sorted by ``training.sort_key`` (source id with nulls first, normalised
question, row number) and shuffled with its own ``random.Random(f"{seed}:{dataset}")``
(Python's string seeding hashes the string with SHA-512, so it is stable across
processes and platforms). The selection walks that fixed order and takes the
first ``quota`` eligible candidates. Because the order does not depend on what
is eligible, a reviewed exclusion re-runs the same selection and only replaces
the excluded question by the next one in line. Too few eligible candidates is a
``ShortageError`` naming the source, the number needed and the number available.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from aethersearch.errors import ConfigError, ShortageError
from aethersearch.isolation.training import sort_key
from aethersearch.release.verify_release_template import card_quotas
from aethersearch.sources.base import Candidate

__all__ = [
    "AuditDecision", "Candidate", "PlanEntry", "PoolFilter", "SelectionAudit", "compute_quotas",
    "sample", "sampling_order",
]


class AuditDecision(NamedTuple):
    """What a selection audit decided about one selection."""

    exclude: dict[str, str]   # normalised question key -> reason; triggers the deterministic reselection
    retained: list[dict[str, Any]]      # reviewed flagged pairs kept, each with its reason (-> exclusion_audit.json)
    report: dict[str, Any]              # counts and flagged pairs (-> manifest + exclusion_audit.json)


SelectionAudit = Callable[[Sequence[Candidate]], AuditDecision]
PoolFilter = Callable[[Sequence[Candidate]], dict[str, str]]   # near-duplicates to drop before sampling


class PlanEntry(NamedTuple):
    """One source in the plan: name, planned count, and optional plan-level cap."""

    dataset: str
    planned: int
    cap: int | None = None


def compute_quotas(plan: Sequence[PlanEntry]) -> dict[str, int]:
    """Per-source quotas (in plan order) from planned counts and caps, redistributing shortfalls.

    The total always equals the sum of planned counts; if the caps cannot supply
    it a ConfigError says by how much.
    """
    names = [entry.dataset for entry in plan]
    if len(set(names)) != len(names):
        raise ConfigError(f"duplicate source names in the plan: {names}", fix="give each source a unique name")
    quota, unplaced = card_quotas([(e.dataset, e.planned, e.cap) for e in plan])
    if unplaced:
        raise ConfigError(f"the plan needs {sum(e.planned for e in plan)} questions but the caps allow only "
                          f"{sum(quota.values())} ({unplaced} short)",
                          fix="lower the planned counts or raise a cap")
    return quota


def sampling_order(candidates: Sequence[Candidate], *, seed: int, dataset: str) -> list[Candidate]:
    """A source's fixed draw order: sorted deterministically, then shuffled with its own seeded RNG."""
    ordered = sorted(candidates, key=sort_key)
    random.Random(f"{seed}:{dataset}").shuffle(ordered)
    return ordered


def sample(orders: Mapping[str, Sequence[Candidate]], eligible: Mapping[str, Callable[[Candidate], bool]],
           quotas: Mapping[str, int], *, available_note: Mapping[str, str] | None = None
           ) -> dict[str, list[Candidate]]:
    """Take the first ``quota`` eligible candidates of each source's draw order.

    Raises ShortageError for the first source (in plan order) without enough.
    """
    selected: dict[str, list[Candidate]] = {}
    for dataset, quota in quotas.items():
        is_eligible = eligible[dataset]
        chosen: list[Candidate] = []
        for candidate in orders[dataset]:
            if len(chosen) == quota:
                break
            if is_eligible(candidate):
                chosen.append(candidate)
        if len(chosen) < quota:
            available = sum(1 for c in orders[dataset] if is_eligible(c))
            note = (available_note or {}).get(dataset, "")
            raise ShortageError(
                f"source {dataset!r} is short: needed {quota} eligible questions, available {available}"
                + (f" ({note})" if note else ""),
                fix=f"cap {dataset!r} at what it has (cap: {available} in its source entry), so the card's rule "
                    "redistributes the rest to the other sources; or use a larger source file (lowering only its "
                    "planned count does not help: it still receives a share of other sources' shortfall)")
        selected[dataset] = chosen
    return selected
