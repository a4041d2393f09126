"""The verifiers detect tampering and name the file and row: package and standalone agree."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from aethersearch.release.verify import verify_release
from aethersearch.release_layout import release_layout
from tests.benchmark.conftest_helpers import build_demo


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_demo(tmp_path_factory.mktemp("verify"))[1].release_dir


@pytest.fixture
def release(pristine: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "release"
    shutil.copytree(pristine, copy)
    return copy


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _rewrite_checksums(release: Path) -> None:
    """What a careful tamperer does: make checksums.sha256 match the edited files again."""
    names = sorted(p.name for p in release.iterdir() if p.name != "checksums.sha256")
    (release / "checksums.sha256").write_text(
        "".join(f"{hashlib.sha256((release / n).read_bytes()).hexdigest()}  {n}\n" for n in names))


def _standalone(release: Path) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-I", str(release / "verify_release.py"), str(release)],
                          capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout


def _assert_named(release: Path, file: str, row: int | None, check: str | None = None) -> None:
    report = verify_release(release)
    assert not report.ok
    hits = [c for c in report.failures if c.file == file and c.row == row and (check is None or c.name == check)]
    assert hits, "\n".join(c.line() for c in report.failures)
    code, out = _standalone(release)
    assert code == 1
    where = f"{file} row {row}" if row is not None else f"{file}:"
    assert any(line.startswith("FAIL") and where in line for line in out.splitlines()), out


def test_pristine_release_passes_both_verifiers(pristine: Path) -> None:
    assert verify_release(pristine).ok
    code, out = _standalone(pristine)
    assert code == 0 and "FAIL" not in out and "OK   projection" in out


def test_a_flipped_byte_is_detected_naming_file_and_row(release: Path) -> None:
    lines = _lines(release_layout(release).eval)
    target = bytearray(lines[6])
    position = target.index(b'"question":"') + len(b'"question":"') + 2
    target[position] ^= 0x01
    lines[6] = bytes(target)
    (release_layout(release).eval).write_bytes(b"".join(lines))
    _assert_named(release, "demo.jsonl", None, "checksums")
    _assert_named(release, "demo.jsonl", 7, "row digests")


def test_a_deleted_row_is_detected_naming_file_and_row(release: Path) -> None:
    lines = _lines(release_layout(release).eval)
    del lines[9]
    (release_layout(release).eval).write_bytes(b"".join(lines))
    _rewrite_checksums(release)
    _assert_named(release, "demo.jsonl", 10, "eval rows")
    _assert_named(release, "demo_rollout_questions.jsonl", 10, "projection")


def test_a_duplicated_row_is_detected_naming_file_and_row(release: Path) -> None:
    lines = _lines(release_layout(release).eval)
    lines.insert(4, lines[3])
    (release_layout(release).eval).write_bytes(b"".join(lines))
    _rewrite_checksums(release)
    _assert_named(release, "demo.jsonl", 5, "unique ids")
    _assert_named(release, "demo.jsonl", 5, "unique questions")


def test_a_changed_alias_is_detected_naming_file_and_row_even_with_fixed_checksums(release: Path) -> None:
    lines = _lines(release_layout(release).eval)
    row = orjson.loads(lines[11])
    row["answers"] = [row["answers"][0] + " (edited)"]
    lines[11] = orjson.dumps(row, option=orjson.OPT_SORT_KEYS) + b"\n"
    (release_layout(release).eval).write_bytes(b"".join(lines))
    _rewrite_checksums(release)
    _assert_named(release, "demo.jsonl", 12, "row digests")
    _assert_named(release, "demo.jsonl", None, "data sha256")


def test_a_projection_that_differs_from_the_eval_file_is_detected(release: Path) -> None:
    lines = _lines(release_layout(release).rollout)
    row = orjson.loads(lines[2])
    row["question"] = row["question"] + " Hint: it is in Europe."
    lines[2] = orjson.dumps(row, option=orjson.OPT_SORT_KEYS) + b"\n"
    leaked = orjson.loads(lines[5])
    leaked["answers"] = ["gold"]
    lines[5] = orjson.dumps(leaked, option=orjson.OPT_SORT_KEYS) + b"\n"
    (release_layout(release).rollout).write_bytes(b"".join(lines))
    _rewrite_checksums(release)
    _assert_named(release, "demo_rollout_questions.jsonl", 3, "projection")
    _assert_named(release, "demo_rollout_questions.jsonl", 6, "projection")


def test_an_unlisted_or_missing_file_and_a_broken_schema_are_reported(release: Path) -> None:
    (release / "extra.txt").write_text("x")
    _assert_named(release, "extra.txt", None, "checksums")
    (release / "extra.txt").unlink()
    lines = _lines(release_layout(release).eval)
    row = orjson.loads(lines[0])
    row["source_row_number"] = 0
    lines[0] = orjson.dumps(row, option=orjson.OPT_SORT_KEYS) + b"\n"
    (release_layout(release).eval).write_bytes(b"".join(lines))
    _rewrite_checksums(release)
    _assert_named(release, "demo.jsonl", 1, "eval rows")
    assert any(c.name == "eval schema" and c.row == 1 for c in verify_release(release).failures)
    (release_layout(release).diagnostics).unlink()
    assert any(c.file == "demo_diagnostics.jsonl" for c in verify_release(release).failures)


def test_semantic_checks_hold_even_when_every_hash_was_recomputed(release: Path) -> None:
    """A tamperer who also rewrites the manifest hashes is still caught by provenance and projection."""
    lines = _lines(release_layout(release).eval)
    row = orjson.loads(lines[1])
    row["source_split"] = "train"
    lines[1] = orjson.dumps(row, option=orjson.OPT_SORT_KEYS) + b"\n"
    data = b"".join(lines)
    (release_layout(release).eval).write_bytes(data)
    manifest = orjson.loads((release_layout(release).manifest).read_bytes())
    manifest["row_sha256"] = [hashlib.sha256(line.rstrip(b"\n")).hexdigest() for line in lines]
    manifest["data_sha256"] = hashlib.sha256(data).hexdigest()
    (release_layout(release).manifest).write_bytes(orjson.dumps(manifest, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2))
    _rewrite_checksums(release)
    report = verify_release(release)
    failures = [(c.name, c.file, c.row) for c in report.failures]
    assert ("provenance", "demo.jsonl", 2) in failures
    # the rewritten manifest no longer matches what the independent validation bound, nor the file hashes
    assert {"independent validation", "file hashes"} <= {name for name, _, _ in failures}
    code, out = _standalone(release)
    assert code == 1 and "FAIL provenance: demo.jsonl row 2: source_split/source_file 'train'" in out
