"""Release bytes do not depend on where the config sits, and replay finds the inputs again on its own.

The same build (demo sources, training registry, inline exclusion, audit with the
auto-review policy) is configured from two folders at different depths relative
to one data directory, and built into two differently placed output folders.
Every release file must be byte-identical, name no directory of this machine and
no ``../``; ``aether verify DIR --replay`` must pass with no extra flag, and a
missing input file must be reported as missing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from aethersearch.cli import app
from aethersearch.curation.build import build_from_config
from aethersearch.jsonl import read_jsonl
from aethersearch.release.replay import replay_release
from aethersearch.sources.demo import write_demo_sources


def _configure(data_config: Path, folder: Path) -> Path:
    """The demo config and its registry, written into ``folder``, pointing at the demo data by data_root."""
    data_dir = data_config.parent
    config = yaml.safe_load(data_config.read_text(encoding="utf-8"))
    first = read_jsonl(data_dir / config["sources"][0]["path"])[0]
    config.update(data_root=os.path.relpath(data_dir, folder), audit={"reviews": "reviews.json"},
                  exclusions=[{"question": first["question"], "reason": "reviewed: in a training set"}])
    registry_file = data_dir / config["training_registry"]
    registry = yaml.safe_load(registry_file.read_text(encoding="utf-8"))
    target = folder / config["training_registry"]
    target.parent.mkdir(parents=True)
    registry["data_root"] = os.path.relpath(registry_file.parent, target.parent)
    target.write_text(yaml.safe_dump(registry, sort_keys=False), encoding="utf-8")
    (folder / "build.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return folder / "build.yaml"


def _files(release: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(release.iterdir())}


@pytest.fixture
def two_builds(tmp_path: Path) -> tuple[Path, Path, Path]:
    data_config = write_demo_sources(tmp_path / "data")
    near = _configure(data_config, tmp_path / "a")
    deep = _configure(data_config, tmp_path / "x" / "y" / "z")
    assert yaml.safe_load(near.read_text())["data_root"] != yaml.safe_load(deep.read_text())["data_root"]
    one = build_from_config(near, tmp_path / "a" / "rel", auto_review=True).release_dir
    two = build_from_config(deep, tmp_path / "x" / "y" / "out" / "deeper" / "rel", auto_review=True).release_dir
    return tmp_path, one, two


def test_configs_at_two_depths_build_byte_identical_releases(two_builds: tuple[Path, Path, Path]) -> None:
    root, one, two = two_builds
    first, second = _files(one), _files(two)
    assert first.keys() == second.keys()
    differing = sorted(name for name in first if first[name] != second[name])
    assert not differing, f"release files differ with the config's location: {differing}"
    manifest = next(data for name, data in first.items() if name.endswith("_manifest.json")).decode("utf-8")
    assert '"audit": null' not in manifest and "reviewed: in a training set" in manifest
    for name, data in first.items():
        text = data.decode("utf-8")
        assert "../" not in text and str(root) not in text and "data_root" not in text, name


def test_verify_replay_finds_the_inputs_from_each_config_without_flags(two_builds: tuple[Path, Path, Path],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    root, one, two = two_builds
    for cwd, release in ((root, one), (root / "x" / "y", two)):
        monkeypatch.chdir(cwd)  # the README's layout: the config's folder beside where the commands run
        result = CliRunner().invoke(app, ["verify", str(release), "--replay"], env={"COLUMNS": "300"})
        assert result.exit_code == 0, result.output
        assert "OK source_hashes" in result.output and "OK sampling_replay" in result.output


def test_a_missing_input_file_is_reported_as_missing(two_builds: tuple[Path, Path, Path],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    root, one, _ = two_builds
    (root / "data" / "popqa" / "test.tsv").rename(root / "popqa.moved")
    training = yaml.safe_load((root / "data" / "train" / "registry.yaml").read_text())["files"][0]["path"]
    (root / "data" / "train" / training).unlink()
    monkeypatch.chdir(root)
    report = replay_release(one)
    failed = {c.name: c.detail for c in report.failures}
    assert "popqa/test.tsv (popqa): missing" in failed["source_hashes"]
    assert "sha256 changed" not in failed["source_hashes"]
    assert f"{training} (" in failed["training_hashes"] and "now missing" in failed["training_hashes"]
