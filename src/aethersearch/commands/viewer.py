"""`aether view`: serve a read-only web viewer over run directories.

Thin command: parse options, load the runs, serve. Heavy imports stay inside the function.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from aethersearch.report.viewer import VIEWER_HOST, VIEWER_PORT

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``view`` command to ``app``."""

    @app.command("view")
    def view(
        runs: Annotated[list[Path], typer.Argument(help="Run directories to browse (the first is the default).")],
        port: Annotated[int, typer.Option(help="Port to serve on.")] = VIEWER_PORT,
        host: Annotated[str, typer.Option(help="Interface to bind (127.0.0.1: this machine only).")] = VIEWER_HOST,
        release: Annotated[Path | None, typer.Option(help="Release whose gold to show (default: the one the "
                                                          "first run was scored on).")] = None,
        corpus: Annotated[Path | None, typer.Option(help="Document store the runs searched, to show the text of "
                                                         "returned documents.")] = None,
        label: Annotated[list[str] | None, typer.Option("--label", help="Run label, one per run in order "
                                                        "(default: the model name).")] = None,
    ) -> None:
        """Browse questions, traces and flips of scored runs in a local web page (read-only)."""
        from aethersearch.report.viewer.app import load_viewer, serve

        viewer = load_viewer(runs, release=release, corpus=corpus, labels=label or ())
        for run in viewer.runs:
            state = f"problem: {run.problem.title}" if run.problem else f"{len(run.questions)} questions"
            typer.echo(f"{run.key}: {state}")
        typer.echo(f"aether view: serving http://{host}:{port}/  (read-only; Ctrl-C to stop)")
        serve(viewer, host=host, port=port)
