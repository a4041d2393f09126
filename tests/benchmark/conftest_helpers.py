"""Shared helpers for the benchmark tests: build the demo release once per module."""

from __future__ import annotations

from pathlib import Path

from aethersearch.curation.build import BuildResult, build_from_config
from aethersearch.sources.demo import write_demo_sources


def build_demo(root: Path, **hooks) -> tuple[Path, BuildResult]:
    """Write the demo sources under ``root/src`` and build them into ``root/release``."""
    config = write_demo_sources(root / "src")
    return config, build_from_config(config, root / "release", **hooks)
