"""Independent replay validation of a release (the card's step 6).

Why: a verifier that reuses the builder's code can only confirm the builder
agrees with itself. This module re-reads the ORIGINAL files the manifest lists
with its own parsers (``replay_sources``), shares nothing with the builder but
``aethersearch.text.question_key``, and checks:

* ``training_hashes``  - every training file (and the registry) still has its recorded sha256;
* ``source_hashes``    - every held-out source file (and option file) still has its sha256;
* ``exclusion_sets``   - unique keys per stage and the union, rebuilt from the training
                         files, equal the manifest's counts; the selection overlaps none;
* ``rows_match_originals`` - each eval row's question, aliases, id, split and label equal
                         the original row at (file, row number);
* ``sampling_replay``  - quotas recomputed from the plan, isolation and the seeded
                         per-source draw replayed, giving the same ids in the same order.

Results go to ``<release>.independent_validation.json`` beside the release (atomic write;
not inside it, because a frozen release's verifier refuses files its checksums do not
list; ``aether replay --out PATH`` writes elsewhere) and are printed as OK/FAIL per
check together with that path. The replay reimplements the rule the manifest's ``sampling``
field states: sort by (source id, null first; question key; row number), then
``random.Random(f"{seed}:{dataset}").shuffle``; take the first ``quota`` eligible.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from aethersearch.benchmark.replay_sources import RawRow, read_original
from aethersearch.benchmark.verify_release_template import card_quotas, manifest_core_sha256, pretty_json
from aethersearch.errors import AetherError, ConfigError, DataError
from aethersearch.jsonl import atomic_write_bytes
from aethersearch.release_layout import release_layout
from aethersearch.text import question_key

OUTPUT = "independent_validation.json"
_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)


def _template(question: str) -> str:
    """Punctuation/spacing-free key (the card's conservative equivalent), reimplemented here."""
    return _NON_WORD.sub("", question_key(question))


def _sha256(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


class ReplayCheck(NamedTuple):
    """One check's verdict and counts."""

    name: str
    ok: bool
    detail: str
    counts: dict[str, Any]

    def line(self) -> str:
        """``OK name: detail`` or ``FAIL name: detail``."""
        return f"{'OK' if self.ok else 'FAIL'} {self.name}: {self.detail}"


class ReplayReport(NamedTuple):
    """All replay checks of one release and where they were written."""

    release_dir: Path
    checks: list[ReplayCheck]
    output: Path

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return all(c.ok for c in self.checks)

    @property
    def failures(self) -> list[ReplayCheck]:
        """The failed checks."""
        return [c for c in self.checks if not c.ok]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(path, f"cannot read: {exc}", fix="the release is incomplete; rebuild it") from None


def _read_eval(path: Path) -> list[dict[str, Any]]:
    rows = []
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except OSError as exc:
        raise DataError(path, f"cannot read: {exc.strerror}", fix="the release is incomplete") from None
    for number, line in enumerate(lines, start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DataError(path, f"invalid JSON: {exc.msg}", line=number, fix="rebuild the release") from None
    return rows


def source_dir_candidates(release_dir: Path, config_name: str | None = None) -> list[Path]:
    """Where a release's build config usually lives, best guess first.

    The manifest records paths exactly as the build config wrote them (relative
    to the config), so builds stay byte-identical whatever the output directory,
    and records the config's file name. ``aether build --demo --out X`` writes
    its sources to ``X_sources`` beside ``X``; the README flow writes the config
    to a folder (``cfg/``) beside the release. So: ``X_sources``, then every
    folder beside the release or in the current directory that holds a file of
    the config's name, then the current directory, the release's parent and the
    release. A candidate is only used if every recorded source file exists under
    it, and the replay then checks every file's sha256.
    """
    release_dir = Path(release_dir)
    found: list[Path] = []
    if config_name:
        for root in (release_dir.resolve().parent, Path.cwd()):
            found += sorted(p.parent for p in root.glob(f"*/{config_name}") if p.is_file())
    return [release_dir.parent / f"{release_dir.name}_sources", *found, Path.cwd(), release_dir.parent, release_dir]


def find_base_dir(manifest: dict[str, Any], release_dir: Path, candidates: Sequence[Path] = ()) -> Path:
    """The directory the manifest's relative paths are written against.

    The first of ``candidates`` (e.g. ``--base-dir``, or a ``--config`` file's
    directory), then ``source_dir_candidates(release_dir)``, under which every
    listed source file exists is used.
    """
    paths = [s["path"] for s in manifest.get("sources", [])]
    tried = [*candidates, *source_dir_candidates(release_dir, manifest.get("config_path"))]
    for base in tried:
        if all((Path(p) if Path(p).is_absolute() else base / p).exists() for p in paths):
            return base
    raise AetherError(f"cannot find the original source files listed in {release_layout(release_dir).manifest} "
                      f"(e.g. {paths[:1]}) under any of: {', '.join(str(b) for b in tried)}",
                      fix="pass --base-dir DIR, the build config's directory (`aether replay` also takes --config BUILD.yaml)")


def _resolve(base: Path, path: str) -> Path:
    return Path(path) if Path(path).is_absolute() else base / path


class _Training(NamedTuple):
    keys: dict[str, set[str]]
    templates: set[str]
    file_keys: list[int]


def _training_sets(manifest: dict[str, Any], base: Path) -> tuple[_Training, list[str]]:
    """Exclusion keys per stage rebuilt from the original training files."""
    training = manifest.get("training") or {}
    registry = training.get("registry_path")
    root = _resolve(base, registry).parent if registry else base
    keys: dict[str, set[str]] = {}
    templates: set[str] = set()
    file_keys, problems = [], []
    registry_entries: dict[str, dict[str, Any]] = {}
    if registry and _resolve(base, registry).exists():
        # Options (e.g. 2Wiki aliases) live only in the registry; read it as plain YAML/JSON.
        import yaml

        try:
            data = yaml.safe_load(_resolve(base, registry).read_text(encoding="utf-8")) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            problems.append(f"{registry}: cannot read the training registry ({exc})")
            data = {}
        files = data.get("files", []) if isinstance(data, dict) else []
        registry_entries = {str(f.get("path")): f for f in files if isinstance(f, dict)}
    for entry in training.get("files", []):
        path = _resolve(root, entry["path"])
        options = dict((registry_entries.get(entry["path"]) or {}).get("options") or {})
        if "aliases" in options:
            options["aliases"] = _resolve(root, options["aliases"])
        try:
            rows = read_original(entry["format"], path, options)
        except DataError as exc:
            problems.append(str(exc))
            file_keys.append(-1)
            continue
        file_set = {question_key(r.question) for r in rows}
        keys.setdefault(entry["stage"], set()).update(file_set)
        templates.update(_template(r.question) for r in rows)
        file_keys.append(len(file_set))
    return _Training(keys, templates, file_keys), problems


def check_training_hashes(manifest: dict[str, Any], base: Path) -> ReplayCheck:
    """Every pinned training file and the registry are byte-identical to the build's."""
    training = manifest.get("training") or {}
    registry = training.get("registry_path")
    root = _resolve(base, registry).parent if registry else base
    changed = []
    files = training.get("files", [])
    for entry in files:
        actual = _sha256(_resolve(root, entry["path"]))
        if actual != entry["sha256"]:
            changed.append(f"{entry['path']} ({entry['stage']}): recorded {entry['sha256'][:12]}..., "
                           f"now {'missing' if actual is None else actual[:12] + '...'}")
    if registry and training.get("registry_sha256"):
        actual = _sha256(_resolve(base, registry))
        if actual is None:
            changed.append(f"registry {registry}: missing (looked under {base})")
        elif actual != training["registry_sha256"]:
            changed.append(f"registry {registry}: sha256 changed")
    detail = (f"{len(files)} training file(s) unchanged" if not changed
              else f"{len(changed)} changed since the build: " + "; ".join(changed))
    return ReplayCheck("training_hashes", not changed, detail,
                       {"files": len(files), "changed": len(changed), "changed_files": changed})


def check_source_hashes(manifest: dict[str, Any], base: Path) -> ReplayCheck:
    """Every held-out source file (and option file) is byte-identical to the build's."""
    changed = []
    for source in manifest.get("sources", []):
        refs = [(source["path"], source["sha256"])]
        refs += [(ref["path"], ref["sha256"]) for ref in (source.get("option_files") or {}).values()]
        for path, sha in refs:
            actual = _sha256(_resolve(base, path))
            if actual != sha:
                changed.append(f"{path} ({source['dataset']}): {'missing' if actual is None else 'sha256 changed'}")
    detail = (f"{len(manifest.get('sources', []))} source file(s) unchanged" if not changed
              else "changed since the build: " + ", ".join(changed))
    return ReplayCheck("source_hashes", not changed, detail, {"changed": len(changed), "changed_files": changed})


def _source_rows(manifest: dict[str, Any], base: Path) -> tuple[dict[str, list[RawRow]], list[str]]:
    rows: dict[str, list[RawRow]] = {}
    problems = []
    for source in manifest.get("sources", []):
        options = dict(source.get("options") or {})
        if "aliases" in options:
            options["aliases"] = _resolve(base, str(options["aliases"]))
        try:
            rows[source["dataset"]] = read_original(source["format"], _resolve(base, source["path"]), options)
        except DataError as exc:
            problems.append(str(exc))
            rows[source["dataset"]] = []
    return rows, problems


def check_exclusion_sets(manifest: dict[str, Any], training: _Training, problems: list[str],
                         eval_rows: list[dict[str, Any]]) -> ReplayCheck:
    """Rebuilt per-stage key counts equal the manifest's, and no selected question is in them."""
    recorded = (manifest.get("training") or {})
    expected = recorded.get("unique_keys_by_stage") or {}
    rebuilt = {stage: len(keys) for stage, keys in sorted(training.keys.items())}
    union = set().union(*training.keys.values()) if training.keys else set()
    mismatches = [f"{stage}: manifest {expected.get(stage)}, replay {rebuilt.get(stage)}"
                  for stage in sorted(set(expected) | set(rebuilt)) if expected.get(stage) != rebuilt.get(stage)]
    if recorded.get("union_size") is not None and recorded["union_size"] != len(union):
        mismatches.append(f"union: manifest {recorded['union_size']}, replay {len(union)}")
    for entry, count in zip(recorded.get("files", []), training.file_keys, strict=False):
        if entry.get("unique_keys") != count:
            mismatches.append(f"{entry['path']}: manifest {entry.get('unique_keys')} unique keys, replay {count}")
    overlap = [r["id"] for r in eval_rows if question_key(r["question"]) in union]
    equivalent = [r["id"] for r in eval_rows if _template(r["question"]) in training.templates]
    ok = not (mismatches or overlap or equivalent or problems)
    parts = problems + mismatches
    if overlap:
        parts.append(f"{len(overlap)} selected question(s) overlap training exactly: {overlap[:5]}")
    if equivalent:
        parts.append(f"{len(equivalent)} selected question(s) equal training after removing punctuation: "
                     f"{equivalent[:5]}")
    detail = (f"rebuilt {len(union)} unique training keys over {len(rebuilt)} stage(s); "
              f"0 exact overlaps, 0 equivalents" if ok else "; ".join(parts))
    return ReplayCheck("exclusion_sets", ok, detail,
                       {"unique_keys_by_stage": rebuilt, "union_size": len(union),
                        "exact_overlaps": len(overlap), "equivalents": len(equivalent),
                        "mismatches": mismatches})


def check_rows(manifest: dict[str, Any], originals: dict[str, list[RawRow]],
               eval_rows: list[dict[str, Any]]) -> ReplayCheck:
    """Each eval row equals its original row: question, aliases, id, split, file label."""
    sources = {s["dataset"]: s for s in manifest.get("sources", [])}
    by_row = {d: {r.row_number: r for r in rows} for d, rows in originals.items()}
    bad = []
    for row in eval_rows:
        source = sources.get(row.get("source_dataset"))
        original = by_row.get(str(row.get("source_dataset")), {}).get(int(row.get("source_row_number") or 0))
        where = f"{row.get('id')} ({row.get('source_file')} row {row.get('source_row_number')})"
        if source is None or original is None:
            bad.append(f"{where}: no such row in the original file")
            continue
        for field, want, got in (("question", original.question, row.get("question")),
                                 ("answers", original.answers, row.get("answers")),
                                 ("source_id", original.source_id, row.get("source_id")),
                                 ("source_split", source["split"], row.get("source_split")),
                                 ("source_file", source["source_file"], row.get("source_file"))):
            if want != got:
                bad.append(f"{where}: {field} is {got!r:.60}, original has {want!r:.60}")
    detail = (f"{len(eval_rows)} rows match their original rows (question, aliases, id)" if not bad
              else f"{len(bad)} mismatch(es): " + "; ".join(bad[:5]))
    return ReplayCheck("rows_match_originals", not bad, detail,
                       {"rows": len(eval_rows), "verified": len(eval_rows) - len(bad), "mismatches": bad[:50]})


def replay_quotas(plan: Sequence[tuple[str, int, int | None]]) -> dict[str, int]:
    """The card's quota rule: the one specification (``card_quotas``) the builder and release verifier use.

    The replay keeps its own parsers and draw, but the quota rule is a
    specification, not an implementation detail to re-derive: three copies had
    drifted (6,558 of 192,109 random capped plans disagreed), so all callers now
    share this function and ``tests/benchmark/test_quota_rule.py`` property-tests it
    against a literal one-question-at-a-time deal.
    """
    quota, _unplaced = card_quotas(list(plan))
    return quota


def _order_key(row: RawRow) -> tuple[tuple[int, str], str, int]:
    sid = (0, "") if row.source_id is None else (1, row.source_id)
    return sid, question_key(row.question), row.row_number


def replay_selection(manifest: dict[str, Any], originals: dict[str, list[RawRow]],
                     training: _Training) -> tuple[dict[str, int], list[tuple[str, int]], list[str]]:
    """Quotas, then the replayed (dataset, row number) of every selected question, in release order."""
    sources = manifest.get("sources", [])
    quotas = replay_quotas([(s["dataset"], s["planned"], s.get("cap")) for s in sources])
    union = set().union(*training.keys.values()) if training.keys else set()
    listed = manifest.get("exclusions", [])
    audit_keys = {e["key"] for e in listed if e.get("origin") == "selection audit" and e.get("key")}
    reviewed_keys = {e["key"] for e in listed if e.get("origin") != "selection audit" and e.get("key")}
    reviewed_ids = {(e["dataset"], e["source_id"]) for e in listed
                    if e.get("origin") != "selection audit" and not e.get("key") and e.get("dataset")}
    pool_removed = {(r["dataset"], r["source_row_number"]) for r in manifest.get("pool_filter_removals", [])}
    eligible: set[tuple[str, int]] = set()
    seen: set[str] = set()
    for source in sources:
        dataset = source["dataset"]
        for row in sorted(originals[dataset], key=_order_key):
            key, template = question_key(row.question), _template(row.question)
            if key in union or template in training.templates or key in reviewed_keys \
                    or (dataset, row.source_id) in reviewed_ids or template in seen:
                continue
            seen.add(template)
            if (dataset, row.row_number) not in pool_removed:
                eligible.add((dataset, row.row_number))
    picked: list[tuple[str, int]] = []
    short = []
    for source in sources:
        dataset = source["dataset"]
        order = sorted(originals[dataset], key=_order_key)
        random.Random(f"{manifest['seed']}:{dataset}").shuffle(order)
        chosen = [r.row_number for r in order
                  if (dataset, r.row_number) in eligible and question_key(r.question) not in audit_keys]
        if len(chosen) < quotas[dataset]:
            short.append(f"{dataset}: quota {quotas[dataset]}, only {len(chosen)} eligible")
        picked.extend((dataset, n) for n in chosen[:quotas[dataset]])
    return quotas, picked, short


def check_sampling(manifest: dict[str, Any], originals: dict[str, list[RawRow]], training: _Training,
                   eval_rows: list[dict[str, Any]]) -> ReplayCheck:
    """The replayed draw gives the release's ids, in the same order, from the same rows."""
    quotas, picked, short = replay_selection(manifest, originals, training)
    recorded = {c["dataset"]: c.get("quota") for c in manifest.get("composition", [])}
    problems = [f"quota {d}: manifest {recorded.get(d)}, replay {q}" for d, q in quotas.items()
                if recorded.get(d) != q] + short
    expected_ids = [f"{manifest['name']}_{i:04d}" for i in range(1, len(picked) + 1)]
    actual = [(r.get("id"), r.get("source_dataset"), r.get("source_row_number")) for r in eval_rows]
    replayed = [(i, d, n) for i, (d, n) in zip(expected_ids, picked, strict=True)]
    matching = sum(1 for a, b in zip(actual, replayed, strict=False) if a == b)
    if actual != replayed:
        first = next((k for k, (a, b) in enumerate(zip(actual, replayed, strict=False)) if a != b),
                     min(len(actual), len(replayed)))
        got = actual[first] if first < len(actual) else "end of eval.jsonl"
        want = replayed[first] if first < len(replayed) else "end of the replay"
        problems.append(f"first difference at position {first + 1}: release has {got}, replay gives {want}; "
                        f"{len(actual)} released vs {len(replayed)} replayed rows")
    detail = (f"{len(replayed)} ids replayed in the same order (seed {manifest['seed']}, quotas "
              f"{'/'.join(str(q) for q in quotas.values())})" if not problems else "; ".join(problems))
    return ReplayCheck("sampling_replay", not problems, detail,
                       {"quotas": quotas, "replayed": len(replayed), "released": len(actual),
                        "matching_in_order": matching})


def default_output(release_dir: Path) -> Path:
    """``<release>.independent_validation.json`` beside the release.

    Not inside it: the release is frozen and its verifier refuses files that
    ``checksums.sha256`` does not list.
    """
    release_dir = Path(release_dir).resolve()
    return release_dir.with_name(f"{release_dir.name}.{OUTPUT}")


def replay_report(release_dir: Path, *, base_dir: Path | None = None, config: Path | None = None
                  ) -> tuple[ReplayReport, bytes]:
    """Run every independent check; returns the report and the canonical bytes of independent_validation.json.

    The bytes name no local directory (a release built twice anywhere is
    byte-identical) and bind the manifest they validated by
    ``manifest_core_sha256``: the manifest minus its ``files`` map, so the
    manifest can record this report's own sha256 without a cycle.
    """
    release_dir = Path(release_dir)
    if not release_dir.is_dir():
        raise DataError(release_dir, "no such release directory",
                        fix="pass the directory `aether build` wrote (it holds the manifest and the eval file)")
    layout = release_layout(release_dir)
    manifest = _read_json(layout.manifest)
    eval_rows = _read_eval(layout.eval)
    hints = [Path(p) for p in (base_dir, Path(config).resolve().parent if config is not None else None)
             if p is not None]
    base = find_base_dir(manifest, release_dir, hints)
    training, training_problems = _training_sets(manifest, base)
    originals, source_problems = _source_rows(manifest, base)
    checks = [check_training_hashes(manifest, base), check_source_hashes(manifest, base),
              check_exclusion_sets(manifest, training, training_problems, eval_rows)]
    if source_problems:
        checks.append(ReplayCheck("rows_match_originals", False, "; ".join(source_problems), {}))
        checks.append(ReplayCheck("sampling_replay", False, "original source files unreadable", {}))
    else:
        checks.append(check_rows(manifest, originals, eval_rows))
        checks.append(check_sampling(manifest, originals, training, eval_rows))
    data = pretty_json({
        "schema_version": 1, "release": manifest.get("name"), "data_sha256": manifest.get("data_sha256"),
        "manifest_core_sha256": manifest_core_sha256(manifest),
        "ok": all(c.ok for c in checks),
        "shared_with_builder": ["aethersearch.text.question_key",
                                "verify_release_template.card_quotas (the quota rule's one specification)"],
        "checks": [{"name": c.name, "status": "OK" if c.ok else "FAIL", "detail": c.detail, "counts": c.counts}
                   for c in checks]})
    return ReplayReport(release_dir, checks, base), data


def replay_release(release_dir: Path, *, base_dir: Path | None = None, output: Path | None = None,
                   config: Path | None = None) -> ReplayReport:
    """Run every independent check, write the report to ``output`` (beside the release) and return it.

    The sources are looked up under ``base_dir``, then ``config``'s directory,
    then ``source_dir_candidates``. The report goes to ``output`` or, by default,
    ``default_output(release_dir)``; the copy made at build time is inside the
    release. A broken release is reported through FAIL checks, never by raising; only a
    missing manifest or unreadable eval file (nothing to check) raises DataError.
    """
    release_dir = Path(release_dir)
    target = Path(output) if output is not None else default_output(release_dir)
    if target.resolve().is_relative_to(release_dir.resolve()):
        raise ConfigError(f"refusing to write the replay report {target} inside the release {release_dir}",
                          fix="a release is frozen (its verifier refuses unlisted files); pass an --out "
                              "path outside it, or omit --out to write it beside the release")
    report, data = replay_report(release_dir, base_dir=base_dir, config=config)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(target, data)
    return ReplayReport(release_dir, report.checks, target)
