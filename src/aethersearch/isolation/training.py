"""Training registry, exclusion sets and the isolation pass (overlaps, equivalents, duplicates).

Why: a benchmark that shares questions with the checkpoints' training data
measures memorisation. The registry pins every training file (canonical and
historical) by sha256 per stage (SFT, DPO, RL), so a silently changed file is
refused; the exclusion sets are the normalised question keys per stage and their
union. The isolation pass then removes, in this order and each with its reason:
exact training overlaps (same ``question_key``), conservative punctuation/spacing
equivalents (same ``template_key``), reviewed exclusions (keys or source ids),
and internal and cross-source duplicates (the first in the deterministic order
is kept, the rest recorded).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aethersearch.config_files import read_mapping, validation_message
from aethersearch.errors import ConfigError, IntegrityError
from aethersearch.jsonl import sha256_bytes, sha256_file
from aethersearch.sources import read_source
from aethersearch.sources.base import Candidate
from aethersearch.text import question_key, template_key_of_key

__all__ = ["Exclusion", "ExclusionSets", "IsolationResult", "Removal", "STAGES", "Stage", "TrainingFile",
    "TrainingRegistry", "build_exclusion_sets", "candidate_template", "check_exclusions_match", "check_hashes",
    "empty_exclusion_sets", "final_overlap", "isolate", "load_exclusion_list", "load_registry", "parse_exclusions",
    "registry_content_sha256", "resolve_exclusions", "sort_key"]

Stage = Literal["SFT", "DPO", "RL"]
STAGES: tuple[str, ...] = ("SFT", "DPO", "RL")


class TrainingFile(BaseModel):
    """One pinned training file of a release."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    stage: Stage
    release: str = Field(description="the training release this file belongs to")
    role: Literal["canonical", "historical"] = "canonical"
    path: str
    format: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    options: dict[str, Any] = Field(default_factory=dict)


class TrainingRegistry(BaseModel):
    """The registry file: every training file, by stage."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = 1
    data_root: str = Field(default=".", description="where the training files are, relative to the registry "
                           "file (or absolute); a locator only, left out of the registry's recorded identity")
    files: list[TrainingFile] = Field(default_factory=list)


class ExclusionSets(NamedTuple):
    """Normalised keys (and template keys) per stage, their union, and per-file counts."""

    keys: dict[str, set[str]]
    templates: dict[str, set[str]]
    union: set[str]
    union_templates: set[str]
    file_rows: list[dict[str, Any]]


class Exclusion(NamedTuple):
    """A reviewed exclusion: a normalised key, or a (dataset, source id) pair, with its reason."""

    key: str | None
    dataset: str | None
    source_id: str | None
    reason: str
    origin: str
    given: str = "key"  # how the entry named the question: "key", "question" or "source_id"


class Removal(NamedTuple):
    """A candidate removed by the isolation pass, and why."""

    candidate: Candidate
    kind: str
    reason: str
    stages: tuple[str, ...] = ()
    duplicate_of: tuple[str, int] | None = None


class IsolationResult(NamedTuple):
    """Eligible candidates per source (deterministic order) and everything removed."""

    eligible: dict[str, list[Candidate]]
    removals: list[Removal]
    counts: dict[str, Any]


def load_registry(path: Path) -> TrainingRegistry:
    """Read and validate a training registry (YAML or JSON)."""
    try:
        return TrainingRegistry.model_validate(read_mapping(path, what="training registry"))
    except ValidationError as exc:
        raise validation_message(path, exc, what="training registry") from None


def registry_content_sha256(path: Path) -> str:
    """sha256 of the registry's canonical JSON without ``data_root``: what it pins, not where the files were.

    The replay recomputes it from the file with its own YAML read and the shipped
    verifier's canonical JSON, so both sides hash exactly the mapping the file holds.
    """
    from aethersearch.release.verify_release_template import pretty_json

    data = {k: v for k, v in read_mapping(path, what="training registry").items() if k != "data_root"}
    return sha256_bytes(pretty_json(data))


def _root(registry: TrainingRegistry, base_dir: Path) -> Path:
    """The directory the registry's file paths start from (``data_root`` against the registry's directory)."""
    return base_dir / registry.data_root


def check_hashes(registry: TrainingRegistry, base_dir: Path) -> dict[str, str]:
    """Refuse any training file whose sha256 differs from the registry; returns path -> sha256."""
    hashes = {}
    root = _root(registry, base_dir)
    for entry in registry.files:
        path = Path(entry.path) if Path(entry.path).is_absolute() else root / entry.path
        actual = sha256_file(path)
        if actual != entry.sha256:
            raise IntegrityError(
                f"training file {entry.path} ({entry.stage}, {entry.release}) has sha256 {actual}, "
                f"but the registry pins {entry.sha256}",
                fix="restore the pinned file, or review the change and update its sha256 in the registry")
        hashes[entry.path] = actual
    return hashes


def build_exclusion_sets(registry: TrainingRegistry, base_dir: Path,
                         progress: Callable[[int, int], None] | None = None) -> ExclusionSets:
    """Read every registered training file (hash-checked) and collect its keys per stage.

    ``base_dir`` is the registry file's folder; ``progress(files_done, files_total)``
    hears each file (hash check, then read).
    """
    total = len(registry.files)
    if progress is not None:
        progress(0, total)
    check_hashes(registry, base_dir)
    root = _root(registry, base_dir)
    keys: dict[str, set[str]] = {}
    templates: dict[str, set[str]] = {}
    file_rows = []
    for entry in registry.files:
        path = Path(entry.path) if Path(entry.path).is_absolute() else root / entry.path
        options = dict(entry.options)
        if "aliases" in options and not Path(options["aliases"]).is_absolute():
            options["aliases"] = root / options["aliases"]
        rows = read_source(entry.format, path, dataset=f"train:{entry.release}", split="train",
                           source_file=path.name, options=options)
        file_keys = {candidate.key for candidate in rows.candidates}
        keys.setdefault(entry.stage, set()).update(file_keys)
        templates.setdefault(entry.stage, set()).update(candidate_template(c) for c in rows.candidates)
        file_rows.append({"path": entry.path, "stage": entry.stage, "release": entry.release,
                          "role": entry.role, "format": entry.format, "sha256": entry.sha256,
                          "rows": rows.rows_read, "questions": len(rows.candidates),
                          "unique_keys": len(file_keys)})
        if progress is not None:
            progress(len(file_rows), total)
    union = set().union(*keys.values()) if keys else set()
    union_templates = set().union(*templates.values()) if templates else set()
    return ExclusionSets(keys, templates, union, union_templates, file_rows)


def empty_exclusion_sets() -> ExclusionSets:
    """No training registry: nothing to exclude (recorded as such in the manifest)."""
    return ExclusionSets({}, {}, set(), set(), [])


def load_exclusion_list(path: Path) -> list[Exclusion]:
    """A reviewed exclusion list file: ``exclusions: [{key|question|(dataset, source_id), reason}]``."""
    data = read_mapping(path, what="exclusion list")
    return parse_exclusions(data.get("exclusions"), path)


def parse_exclusions(entries: Any, where: Path | str) -> list[Exclusion]:
    """Exclusion entries from a list file or written inline in the build config (``exclusions: [...]``).

    ``question`` is any published form of the question (it is normalised here);
    ``key`` is a normalised key exactly as the manifest and the exclusion audit
    write it (used verbatim, so quote it in YAML when it ends with a space).
    """
    if not isinstance(entries, list):
        raise ConfigError(f"{where}: expected a list under 'exclusions'",
                          fix="write exclusions: [{question: ..., reason: ...}] (inline, or in a list file)")
    out = []
    for number, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict) or not isinstance(entry.get("reason"), str) or not entry["reason"].strip():
            raise ConfigError(f"{where}: exclusion #{number} needs a non-empty 'reason'",
                              fix="every exclusion records why it was made")
        if isinstance(entry.get("question"), str):
            out.append(Exclusion(question_key(entry["question"]), None, None, entry["reason"], "exclusion list",
                                 "question"))
        elif isinstance(entry.get("key"), str):
            # Verbatim: a key is already normalised, and normalising it again is not always a no-op
            # ("what is x ?" has the key "what is x ", whose own key drops the space).
            out.append(Exclusion(entry["key"], None, None, entry["reason"], "exclusion list", "key"))
        elif isinstance(entry.get("dataset"), str) and entry.get("source_id") is not None:
            out.append(Exclusion(None, entry["dataset"], str(entry["source_id"]), entry["reason"], "exclusion list",
                                 "source_id"))
        else:
            raise ConfigError(f"{where}: exclusion #{number} needs 'key', 'question', or 'dataset' + 'source_id'",
                              fix="name the excluded question by its text, its normalised key or its source id")
    return out


def resolve_exclusions(exclusions: Sequence[Exclusion], sources: Mapping[str, Sequence[Candidate]]
                       ) -> list[Exclusion]:
    """Map each ``question`` entry to the published question's key, ignoring a space before the "?".

    A question published as "what is x ?" has the key "what is x " (the key strips
    whitespace *before* dropping the "?"), so the text "what is x?" a reviewer
    types would otherwise name no question. The entry keeps the published key,
    so the manifest and the replay see the key that is really excluded.
    """
    by_stripped: dict[str, set[str]] = {}
    for candidates in sources.values():
        for c in candidates:
            by_stripped.setdefault(c.key.rstrip(), set()).add(c.key)
    out = []
    for entry in exclusions:
        if entry.given == "question" and entry.key is not None:
            matches = by_stripped.get(entry.key.rstrip(), set())
            if entry.key not in matches and len(matches) == 1:
                entry = entry._replace(key=next(iter(matches)))
        out.append(entry)
    return out


def check_exclusions_match(path: Path | str, exclusions: Sequence[Exclusion],
                           sources: Mapping[str, Sequence[Candidate]]) -> None:
    """Refuse a reviewed exclusion that names no question of the configured sources.

    Why: an entry with a typo in its key, a wrong source id, or an id for a
    source that has none (NQ-Open, Bamboogle) would otherwise exclude nothing
    and go unnoticed, while the release's manifest claims it was applied.
    """
    keys = {c.key for candidates in sources.values() for c in candidates}
    ids = {(dataset, c.source_id) for dataset, candidates in sources.items() for c in candidates
           if c.source_id is not None}
    for number, entry in enumerate(exclusions, start=1):
        if entry.key is not None and entry.key not in keys:
            hint = ("; it is not a normalised key (see text.question_key): to give the question's text, "
                    "write it under 'question'" if entry.given == "key" and question_key(entry.key) != entry.key
                    else "")
            raise ConfigError(f"{path}: exclusion #{number} (key {entry.key!r}) matches no question of the "
                              f"configured sources{hint}",
                              fix="correct the key or the question text, or remove the entry")
        if entry.key is None and (entry.dataset, entry.source_id) not in ids:
            known = sorted(sources)
            why = (f"no source named {entry.dataset!r} (sources: {known})" if entry.dataset not in sources
                   else f"source {entry.dataset!r} has no question with source_id {entry.source_id!r}")
            raise ConfigError(f"{path}: exclusion #{number} matches nothing: {why}",
                              fix="correct the dataset/source_id, or exclude by 'question'/'key' "
                                  "(sources without ids, such as NQ-Open and Bamboogle, need a key)")


def candidate_template(candidate: Candidate) -> str:
    """``template_key(candidate.question)``, computed from the stored key (the same regex, half the work)."""
    return template_key_of_key(candidate.key)


def sort_key(candidate: Candidate) -> tuple[tuple[int, str], str, int]:
    """The deterministic candidate order: (source id, normalised question, row number).

    A null source id sorts before every string id (``(0, "")`` < ``(1, id)``), so
    sources without ids (NQ-Open, Bamboogle) are ordered by question then row.
    """
    sid = (0, "") if candidate.source_id is None else (1, candidate.source_id)
    return sid, candidate.key, candidate.source_row_number


def isolate(sources: Mapping[str, Sequence[Candidate]], sets: ExclusionSets,
            exclusions: Iterable[Exclusion] = ()) -> IsolationResult:
    """Remove overlaps, equivalents, reviewed exclusions and duplicates; keep the deterministic order.

    ``sources`` must be in the config's fixed source order: cross-source
    duplicates keep the copy from the earlier source.
    """
    exclusions = list(exclusions)
    by_key = {e.key: e for e in exclusions if e.key is not None}
    by_id = {(e.dataset, e.source_id): e for e in exclusions if e.key is None}
    stage_order = [s for s in STAGES if s in sets.keys] + sorted(set(sets.keys) - set(STAGES))
    removals: list[Removal] = []
    eligible: dict[str, list[Candidate]] = {}
    seen: dict[str, Candidate] = {}
    counts: dict[str, Any] = {
        "input_rows": 0, "exact_overlaps_removed": 0,
        "exact_overlaps_by_stage": {s: 0 for s in stage_order}, "template_equivalents_removed": 0,
        "reviewed_exclusions_removed": 0, "internal_duplicates_removed": 0, "cross_source_duplicates_removed": 0,
    }
    for dataset, candidates in sources.items():
        kept: list[Candidate] = []
        for candidate in sorted(candidates, key=sort_key):
            counts["input_rows"] += 1
            template = candidate_template(candidate)
            if candidate.key in sets.union:
                stages = tuple(s for s in stage_order if candidate.key in sets.keys[s])
                for stage in stages:
                    counts["exact_overlaps_by_stage"][stage] += 1
                counts["exact_overlaps_removed"] += 1
                removals.append(Removal(candidate, "training_overlap",
                                        f"exact normalised-key match with training ({', '.join(stages)})", stages))
                continue
            if template in sets.union_templates:
                stages = tuple(s for s in stage_order if template in sets.templates[s])
                counts["template_equivalents_removed"] += 1
                removals.append(Removal(candidate, "training_equivalent",
                                        "matches training after removing punctuation and spacing "
                                        f"({', '.join(stages)})", stages))
                continue
            reviewed = by_key.get(candidate.key) or by_id.get((dataset, candidate.source_id))
            if reviewed is not None:
                counts["reviewed_exclusions_removed"] += 1
                removals.append(Removal(candidate, "reviewed_exclusion", f"{reviewed.origin}: {reviewed.reason}"))
                continue
            first = seen.get(template)
            if first is not None:
                internal = first.source_dataset == candidate.source_dataset
                counts["internal_duplicates_removed" if internal else "cross_source_duplicates_removed"] += 1
                removals.append(Removal(candidate, "duplicate",
                                        f"{'internal' if internal else 'cross-source'} duplicate of "
                                        f"{first.source_dataset} row {first.source_row_number}",
                                        duplicate_of=(first.source_dataset, first.source_row_number)))
                continue
            seen[template] = candidate
            kept.append(candidate)
        eligible[dataset] = kept
    counts["duplicates_removed"] = counts["internal_duplicates_removed"] + counts["cross_source_duplicates_removed"]
    counts["eligible"] = sum(len(v) for v in eligible.values())
    return IsolationResult(eligible, removals, counts)


def final_overlap(selected: Iterable[Candidate], sets: ExclusionSets) -> dict[str, int]:
    """Exact overlap of the final selection with each stage (the card requires 0 for every stage)."""
    keys = [c.key for c in selected]
    return {stage: sum(1 for key in keys if key in stage_keys) for stage, stage_keys in sets.keys.items()}
