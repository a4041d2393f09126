"""The build loop: read sources, isolate from training, select (with audit rounds), write, verify.

Why one loop with hooks: the near-duplicate audit (issue 3) must be able to drop
pool candidates before sampling (``pool_filter``) and to exclude selected
questions after sampling (``selection_audit``); an exclusion re-runs the *same*
deterministic selection, and the loop repeats until an audit adds nothing new
(capped by ``max_audit_rounds``). The release is written into a temporary
sibling directory, verified, and only then moved into place, so a failed build
never leaves a half-written release.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from time import perf_counter
from typing import Any, NamedTuple

import orjson

from aethersearch import __version__
from aethersearch.curation.config import LoadedConfig, SourceConfig, load_config
from aethersearch.errors import AetherError, ConfigError, IntegrityError
from aethersearch.isolation.training import (
    ExclusionSets,
    IsolationResult,
    Removal,
    build_exclusion_sets,
    check_exclusions_match,
    empty_exclusion_sets,
    final_overlap,
    isolate,
    load_exclusion_list,
    load_registry,
    parse_exclusions,
    registry_content_sha256,
    resolve_exclusions,
)
from aethersearch.jsonl import sha256_bytes, sha256_file
from aethersearch.records import DiagnosticsRow, EvalRow
from aethersearch.release.card import dataset_card
from aethersearch.release.manifest import (
    SAMPLING_DESCRIPTION,
    ExclusionRecord,
    FileDigest,
    FileRef,
    Manifest,
    PoolFilterRemoval,
    SourceRecord,
    TrainingFileRecord,
    TrainingSummary,
    attribution,
    encode_release_rows,
    exclusion_audit_bytes,
    manifest_bytes,
    manifest_core_sha256,
    row_digests,
    row_id,
    verifier_source,
    write_release_files,
)
from aethersearch.release.verify import VerifyReport, verify_release
from aethersearch.release_layout import layout_names
from aethersearch.selection.sampling import (
    AuditDecision,
    PlanEntry,
    PoolFilter,
    SelectionAudit,
    compute_quotas,
    sample,
    sampling_order,
)
from aethersearch.sources import PATH_OPTIONS, read_source
from aethersearch.sources.base import ROW_NUMBER_CONVENTION, Candidate, SourceRows

__all__ = ["BuildResult", "STAGES", "StageReport", "build_from_config", "build_release"]

STAGES = ("read_sources", "exclusion_sets", "dedup", "select", "write", "replay", "verify")
StageReport = Callable[[str, int, "int | None"], None]
"""``report(stage, done, total)``: the build's progress, stage by stage (the CLI renders it)."""


def _no_report(stage: str, done: int, total: int | None) -> None:
    return None


class BuildResult(NamedTuple):
    """A finished build: where the release is, its manifest, stage timings (s) and verification."""

    release_dir: Path
    manifest: Manifest
    timings: dict[str, float]
    verify: VerifyReport


class _Source(NamedTuple):
    config: SourceConfig
    rows: SourceRows
    sha256: str
    option_files: dict[str, FileRef]


def _read_sources(loaded: LoadedConfig, report: StageReport = _no_report) -> dict[str, _Source]:
    out = {}
    for number, source in enumerate(loaded.config.sources):
        report("read_sources", number, len(loaded.config.sources))
        path = loaded.data(source.path)
        options = dict(source.options)
        option_files = {}
        for name in PATH_OPTIONS & set(options):
            option_path = loaded.data(str(options[name]))
            option_files[name] = FileRef(path=str(options[name]), sha256=sha256_file(option_path))
            options[name] = option_path
        sha = sha256_file(path)
        if source.sha256 is not None and sha != source.sha256:
            raise IntegrityError(f"source {source.dataset!r} file {source.path} has sha256 {sha}, but the config "
                                 f"pins {source.sha256}",
                                 fix="restore the pinned file, or review the change and update its sha256")
        rows = read_source(source.format, path, dataset=source.dataset, split=source.split,
                           source_file=source.source_file or Path(source.path).name, options=options)
        out[source.dataset] = _Source(source, rows, sha, option_files)
    return out


def _removal_record(removal: Removal) -> dict[str, Any]:
    c = removal.candidate
    record = {"dataset": c.source_dataset, "source_row_number": c.source_row_number, "source_id": c.source_id,
              "key": c.key, "kind": removal.kind, "reason": removal.reason, "stages": list(removal.stages)}
    if removal.duplicate_of is not None:
        record["duplicate_of"] = {"dataset": removal.duplicate_of[0], "source_row_number": removal.duplicate_of[1]}
    return record


def _apply_pool_filter(pool_filter: PoolFilter | None, isolation: IsolationResult
                       ) -> tuple[dict[str, set[int]], list[PoolFilterRemoval]]:
    eligible_rows = {d: {c.source_row_number for c in cands} for d, cands in isolation.eligible.items()}
    if pool_filter is None:
        return eligible_rows, []
    pool = [c for cands in isolation.eligible.values() for c in cands]
    drop = pool_filter(pool)
    removals = []
    for candidate in pool:
        if candidate.key in drop:
            eligible_rows[candidate.source_dataset].discard(candidate.source_row_number)
            removals.append(PoolFilterRemoval(dataset=candidate.source_dataset,
                                              source_row_number=candidate.source_row_number,
                                              source_id=candidate.source_id, key=candidate.key,
                                              reason=drop[candidate.key]))
    return eligible_rows, removals


def _eligibility(rows: set[int], excluded: dict[str, str]) -> Callable[[Candidate], bool]:
    """Eligible = survived isolation and the pool filter (by row) and not excluded by an audit (by key)."""
    return lambda c: c.source_row_number in rows and c.key not in excluded


def _select(loaded: LoadedConfig, sources: dict[str, _Source], eligible_rows: dict[str, set[int]],
            selection_audit: SelectionAudit | None
            ) -> tuple[dict[str, int], dict[str, list[Candidate]], dict[str, str], list[dict[str, Any]],
                       AuditDecision | None]:
    config = loaded.config
    plan = [PlanEntry(s.dataset, config.planned_for(s), s.cap) for s in config.sources]
    quotas = compute_quotas(plan)
    orders = {d: sampling_order(src.rows.candidates, seed=config.seed, dataset=d) for d, src in sources.items()}
    audit_excluded: dict[str, str] = {}
    rounds: list[dict[str, Any]] = []
    decision: AuditDecision | None = None
    while True:
        notes = {d: f"{src.rows.rows_read} rows read, {len(eligible_rows[d])} left after exclusion and "
                    f"de-duplication, {sum(1 for c in src.rows.candidates if c.key in audit_excluded)} excluded by "
                    "the selection audit" for d, src in sources.items()}
        eligible = {d: _eligibility(eligible_rows[d], audit_excluded) for d in sources}
        selected = sample(orders, eligible, quotas, available_note=notes)
        if selection_audit is None:
            return quotas, selected, audit_excluded, rounds, None
        decision = selection_audit([c for d in quotas for c in selected[d]])
        new = {k: v for k, v in sorted(decision.exclude.items()) if k not in audit_excluded}
        rounds.append({"round": len(rounds) + 1, "new_exclusions": len(new), "report": decision.report})
        if not new:
            return quotas, selected, audit_excluded, rounds, decision
        if len(rounds) >= config.max_audit_rounds:
            raise AetherError(f"the selection audit still excluded {len(new)} new question(s) after "
                              f"{len(rounds)} rounds (max_audit_rounds {config.max_audit_rounds})",
                              fix="review the audit's thresholds, or raise max_audit_rounds in the build config")
        audit_excluded.update(new)


def _training(loaded: LoadedConfig, report: StageReport = _no_report) -> tuple[ExclusionSets, TrainingSummary]:
    config = loaded.config
    if config.training_registry is None:
        sets = empty_exclusion_sets()
        return sets, TrainingSummary(registry_path=None, registry_content_sha256=None)
    registry_path = loaded.resolve(config.training_registry)
    registry = load_registry(registry_path)
    sets = build_exclusion_sets(registry, registry_path.parent,
                                progress=lambda done, total: report("exclusion_sets", done, total))
    summary = TrainingSummary(
        registry_path=config.training_registry, registry_content_sha256=registry_content_sha256(registry_path),
        files=[TrainingFileRecord(**row) for row in sets.file_rows],
        unique_keys_by_stage={s: len(k) for s, k in sorted(sets.keys.items())},
        unique_templates_by_stage={s: len(k) for s, k in sorted(sets.templates.items())},
        union_size=len(sets.union), union_templates=len(sets.union_templates))
    return sets, summary


def _rows(name: str, quotas: dict[str, int], selected: dict[str, list[Candidate]]
          ) -> tuple[list[EvalRow], list[DiagnosticsRow]]:
    eval_rows, diagnostics = [], []
    index = 0
    for dataset in quotas:
        for c in selected[dataset]:
            index += 1
            rid = row_id(name, index)
            eval_rows.append(EvalRow(id=rid, question=c.question, answers=c.answers, source_dataset=c.source_dataset,
                                     source_split=c.source_split, source_id=c.source_id,
                                     source_row_number=c.source_row_number, source_file=c.source_file))
            diagnostics.append(DiagnosticsRow(id=rid, source_dataset=c.source_dataset, **c.diagnostics))
    return eval_rows, diagnostics


def _install(staging: Path, out_dir: Path) -> None:
    """Move a verified staging directory into place, replacing an earlier release there."""
    old = None
    if out_dir.exists():
        has_manifest = (out_dir / "manifest.json").is_file() or any(out_dir.glob("*_manifest.json"))
        if not out_dir.is_dir() or (any(out_dir.iterdir()) and not has_manifest):
            raise ConfigError(f"{out_dir} exists and is not a release directory; refusing to replace it",
                              fix="choose a new --out directory or remove it")
        old = out_dir.with_name(f".{out_dir.name}.old")
        if old.exists():
            shutil.rmtree(old)
        out_dir.rename(old)
    staging.rename(out_dir)
    if old is not None:
        shutil.rmtree(old)


def build_release(loaded: LoadedConfig, out_dir: str | Path, *, pool_filter: PoolFilter | None = None,
                  selection_audit: SelectionAudit | None = None, progress: StageReport | None = None
                  ) -> BuildResult:
    """Build, verify and install a release from a loaded config; returns the manifest and stage timings.

    ``progress(stage, done, total)`` is called as each stage starts and ends
    (and per source while reading), so a long audited build is never silent.
    """
    config = loaded.config
    out_dir = Path(out_dir).resolve()
    timings: dict[str, float] = {}
    clock = perf_counter()
    notify = progress or _no_report

    def lap(stage: str) -> None:
        nonlocal clock
        now = perf_counter()
        timings[stage] = now - clock
        clock = now
        notify(stage, 1, 1)
        following = STAGES.index(stage) + 1 if stage in STAGES else len(STAGES)
        if following < len(STAGES):
            notify(STAGES[following], 0, 1 if STAGES[following] != "read_sources" else len(config.sources))

    notify("read_sources", 0, len(config.sources))
    sources = _read_sources(loaded, notify)
    timings["read_sources"] = perf_counter() - clock
    clock = perf_counter()
    notify("read_sources", len(config.sources), len(config.sources))
    notify("exclusion_sets", 0, 1)
    sets, training = _training(loaded, notify)
    lap("exclusion_sets")
    pools = {d: s.rows.candidates for d, s in sources.items()}
    reviewed: list[Any] = []
    if isinstance(config.exclusions, str):
        where: Path | str = loaded.resolve(config.exclusions)
        reviewed = load_exclusion_list(Path(where))
    elif config.exclusions:
        where = f"{loaded.path or '<config>'} (exclusions)"
        reviewed = parse_exclusions(config.exclusions, where)
    if reviewed:
        reviewed = resolve_exclusions(reviewed, pools)
        check_exclusions_match(where, reviewed, pools)
    isolation = isolate(pools, sets, reviewed)
    eligible_rows, pool_removals = _apply_pool_filter(pool_filter, isolation)
    lap("dedup")
    quotas, selected, audit_excluded, rounds, decision = _select(loaded, sources, eligible_rows, selection_audit)
    chosen = [c for d in quotas for c in selected[d]]
    overlap = final_overlap(chosen, sets)
    if any(overlap.values()):
        raise IntegrityError(f"final selection overlaps training: {overlap}", fix="report this as a bug")
    lap("select")

    eval_rows, diagnostics = _rows(config.name, quotas, selected)
    names = layout_names(config.stem)
    legacy = encode_release_rows(eval_rows, diagnostics)
    files = {names["eval"]: legacy["eval.jsonl"], names["rollout"]: legacy["rollout_questions.jsonl"],
             names["diagnostics"]: legacy["diagnostics.jsonl"]}
    exclusions = [ExclusionRecord(key=e.key, dataset=e.dataset, source_id=e.source_id, reason=e.reason,
                                  origin=e.origin) for e in reviewed]
    exclusions += [ExclusionRecord(key=k, reason=r, origin="selection audit") for k, r in sorted(audit_excluded.items())]
    counts = dict(isolation.counts)
    counts.update(pool_filter_removed=len(pool_removals), audit_excluded=len(audit_excluded),
                  unique_exclusion_keys_by_stage=dict(training.unique_keys_by_stage),
                  exclusion_union_size=training.union_size, final_exact_overlap_by_stage=overlap)
    source_records = []
    for source in config.sources:
        src = sources[source.dataset]
        source_records.append(SourceRecord(
            dataset=source.dataset, format=source.format, path=source.path, split=source.split,
            source_file=source.source_file or Path(source.path).name, sha256=src.sha256,
            options=dict(source.options), option_files=src.option_files, rows_read=src.rows.rows_read,
            candidates=len(src.rows.candidates), skipped=src.rows.skipped,
            eligible=len(eligible_rows[source.dataset]), planned=config.planned_for(source), cap=source.cap,
            quota=quotas[source.dataset], selected=len(selected[source.dataset])))
    audit = None
    if decision is not None:
        audit = {"rounds": rounds, "report": decision.report, "retained": decision.retained}
    files[names["exclusion_audit"]] = exclusion_audit_bytes({
        "schema_version": 1, "name": config.name, "training": training.model_dump(mode="json"),
        "isolation": counts, "exclusions": [e.model_dump(mode="json") for e in exclusions],
        "removed": [_removal_record(r) for r in isolation.removals],
        "pool_filter_removals": [r.model_dump(mode="json") for r in pool_removals],
        "audit": audit, "retained": decision.retained if decision is not None else []})
    files[names["verifier"]] = verifier_source()

    def digests() -> dict[str, FileDigest]:
        return {name: FileDigest(sha256=sha256_bytes(data), rows=data.count(b"\n"))
                for name, data in sorted(files.items()) if name != names["manifest"]}

    manifest = Manifest(
        name=config.name, file_stem=config.stem, layout=names, revision=config.revision,
        description=config.description, software_version=__version__,
        seed=config.seed, sampling=SAMPLING_DESCRIPTION, row_number_convention=ROW_NUMBER_CONVENTION,
        question_count=len(eval_rows),
        composition=[{"dataset": r.dataset, "split": r.split, "planned": r.planned, "cap": r.cap,
                      "quota": r.quota, "selected": r.selected} for r in source_records],
        sources=source_records, training=training, isolation=counts, exclusions=exclusions,
        pool_filter_removals=pool_removals, audit=audit, config=config.recorded(),
        config_path=loaded.path.name if loaded.path else None, deviations=list(config.deviations),
        files={}, data_sha256=sha256_bytes(files[names["eval"]]),
        rollout_sha256=sha256_bytes(files[names["rollout"]]), row_sha256=row_digests(files[names["eval"]]))
    # The attribution and the card are rendered from the manifest's content (not its ``files``), so
    # their hashes can be added to ``files`` afterwards without changing what they say. The card also
    # shows what the independent replay verified, so it is rendered once that report exists.
    files[names["attribution"]] = attribution(manifest, config.sources).encode("utf-8")
    manifest = manifest.model_copy(update={"files": digests()})
    files[names["manifest"]] = manifest_bytes(manifest)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = out_dir.with_name(f".{out_dir.name}.staging")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir()
    try:
        write_release_files(staging, files)
        lap("write")
        files[names["independent_validation"]] = _independent_validation(staging, loaded, manifest)
        files[names["card"]] = dataset_card(manifest, [orjson.loads(line) for line in files[names["eval"]].splitlines()],
                                            orjson.loads(files[names["independent_validation"]])).encode("utf-8")
        manifest = manifest.model_copy(update={"files": digests()})
        files[names["manifest"]] = manifest_bytes(manifest)
        write_release_files(staging, files)
        lap("replay")
        report = verify_release(staging)
        if not report.ok:
            raise IntegrityError("the freshly written release failed verification:\n  "
                                 + "\n  ".join(c.line() for c in report.failures), fix="report this as a bug")
        _install(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    lap("verify")
    return BuildResult(out_dir, manifest, timings, VerifyReport(out_dir, report.checks))


def _independent_validation(staging: Path, loaded: LoadedConfig, manifest: Manifest) -> bytes:
    """Run the independent replay on the staged release; its report becomes a release file.

    A failed replay stops the build: a release whose own replay disagrees is not published.
    """
    from aethersearch.release.replay import replay_report

    report, data = replay_report(staging, base_dir=loaded.base_dir)
    if not report.ok:
        raise IntegrityError("the independent replay of the new release failed:\n  "
                             + "\n  ".join(c.line() for c in report.failures), fix="report this as a bug")
    if manifest_core_sha256(manifest) not in data.decode("utf-8"):
        raise IntegrityError("the independent replay validated another manifest", fix="report this as a bug")
    return data


def build_from_config(config_path: str | Path, out_dir: str | Path, *, pool_filter: PoolFilter | None = None,
                      selection_audit: SelectionAudit | None = None, auto_review: bool = False,
                      progress: StageReport | None = None) -> BuildResult:
    """Load a config file and build its release; an ``audit:`` section wires in ``audit.near_duplicates``'s hooks."""
    loaded = load_config(config_path)
    audit_config = loaded.config.audit
    if audit_config is not None and pool_filter is None and selection_audit is None:
        from aethersearch.audit.near_duplicates import make_audit_hooks  # lazy: owned by issue 3

        sets, _ = _training(loaded)
        reviews = audit_config.get("reviews")
        pool_filter, selection_audit = make_audit_hooks(
            dict(audit_config), sorted(sets.union),
            reviews_path=loaded.resolve(reviews) if isinstance(reviews, str) else None, auto_review=auto_review,
            stage_keys=dict(sets.keys), progress=progress or _no_report)
    return build_release(loaded, out_dir, pool_filter=pool_filter, selection_audit=selection_audit,
                         progress=progress)

