"""`aether export verl|flashrag` and `aether import verl`: files the training tools read and write."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from aethersearch.commands.progress import make_console

__all__ = ["register", "register_sandbox_import"]

console = make_console()


def register(app: typer.Typer) -> None:
    """Add the export and import commands to the CLI."""
    export_app = typer.Typer(help="Write a release as a trainer's validation file (carries gold by design).",
                             no_args_is_help=True)
    import_app = typer.Typer(help="Read what a trainer wrote back as a run directory.", no_args_is_help=True)
    app.add_typer(export_app, name="export")
    app.add_typer(import_app, name="import")

    @export_app.command("verl")
    def export_verl(
        release: Path = typer.Argument(..., help="release directory"),  # noqa: B008
        out: Path = typer.Option(..., "--out", "-o", help="parquet file to write, e.g. val.parquet"),  # noqa: B008
    ) -> None:
        """verl / Search-R1 validation parquet (id, question, golden_answers, data_source, prompt, ...).

        One row per question; verl samples each val_kwargs.n times (set val_kwargs.do_sample=True and a
        temperature > 0 for n > 1) and logs reward/mean@n; `aether import verl` reads the n as K samples.
        """
        from aethersearch.interop.exports import aethersearch_pins, sidecar_path
        from aethersearch.interop.exports import export_verl as run

        sidecar = run(release, out)
        console.print(f"[green]wrote[/] {sidecar.rows:,} rows of release {escape(sidecar.release_id)} to "
                      f"{escape(str(out))} (sidecar {escape(str(sidecar_path(out)))})", soft_wrap=True)
        console.print("per source: " + ", ".join(f"{k}={v}" for k, v in sidecar.source_counts.items())
                      + f"; sha256 {sidecar.file_sha256}", soft_wrap=True)
        console.print("AetherSearch fixed-eval pins (paste into its config):\n" + escape(aethersearch_pins(sidecar)),
                      soft_wrap=True)
        console.print("reward: custom_reward_function.path=" + escape(_reward_path()) + " name=compute_score",
                      soft_wrap=True)

    @export_app.command("flashrag")
    def export_flashrag(
        release: Path = typer.Argument(..., help="release directory"),  # noqa: B008
        out: Path = typer.Option(..., "--out", "-o", help="jsonl file to write"),  # noqa: B008
    ) -> None:
        """FlashRAG dataset jsonl (id, question, golden_answers)."""
        from aethersearch.interop.exports import export_flashrag as run
        from aethersearch.interop.exports import sidecar_path

        sidecar = run(release, out)
        console.print(f"[green]wrote[/] {sidecar.rows:,} rows of release {escape(sidecar.release_id)} to "
                      f"{escape(str(out))} (sidecar {escape(str(sidecar_path(out)))})", soft_wrap=True)

    @import_app.command("verl")
    def import_verl(
        generations: Path = typer.Argument(..., help="a {step}.jsonl from verl's trainer.validation_data_dir"),  # noqa: B008
        release: Path = typer.Option(..., "--release", help="the release the validation parquet came from"),  # noqa: B008
        out: Path = typer.Option(..., "--out", "-o", help="run directory to write"),  # noqa: B008
        model: str | None = typer.Option(None, "--model", help="run label (default: step-N)"),
        force: bool = typer.Option(False, "--force", help="replace an existing run directory"),
        eos_text: str = typer.Option("<|im_end|>", "--eos-text",
                                     help="the model's end-of-sequence text, kept in the dump, that ends each "
                                          "action (cuts a response into actions for --compat aethersearch)"),
    ) -> None:
        """Import verl validation generations as a run directory (then `aether score OUT --release DIR`)."""
        from aethersearch.interop.verl_import import import_generations

        result = import_generations(generations, release, out, model=model, force=force, eos_text=eos_text or None)
        console.print(f"[green]imported[/] {result.imported:,} generations (of {result.release_rows:,} release rows)"
                      f" into {escape(str(result.run_dir))}; next: aether score {escape(str(result.run_dir))} "
                      f"--release {escape(str(release))}", soft_wrap=True)
        if result.unsplit:
            console.print(f"[yellow]note:[/] {len(result.unsplit):,} response(s) cannot be cut into actions exactly "
                          f"(first: {escape(result.unsplit[0])}; all in import.json), so `--compat aethersearch` "
                          "will refuse this run; the default and `--compat searchr1` scores are unaffected",
                          soft_wrap=True)

    register_sandbox_import(import_app)

    @import_app.command("aethersearch")
    def import_aethersearch(
        predictions: Path = typer.Argument(..., help="predictions.jsonl from AetherSearch's eval/update_NNN/"),  # noqa: B008
        release: Path = typer.Option(..., "--release", help="the release their parquet was exported from"),  # noqa: B008
        out: Path | None = typer.Option(None, "--out", "-o", help="run directory (default: beside the file)"),  # noqa: B008
        model: str | None = typer.Option(None, "--model", help="run label (default: update-N)"),
        force: bool = typer.Option(False, "--force", help="replace an existing run directory"),
    ) -> None:
        """Import AetherSearch's fixed-eval predictions as a run (then `aether score OUT --release DIR`)."""
        from aethersearch.interop.aethersearch_import import import_predictions

        target = out or predictions.parent / "aether_run"
        result = import_predictions(predictions, release, target, model=model, force=force)
        console.print(f"[green]imported[/] {result.imported:,} predictions (of {result.release_rows:,} release rows)"
                      f" into {escape(str(result.run_dir))}; their mean R_task over the release "
                      f"{result.reported_f1:.4f}; next: aether score {escape(str(result.run_dir))} --release "
                      f"{escape(str(release))} --compat aethersearch", soft_wrap=True)


def register_sandbox_import(import_app: typer.Typer) -> None:
    """Add `aether import sandbox`."""

    @import_app.command("sandbox")
    def import_sandbox(
        action_log: Path = typer.Argument(..., help="the --action-log of the `aether sandbox serve` the harness used"),  # noqa: B008
        release: Path = typer.Option(..., "--release", help="the hint-free release the sandbox served"),  # noqa: B008
        run_id: str = typer.Option(..., "--run-id", help="the run_id the harness sent with POST /episodes"),
        out: Path = typer.Option(..., "--out", "-o", help="run directory to write"),  # noqa: B008
        agent: str = typer.Option("external", "--agent", help="the harness's name (run.json's agent)"),
        model: str | None = typer.Option(None, "--model", help="run label (default: the run id)"),
        force: bool = typer.Option(False, "--force", help="replace an existing run directory"),
    ) -> None:
        """Import an external harness's sandbox episodes as a run (then score, factorise, compare, report, view)."""
        from aethersearch.interop.sandbox_import import import_sandbox_log

        result = import_sandbox_log(action_log, release, out, run_id=run_id, agent=agent, model=model, force=force)
        console.print(f"[green]imported[/] {result.imported:,} episodes (of {result.release_rows:,} release "
                      f"questions; {result.unclosed} never closed, {result.superseded} replaced) into "
                      f"{escape(str(result.run_dir))}; next: aether score {escape(str(result.run_dir))} --release "
                      f"{escape(str(release))}, then aether factorise with --corpus", soft_wrap=True)


def _reward_path() -> str:
    from aethersearch.interop import verl_reward

    return str(verl_reward.__file__)
