"""The CLI's leaf commands by path (``"corpus import"``), for the tests that check every command."""

from __future__ import annotations

from typing import Any

import typer

from aethersearch.cli import app


def leaves() -> dict[str, Any]:
    """Every leaf click command of ``aether``, keyed by its space-separated path."""
    found: dict[str, Any] = {}

    def walk(command: Any, path: str) -> None:
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(sub, f"{path} {name}".strip())
        else:
            found[path] = command

    walk(typer.main.get_command(app), "")
    return found
