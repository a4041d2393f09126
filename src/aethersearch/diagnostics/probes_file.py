"""``probes.json`` and ``factorised.json``: typed records, written and read through :class:`ProbesFile` and
:class:`FactorisedFile`.

Why typed: the file is written by three probes (each merging its summary into the
file) and read by ``aether factorise`` (Forget's parametric evidence), the degradation
block and the report. A summary field renamed on one side would have read as absent
on the other. Fields a variant does not have (a probe not applicable, no corpus to
judge sufficiency) are absent from the file, not null: a record is written with the
fields it was given (``exclude_unset``), and read back with the same ones. Every
field may be absent, so a file an older version wrote (fewer fields) still reads; a
field no record has, or a value of the wrong type, is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aethersearch.errors import DataError
from aethersearch.jsonl import atomic_write_json, loads, validation_problem
from aethersearch.records import SparseRecord

__all__ = ["Degradation", "DistractorProbe", "FACTORISED_FILE", "FactorisedFile", "Figures", "ForgetProbe",
    "LeadAstrayProbe", "PROBES_FILE", "ProbesFile", "read_factorised", "read_probes", "write_factorised",
    "write_probes"]

PROBES_FILE = "probes.json"
FACTORISED_FILE = "factorised.json"


class ForgetProbe(SparseRecord):
    """``probes.json["forget"]``: the paper's Forget rate over sufficient-evidence failures, and its parts.

    Not applicable (an agent without a model): ``applicable`` False with the ``reason``.
    Without a corpus to judge sufficiency: ``forget_rate_reason`` instead of the rate's parts.
    """

    applicable: bool | None = None
    n_hops: int | None = None
    forget_rate: float | None = None
    n_eligible: int | None = None
    eligible_ids: list[str] | None = None
    reason: str | None = None
    n_forget: int | None = None
    forget_ids: list[str] | None = None
    forget_rate_reason: str | None = None
    definition: str | None = None
    n_known_in_isolation: int | None = None
    n_forgotten: int | None = None
    known_hop_forget_rate: float | None = None
    isolated_accuracy: float | None = None
    n_questions_with_known_hop: int | None = None
    n_questions_forgetting: int | None = None
    question_forget_rate: float | None = None
    forgotten: list[str] | None = None
    failed_at: dict[str, int | None] | None = None
    known_hop_definition: str | None = None
    model: str | None = None
    probe_dir: str | None = None
    #: question id -> the evidence pages the model knew without search (fed to ``aether factorise``)
    parametric: dict[str, list[str]] | None = None


class LeadAstrayProbe(SparseRecord):
    """``probes.json["lead_astray"]``: the paper's Lead-astray rate over sufficient-evidence failures."""

    applicable: bool | None = None
    n_eligible: int | None = None
    n_led_astray: int | None = None
    lead_astray_rate: float | None = None
    eligible_ids: list[str] | None = None
    led_astray_ids: list[str] | None = None
    clean_pages: dict[str, int] | None = None
    definition: str | None = None
    probe_dir: str | None = None


class DistractorProbe(SparseRecord):
    """``probes.json["distractors"]``: this project's robustness probe (seeded corpus distractors)."""

    ratio: float | None = None
    seed: int | None = None
    n: int | None = None
    n_eligible: int | None = None
    n_distracted: int | None = None
    distractor_rate: float | None = None
    pass_at_1_clean: float | None = None
    pass_at_1_noisy: float | None = None
    pass_at_1_drop: float | None = None
    distracted_ids: list[str] | None = None
    definition: str | None = None
    probe_dir: str | None = None


class Degradation(SparseRecord):
    """``probes.json["degradation"]``: Forget and Lead-astray side by side, and their difference when comparable."""

    forget_rate: float | None = None
    forget_n_eligible: int | None = None
    lead_astray_rate: float | None = None
    lead_astray_n_eligible: int | None = None
    forget_minus_lead_astray: float | None = None
    difference_reason: str | None = None


class ProbesFile(SparseRecord):
    """A run's ``probes.json``: the summary of each probe run on it so far."""

    forget: ForgetProbe | None = None
    lead_astray: LeadAstrayProbe | None = None
    distractors: DistractorProbe | None = None
    degradation: Degradation | None = None


def read_probes(run_dir: Path) -> ProbesFile:
    """``probes.json`` of a run (an empty record when no probe ran); a file that is not one is a DataError."""
    path = Path(run_dir) / PROBES_FILE
    if not path.is_file():
        return ProbesFile()
    try:
        return ProbesFile.model_validate(loads(path.read_bytes()))
    except ValueError as exc:
        raise DataError(path, f"not a probes file: {validation_problem(exc)}", fix="delete it and rerun the probes") from None


def write_probes(run_dir: Path, probes: ProbesFile) -> None:
    """Write ``probes.json`` atomically."""
    atomic_write_json(Path(run_dir) / PROBES_FILE, probes.line())


#: one group's factorised figures (Knowledge Sufficiency, Search Score, the F1s, GenScore, their counts)
Figures = dict[str, float | int | None]


class FactorisedFile(SparseRecord):
    """A run's ``factorised.json``: the factorised metrics overall, by hop count and by source, and their binding.

    Written by ``aether factorise``; read by the report. ``run`` binds the figures to
    the run (agent, model, environment, release, agent settings, budget);
    ``correctness`` says what decided a correct answer (exact match, or a judge);
    ``samples`` and ``reduced`` appear when the figures are means over K > 1 samples.
    Fields keep the values they were written with (an integer count stays an integer,
    a mean over samples a float).
    """

    overall: Figures | None = None
    by_hops: dict[str, Figures] | None = None
    by_source: dict[str, Figures] | None = None
    n: int | float | None = None
    definitions: dict[str, str] | None = None
    samples: int | None = None
    reduced: str | None = None
    missing: list[str] | None = None
    run: dict[str, Any] | None = None
    parametric_source: str | None = None
    correctness: str | dict[str, Any] | None = None


def read_factorised(run_dir: Path) -> FactorisedFile | None:
    """``factorised.json`` of a run, None when ``aether factorise`` has not run; a file that is not one is a
    DataError naming the field."""
    path = Path(run_dir) / FACTORISED_FILE
    if not path.is_file():
        return None
    try:
        return FactorisedFile.model_validate(loads(path.read_bytes()))
    except ValueError as exc:
        raise DataError(path, f"not a factorised file: {validation_problem(exc)}",
                        fix="rerun `aether factorise` on the run") from None


def write_factorised(run_dir: Path, figures: dict[str, Any]) -> FactorisedFile:
    """Check ``figures`` against :class:`FactorisedFile` and write ``factorised.json`` atomically."""
    record = FactorisedFile.model_validate(figures)
    atomic_write_json(Path(run_dir) / FACTORISED_FILE, record.line())
    return record
