"""Shared fixtures: the real public data beside the checkout, skipped cleanly when absent."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NamedTuple

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("AETHER_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path to ../shared/data; skips the test with a reason when it is not there."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not found at {SHARED_DATA} (set AETHER_SHARED_DATA or place shared/ beside the checkout)")
    return SHARED_DATA


def require_shared(relative: str) -> Path:
    """A file under ../shared/data, or skip the calling test with a reason."""
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(f"real data file missing: {path}")
    return path


class Eval1400Build(NamedTuple):
    """The real Eval-1400 release built once per test session (the README's config, audit on, auto-review)."""

    root: Path  # holds cfg/ (config, training registry) and release/
    release_dir: Path


#: pytest-xdist runs the users of one shared build on one worker (``--dist loadgroup``), so the build is made
#: once per session instead of once per worker; the file lock keeps it right under any other distribution.
SHARED_BUILD_GROUPS = {"eval1400_build": "eval1400", "real_server": "realmodel"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put every test that needs a session-wide expensive resource in that resource's xdist group."""
    for item in items:
        for fixture, group in SHARED_BUILD_GROUPS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(group))


def session_temp_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This session's temporary root, one for all its xdist workers (each worker's basetemp is a child)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def eval1400_build(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Eval1400Build:
    """The audited Eval-1400 release of the public data, built once and shared read-only.

    It takes minutes (the near-duplicate audit visits every selected question against ~47k training
    questions), and three modules need exactly this build. Tests must not write into it.
    """
    from filelock import FileLock

    from aethersearch.benchmark.build import build_from_config
    from aethersearch.benchmark.eval1400 import write_eval1400_config

    shared_root = session_temp_root(tmp_path_factory)
    root = shared_root / "eval1400-build"
    done = root / "BUILT"
    with FileLock(str(shared_root / "eval1400-build.lock")):
        if not done.is_file():
            if root.exists():
                shutil.rmtree(root)
            config = write_eval1400_config(shared_data, root / "cfg")
            build_from_config(config, root / "release", auto_review=True)
            done.write_text("ok\n", encoding="utf-8")
    return Eval1400Build(root, root / "release")
