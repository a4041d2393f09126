"""Progress when redirected: periodic plain lines with rate and ETA; `aether --quiet` prints none; no wrapping."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from aethersearch.commands.progress import PlainProgress


def test_plain_lines_come_every_interval_with_rate_and_eta() -> None:
    now = [0.0]
    stream = io.StringIO()
    plain = PlainProgress("rollout", stream, every_s=10.0, clock=lambda: now[0], unit=" q")
    for step in range(1, 31):  # 30 updates, one per second
        now[0] = float(step)
        plain.update(step * 10, 1000, errored=0)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3  # at 10 s, 20 s and 30 s: never a line per update
    assert lines[0] == "rollout: 100/1,000 (10.0%), 10.0 q/s, elapsed 10s, ETA 1m30s, errored 0"
    assert lines[1].startswith("rollout: 200/1,000") and lines[2].startswith("rollout: 300/1,000")
    plain.write()
    assert stream.getvalue().splitlines()[-1].startswith("rollout: 300/1,000 (30.0%)")


def _index_build(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    from aethersearch.corpus.demo_world import generate_world, write_world

    corpus = write_world(generate_world(seed=0), tmp_path / "world").corpus
    env = {**os.environ, "AETHER_PROGRESS_INTERVAL": "0"}
    deep = tmp_path / ("a-long-directory-name-" * 4) / "index"
    return subprocess.run([sys.executable, "-m", "aethersearch.cli", *flags, "index", "build", str(corpus),
                           "--out", str(deep)], capture_output=True, text=True, env=env, timeout=300, check=False)


def test_redirected_index_build_writes_plain_progress_and_unwrapped_lines(tmp_path: Path) -> None:
    result = _index_build(tmp_path)
    assert result.returncode == 0, result.stderr
    progress = [line for line in result.stderr.splitlines() if line.startswith("index ")]
    assert progress and "docs/s" in progress[-1] and "(100.0%)" in progress[-1]
    assert "\x1b[" not in result.stderr  # no terminal control codes in a log
    built = [line for line in result.stdout.splitlines() if line.startswith("built bm25 index")]
    assert built and built[0].endswith("/index")  # the long path is on the same line, not wrapped


def test_quiet_prints_no_progress(tmp_path: Path) -> None:
    result = _index_build(tmp_path, "--quiet")
    assert result.returncode == 0, result.stderr
    assert not [line for line in result.stderr.splitlines() if line.startswith("index ")]
    assert "built bm25 index" in result.stdout
