"""The pages whose commands are tested: the README first, then the docs pages that took over its sections.

Why one list: ``tests/test_readme_commands.py`` runs and parses every command on
these pages, ``tests/benchmark/test_readme_release.py`` runs the release block and
``tests/realmodel/test_real_model.py`` the laptop block, wherever the block now
lives; a section moved between pages keeps its test as long as its page is listed
here. The order is the README's former reading order, which the run test keeps:
later blocks use what earlier ones wrote (``demo_out``, ``runs/*``).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: The docs pages that hold the README's former sections, in the README's former order.
COMMAND_PAGES = [DOCS / name for name in (
    "getting-started.md", "reference/cli.md", "guides/build-a-release.md", "guides/run-and-compare.md",
    "guides/failures.md", "guides/training-loop.md", "guides/hint-free.md", "guides/real-model.md", "guides/mcp.md",
    "reference/server-fidelity.md", "design/layout.md", "measurements/benchmarks.md")]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)


def pages() -> list[Path]:
    """README.md, then every page of :data:`COMMAND_PAGES`."""
    return [README, *COMMAND_PAGES]


def fenced_blocks(language: str) -> list[str]:
    """The fenced blocks in ``language`` of every page, in page order."""
    return [body for page in pages() for lang, body in FENCE.findall(page.read_text(encoding="utf-8"))
            if lang == language]


def section(title: str) -> str:
    """The text under the heading ``title`` (any level) on whichever page holds it, up to the next heading.

    Lines inside fenced blocks are not headings (a shell comment starts with ``#`` too).
    """
    for page in pages():
        lines = page.read_text(encoding="utf-8").splitlines(keepends=True)
        heading = re.compile(rf"^#+ {re.escape(title)}$")
        starts = [i for i, line in enumerate(lines) if heading.match(line.rstrip("\n"))]
        if not starts:
            continue
        body, fenced = [], False
        for line in lines[starts[0] + 1:]:
            if line.startswith("```"):
                fenced = not fenced
            elif not fenced and line.startswith("#"):
                break
            body.append(line)
        return "".join(body)
    raise AssertionError(f"no page of {[str(p.relative_to(ROOT)) for p in pages()]} has the section {title!r}")
