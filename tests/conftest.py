"""Shared fixtures: the real public data beside the checkout, skipped cleanly when absent."""

from __future__ import annotations

import os
from pathlib import Path

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
