"""Independent replay validation of a release (the card's step 6).

Why: a verifier that reuses the builder's code can only confirm the builder
agrees with itself. This module re-reads the ORIGINAL files the manifest lists
with its own parsers (``replay_sources``), shares nothing with the builder but
``aethersearch.text.question_key``, and checks:

* ``training_hashes``  - every training file still has its recorded sha256, and the registry
                         still pins the same files (its content hash without ``data_root``);
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

from aethersearch.errors import AetherError, ConfigError, DataError
from aethersearch.jsonl import atomic_write_bytes
from aethersearch.release.replay_readers import RawRow, read_original
from aethersearch.release.verify_release_template import card_quotas, manifest_core_sha256, pretty_json
from aethersearch.release_layout import release_layout
from aethersearch.text import question_key

__all__ = ["InputRoots", "OUTPUT", "ReplayCheck", "ReplayReport", "check_exclusion_sets", "check_rows",
    "check_sampling", "check_source_hashes", "check_training_hashes", "default_output", "find_roots",
    "replay_quotas", "replay_release", "replay_report", "replay_selection", "source_dir_candidates"]

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

    The manifest records no location: source paths are relative to the config's
    ``data_root`` and the config's file name is recorded (``config_path``). ``aether
    build --demo --out X`` writes its config to ``X_sources`` beside ``X``; the README
    flow writes it to a folder (``cfg/``) beside the release. So: ``X_sources``, then
    every folder beside the release or in the current directory that holds a file of
    the config's name, then the current directory, the release's parent and the release.
    """
    release_dir = Path(release_dir)
    found: list[Path] = []
    if config_name:
        for root in (release_dir.resolve().parent, Path.cwd()):
            found += sorted(p.parent for p in root.glob(f"*/{config_name}") if p.is_file())
    return [release_dir.parent / f"{release_dir.name}_sources", *found, Path.cwd(), release_dir.parent, release_dir]


class InputRoots(NamedTuple):
    """Where the inputs are on this machine: never recorded in the release, found again here."""

    config_dir: Path  # the build config's folder: config-side files (the training registry) start here
    data_dir: Path  # the config's ``data_root``: the recorded source paths start here


def _data_root(config_dir: Path, config_name: str | None) -> Path:
    """The ``data_root`` the build config in ``config_dir`` names (read as plain YAML), else ``config_dir``."""
    import yaml

    path = config_dir / config_name if config_name else None
    if path is None or not path.is_file():
        return config_dir
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return config_dir
    root = data.get("data_root") if isinstance(data, dict) else None
    return config_dir / root if isinstance(root, str) else config_dir


def find_roots(manifest: dict[str, Any], release_dir: Path, candidates: Sequence[Path] = (),
               config: Path | None = None) -> InputRoots:
    """The build config's folder and data root for this release.

    ``config`` (``--config``: its folder and ``data_root``) and ``candidates``
    (``--base-dir``: the build config's folder) come first and are
    used as soon as they hold the build config or every source file; then
    ``source_dir_candidates``: the first under whose data root every recorded source
    file exists, else the first holding the build config and at least one of them
    (the replay then reports each absent file as missing, not as changed).
    """
    paths = [s["path"] for s in manifest.get("sources", [])]
    name = manifest.get("config_path")
    explicit = [InputRoots(config.parent, _data_root(config.parent, config.name))] if config is not None else []
    explicit += [InputRoots(b, _data_root(b, name)) for b in candidates]
    guessed = [InputRoots(b, _data_root(b, name)) for b in source_dir_candidates(release_dir, name)]

    def present(roots: InputRoots) -> int:
        return sum(_resolve(roots.data_dir, p).exists() for p in paths)

    def has_config(roots: InputRoots) -> bool:
        return bool(name) and (roots.config_dir / str(name)).is_file()

    if config is not None:
        return explicit[0]
    for roots in explicit:
        if has_config(roots) or present(roots) == len(paths):
            return roots
    for roots in guessed:
        if present(roots) == len(paths):
            return roots
    for roots in guessed:
        if has_config(roots) and present(roots):
            return roots
    tried = [*explicit, *guessed]
    raise AetherError(f"cannot find the original source files listed in {release_layout(release_dir).manifest} "
                      f"(e.g. {paths[:1]}, relative to the build config's data_root) under any of: "
                      f"{', '.join(str(r.data_dir) for r in tried)}",
                      fix="pass --base-dir DIR, the build config's directory (`aether replay` also takes "
                          "--config BUILD.yaml)")


def _resolve(base: Path, path: str) -> Path:
    return Path(path) if Path(path).is_absolute() else base / path


def _registry(manifest: dict[str, Any], roots: InputRoots) -> tuple[Path | None, dict[str, Any] | None, Path]:
    """The registry file, its content (None if unreadable) and the root its file paths start from."""
    import yaml

    registry = (manifest.get("training") or {}).get("registry_path")
    if not registry:
        return None, None, roots.data_dir
    path = _resolve(roots.config_dir, registry)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return path, None, path.parent
    if not isinstance(data, dict):
        return path, None, path.parent
    root = data.get("data_root")
    return path, data, path.parent / root if isinstance(root, str) else path.parent


class _Training(NamedTuple):
    keys: dict[str, set[str]]
    templates: set[str]
    file_keys: list[int]


def _training_sets(manifest: dict[str, Any], roots: InputRoots) -> tuple[_Training, list[str]]:
    """Exclusion keys per stage rebuilt from the original training files."""
    training = manifest.get("training") or {}
    registry, data, root = _registry(manifest, roots)
    keys: dict[str, set[str]] = {}
    templates: set[str] = set()
    file_keys, problems = [], []
    if registry is not None and data is None:
        problems.append(f"{training.get('registry_path')}: cannot read the training registry at {registry}")
    # Options (e.g. 2Wiki aliases) live only in the registry.
    files = (data or {}).get("files", [])
    registry_entries = {str(f.get("path")): f for f in files if isinstance(f, dict)} if isinstance(files, list) else {}
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


def check_training_hashes(manifest: dict[str, Any], roots: InputRoots) -> ReplayCheck:
    """Every pinned training file is byte-identical to the build's, and the registry pins the same files."""
    training = manifest.get("training") or {}
    registry, data, root = _registry(manifest, roots)
    changed = []
    files = training.get("files", [])
    for entry in files:
        actual = _sha256(_resolve(root, entry["path"]))
        if actual != entry["sha256"]:
            changed.append(f"{entry['path']} ({entry['stage']}): recorded {entry['sha256'][:12]}..., "
                           f"now {'missing' if actual is None else actual[:12] + '...'}")
    recorded = training.get("registry_content_sha256")
    if registry is not None and recorded:
        if not registry.exists():
            changed.append(f"registry {training['registry_path']}: missing (looked for {registry})")
        elif data is None:
            changed.append(f"registry {training['registry_path']}: unreadable")
        else:
            content = {k: v for k, v in data.items() if k != "data_root"}
            if hashlib.sha256(pretty_json(content)).hexdigest() != recorded:
                changed.append(f"registry {training['registry_path']}: its content (files, pins) changed")
    detail = (f"{len(files)} training file(s) unchanged" if not changed
              else f"{len(changed)} changed since the build: " + "; ".join(changed))
    return ReplayCheck("training_hashes", not changed, detail,
                       {"files": len(files), "changed": len(changed), "changed_files": changed})


def check_source_hashes(manifest: dict[str, Any], roots: InputRoots) -> ReplayCheck:
    """Every held-out source file (and option file) is byte-identical to the build's."""
    changed = []
    for source in manifest.get("sources", []):
        refs = [(source["path"], source["sha256"])]
        refs += [(ref["path"], ref["sha256"]) for ref in (source.get("option_files") or {}).values()]
        for path, sha in refs:
            actual = _sha256(_resolve(roots.data_dir, path))
            if actual != sha:
                changed.append(f"{path} ({source['dataset']}): {'missing' if actual is None else 'sha256 changed'}")
    detail = (f"{len(manifest.get('sources', []))} source file(s) unchanged" if not changed
              else "changed since the build: " + ", ".join(changed))
    return ReplayCheck("source_hashes", not changed, detail, {"changed": len(changed), "changed_files": changed})


def _source_rows(manifest: dict[str, Any], roots: InputRoots) -> tuple[dict[str, list[RawRow]], list[str]]:
    rows: dict[str, list[RawRow]] = {}
    problems = []
    for source in manifest.get("sources", []):
        options = dict(source.get("options") or {})
        if "aliases" in options:
            options["aliases"] = _resolve(roots.data_dir, str(options["aliases"]))
        try:
            rows[source["dataset"]] = read_original(source["format"], _resolve(roots.data_dir, source["path"]),
                                                    options)
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
    specification, not an implementation detail to re-derive: separate copies
    drift (three did: 6,558 of 192,109 random capped plans disagreed), so all callers
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
    hints = [Path(base_dir)] if base_dir is not None else []
    roots = find_roots(manifest, release_dir, hints, config=Path(config).resolve() if config is not None else None)
    training, training_problems = _training_sets(manifest, roots)
    originals, source_problems = _source_rows(manifest, roots)
    checks = [check_training_hashes(manifest, roots), check_source_hashes(manifest, roots),
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
    return ReplayReport(release_dir, checks, roots.data_dir), data


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
