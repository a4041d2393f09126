"""`aether build` and `aether verify`: build a frozen benchmark release and check one.

Thin commands: parse options, call one public function, print with rich.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Add ``build``, ``verify`` and ``demo-sources`` to the CLI."""

    @app.command("build")
    def build(
        config: Path = typer.Argument(..., help="build config (YAML/JSON), e.g. the one `aether demo-sources` writes"),
        out: Path = typer.Option(..., "--out", "-o", help="release directory to write (replaced atomically)"),
        auto_review: bool = typer.Option(False, "--auto-review", help="let the audit auto-review flagged pairs"),
    ) -> None:
        """Build a release: read sources, exclude training questions, select, write and verify."""
        from rich.console import Console
        from rich.table import Table

        from aethersearch.benchmark.build import build_from_config

        result = build_from_config(config, out, auto_review=auto_review)
        console = Console()
        table = Table(title=f"{result.manifest.name}: {result.manifest.question_count} questions")
        for column in ("source", "split", "planned", "quota", "selected"):
            table.add_column(column, justify="left" if column in {"source", "split"} else "right")
        for row in result.manifest.composition:
            table.add_row(row["dataset"], row["split"], str(row["planned"]), str(row["quota"]), str(row["selected"]))
        console.print(table)
        iso = result.manifest.isolation
        console.print(f"exact overlaps removed {iso['exact_overlaps_removed']}, equivalents "
                      f"{iso['template_equivalents_removed']}, duplicates {iso['duplicates_removed']}; final "
                      f"overlap per stage {iso['final_exact_overlap_by_stage']}")
        console.print(f"data sha256 {result.manifest.data_sha256}")
        console.print("stages: " + ", ".join(f"{k} {v:.2f}s" for k, v in result.timings.items()))
        console.print(f"[green]wrote {result.release_dir}[/]")

    @app.command("verify")
    def verify(
        release: Path = typer.Argument(..., help="release directory"),
        replay: bool = typer.Option(False, "--replay", help="also replay the build from the original sources"),
    ) -> None:
        """Verify a release: checksums, rows, ids, schema, projection; print OK/FAIL per check."""
        from rich.console import Console
        from rich.markup import escape

        from aethersearch.benchmark.verify import verify_release

        console = Console()
        report = verify_release(release)
        for check in report.checks:
            colour = "green" if check.ok else "red"
            console.print(f"[{colour}]{escape(check.line())}[/]", highlight=False)
        ok = report.ok
        if replay:
            if importlib.util.find_spec("aethersearch.benchmark.replay") is None:
                console.print("[red]FAIL replay: aethersearch.benchmark.replay is not installed[/]")
                ok = False
            else:
                from aethersearch.benchmark.replay import replay_release

                replayed = replay_release(release)
                console.print(replayed if not hasattr(replayed, "ok") else
                              f"{'OK' if replayed.ok else 'FAIL'} replay")
                ok = ok and bool(getattr(replayed, "ok", True))
        console.print(f"[{'green' if ok else 'red'}]{'OK' if ok else 'FAIL'}[/]: {release}")
        raise typer.Exit(0 if ok else 1)

    @app.command("demo-sources")
    def demo_sources(
        out: Path = typer.Argument(..., help="directory for the demo source files and build config"),
        seed: int = typer.Option(0, help="demo world seed"),
    ) -> None:
        """Write the embedded demo sources (every official layout) and a build config; print its path."""
        from aethersearch.benchmark.demo_sources import write_demo_sources

        typer.echo(write_demo_sources(out, seed=seed))
