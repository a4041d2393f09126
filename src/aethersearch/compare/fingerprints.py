"""The comparison contract: runs are comparable only when every contract field of run.json agrees.

Why: a Base-vs-RL delta means nothing if the two runs used different releases,
indexes, budgets, prompts or decoding; the difference would be measured, but
not the one being claimed. ``check_contract`` names every differing field at
once, with both values. ``--allow FIELD`` overrides a field explicitly, and the
override is returned so the comparison and the report can say so. The release
fields can never be allowed: runs on different questions or different gold have
no paired questions to compare, so suggesting ``--allow`` for them would only
lead to a second, later refusal.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel

from aethersearch.errors import ConfigError, DataError, IntegrityError
from aethersearch.jsonl import loads, validate_row
from aethersearch.records import RunFingerprint

__all__ = ["ContractCheck", "FieldDifference", "NEVER_ALLOWED", "REDUCER_FIX", "RUN_FILE", "SAMPLES",
    "check_contract", "differences", "load_fingerprint", "validate_allow"]

RUN_FILE = "run.json"
#: Contract fields that cannot be overridden: the runs would not share the questions a paired test needs.
NEVER_ALLOWED: frozenset[str] = frozenset({"release_id", "release_data_sha256", "rollout_sha256", "question_count"})


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
                        fix="compare runs written by `aether run` (or `aether import verl`), or write run.json "
                            "for hand-made runs")
    try:
        value = loads(path.read_bytes())
    except ValueError as exc:
        raise DataError(path, f"invalid JSON: {exc}", fix="restore run.json from the runner") from None
    return validate_row(path, 1, value, RunFingerprint)


#: A contract field made comparable by choosing what to compare (``--reducer``), never by ``--allow``.
SAMPLES = "samples"
REDUCER_FIX = ("pass --reducer mean (each run's mean@K: the expected single-sample score, comparable across K), "
               "--reducer pass@k (k up to the smallest K) or --reducer maj (each run's maj@K)")


def validate_allow(allow: Sequence[str]) -> list[str]:
    """Refuse an ``--allow`` name that is not a contract field (a typo must not silently allow nothing)."""
    valid = [f for f in RunFingerprint.CONTRACT_FIELDS if f not in NEVER_ALLOWED and f != SAMPLES]
    for name in allow:
        if name == SAMPLES:
            raise ConfigError("--allow samples: runs of different K are compared through a reducer", fix=REDUCER_FIX)
        if name in NEVER_ALLOWED:
            raise ConfigError(f"--allow {name} cannot work: runs on different releases share no questions to pair",
                              fix="roll both checkpoints out on the same release")
        if name not in valid:
            raise ConfigError(f"--allow {name!r} is not a contract field",
                              fix=f"use one of: {', '.join(valid)}")
    return sorted(set(allow))


def _value(fingerprint: RunFingerprint, field: str) -> Any:
    value = getattr(fingerprint, field)
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


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


def check_contract(runs: Sequence[tuple[str, RunFingerprint]], allow: Sequence[str] = (), *,
                   reducer: str | None = None) -> ContractCheck:
    """Raise ``IntegrityError`` naming every differing, not-allowed contract field; else return the check.

    Runs of different K (``samples``) pass only with a ``reducer`` chosen: their
    plain figures are mean@K of different K, and pass@k or maj@K must be asked for.
    """
    allowed = validate_allow(allow)
    found = differences(runs)
    if reducer is not None:
        allowed = sorted({*allowed, SAMPLES})
    blocking = [diff for diff in found if diff.field not in allowed]
    if blocking and {d.field for d in blocking} == {SAMPLES}:
        lines = "; ".join(f"{d.reference_run} has {d.reference_value} but {d.other_run} has {d.other_value}"
                          for d in blocking)
        raise IntegrityError(f"runs differ in samples per question (K): {lines}; say which K-sample figure to "
                             "compare", fix=REDUCER_FIX)
    if blocking:
        lines = "; ".join(f"{d.field}: {d.reference_run} has {d.reference_value!r} but {d.other_run} has "
                          f"{d.other_value!r}" for d in blocking)
        fields = sorted({d.field for d in blocking}, key=RunFingerprint.CONTRACT_FIELDS.index)
        impossible = [f for f in fields if f in NEVER_ALLOWED]
        if impossible:
            fix = (f"the runs are on different releases ({', '.join(impossible)}): roll both out on the same "
                   "release; no --allow can make them comparable")
        else:
            fix = ("compare runs made with the same settings, or pass "
                   + " ".join(f"--allow {f}" for f in fields) + " to compare anyway (the report will say so)")
        raise IntegrityError(f"runs differ in {len(fields)} contract field(s): {lines}", fix=fix)
    return ContractCheck(found, allowed)
