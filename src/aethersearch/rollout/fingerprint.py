"""The settings fingerprint (run.json) and the release checks the runner can make without gold.

Why here: a run may only be resumed with exactly the settings it started with, and
two checkpoints may only be compared when their contract fields agree. The runner
never opens ``eval.jsonl``: it checks the rollout projection's sha256 against the
release's ``checksums.sha256`` (and reads the release id and data hash from
``manifest.json``), so a tampered or half-copied release is refused. The full
verifier (``aethersearch.release.verify``) is run one layer up by ``aether eval``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from aethersearch import __version__
from aethersearch.errors import DataError, IntegrityError
from aethersearch.jsonl import iter_jsonl, loads, sha256_file, validate_row
from aethersearch.records import (
    Budget,
    Decoding,
    RolloutQuestion,
    RunFingerprint,
    RunLimits,
    SandboxContract,
)
from aethersearch.release_layout import release_layout

__all__ = ["RESUME_IGNORED", "ROLLOUT_FILE", "ReleaseInfo", "build_fingerprint", "fingerprint_diff",
    "load_rollout_questions", "release_info", "rollout_file_info"]

ROLLOUT_FILE = "rollout_questions.jsonl"
#: Fields that may differ on resume: the same model served at another address, run with other
#: parallelism or patience, is the same run (run.json is rewritten with the latest values).
#: ``profile`` is the profile's description (where the file was, where each limit came from); its content is
#: ``profile_sha256`` and the budget it gave, both compared, so a resume may name the same file by another path.
RESUME_IGNORED = frozenset({"endpoint", "concurrency", "limits", "profile"})

_ID_KEYS = ("release_id", "name", "id")
_DATA_KEYS = ("data_sha256", "eval_sha256", "canonical_data_sha256", "eval_jsonl_sha256")


class ReleaseInfo(NamedTuple):
    """What the runner knows of a release: its id, data hash and the rollout file."""

    release_id: str
    data_sha256: str
    rollout_path: Path
    rollout_sha256: str


def _find(manifest: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if isinstance(manifest.get(key), str) and manifest[key]:
            return manifest[key]
    release = manifest.get("release")
    if isinstance(release, dict):
        return _find(release, keys)
    return None


def _checksums(path: Path) -> dict[str, str]:
    sums: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        digest, sep, name = line.partition("  ")
        if not sep:
            digest, _, name = line.partition(" *")
        if len(digest) != 64 or not name:
            raise DataError(path, "not a sha256sum line", line=number,
                            fix="regenerate the release (aether build)")
        sums[name.strip()] = digest
    return sums


def release_info(release_dir: str | Path) -> ReleaseInfo:
    """Check ``rollout_questions.jsonl`` against ``checksums.sha256`` and read the manifest.

    Raises IntegrityError (naming the file) when the checksum is missing or differs.
    """
    release = Path(release_dir)
    layout = release_layout(release)  # the release's own file names, read from its manifest (no gold)
    rollout, sums_path, manifest_path = layout.rollout, layout.checksums, layout.manifest
    for needed in (rollout, sums_path, manifest_path):
        if not needed.is_file():
            raise DataError(needed, "missing from the release directory",
                            fix="point at a release built by `aether build` (or rebuild it)")
    sums = _checksums(sums_path)
    if rollout.name not in sums:
        raise IntegrityError(f"{sums_path}: no checksum for {rollout.name}",
                             fix="rebuild the release; the runner refuses unverifiable questions")
    actual = sha256_file(rollout)
    if actual != sums[rollout.name]:
        raise IntegrityError(f"{rollout}: sha256 {actual[:16]}… differs from checksums.sha256 "
                             f"({sums[rollout.name][:16]}…): the release fails verification",
                             fix="restore the release from its source or rebuild it; run `aether verify`")
    try:
        manifest = loads(manifest_path.read_bytes())
    except ValueError as exc:
        raise DataError(manifest_path, f"invalid JSON: {exc}", fix="rebuild the release") from None
    release_id = _find(manifest, _ID_KEYS) or release.name
    data_sha = _find(manifest, _DATA_KEYS) or sums.get(layout.eval.name)
    if not data_sha:
        raise DataError(manifest_path, "no data sha256 (expected one of " + ", ".join(_DATA_KEYS) + ")",
                        fix="rebuild the release")
    return ReleaseInfo(str(release_id), str(data_sha), rollout, actual)


def rollout_file_info(path: str | Path) -> ReleaseInfo:
    """A bare rollout file outside a release (programmatic use): its own hash stands in for both."""
    path = Path(path)
    digest = sha256_file(path)
    return ReleaseInfo(path.stem, digest, path, digest)


def load_rollout_questions(path: str | Path) -> list[RolloutQuestion]:
    """Read ``rollout_questions.jsonl`` strictly: exactly ``{id, question}``, unique ids."""
    questions: list[RolloutQuestion] = []
    seen: dict[str, int] = {}
    for number, value in iter_jsonl(path):
        row = validate_row(path, number, value, RolloutQuestion)
        if row.id in seen:
            raise DataError(path, f"duplicate id {row.id!r} (first on line {seen[row.id]})",
                            line=number, fix="ids must be unique; rebuild the release")
        seen[row.id] = number
        questions.append(row)
    return questions


def build_fingerprint(
    info: ReleaseInfo,
    *,
    question_count: int,
    agent: Any,
    budget: Budget,
    decoding: Decoding,
    endpoint: str | None,
    model: str | None,
    corpus_hash: str | None,
    index_hash: str | None,
    environment: str = "search",
    retrieval_topk: int | None = None,
    concurrency: int | None = None,
    limits: RunLimits | None = None,
    served_model: dict[str, Any] | None = None,
    sent_decoding: dict[str, Any] | None = None,
    samples: int = 1,
    sandbox: SandboxContract | None = None,
    retrieval_mode_aliases: dict[str, str] | None = None,
    profile: dict[str, Any] | None = None,
) -> RunFingerprint:
    """The run.json record for these settings (decoding as the agent will really send it).

    Callers outside tests go through :func:`aethersearch.rollout.session.prepare_run`,
    which fills every field the same way for the CLI, the Python API and the probes.
    """
    return RunFingerprint(
        release_id=info.release_id, release_data_sha256=info.data_sha256,
        rollout_sha256=info.rollout_sha256, question_count=question_count,
        corpus_hash=corpus_hash, index_hash=index_hash, environment=environment,  # type: ignore[arg-type]
        agent=agent.name, agent_config=agent.config(),
        prompt_template_hash=agent.prompt_template_hash(), budget=budget,
        endpoint=endpoint, model=model, decoding=agent.effective_decoding(decoding),
        retrieval_topk=retrieval_topk, software_version=__version__, concurrency=concurrency,
        limits=limits, served_model=served_model, sent_decoding=sent_decoding, samples=samples,
        sandbox=sandbox,
        retrieval_mode_aliases=retrieval_mode_aliases, profile=profile,
        profile_sha256=None if profile is None else str(profile["sha256"]),
    )


def fingerprint_diff(stored: RunFingerprint, current: RunFingerprint,
                     ignore: frozenset[str] = RESUME_IGNORED) -> list[str]:
    """Human-readable ``field: stored -> current`` lines for every field that differs."""
    a, b = stored.model_dump(mode="json"), current.model_dump(mode="json")
    return [f"{key}: {a.get(key)!r} -> {b.get(key)!r}" for key in sorted(set(a) | set(b))
            if key not in ignore and a.get(key) != b.get(key)]
