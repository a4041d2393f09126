"""Bind a score to the exact gold it was computed with.

Why: a score is a function of the run *and* of the gold aliases. Editing two
aliases in ``eval.jsonl`` once moved NQ EM from 40.9 to 54.5 and the scorer
(which checked only the release id and the question count) said nothing. So
before anything is scored:

1. every file listed in the release's ``checksums.sha256`` must match it (the
   release is what its builder wrote);
2. ``eval.jsonl`` must be listed there, and match the manifest's ``data_sha256``
   when the manifest records one;
3. ``eval.jsonl`` must hash to the ``release_data_sha256`` the run recorded in
   ``run.json`` when it was rolled out. This is the check that still holds when
   someone edits the gold *and* regenerates the checksums: the run pinned the
   gold before anyone could touch it.

Each refusal names the file, the expected and the found sha256, and the fix.
The hashes that passed are recorded in ``scores.json`` (:class:`GoldBinding`),
together with the hashes of ``run.json`` and the traces, so a reader can tell
whether a ``scores.json`` still describes the files beside it.
"""

from __future__ import annotations

import re
from pathlib import Path

from aethersearch.errors import DataError, IntegrityError
from aethersearch.jsonl import loads, sha256_bytes, sha256_file
from aethersearch.records import Record, RunFingerprint
from aethersearch.release_layout import release_layout

__all__ = ["CHECKSUMS_FILE", "EVAL_FILE", "GoldBinding", "MANIFEST_FILE", "RUN_FILE", "bind_gold", "read_checksums",
    "verify_release_files"]

CHECKSUMS_FILE = "checksums.sha256"
MANIFEST_FILE = "manifest.json"
EVAL_FILE = "eval.jsonl"
RUN_FILE = "run.json"

_SUM_LINE = re.compile(r"([0-9a-f]{64}) [ *](.+)")
_RESTORE = ("restore the release from its published source (or rebuild it with `aether build`), "
            "then check it with `aether verify {release}`")


class GoldBinding(Record):
    """The exact inputs a ``scores.json`` was computed from (all sha256 hex digests)."""

    release_dir: str
    release_id: str | None
    eval_file: str = EVAL_FILE
    eval_sha256: str
    checksums_sha256: str
    manifest_sha256: str | None
    run_json_sha256: str | None
    """None for a hand-written ``predictions.jsonl`` run without ``run.json`` (nothing to bind to)."""
    run_file: str
    """The scored run file's name (``traces.jsonl`` or ``predictions.jsonl``)."""
    run_file_sha256: str


def read_checksums(path: Path) -> dict[str, str]:
    """``sha256sum``-format lines of a release's checksum file, as ``{file name: digest}``."""
    sums: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        match = _SUM_LINE.fullmatch(line)
        if match is None:
            raise DataError(path, "not a 'sha256  name' line", line=number,
                            fix="restore checksums.sha256 from the release's source (or rebuild the release)")
        sums[match.group(2)] = match.group(1)
    return sums


def _mismatch(path: Path, expected: str, found: str, recorded_in: str, fix: str) -> IntegrityError:
    return IntegrityError(f"{path}: sha256 {found} does not match {expected} recorded in {recorded_in}; "
                          "refusing to score against gold that is not the gold the run was made for", fix=fix)


def _eval(release_dir: Path) -> Path:
    """The release's gold file, named by its manifest (``eval.jsonl`` in legacy releases)."""
    return release_layout(release_dir).eval


def _manifest_path(release_dir: Path) -> Path:
    return release_layout(release_dir).manifest


def _manifest(release_dir: Path) -> tuple[dict[str, object] | None, str | None]:
    path = _manifest_path(release_dir)
    if not path.is_file():
        return None, None
    data = path.read_bytes()
    try:
        value = loads(data)
    except ValueError as exc:
        raise DataError(path, f"invalid JSON: {exc}", fix=_RESTORE.format(release=release_dir)) from None
    return (value if isinstance(value, dict) else None), sha256_bytes(data)


def verify_release_files(release_dir: Path) -> tuple[str, str]:
    """Checks 1 and 2: every checksum matches and ``eval.jsonl`` is pinned; returns (eval sha256, checksums sha256)."""
    sums_path = release_dir / CHECKSUMS_FILE
    eval_name = _eval(release_dir).name
    if not sums_path.is_file():
        raise IntegrityError(f"{sums_path} is missing: the gold in {release_dir / eval_name} cannot be verified",
                             fix="score against a release written by `aether build` or `aether construct` "
                                 "(they write checksums.sha256), or restore the file from the release's source")
    sums = read_checksums(sums_path)
    if eval_name not in sums:
        raise IntegrityError(f"{sums_path} has no line for {eval_name}: the gold cannot be verified",
                             fix=_RESTORE.format(release=release_dir))
    eval_sha = ""
    for name, expected in sorted(sums.items()):
        path = release_dir / name
        if not path.is_file():
            raise IntegrityError(f"{path} is listed in {sums_path} but missing",
                                 fix=_RESTORE.format(release=release_dir))
        found = sha256_file(path)
        if found != expected:
            raise _mismatch(path, expected, found, str(sums_path), _RESTORE.format(release=release_dir))
        if name == eval_name:
            eval_sha = found
    return eval_sha, sha256_file(sums_path)


def bind_gold(release_dir: Path, run_dir: Path, fingerprint: RunFingerprint | None,
              run_file: Path) -> GoldBinding:
    """Verify the release and the run's pinned eval hash; return what the score will be bound to.

    Raises IntegrityError (file, expected and found sha256, fix) on any mismatch.
    """
    release_dir, run_dir = Path(release_dir), Path(run_dir)
    eval_sha, checksums_sha = verify_release_files(release_dir)
    manifest, manifest_sha = _manifest(release_dir)
    manifest_data = manifest.get("data_sha256") if manifest is not None else None
    if isinstance(manifest_data, str) and manifest_data != eval_sha:
        raise _mismatch(_eval(release_dir), manifest_data, eval_sha, str(_manifest_path(release_dir)),
                        _RESTORE.format(release=release_dir))
    release_id = None
    if manifest is not None:
        found_id = manifest.get("release_id") or manifest.get("name")
        release_id = found_id if isinstance(found_id, str) else None
    run_json_sha = None
    if fingerprint is not None:
        run_json_sha = sha256_file(run_dir / RUN_FILE)
        if release_id is not None and release_id != fingerprint.release_id:
            raise IntegrityError(
                f"{run_dir / RUN_FILE} says release {fingerprint.release_id!r} but "
                f"{_manifest_path(release_dir)} is release {release_id!r}",
                fix="score the run against the release it was rolled out on")
        if fingerprint.release_data_sha256 != eval_sha:
            raise _mismatch(
                _eval(release_dir), fingerprint.release_data_sha256, eval_sha,
                f"{run_dir / RUN_FILE} (release_data_sha256, pinned when the run was rolled out)",
                f"score {run_dir} against the exact release it was rolled out on (release "
                f"{fingerprint.release_id!r}); if the gold was corrected on purpose, publish the correction "
                "as a new release and roll the run out again on it")
    return GoldBinding(release_dir=str(release_dir), release_id=release_id, eval_file=_eval(release_dir).name,
                       eval_sha256=eval_sha,
                       checksums_sha256=checksums_sha, manifest_sha256=manifest_sha,
                       run_json_sha256=run_json_sha, run_file=run_file.name,
                       run_file_sha256=sha256_file(run_file))
