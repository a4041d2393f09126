"""The release: its manifest schema and the writer of every release file.

Why a fixed schema: issue 3's independent replay re-reads the *original* source
files with its own parsers and compares, so the manifest must carry everything
that replay needs (paths relative to the data root, formats, splits, hashes, plan, quotas, seed,
training registry, final exclusions, pool-filter removals, resolved config) and
keep those names stable. Every file is canonical (sorted keys, ``\\n`` line
ends, no timestamps, no floats), so identical inputs give identical bytes.
"""

from __future__ import annotations

import importlib
import json
import os
import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field, ValidationError

from aethersearch.errors import DataError
from aethersearch.jsonl import atomic_write_bytes, encode_jsonl, sha256_bytes
from aethersearch.records import SCHEMA_VERSION, DiagnosticsRow, EvalRow, Record, RolloutQuestion
from aethersearch.release import verify_release_template as standalone
from aethersearch.release_layout import LEGACY_NAMES, MANIFEST_SUFFIX, release_layout

__all__ = ["CHECKSUMS", "ExclusionRecord", "FileDigest", "FileRef", "HINTFREE_MANIFEST_KIND", "HintfreeManifest",
    "MANIFEST_KIND", "MANIFEST_MODELS", "Manifest", "PoolFilterRemoval", "SAMPLING_DESCRIPTION", "SourceRecord",
    "TrainingFileRecord", "TrainingSummary", "attribution", "checksums_text", "encode_release_rows",
    "exclusion_audit_bytes", "hintfree_corpus_hash", "is_hintfree_release", "load_hintfree_manifest",
    "load_manifest", "manifest_bytes", "manifest_core_sha256", "row_digests", "row_id", "verifier_source",
    "write_release_files"]

MANIFEST_KIND = "aethersearch-benchmark-release"
CHECKSUMS = "checksums.sha256"


class FileRef(Record):
    """A file by its path relative to the config's data root (as written) and its sha256."""

    path: str
    sha256: str


class SourceRecord(Record):
    """One source: where it is, how it was read, its plan and what was taken."""

    dataset: str
    format: str
    path: str
    split: str
    source_file: str
    sha256: str
    options: dict[str, Any] = Field(default_factory=dict)
    option_files: dict[str, FileRef] = Field(default_factory=dict)
    rows_read: int
    candidates: int
    skipped: dict[str, int] = Field(default_factory=dict)
    eligible: int
    planned: int
    cap: int | None
    quota: int
    selected: int


class TrainingFileRecord(Record):
    """One pinned training file and what it contributed."""

    stage: str
    release: str
    role: str
    path: str
    format: str
    sha256: str
    rows: int
    questions: int
    unique_keys: int


class TrainingSummary(Record):
    """The training registry as used: file hashes and unique normalised keys per stage.

    ``registry_content_sha256`` is the sha256 of the registry's canonical JSON without
    its ``data_root`` locator (``training.registry_content_sha256``), so it names what
    the registry pins, not where its files were; file ``path``s are relative to that root.
    """

    registry_path: str | None
    registry_content_sha256: str | None
    files: list[TrainingFileRecord] = Field(default_factory=list)
    unique_keys_by_stage: dict[str, int] = Field(default_factory=dict)
    unique_templates_by_stage: dict[str, int] = Field(default_factory=dict)
    union_size: int = 0
    union_templates: int = 0


class ExclusionRecord(Record):
    """One entry of the final exclusion list: a normalised key (or source id) and its reason."""

    key: str | None = None
    dataset: str | None = None
    source_id: str | None = None
    reason: str
    origin: str


class PoolFilterRemoval(Record):
    """A candidate the pool filter removed before sampling."""

    dataset: str
    source_row_number: int
    source_id: str | None
    key: str
    reason: str


class FileDigest(Record):
    """A release file: its sha256 and line count (every file but the manifest and checksums has one)."""

    sha256: str
    rows: int


class Manifest(Record):
    """``manifest.json``: everything needed to verify and independently replay the release."""

    schema_version: int = SCHEMA_VERSION
    kind: str = MANIFEST_KIND
    name: str
    file_stem: str
    layout: dict[str, str]
    revision: str
    description: str = ""
    software_version: str
    seed: int
    sampling: str
    row_number_convention: str
    question_count: int
    composition: list[dict[str, Any]]
    sources: list[SourceRecord]
    training: TrainingSummary
    isolation: dict[str, Any]
    exclusions: list[ExclusionRecord] = Field(default_factory=list)
    pool_filter_removals: list[PoolFilterRemoval] = Field(default_factory=list)
    audit: dict[str, Any] | None = None
    config: dict[str, Any]
    config_path: str | None = None
    files: dict[str, FileDigest]
    data_sha256: str
    rollout_sha256: str
    row_sha256: list[str]
    deviations: list[str] = Field(default_factory=list)


HINTFREE_MANIFEST_KIND = "aethersearch-hintfree-release"
M = TypeVar("M", bound=Record)


class HintfreeManifest(Record):
    """``manifest.json`` of a hint-free (WebDetective) release written by ``construct/``.

    It lives here, beside ``Manifest``, so the verifier (this layer) can check
    both kinds of release without importing the construction code above it.
    """

    kind: str = HINTFREE_MANIFEST_KIND
    schema_version: int = SCHEMA_VERSION
    name: str
    release_id: str
    source_dataset: str
    question_count: int
    composition: list[dict[str, Any]]
    data_sha256: str
    rollout_sha256: str
    row_sha256: list[str]
    exclusions: list[dict[str, Any]] = Field(default_factory=list)
    sources: list[dict[str, Any]]
    construction: dict[str, Any]
    corpus: dict[str, Any]
    graph: dict[str, Any]
    files: dict[str, str]
    sandbox: str


# Manifest schema by ``kind``: the verifier validates each release against its own.
MANIFEST_MODELS: dict[str, type[Record]] = {MANIFEST_KIND: Manifest, HINTFREE_MANIFEST_KIND: HintfreeManifest}


SAMPLING_DESCRIPTION = (
    "per source: all candidates read, sorted by (source_id with null first, question_key, source_row_number), "
    "shuffled with random.Random(f'{seed}:{dataset}') (CPython Mersenne Twister, string seed via SHA-512); "
    "the first `quota` eligible candidates in that order are selected, kept in draw order; sources in config order"
)


def _manifest_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DataError(path, f"cannot read: {exc.strerror}", fix="point at a release directory") from None


def _validated(model: type[M], path: Path, data: bytes, what: str, command: str) -> M:
    """``data`` as ``model``; a DataError naming the first invalid field and the command that rebuilds it."""
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise DataError(path, f"not a {what}: {first['msg']}", field=".".join(str(p) for p in first["loc"]) or None,
                        fix=f"rebuild the release with `{command}`") from None


def load_manifest(release_dir: str | Path) -> Manifest:
    """Read and validate the release's manifest (for consumers: rollout, scoring, replay)."""
    path = release_layout(release_dir).manifest
    manifest = _validated(Manifest, path, _manifest_bytes(path), "release manifest", "aether build")
    if manifest.kind != MANIFEST_KIND:
        raise DataError(path, f"kind {manifest.kind!r} is not {MANIFEST_KIND!r}", field="kind",
                        fix="point at a benchmark release directory")
    return manifest


def load_hintfree_manifest(release_dir: str | Path) -> HintfreeManifest | None:
    """The validated manifest of a hint-free release; ``None`` when the release is of another kind.

    Why a reader of its own: whether a release is hint-free decides where it may be
    evaluated (only inside the masked sandbox, ``aethersearch.sandbox_eval``), and its
    ``corpus.corpus_hash`` which pages that sandbox must serve.
    """
    path = release_layout(release_dir).manifest
    data = _manifest_bytes(path)
    try:
        kind = json.loads(data).get("kind")
    except (ValueError, AttributeError):
        raise DataError(path, "not a JSON object", fix="rebuild the release") from None
    if kind != HINTFREE_MANIFEST_KIND:
        return None
    return _validated(HintfreeManifest, path, data, "hint-free release manifest", "aether construct")


def is_hintfree_release(release_dir: str | Path) -> bool:
    """Whether the release is a hint-free (WebDetective) release, by its manifest's ``kind``.

    A directory with no manifest is no hint-free release: the run path's own release
    check then names what is missing (one message for every kind of release).
    """
    root = Path(release_dir)
    if not (root / LEGACY_NAMES["manifest"]).is_file() and not any(root.glob(f"*{MANIFEST_SUFFIX}")):
        return False
    return load_hintfree_manifest(root) is not None


def hintfree_corpus_hash(release_dir: str | Path) -> str | None:
    """The corpus hash a hint-free release was constructed from (``corpus.corpus_hash``); None for other kinds."""
    manifest = load_hintfree_manifest(release_dir)
    value = manifest.corpus.get("corpus_hash") if manifest is not None else None
    return str(value) if value else None


def row_id(name: str, index: int) -> str:
    """``<name>_0001`` ... (at least four digits)."""
    return f"{name}_{index:04d}"


def verifier_source() -> bytes:
    """The standalone, standard-library-only verifier copied into every release."""
    return resources.files("aethersearch.release").joinpath("verify_release_template.py").read_bytes()


def _citation(fmt: str) -> str:
    """The ``Citation:`` paragraph of a source adapter's module docstring."""
    from aethersearch.sources import FORMATS

    if fmt not in FORMATS:
        return ""
    text = importlib.import_module(FORMATS[fmt].partition(":")[0]).__doc__ or ""
    match = re.search(r"Citation:(.*?\))[.;]", text, flags=re.S)  # up to the reference's closing ")."
    return " ".join(match.group(1).split()) if match else ""


def attribution(manifest: Manifest, sources: Sequence[Any]) -> str:
    """ATTRIBUTION.md: each source file, its citation and license, and the training files excluded."""
    lines = [f"# Attribution for {manifest.name}", "",
             "The questions and answers in this release are unedited copies from these public files:", ""]
    for record, config in zip(manifest.sources, sources, strict=True):
        fmt_citation = _citation(record.format)
        lines += [f"## {record.dataset} ({record.split})", "",
                  f"- file: `{record.source_file}` (format `{record.format}`, sha256 `{record.sha256}`)",
                  f"- citation: {config.citation or fmt_citation or 'see the source'}",
                  *([f"- file format: {fmt_citation}"] if config.citation and fmt_citation else []),
                  f"- license: {config.license or 'see the source'}", ""]
    if manifest.training.files:
        lines += ["## Training files used only for exclusion", ""]
        lines += [f"- {f.stage} / {f.release} ({f.role}): `{f.path}` (format `{f.format}`, sha256 `{f.sha256}`)"
                  for f in manifest.training.files]
        lines.append("")
    return "\n".join(lines)


def encode_release_rows(eval_rows: Sequence[EvalRow], diagnostics: Sequence[DiagnosticsRow]
                        ) -> dict[str, bytes]:
    """Canonical bytes of the three row files by legacy name (the rollout file is the eval file's projection)."""
    rollout = [RolloutQuestion(id=row.id, question=row.question) for row in eval_rows]
    return {"eval.jsonl": encode_jsonl(eval_rows), "rollout_questions.jsonl": encode_jsonl(rollout),
            "diagnostics.jsonl": encode_jsonl(diagnostics)}


def row_digests(eval_bytes: bytes) -> list[str]:
    """sha256 of each eval line (without its newline), in order: lets the verifier name a changed row."""
    return [sha256_bytes(line) for line in eval_bytes.split(b"\n") if line]


def checksums_text(files: dict[str, bytes]) -> str:
    """``sha256sum -c`` compatible lines for every file, sorted by name."""
    return "".join(f"{sha256_bytes(data)}  {name}\n" for name, data in sorted(files.items()))


def write_release_files(directory: Path, files: dict[str, bytes]) -> None:
    """Write every file atomically, then ``checksums.sha256`` last."""
    for name, data in sorted(files.items()):
        atomic_write_bytes(directory / name, data)
    atomic_write_bytes(directory / CHECKSUMS, checksums_text(files).encode("utf-8"))
    for name in [*files, CHECKSUMS]:
        os.chmod(directory / name, 0o644)  # a published release is world-readable (mkstemp makes 0600)


def manifest_bytes(manifest: Manifest) -> bytes:
    """Canonical, indented manifest JSON (the standalone verifier's ``pretty_json``, checked byte for byte)."""
    return standalone.pretty_json(manifest.model_dump(mode="json"))


def manifest_core_sha256(manifest: Manifest) -> str:
    """The hash of the manifest minus ``files`` that independent_validation.json binds."""
    return standalone.manifest_core_sha256(manifest.model_dump(mode="json"))


def exclusion_audit_bytes(audit: dict[str, Any]) -> bytes:
    """Canonical, indented exclusion audit JSON (checked byte for byte by the verifiers)."""
    return standalone.pretty_json(audit)
