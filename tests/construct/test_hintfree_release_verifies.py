"""A hint-free release is a release like any other: both verifiers accept it and catch tampering."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from aethersearch.construct.build import build_demo_sandbox_release
from aethersearch.release.verify import verify_release


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_demo_sandbox_release(tmp_path_factory.mktemp("hintfree") / "release")


def test_package_and_standalone_verifiers_accept_the_hintfree_release(release: Path) -> None:
    report = verify_release(release)
    assert report.ok, [check.line() for check in report.failures]
    proc = subprocess.run([sys.executable, "-I", "verify_release.py", "."], cwd=release,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_changed_gold_alias_in_a_hintfree_release_is_named(release: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in release.iterdir():
        (copy / path.name).write_bytes(path.read_bytes())
    lines = (copy / "eval.jsonl").read_text().splitlines(keepends=True)
    lines[2] = lines[2].replace('"answers":["', '"answers":["X', 1)
    (copy / "eval.jsonl").write_text("".join(lines))
    report = verify_release(copy)
    assert not report.ok
    assert any(check.file == "eval.jsonl" and check.row == 3 for check in report.failures), \
        [check.line() for check in report.failures]
