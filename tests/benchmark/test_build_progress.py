"""`aether build` is never silent: one progress line per stage in a log, periodic lines in a long stage."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from aethersearch.benchmark.build import STAGES, build_from_config
from aethersearch.benchmark.demo_sources import write_demo_sources


def test_build_reports_every_stage_in_order(tmp_path: Path) -> None:
    seen: list[tuple[str, int, int | None]] = []
    build_from_config(write_demo_sources(tmp_path / "src"), tmp_path / "rel",
                      progress=lambda stage, done, total: seen.append((stage, done, total)))
    order = list(dict.fromkeys(stage for stage, _, _ in seen))
    assert order == list(STAGES)
    for stage in STAGES:  # each stage starts at 0 and ends complete
        mine = [(d, t) for s, d, t in seen if s == stage]
        assert mine[0][0] == 0 and mine[-1][0] == mine[-1][1]


def test_cli_build_writes_plain_stage_lines_when_not_a_terminal(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "aethersearch.cli", "build", "--demo", "--out", str(tmp_path / "r")],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "AETHER_PROGRESS_INTERVAL": "0"})
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("build ")]
    for stage in STAGES:
        assert any(line.startswith(f"build {stage}: ") and "elapsed" in line for line in lines), (stage, lines)
    assert "\x1b[" not in done.stderr  # plain text in a log, no terminal control codes
