"""One spelling per concept across the CLI, and the refusals that must exit non-zero."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from typer.testing import CliRunner

from aethersearch.cli import app
from tests.cli_tree import leaves

runner = CliRunner()


def _options(command: Any) -> dict[str, list[str]]:
    return {param.name: list(param.opts) + list(param.secondary_opts) for param in command.params
            if getattr(param, "param_type_name", "") == "option"}


def test_outputs_are_always_out_or_o_never_positional() -> None:
    problems = []
    for path, command in leaves().items():
        for param in command.params:
            kind = getattr(param, "param_type_name", "")
            if kind == "argument" and param.name in ("out", "output", "out_dir"):
                problems.append(f"aether {path}: positional output {param.name.upper()}")
            if kind == "option" and "--out" in param.opts and "-o" not in param.opts:
                problems.append(f"aether {path}: --out without -o")
    assert not problems, "\n".join(problems)


def test_one_spelling_for_index_topk_and_max_tokens() -> None:
    commands = leaves()
    for path in ("search", "serve", "run", "eval", "sandbox serve", "probe distractors"):
        assert any("--index" in opts for opts in _options(commands[path]).values()), f"aether {path} lacks --index"
    spellings = {opt for command in commands.values() for opts in _options(command).values() for opt in opts}
    assert not {s for s in spellings if "top-k" in s or s in ("--k", "--top_k")}
    assert "--max-new-tokens" not in spellings
    for path in ("search", "run", "eval"):
        assert "--topk" in {o for opts in _options(commands[path]).values() for o in opts}, path
    for path in ("run", "eval"):
        opts = {o for opts in _options(commands[path]).values() for o in opts}
        assert {"--max-tokens", "--token-budget"} <= opts, path


def test_eval_and_run_share_the_agent_default(tmp_path: Path) -> None:
    from tests.scoring.factory import eval_rows, write_release

    release = write_release(tmp_path / "release", eval_rows(2))
    for command in (["run", str(release), "--out", str(tmp_path / "r")], ["eval", str(release), "--out",
                                                                        str(tmp_path / "e")]):
        result = runner.invoke(app, command)
        assert result.exit_code != 0
        assert "agent 'search-r1' needs a search tool" in str(result.exception), (command, result.exception)


def test_a_missing_release_is_named_as_missing(tmp_path: Path) -> None:
    for command in ("run", "eval"):
        result = runner.invoke(app, [command, str(tmp_path / "nonexistent"), "--out", str(tmp_path / command)])
        assert result.exit_code != 0
        assert "does not exist" in str(result.exception) and "nonexistent" in str(result.exception)


def test_report_exits_non_zero_when_it_refused_the_comparison(tmp_path: Path) -> None:
    from aethersearch.records import Budget
    from tests.scoring.factory import eval_rows, write_release, write_run

    rows = eval_rows(3)
    release = write_release(tmp_path / "release", rows)
    a = write_run(tmp_path / "a", rows, set())
    b = write_run(tmp_path / "b", rows, set(), fp_changes={"budget": Budget(max_turns=2)})
    out = tmp_path / "report.html"
    result = runner.invoke(app, ["report", str(a), str(b), "--release", str(release), "-o", str(out)])
    assert result.exit_code != 0 and "comparison refused" in str(result.exception)
    assert out.is_file() and "Comparison refused" in out.read_text(encoding="utf-8")
    allowed = runner.invoke(app, ["report", str(a), str(b), "--release", str(release), "-o", str(out),
                                  "--allow", "budget"])
    assert allowed.exit_code == 0, allowed.output


def test_texts_only_name_commands_that_exist() -> None:
    import re

    root = typer.main.get_command(app)
    top = set(root.commands)  # type: ignore[attr-defined]
    groups = {name: set(c.commands) for name, c in root.commands.items() if hasattr(c, "commands")}  # type: ignore[attr-defined]
    bad = []
    for path in sorted((Path(__file__).resolve().parents[1] / "src" / "aethersearch").rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for match in re.finditer(r"`aether ([a-z][a-z0-9-]*)(?: ([a-z][a-z0-9-]*))?", line):
                first, second = match.groups()
                if first not in top or (first in groups and second is not None and second not in groups[first]):
                    bad.append(f"{path.name}:{number}: {match.group(0)}")
    assert not bad, "texts naming commands that do not exist:\n" + "\n".join(bad)
