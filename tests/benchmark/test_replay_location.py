"""Where the replay finds the original sources and where it writes its report.

Users run ``aether build --demo --out X`` and then ``aether verify X --replay``
from anywhere; the replay must find ``X_sources`` on its own, print where it
wrote ``independent_validation.json`` and never write into the frozen release.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aethersearch.cli import app
from aethersearch.errors import AetherError, ConfigError
from aethersearch.release.replay import default_output, replay_release

SRC = Path(__file__).resolve().parents[2] / "src" / "aethersearch" / "release"


@pytest.fixture
def demo_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``aether build --demo --out <tmp>/out/rel``, then cd somewhere unrelated."""
    runner = CliRunner()
    release = tmp_path / "out" / "rel"
    built = runner.invoke(app, ["build", "--demo", "--out", str(release)], env={"COLUMNS": "200"})
    assert built.exit_code == 0, built.output
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return release


def test_verify_replay_finds_the_demo_sources_without_base_dir(demo_release: Path) -> None:
    result = CliRunner().invoke(app, ["verify", str(demo_release), "--replay"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert result.output.count("OK sampling_replay") == 1
    expected = demo_release.parent / "rel.independent_validation.json"
    assert f"wrote {expected.resolve()}" in result.output
    written = json.loads(expected.read_text(encoding="utf-8"))
    assert written["ok"] is True
    # the rerun reproduces the report the build put inside the release, byte for byte, and names no local path
    assert expected.read_bytes() == (demo_release / "independent_validation.json").read_bytes()
    assert str(demo_release.parent) not in expected.read_text(encoding="utf-8")


def test_replay_takes_the_build_config_and_an_output_path(demo_release: Path, tmp_path: Path) -> None:
    out = tmp_path / "reports" / "independent_validation.json"
    config = demo_release.parent / "rel_sources" / "build.yaml"
    # Move the sources away from the sibling name so only --config can find them.
    moved = tmp_path / "configs"
    (demo_release.parent / "rel_sources").rename(moved)
    with pytest.raises(AetherError, match="cannot find the original source files"):
        replay_release(demo_release)
    result = CliRunner().invoke(app, ["replay", str(demo_release), "--config", str(moved / config.name),
                                      "--out", str(out)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.output
    assert json.loads(out.read_text(encoding="utf-8"))["ok"] is True
    assert not default_output(demo_release).exists()


def test_replay_refuses_to_write_inside_the_release(demo_release: Path) -> None:
    before = sorted(p.name for p in demo_release.iterdir())
    with pytest.raises(ConfigError, match="inside the release"):
        replay_release(demo_release, output=demo_release / "independent_validation.json")
    assert sorted(p.name for p in demo_release.iterdir()) == before
    verified = CliRunner().invoke(app, ["verify", str(demo_release)], env={"COLUMNS": "300"})
    assert verified.exit_code == 0, verified.output


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_replay_shares_only_the_normalisation_function_with_the_builder() -> None:
    """A builder bug cannot hide itself: the replay imports none of the builder's modules."""
    for name in ("replay.py", "replay_readers.py"):
        project = {m for m in _imports(SRC / name) if m.startswith("aethersearch")}
        # verify_release_template: the quota rule's one specification and canonical JSON (stdlib only);
        # release_layout: the release's file names
        assert project <= {"aethersearch.text", "aethersearch.errors", "aethersearch.jsonl",
                           "aethersearch.release.replay_readers", "aethersearch.release_layout",
                           "aethersearch.release.verify_release_template"}, (name, project)
    text_imports = ast.parse((SRC / "replay.py").read_text(encoding="utf-8"))
    from_text = {alias.name for node in ast.walk(text_imports)
                 if isinstance(node, ast.ImportFrom) and node.module == "aethersearch.text"
                 for alias in node.names}
    assert from_text == {"question_key"}
