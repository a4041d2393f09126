"""The command reference cannot miss a command or an option: one page is generated from the CLI, the
overview table names every command, and the README's "What you can do" names every capability."""

from __future__ import annotations

from pathlib import Path

from aethersearch.commands.reference import PAGE, cli_reference
from tests.cli_tree import leaves
from tests.doc_pages import ROOT, section

OVERVIEW = ROOT / "docs" / "reference" / "cli.md"


def test_generated_page_equals_what_the_cli_generates_now() -> None:
    page = ROOT / PAGE
    assert page.read_text(encoding="utf-8") == cli_reference(), (
        f"{PAGE} is stale: a command or option changed; run `make cli-docs` and commit the page")


def test_generated_page_lists_every_command_and_every_option() -> None:
    sections = {chunk.split("`", 1)[0]: chunk for chunk in cli_reference().split("## `aether ")[1:]}
    missing = [f"aether {path}" for path in leaves() if path not in sections]
    for path, command in leaves().items():
        options = [opt for param in command.params for opt in (*param.opts, *param.secondary_opts)
                   if opt.startswith("--")]
        missing += [f"aether {path} {opt}" for opt in options if f"{opt}`" not in sections.get(path, "")
                    and f"{opt} " not in sections.get(path, "") and f"{opt}/" not in sections.get(path, "")]
    assert not missing, missing


def test_overview_table_names_every_command() -> None:
    overview = OVERVIEW.read_text(encoding="utf-8")
    missing = [path for path in leaves() if f"`aether {path}" not in overview]
    assert not missing, f"docs/reference/cli.md does not show: {missing}"


def test_readme_what_you_can_do_has_one_command_per_capability() -> None:
    body = section("What you can do")
    rows = [line for line in body.splitlines() if line.startswith("| **")]
    capabilities = {row.split("**")[1] for row in rows}
    wanted = {"eval", "run", "score", "compare", "noise", "samples", "view", "report", "watch",
              "sandbox evaluation", "construct", "export / import", "serve"}
    assert wanted <= capabilities, f"missing: {wanted - capabilities}"
    for row in rows:
        assert "`aether " in row, f"no command on the row {row[:60]!r}"


def test_page_is_in_the_manual() -> None:
    assert f"reference/{Path(PAGE).name}" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
