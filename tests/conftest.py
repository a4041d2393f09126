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


#: Session-wide expensive resources, and the order in which their users run first. Under pytest-xdist's
#: ``--dist worksteal`` (``make test``) the collection is cut into contiguous chunks, one per worker, and a
#: worker steals only from the *end* of another's queue: modules that need one of these come first, so they
#: share one worker (one build, one model server) and the longest work starts at once. (``--dist loadgroup``
#: would say this with marks, but pytest-xdist 3.8 writes the group into ``item._nodeid``, which pytest 9
#: no longer reads.) Under any other distribution the build's file lock still makes it once; a model server
#: may then start once per worker.
SHARED_RESOURCES = ("eval1400_build", "real_server")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run modules that use a shared resource first (grouped by resource), then modules with a ``slow`` test
    (the longest work starts early, none is left alone at the end), then the rest; order kept within each."""
    slow, rest = len(SHARED_RESOURCES), len(SHARED_RESOURCES) + 1
    rank: dict[Path, int] = {}
    for item in items:
        used = [i for i, name in enumerate(SHARED_RESOURCES) if name in getattr(item, "fixturenames", ())]
        if item.get_closest_marker("slow"):
            used.append(slow)
        if used:
            rank[item.path] = min(rank.get(item.path, rest), *used)
    items.sort(key=lambda item: rank.get(item.path, rest))


def session_temp_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test session's temporary root, one for all its xdist workers (each worker's basetemp is a child)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def eval1400_build(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Eval1400Build:
    """The audited Eval-1400 release of the public data, built once and shared read-only.

    It takes minutes (the near-duplicate audit visits every selected question against ~47k training
    questions), and two modules need exactly this build. Tests must not write into it.
    """
    from filelock import FileLock

    from aethersearch.curation.build import build_from_config
    from aethersearch.curation.eval1400 import write_eval1400_config

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
