"""`aether audit` and `aether replay`: the near-duplicate audit alone, and the independent replay.

Thin commands: parse options, call one public function, print with rich.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from aethersearch.commands.progress import make_console

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``audit``, ``review`` and ``replay`` to the CLI."""

    @app.command("audit")
    def audit(
        target: Path = typer.Argument(..., help="release directory (eval.jsonl) or JSONL of {id, question}"),
        training: Path = typer.Option(..., "--training", "-t", help="training registry (YAML/JSON)"),
        reviews: Path | None = typer.Option(None, "--reviews", help="review decisions JSON, to show each pair's status"),
        threshold: float | None = typer.Option(None, "--threshold", min=0.0, max=100.0,
                                              help="similarity threshold, 0-100 (default 85)"),
        rare_threshold: float | None = typer.Option(None, "--rare-threshold", min=0.0, max=1.0,
                                                   help="rare-token threshold, 0-1 (default 0.6)"),
        top: int = typer.Option(20, "--top", help="how many flagged pairs to print"),
        json_out: Path | None = typer.Option(None, "--json", help="also write every flagged pair and the counts here"),
    ) -> None:
        """Audit selected questions against every training question; print the top flagged pairs."""
        from rich.table import Table

        from aethersearch.audit.near_duplicates import audit_selection_file
        from aethersearch.commands.progress import stage_progress
        from aethersearch.jsonl import atomic_write_json

        config: dict[str, Any] = {}
        if threshold is not None:
            config["similarity"] = {"threshold": threshold}
        if rare_threshold is not None:
            config["rare_tokens"] = {"threshold": rare_threshold}
        with stage_progress("audit") as report:  # rich bars on a terminal, plain periodic lines in a log
            result = audit_selection_file(target, training, audit_config=config, reviews_path=reviews,
                                          progress=report)
        counts = result.report["counts"]
        sim = result.report["methods"]["similarity"]
        table = Table(title=f"top {min(top, len(result.pairs))} of {counts['pairs_flagged']} flagged pairs")
        for column in ("selected", "training question", "similarity", "rare-token", "decision"):
            table.add_column(column, overflow="fold")
        for pair in result.pairs[:top]:
            table.add_row(pair["selected_question"] if pair["selected_id"] is None
                          else f"{pair['selected_id']}: {pair['selected_question']}",
                          pair["pair"][1], "" if pair["similarity"] is None else f"{pair['similarity']:.1f}",
                          "" if pair["rare_token"] is None else f"{pair['rare_token']:.3f}", pair["decision"])
        console = make_console()
        console.print(table)
        console.print(f"{result.report['questions']} questions x {result.report['training_union_size']} training "
                      f"questions: {sim['pairs_visited']:,} pairs scored ({sim['scorer']} >= {sim['threshold']}); "
                      f"pairs flagged {counts['pairs_flagged']}, questions involved {counts['questions_involved']}, "
                      f"retained with reason {counts['retained_with_reason']}, excluded {counts['excluded']}, "
                      f"unreviewed {counts['unreviewed']}")
        if json_out is not None:
            atomic_write_json(json_out, {"report": result.report, "pairs": result.pairs})
            console.print(f"wrote {json_out}")
        if counts["unreviewed"]:
            console.print(f"[red]FAIL[/]: {counts['unreviewed']} flagged pair(s) have no recorded decision; a "
                          "release must record a decision for every flagged pair (fix: build with the audit on, "
                          "review the template and rebuild, or `aether build CONFIG --auto-review`)")
            raise typer.Exit(1)
        console.print("[green]OK[/]: every flagged pair has a recorded decision")

    @app.command("review")
    def review(
        template: Path = typer.Argument(..., help="the review template the build wrote (*.todo.json), filled in"),
        out: Path = typer.Option(..., "--out", "-o", help="the review file the build config names (audit.reviews)"),
        auto: bool = typer.Option(False, "--auto", help="decide every remaining TODO by the documented "
                                  "conservative policy (aethersearch.audit.policy)"),
    ) -> None:
        """Apply a decisions file: merge the decided pairs of a filled-in template into the review file."""
        from aethersearch.audit.review import apply_review_file

        decided, automatic, todo = apply_review_file(template, out, auto=auto)
        typer.echo(f"{out}: {decided} decision(s) from the template, {automatic} by the policy, {todo} still TODO")
        if todo:
            typer.echo(f"FAIL: {todo} pair(s) in {template} still say TODO (fix: set each to exclude or retain with "
                       "a reason, or pass --auto)", err=True)
            raise typer.Exit(1)

    @app.command("replay")
    def replay(
        release: Path = typer.Argument(..., help="release directory"),
        base_dir: Path | None = typer.Option(None, "--base-dir",
                                             help="the build config's folder (its data_root then locates the data)"),
        config: Path | None = typer.Option(None, "--config", "-c",
                                           help="the build config the release was built from (its directory "
                                                "is used as --base-dir)"),
        out: Path | None = typer.Option(None, "--out", "-o",
                                        help="where to write independent_validation.json "
                                             "(default: <release>.independent_validation.json beside the release)"),
    ) -> None:
        """Independently rebuild exclusions and selection from the original files; OK/FAIL per check.

        The build config is looked for in --config, --base-dir, <release>_sources beside
        the release (what `aether build --demo --out <release>` writes), folders beside
        the release or in the current directory holding a file of its name, the current
        directory and the release's parent; its data_root locates the source files. The report is written beside the
        release, never inside it (the frozen release's verifier refuses unlisted files).
        """
        from rich.markup import escape

        from aethersearch.release.replay import replay_release

        report = replay_release(release, base_dir=base_dir, config=config, output=out)
        console = make_console()
        for check in report.checks:
            console.print(f"[{'green' if check.ok else 'red'}]{escape(check.line())}[/]", highlight=False)
        console.print(f"wrote {escape(str(report.output))}", highlight=False)
        raise typer.Exit(0 if report.ok else 1)
