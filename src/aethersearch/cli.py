"""The ``aether`` command line: thin typer commands, each calling one public function.

Commands live in ``aethersearch.commands.<area>`` modules, each exposing
``register(app)``; this module only assembles them and turns every
``AetherError`` into one clean message and exit code 2 (never a traceback).
"""

from __future__ import annotations

import importlib
import sys

import typer
from rich.markup import escape

from aethersearch.commands.progress import make_console
from aethersearch.errors import AetherError

__all__ = ["COMMAND_MODULES", "app", "main", "version"]

COMMAND_MODULES: tuple[str, ...] = (
    "benchmark",
    "audit",
    "corpus",
    "construct",
    "sandbox",
    "rollout",
    "scoring",
    "diagnostics",
    "interop",
    "viewer",
    "mcp",
)

app = typer.Typer(
    name="aether",
    help="aethersearch: rigorous, reproducible evaluation of agentic search.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress output (bars or periodic lines).")
          ) -> None:
    """aethersearch: rigorous, reproducible evaluation of agentic search."""
    from aethersearch.commands.progress import set_quiet

    set_quiet(quiet)


@app.command()
def version() -> None:
    """Print the aethersearch version."""
    from aethersearch import __version__

    typer.echo(__version__)


for _name in COMMAND_MODULES:
    importlib.import_module(f"aethersearch.commands.{_name}").register(app)

err_console = make_console(stderr=True)


def main() -> None:
    """Entry point: run the app, printing toolkit errors as one message without a traceback."""
    try:
        app()
    except AetherError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
