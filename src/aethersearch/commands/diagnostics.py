"""`aether factorise` and `aether probe forget|lead-astray|distractors`: WebDetective diagnostics of a run.

Thin commands: parse options, call one public function of
``aethersearch.diagnostics.probes`` (or ``aethersearch.diagnostics.rerun``), print with rich.
Heavy imports stay inside the functions so ``aether --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from aethersearch.commands.progress import make_console

__all__ = ["ROWS", "budget_text", "print_factorised", "print_probe", "register"]

#: the factorised table's rows: the paper's six, then the project's evidence coverage (labels: scoring.metric_names)
ROWS = ("pass_at_1", "knowledge_sufficiency", "search_score", "evidence_coverage", "f1_good_refusal",
        "f1_knowledge_utilisation", "gen_score")


def _fmt(value: Any) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def print_factorised(result: dict[str, Any]) -> None:
    """The factorised table: overall, then one column per hop count and per source.

    A release of one source gets no source column: it would repeat the overall column figure for figure.
    """
    from aethersearch.commands.tables import Column, print_fitted
    from aethersearch.scoring.metric_names import label

    groups = [("overall", result["overall"])]
    groups += [(f"{k} hops", v) for k, v in result.get("by_hops", {}).items()]
    by_source = result.get("by_source", {})
    if len(by_source) > 1:
        groups += list(by_source.items())
    budget = (result.get("run") or {}).get("budget")
    title = f"Factorised metrics (n={result['n']}, %)" + (f", budget {budget_text(budget)}" if budget else "")
    rows = [[label(key), *(_fmt(values.get(key)) for _, values in groups)] for key in ROWS]
    rows.append(["n", *(str(values.get("n")) for _, values in groups)])
    print_fitted(make_console(), title, [Column("metric")], [Column(name, "right") for name, _ in groups], rows)


def budget_text(budget: dict[str, Any]) -> str:
    """A budget as one phrase: ``40 tool calls, 32768-token context, no turn limit``."""
    def limit(value: Any, unit: str) -> str:
        return f"no {unit} limit" if value is None else f"{value} {unit}s"
    parts = [limit(budget.get("max_tool_calls"), "tool call"), limit(budget.get("max_turns"), "turn")]
    if budget.get("max_context_tokens") is not None:
        parts.append(f"{budget['max_context_tokens']}-token context")
    if budget.get("max_tokens") is not None:
        parts.append(f"{budget['max_tokens']} completion tokens")
    return ", ".join(parts)


def print_probe(title: str, summary: dict[str, Any], keys: tuple[str, ...]) -> None:
    """One probe on one line: its rates and denominators, or why it does not apply."""
    console = make_console()
    if summary.get("applicable") is False:
        console.print(f"[bold]{title}[/]: not applicable — {summary['reason']} (n_eligible={summary.get('n_eligible')})")
        return
    parts = []
    for key in keys:
        value = summary.get(key)
        parts.append(f"{key}={_fmt(value) + '%' if isinstance(value, float) else value}")
    console.print(f"[bold]{title}[/]: " + ", ".join(parts))


def _store(corpus: Path | None) -> Any:
    if corpus is None:
        return None
    from aethersearch.corpus.store import open_store

    return open_store(corpus)


def _judge(url: str | None, model: str, key_env: str | None) -> Any:
    if url is None:
        return None
    from aethersearch.scoring.judge import JudgeConfig

    return JudgeConfig(base_url=url, model=model, api_key_env=key_env)


def _llm(endpoint: str | None, model: str | None, run: Path) -> Any:
    """An LLM client for the probes: the given endpoint/model, else the run's own (None if it had none)."""
    from aethersearch.diagnostics.probes import load_fingerprint
    from aethersearch.errors import ConfigError

    fingerprint = load_fingerprint(run)
    endpoint = endpoint or fingerprint.endpoint
    model = model or fingerprint.model
    if endpoint is None and model is None:
        return None
    if endpoint is None or model is None:
        raise ConfigError("pass both --endpoint and --model (the run.json has only one of them)",
                          fix="e.g. --endpoint http://127.0.0.1:8000/v1 --model NAME")
    from aethersearch.agents.llm import OpenAIClient

    return OpenAIClient(endpoint, model)


def register(app: typer.Typer) -> None:
    """Add ``factorise`` and the ``probe`` group to the CLI."""

    @app.command("factorise")
    def factorise_command(
        run: Path = typer.Argument(..., help="Run directory (run.json + traces.jsonl)."),
        release: Path = typer.Option(..., "--release", help="The release the run was rolled out on."),
        corpus: Path = typer.Option(..., "--corpus",
                                    help="Document store the run searched (served text is rebuilt from it)."),
        judge: str | None = typer.Option(None, "--judge", help="OpenAI-compatible base URL of an LLM judge "
                                                             "(correctness as in `aether score --judge`)."),
        judge_model: str = typer.Option("gpt-4o-mini", "--judge-model", help="Judge model name."),
        judge_key_env: str | None = typer.Option(None, "--judge-key-env", help="Env var holding the judge API key."),
        correct: str = typer.Option("em", "--correct", help="Where correctness comes from: em (exact match), or "
                                                            "judge:NAME (that judge's verdicts from `aether score "
                                                            "--judge`, no new call)."),
    ) -> None:
        """Write factorised.json (Knowledge Sufficiency, Search Score, F1_GR, F1_KU, GenScore, Pass@1)."""
        from aethersearch.diagnostics.probes import factorise_run
        from aethersearch.errors import ConfigError

        if correct != "em" and not correct.startswith("judge:"):
            raise ConfigError(f"--correct {correct!r}", fix="use em or judge:NAME (a judge of `aether score`)")
        if correct != "em" and judge is not None:
            raise ConfigError("--correct judge:NAME reads a scored judge; --judge calls a new one",
                              fix="pass one of them")
        result = factorise_run(run, release, store=_store(corpus),
                               judge=_judge(judge, judge_model, judge_key_env), correct_from=correct)
        print_factorised(result)
        typer.echo(f"wrote {run / 'factorised.json'}")

    probe = typer.Typer(help="Knowledge-degradation probes (forget, lead-astray) and the distractor robustness probe.",
                        no_args_is_help=True)

    @probe.command("forget")
    def forget_command(
        run: Path = typer.Argument(..., help="Run directory."),
        release: Path = typer.Option(..., "--release", help="The hint-free release of the run."),
        endpoint: str | None = typer.Option(None, "--endpoint", help="Model endpoint (default: the run's)."),
        model: str | None = typer.Option(None, "--model", help="Model name (default: the run's)."),
        concurrency: int = typer.Option(8, "--concurrency", min=1),
        corpus: Path | None = typer.Option(None, "--corpus", help="Document store the run searched (needed for "
                                                                 "the Forget rate over sufficient-evidence failures)."),
        judge: str | None = typer.Option(None, "--judge", help="OpenAI-compatible base URL of an LLM judge."),
        judge_model: str = typer.Option("gpt-4o-mini", "--judge-model", help="Judge model name."),
        judge_key_env: str | None = typer.Option(None, "--judge-key-env", help="Env var holding the judge API key."),
    ) -> None:
        """Ask each hop's sub-question without search; Forget = sufficient-evidence failures whose failing hop is known."""
        from aethersearch.diagnostics.probes import forget_probe

        summary = forget_probe(run, release, llm=_llm(endpoint, model, run), concurrency=concurrency,
                               store=_store(corpus), judge=_judge(judge, judge_model, judge_key_env))
        print_probe("forget", summary, ("forget_rate", "n_forget", "n_eligible", "known_hop_forget_rate",
                                         "n_known_in_isolation", "n_forgotten", "n_hops"))
        typer.echo(f"wrote {run / 'probes.json'}")

    @probe.command("lead-astray")
    def lead_astray_command(
        run: Path = typer.Argument(..., help="Run directory."),
        release: Path = typer.Option(..., "--release", help="The hint-free release of the run."),
        corpus: Path = typer.Option(..., "--corpus", help="Document store the run searched (served text is "
                                                          "rebuilt from it)."),
        endpoint: str | None = typer.Option(None, "--endpoint", help="Model endpoint (default: the run's)."),
        model: str | None = typer.Option(None, "--model", help="Model name (default: the run's)."),
        concurrency: int = typer.Option(8, "--concurrency", min=1),
    ) -> None:
        """Re-ask the run's sufficient-evidence failures with only the clean hop statements they were served."""
        from aethersearch.diagnostics.probes import lead_astray_probe
        from aethersearch.diagnostics.rerun import agent_for

        summary = lead_astray_probe(run, release, store=_store(corpus), llm=_llm(endpoint, model, run),
                                    concurrency=concurrency, agent=agent_for(run))
        print_probe("lead-astray", summary, ("lead_astray_rate", "n_led_astray", "n_eligible"))
        typer.echo(f"wrote {run / 'probes.json'}")

    @probe.command("distractors")
    def distractors_command(
        run: Path = typer.Argument(..., help="Run directory."),
        release: Path = typer.Option(..., "--release", help="The release of the run."),
        corpus: Path = typer.Option(..., "--corpus", help="Document store (distractors and pages)."),
        index: Path | None = typer.Option(None, "--index", help="Search index directory of the corpus."),
        ratio: float = typer.Option(0.5, "--ratio", min=0.0, max=0.95,
                                    help="Share of every observation that is distractors."),
        seed: int = typer.Option(0, "--seed"),
        endpoint: str | None = typer.Option(None, "--endpoint", help="Model endpoint (default: the run's)."),
        model: str | None = typer.Option(None, "--model", help="Model name (default: the run's)."),
        concurrency: int = typer.Option(8, "--concurrency", min=1),
    ) -> None:
        """Robustness probe (not the paper's Lead-astray): rerun with seeded corpus distractors injected."""
        from aethersearch.diagnostics.probes import distractor_probe
        from aethersearch.diagnostics.rerun import agent_for, environment_factory_for

        store = _store(corpus)
        factory = environment_factory_for(run, release, store, index)
        summary = distractor_probe(run, release, environment_factory=factory, store=store,
                                   llm=_llm(endpoint, model, run), ratio=ratio, seed=seed,
                                   concurrency=concurrency, agent=agent_for(run))
        print_probe("distractors", summary, ("distractor_rate", "n_eligible", "n_distracted",
                                              "pass_at_1_clean", "pass_at_1_noisy"))
        typer.echo(f"wrote {run / 'probes.json'}")

    app.add_typer(probe, name="probe")
