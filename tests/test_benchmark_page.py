"""The docs say what is. docs/measurements/benchmarks.md is a current page: one row per figure, each with its command, value,
reference and when it was measured; every benchmark is on it or named with the page that holds it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "measurements" / "benchmarks.md"


def _rows() -> list[list[str]]:
    text = PAGE.read_text(encoding="utf-8").split("## Current figures", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| command")]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines]


def test_every_row_has_command_figure_value_reference_and_date() -> None:
    rows = _rows()
    assert len(rows) > 15
    command = ""
    seen = set()
    for row in rows:
        assert len(row) == 5, row
        command = command if row[0] == "same" else row[0]
        assert re.match(r"`[a-z_0-9]+\.py", command), row
        assert (ROOT / "benchmarks" / command.strip("`").split()[0]).is_file(), command
        assert row[2] and row[3], row
        assert (command, row[1]) not in seen, f"two rows for one figure: {row[1]}"
        seen.add((command, row[1]))
        assert re.search(r"20\d\d-\d\d-\d\d|quiet|load", row[4]), f"no date or machine state: {row}"


def test_every_benchmark_is_on_the_page() -> None:
    text = PAGE.read_text(encoding="utf-8")
    missing = [path.name for path in sorted((ROOT / "benchmarks").glob("*.py"))
               if path.name != "wiki18_corpus.py" and f"`{path.name}" not in text and f"`{path.stem}.py" not in text]
    assert not missing, f"benchmarks with no row and no page named: {missing}"


def test_no_code_cites_a_design_document_the_repository_does_not_hold() -> None:
    names = ("DESIGN" + ".md", "DESIGN" + " convention")  # spelled apart so this file does not cite them
    cited = [f"{path.relative_to(ROOT)}" for folder in ("src", "tests", "benchmarks") for path in
             (ROOT / folder).rglob("*.py") if any(name in path.read_text(encoding="utf-8") for name in names)]
    assert not cited, f"cite docs/design/conventions.md instead: {cited}"
    assert (ROOT / "docs" / "design" / "conventions.md").is_file()
