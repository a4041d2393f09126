"""`aether build` is never silent: one progress line per stage in a log, periodic lines in a long stage."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from aethersearch.curation.build import STAGES, build_from_config
from aethersearch.sources.demo import write_demo_sources


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


def test_the_audit_reports_its_steps_until_complete(tmp_path: Path) -> None:
    from aethersearch.audit.near_duplicates import audit_selection_file

    config = write_demo_sources(tmp_path / "src")
    release = build_from_config(config, tmp_path / "rel").release_dir
    seen: list[tuple[str, int, int | None]] = []
    audit_selection_file(release, tmp_path / "src" / "train" / "registry.yaml",
                         progress=lambda step, done, total: seen.append((step, done, total)))
    assert list(dict.fromkeys(step for step, _, _ in seen)) == ["training files", "similarity", "rare tokens"]
    for step in ("training files", "similarity", "rare tokens"):
        mine = [(d, t) for s, d, t in seen if s == step]
        assert mine[0][0] == 0 and mine[-1][0] == mine[-1][1] and len(mine) >= 2, (step, mine)


def test_cli_audit_and_audited_build_write_plain_progress_lines_when_not_a_terminal(tmp_path: Path) -> None:
    import yaml

    config = write_demo_sources(tmp_path / "src")
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    data["audit"] = {"reviews": "reviews.json"}
    config.write_text(yaml.safe_dump(data), encoding="utf-8")
    env = {**os.environ, "AETHER_PROGRESS_INTERVAL": "0"}
    aether = [sys.executable, "-m", "aethersearch.cli"]
    built = subprocess.run([*aether, "build", str(config), "--out", str(tmp_path / "r"), "--auto-review"],
                           capture_output=True, text=True, timeout=300, env=env)
    assert built.returncode == 0, built.stderr
    for step in ("pool", "similarity", "rare tokens"):
        assert any(line.startswith(f"build audit {step}: ") for line in built.stderr.splitlines()), built.stderr
    audited = subprocess.run([*aether, "audit", str(tmp_path / "r"), "--training",
                              str(tmp_path / "src" / "train" / "registry.yaml")],
                             capture_output=True, text=True, timeout=300, env=env)
    assert audited.returncode == 0, audited.stdout + audited.stderr
    lines = audited.stderr.splitlines()
    for step in ("training files", "similarity", "rare tokens"):
        assert any(line.startswith(f"audit {step}: ") and "elapsed" in line for line in lines), (step, lines)
    assert "\x1b[" not in audited.stderr
