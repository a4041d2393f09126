"""`aether construct` refuses bad options and unsafe output paths cleanly, and never loses a release."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from aethersearch.cli import app
from aethersearch.construct.build import build_demo_release
from aethersearch.construct.hintfree import ConstructionConfig
from aethersearch.errors import ConfigError


@pytest.mark.parametrize("args, option", [(["--min-hops", "1"], "--min-hops"),
                                          (["--max-questions", "0"], "--max-questions"),
                                          (["--max-alternatives", "-1"], "--max-alternatives")])
def test_out_of_range_options_are_a_config_error_naming_the_option(tmp_path: Path, args: list[str],
                                                                   option: str) -> None:
    result = CliRunner().invoke(app, ["construct", "demo", "--out", str(tmp_path / "rel"), *args])
    assert isinstance(result.exception, ConfigError), result.exception  # not a pydantic traceback
    assert option in str(result.exception)
    assert not (tmp_path / "rel").exists()


def test_out_must_be_a_directory_and_force_replaces_only_a_release(tmp_path: Path) -> None:
    config = ConstructionConfig(max_questions=3)
    a_file = tmp_path / "file"
    a_file.write_text("keep me")
    with pytest.raises(ConfigError, match="not a directory"):
        build_demo_release(a_file, config=config, overwrite=True)
    assert a_file.read_text() == "keep me"

    precious = tmp_path / "notes"
    precious.mkdir()
    (precious / "thesis.txt").write_text("years of work")
    with pytest.raises(ConfigError, match="not a release directory"):
        build_demo_release(precious, config=config, overwrite=True)  # --force must not rm -rf a folder
    assert (precious / "thesis.txt").read_text() == "years of work"

    release = build_demo_release(tmp_path / "rel", config=config).path
    first = (release / "eval.jsonl").read_bytes()
    replaced = build_demo_release(release, seed=1, config=ConstructionConfig(max_questions=3, seed=1),
                                  overwrite=True).path
    assert replaced == release and (release / "eval.jsonl").read_bytes() != first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "notes", "rel"]  # no staging left behind
