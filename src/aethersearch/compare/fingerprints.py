"""The comparison contract: runs are comparable only when every contract field of run.json agrees.

Why: a Base-vs-RL delta means nothing if the two runs used different releases,
indexes, budgets, prompts or decoding; the difference would be measured, but
not the one being claimed. ``check_contract`` names the first differing field
and both values. ``--allow FIELD`` overrides a field explicitly, and the
override is returned so the comparison and the report can say so.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from aethersearch.errors import ConfigError, DataError, IntegrityError
from aethersearch.jsonl import loads, validate_row
from aethersearch.records import RunFingerprint

RUN_FILE = "run.json"


class FieldDifference(NamedTuple):
    """One contract field whose value differs between the reference run and another run."""

    field: str
    reference_run: str
    reference_value: Any
    other_run: str
    other_value: Any


class ContractCheck(NamedTuple):
    """Differences found and which of them were explicitly allowed."""

    differences: list[FieldDifference]
    allowed: list[str]


def load_fingerprint(run_dir: Path) -> RunFingerprint:
    """A run's ``run.json``; comparing needs one, so its absence is an error with the fix."""
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        raise DataError(path, "run has no run.json, so its settings cannot be checked",
                        fix="compare runs written by `aether rollout`, or write run.json for hand-made runs")
    try:
        value = loads(path.read_bytes())
    except ValueError as exc:
        raise DataError(path, f"invalid JSON: {exc}", fix="restore run.json from the runner") from None
    return validate_row(path, 1, value, RunFingerprint)


def validate_allow(allow: Sequence[str]) -> list[str]:
    """Refuse an ``--allow`` name that is not a contract field (a typo must not silently allow nothing)."""
    valid = RunFingerprint.CONTRACT_FIELDS
    for name in allow:
        if name not in valid:
            raise ConfigError(f"--allow {name!r} is not a contract field",
                              fix=f"use one of: {', '.join(valid)}")
    return sorted(set(allow))


def _value(fingerprint: RunFingerprint, field: str) -> Any:
    value = getattr(fingerprint, field)
    return value.model_dump(mode="json") if hasattr(value, "model_dump") else value


def differences(runs: Sequence[tuple[str, RunFingerprint]]) -> list[FieldDifference]:
    """Every (field, run) where a run's contract field differs from the first run's."""
    if not runs:
        return []
    ref_name, ref = runs[0]
    found = []
    for name, other in runs[1:]:
        for field in RunFingerprint.CONTRACT_FIELDS:
            a, b = _value(ref, field), _value(other, field)
            if a != b:
                found.append(FieldDifference(field, ref_name, a, name, b))
    return found


def check_contract(runs: Sequence[tuple[str, RunFingerprint]], allow: Sequence[str] = ()) -> ContractCheck:
    """Raise ``IntegrityError`` naming the first differing, not-allowed contract field; else return the check."""
    allowed = validate_allow(allow)
    found = differences(runs)
    for diff in found:
        if diff.field not in allowed:
            raise IntegrityError(
                f"runs differ in contract field {diff.field!r}: {diff.reference_run} has "
                f"{diff.reference_value!r} but {diff.other_run} has {diff.other_value!r}",
                fix=f"compare runs made with the same {diff.field}, or pass --allow {diff.field} "
                    "to compare anyway (the report will say so)")
    return ContractCheck(found, allowed)
