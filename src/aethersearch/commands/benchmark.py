"""`aether build`, `aether verify`, `aether eval1400-config`, `aether demo-sources`: build and check releases.

Thin commands: parse options, call one public function, print with rich.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import typer

from aethersearch.commands.progress import make_console

__all__ = ["register"]


def _build_with_progress(config: Path, out: Path, auto_review: bool) -> Any:
    """Build with one progress display per stage (and per audit step): a rich bar on a terminal, plain lines in a log."""
    from aethersearch.commands.progress import stage_progress
    from aethersearch.curation.build import build_from_config

    with stage_progress("build") as report:
        return build_from_config(config, out, auto_review=auto_review, progress=report)


def register(app: typer.Typer) -> None:
    """Add ``build``, ``verify``, ``eval1400-config`` and ``demo-sources`` to the CLI."""

    @app.command("build")
    def build(
        config: Path = typer.Argument(None, help="build config (YAML/JSON); omit with --demo"),
        out: Path = typer.Option(None, "--out", "-o",
                                 help="release directory (replaced atomically); default ./<release name>"),
        demo: bool = typer.Option(False, "--demo", help="build the embedded demo (sources go beside --out)"),
        auto_review: bool = typer.Option(False, "--auto-review", help="let the audit auto-review flagged pairs"),
    ) -> None:
        """Build a release: read sources, exclude training questions, select, write and verify."""
        from rich.table import Table

        from aethersearch.curation.config import load_config
        from aethersearch.errors import ConfigError

        if demo:
            from aethersearch.sources.demo import write_demo_sources

            out = out or Path("demo_release")
            config = write_demo_sources(out.parent / f"{out.name}_sources")
        if config is None:
            raise ConfigError("no build config given", fix="run `aether build CONFIG --out DIR` or `aether build --demo`")
        out = out or Path(load_config(config).config.name)
        result = _build_with_progress(config, out, auto_review)
        console = make_console()
        table = Table(title=f"{result.manifest.name}: {result.manifest.question_count} questions")
        for column in ("source", "split", "planned", "quota", "selected"):
            table.add_column(column, justify="left" if column in {"source", "split"} else "right")
        for row in result.manifest.composition:
            table.add_row(row["dataset"], row["split"], str(row["planned"]), str(row["quota"]), str(row["selected"]))
        console.print(table)
        iso = result.manifest.isolation
        console.print(f"rows read {iso['input_rows']}; exact training overlaps removed {iso['exact_overlaps_removed']}, "
                      f"equivalents {iso['template_equivalents_removed']}, duplicates {iso['duplicates_removed']}; "
                      f"final overlap per stage {iso['final_exact_overlap_by_stage']}")
        console.print(f"data sha256 {result.manifest.data_sha256}")
        console.print("stages: " + ", ".join(f"{k} {v:.2f}s" for k, v in result.timings.items()))
        console.print(f"[green]wrote {result.release_dir}[/]")

    @app.command("verify")
    def verify(
        release: Path = typer.Argument(..., help="release directory"),
        replay: bool = typer.Option(False, "--replay", help="also replay the build from the original sources"),
        base_dir: Path = typer.Option(None, "--base-dir", help="with --replay: the build config's folder (found beside the release "
                                       "or in the current directory when omitted)"),
    ) -> None:
        """Verify a release: checksums, rows, ids, schema, projection; print OK/FAIL per check."""
        from rich.markup import escape

        from aethersearch.release.verify import verify_release

        console = make_console()
        report = verify_release(release)
        for check in report.checks:
            colour = "green" if check.ok else "red"
            console.print(f"[{colour}]{escape(check.line())}[/]", highlight=False)
        ok = report.ok
        if replay:
            if importlib.util.find_spec("aethersearch.release.replay") is None:
                console.print("[red]FAIL replay: aethersearch.release.replay is not available[/]")
                ok = False
            else:
                from aethersearch.release.replay import replay_release

                replayed = replay_release(release, base_dir=base_dir)
                for replay_check in replayed.checks:
                    console.print(f"[{'green' if replay_check.ok else 'red'}]{escape(replay_check.line())}[/]",
                                  highlight=False)
                console.print(f"wrote {escape(str(replayed.output))}", highlight=False)
                ok = ok and replayed.ok
        console.print(f"[{'green' if ok else 'red'}]{'OK' if ok else 'FAIL'}[/]: {escape(str(release))}")
        raise typer.Exit(0 if ok else 1)

    @app.command("eval1400-config")
    def eval1400_config(
        shared_data: Path = typer.Argument(..., help="the public data directory (../shared/data)"),
        out: Path = typer.Option(..., "--out", "-o", help="directory for build.yaml and training_registry.yaml"),
        popqa: str = typer.Option("parquet200", help="PopQA slice: parquet200 or flashrag16"),
        popqa_planned: int = typer.Option(None, help="PopQA planned count (the slices are short of 213)"),
        popqa_cap: int = typer.Option(None, help="PopQA cap: supply only this many, redistribute the rest "
                                      "(default: the slice's size, 200 or 16)"),
        audit: bool = typer.Option(True, "--audit/--no-audit", help="turn the near-duplicate audit on (the card's "
                                   "step 5; --no-audit only for quick experiments)"),
    ) -> None:
        """Write the real benchmark's build config over the public data; print its path."""
        from aethersearch.curation.eval1400 import POPQA_FILES, write_eval1400_config
        from aethersearch.errors import ConfigError

        if popqa not in POPQA_FILES:
            raise ConfigError(f"unknown PopQA slice {popqa!r}", fix=f"use one of {sorted(POPQA_FILES)}")
        plan = {k: v for k, v in (("planned", popqa_planned), ("cap", popqa_cap)) if v is not None} or None
        typer.echo(write_eval1400_config(shared_data, out, popqa=popqa, popqa_plan=plan, audit=audit))  # type: ignore[arg-type]

    @app.command("searchr1-config")
    def searchr1_config(
        parquet: Path = typer.Argument(..., help="Search-R1's processed test parquet (51,713 rows upstream)"),
        out: Path = typer.Option(..., "--out", "-o", help="directory for build.yaml"),
        name: str = typer.Option("searchr1_test", help="release name (row ids start with it)"),
    ) -> None:
        """Write a build config making a release of every row of the Search-R1 test parquet; print its path."""
        from aethersearch.curation.searchr1_test import write_searchr1_test_config

        typer.echo(write_searchr1_test_config(parquet, out, name=name))

    @app.command("demo-sources")
    def demo_sources(
        out: Path = typer.Option(..., "--out", "-o", help="directory for the demo source files and build config"),
        seed: int = typer.Option(0, help="demo world seed"),
    ) -> None:
        """Write the embedded demo sources (every official layout) and a build config; print its path."""
        from aethersearch.sources.demo import write_demo_sources

        typer.echo(write_demo_sources(out, seed=seed))
