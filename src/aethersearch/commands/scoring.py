"""`aether score`, `aether compare`, `aether report`, `aether watch`: scoring and checkpoint comparison.

Thin commands: parse options, call one public function, print with rich.
Heavy imports stay inside the functions so ``aether --help`` stays fast.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from aethersearch.commands.progress import make_console
from aethersearch.report.viewer import VIEWER_URL

if TYPE_CHECKING:
    from aethersearch.scoring.scores_file import JudgeSummary, MetricEstimate, Scores

__all__ = ["print_aethersearch", "print_comparison", "print_disagreement", "print_scores", "print_selective",
    "register"]


def _pct(value: float | None) -> str:
    return "—" if value is None or math.isnan(value) else f"{100 * value:.1f}"


def _unscored_note(errors: int, missing: int = 0) -> str:
    """What stands beside a figure computed over questions that were never really attempted."""
    parts = ([f"{errors} err"] if errors else []) + ([f"{missing} missing"] if missing else [])
    return f" ({', '.join(parts)})" if parts else ""


def _print_reducers(console: Any, scores: Scores, metric: str = "em") -> None:
    """A K-sample run's reducers of ``metric`` over all questions (micro), CIs clustered by question."""
    micro = scores.overall.micro
    figures = ", ".join(f"{name} {_pct(est.mean)} [{_pct(est.ci_low)}, {_pct(est.ci_high)}]"
                        for name, est in micro.reducers.get(metric, {}).items())
    share = micro.variance.get(metric)
    console.print(f"{metric} over {scores.samples} samples (micro, %, 95% CI clustered by question): {figures}")
    if share is not None and share.share is not None:
        console.print(f"within-question variance share of {metric}: {share.share:.2f} (near 1: more samples "
                      "narrow the CI; near 0: only more questions do)")


def print_scores(scores: Scores) -> None:
    """Per-source table (mean and 95% CI, in %) plus the labelled micro and macro overall rows.

    Every figure computed over questions that ended in errors carries the error
    count beside it, so a run of endpoint failures never reads as a low score.
    """
    from rich.markup import escape

    from aethersearch.commands.tables import Column, print_fitted

    shown = ("em", "subem", "subem_answered", "f1", "cover_em", "judge")
    metrics = [m for m in shown if m in scores.metrics]
    missing = scores.errors.missing
    title = f"{scores.run_dir}  (denominator {scores.denominator}, %)"
    if scores.samples > 1:
        title += f"\n{scores.samples} samples per question: every figure is mean@{scores.samples}"
    if scores.errors.unscored:
        title += f"\n{_unscored_note(scores.errors.count, missing).strip(' ()')}: each scored 0 in every figure"
    def cells(block: Mapping[str, MetricEstimate], note: str) -> list[str]:
        return [f"{_pct(block[m].mean)} [{_pct(block[m].ci_low)}, {_pct(block[m].ci_high)}]{note}"
                for m in metrics]

    rows = [[escape(source), str(entry.n), *cells(entry.metrics, _unscored_note(entry.errors))]
            for source, entry in scores.by_source.items()]
    micro, macro = scores.overall.micro, scores.overall.macro
    rows.append(["overall (micro)", str(micro.n), *cells(micro.metrics, _unscored_note(micro.errors, missing))])
    rows.append(["overall (macro)", f"{macro.sources} src",
                 *cells(macro.metrics, _unscored_note(macro.errors, missing))])
    console = make_console()
    print_fitted(console, escape(title), [Column("source"), Column("n", "right")],
                 [Column(metric, "right") for metric in metrics], rows)
    if scores.samples > 1:
        _print_reducers(console, scores)
    outcomes = ", ".join(f"{k}={v}" for k, v in scores.outcomes.items() if v)
    join = scores.join
    console.print(f"outcomes: {outcomes}")
    if scores.errors.count:
        kinds = ", ".join(f"{k}={v}" for k, v in scores.errors.by_outcome.items())
        console.print(f"[yellow]errors: {scores.errors.count} of {scores.denominator} questions ({kinds}) scored 0 "
                      "without an answer attempt; `aether score --strict` refuses such a run[/]")
    for judge in scores.judges or ([scores.judge] if scores.judge is not None else []):
        print_disagreement(console, judge)
    for pair in scores.judge_agreement:
        ci = "" if pair.ci_low is None or pair.ci_high is None else f" [{100 * pair.ci_low:+.1f}, {100 * pair.ci_high:+.1f}]"
        kappa = "—" if pair.kappa is None else f"{pair.kappa:.3f}"
        delta = "—" if pair.delta is None else f"{100 * pair.delta:+.1f}"
        console.print(f"judges {escape(pair.b)} vs {escape(pair.a)} on {pair.n} questions: kappa {kappa}, "
                      f"score delta {delta}{ci} points; disagree on {len(pair.disagree)}"
                      + (f": {', '.join(pair.disagree[:10])}" if pair.disagree else ""))
    if scores.cost is not None:
        _print_cost(console, scores.cost)
    usage = scores.usage
    if usage.questions_with_usage:
        means = ", ".join(f"{field}={getattr(usage, field).mean:.1f}" for field in
                          ("prompt_tokens", "completion_tokens", "turns", "tool_calls"))
        console.print(f"mean usage per question ({usage.questions_with_usage} recorded): {means}")
    budget = scores.budget
    if budget.exhausted:
        console.print(f"budget exhausted: {budget.exhausted} questions; {budget.answered_after_budget} "
                      "answered by the forced final request (scored as answered)")
    print_selective(console, scores)
    console.print(escape(f"missing={len(join.missing)} duplicates={len(join.duplicates)} "
                         f"unknown={len(join.unknown)}  ->  {Path(scores.run_dir) / 'scores.json'}"))
    console.print(escape(f"gold: {scores.gold.eval_file} sha256 {scores.gold.eval_sha256} "
                         f"(release {scores.gold.release_id or '—'}, verified)"))
    if scores.aethersearch:
        print_aethersearch(console, scores.aethersearch)


def print_aethersearch(console: Any, summary: dict[str, dict[str, float]]) -> None:
    """AetherSearch's own aggregate keys (``--compat aethersearch``), one row per source."""
    from rich.table import Table

    keys = [key for key in summary["overall"] if key != "count"]
    table = Table(title="AetherSearch eval keys (their f1 = mean R_task; overall_macro is our name for the "
                        "README's Overall/Avg.)")
    table.add_column("domain")
    table.add_column("count", justify="right")
    for key in keys:
        table.add_column(key, justify="right")
    for domain, values in summary.items():
        table.add_row(domain, str(int(values["count"])), *(f"{values[key]:.4f}" for key in keys))
    console.print(table)


def print_selective(console: Any, scores: Scores) -> None:
    """Risk–coverage (AURC, max coverage, ECE) and, when scored, the budget curve's points."""
    risk = scores.risk_coverage
    if risk is not None and risk["aurc"] is not None:
        ece = "" if risk["ece"] is None else f", ECE {risk['ece']:.3f} over {risk.get('ece_answers')} stated"
        console.print(f"risk-coverage ({risk['signal']} confidence): AURC {risk['aurc']:.3f} over coverage up to "
                      f"{100 * risk['coverage_max']:.1f}% ({risk['covered']} of {risk['n']} answered){ece}")
        stated = risk.get("stated")
        if stated:
            console.print(f"stated confidence: {stated['stated']} of {stated['answered']} answers stated one; "
                          f"{stated['missing']} missing, {stated['unparseable']} unparseable, "
                          f"{stated['out_of_range']} out of range (ranked last, left out of ECE)")
    curve = scores.budget_curve
    if curve is not None:
        metric = curve["metrics"][0]
        for axis, entry in curve["axes"].items():
            points = ", ".join(f"{p['budget']}: {_pct(p[metric]['mean'])} ({p['exhausted']} exh.)"
                               for p in entry["points"])
            console.print(f"{metric} by {axis} budget: {points}")


def print_disagreement(console: Any, judge: JudgeSummary) -> None:
    """The EM-vs-judge table (rows EM 0/1, columns verdicts) and the ids where the two disagree."""
    from rich.table import Table

    disagreement = judge.disagreement
    agreement = disagreement.agreement
    table = Table(title=f"EM vs judge {judge.model} (agreement "
                        f"{'—' if agreement is None else f'{100 * agreement:.1f}%'}, {disagreement.judged} judged)")
    verdicts = list(next(iter(disagreement.em_vs_verdict.values())))
    table.add_column("EM")
    for verdict in verdicts:
        table.add_column(verdict, justify="right")
    for em_value, counts in disagreement.em_vs_verdict.items():
        table.add_row(em_value, *(str(counts[v]) for v in verdicts))
    console.print(table)
    for ids, label in ((disagreement.judge_correct_em_not, "judge correct, EM 0"),
                       (disagreement.em_correct_judge_not, "EM 1, judge not")):
        if ids:
            shown = ", ".join(ids[:10]) + (f" (+{len(ids) - 10} more)" if len(ids) > 10 else "")
            console.print(f"{label}: {shown}")
    kappa = "" if judge.kappa_vs_em is None else f"; kappa vs EM {judge.kappa_vs_em:.3f}"
    console.print(f"judge {judge.name or judge.model} ({judge.metric}): {judge.parser} parser, prompt "
                  f"{judge.prompt_source} sha256 {judge.prompt_sha256[:12]}, temperature {judge.temperature}, "
                  f"seed {judge.seed}{kappa}" + ("; [bold]judging the model under test[/]" if judge.judge_self else ""))
    if judge.error_count or judge.errors:
        count = judge.error_count or len(judge.errors)
        console.print(f"[yellow]judge errors: {count} rows got no verdict (unparseable reply or API error): left "
                      f"out of {judge.metric}, never scored as wrong; {judge.questions_without_verdict} questions "
                      "are out of its denominator[/]")


def _print_cost(console: Any, cost: dict[str, Any]) -> None:
    """Tokens and cost of the agent and each judge (``--prices``); an unpriced part says so."""
    def money(line: dict[str, Any]) -> str:
        return f"{line['cost']:.4f} {cost['currency']}" if line.get("cost") is not None else f"— ({line.get('why')})"

    parts = [("agent", cost["agent"]), *((f"judge {j['name']}", j) for j in cost["judges"])]
    for label, line in parts:
        console.print(f"cost {label} ({line['model']}): {line['prompt_tokens']:,} + {line['completion_tokens']:,} "
                      f"tokens = {money(line)}")
    total = cost.get("total")
    console.print(f"cost total: {total:.4f} {cost['currency']}" if total is not None
                  else f"cost total: — ({cost.get('total_why')})")


def _print_factorised_pair(pair: dict[str, Any]) -> None:
    """The paper's factorised metrics of two sandbox runs: points, paired delta with its CI and p (``compare``)."""
    from rich.table import Table

    from aethersearch.scoring.metric_names import label

    found = pair.get("factorised")
    if not found:
        return
    console = make_console()
    if "absent" in found:
        console.print(f"[yellow]factorised metrics not compared: {found['absent']}[/]")
        return
    table = Table(title=f"factorised metrics, {pair['b']} vs {pair['a']} (n={found['n']}, paired bootstrap over "
                        f"questions, {found['resamples']} draws)")
    for column in ("metric", pair["a"], pair["b"], "delta", "95% CI", "p", "noise"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    for key, r in found["results"].items():
        if r["delta"] is None:
            table.add_row(label(key), _pct(r["a"]), _pct(r["b"]), "—", "—", "—", r.get("why", ""))
            continue
        table.add_row(label(key), _pct(r["a"]), _pct(r["b"]), f"{100 * r['delta']:+.1f}{' *' if r['significant'] else ''}",
                      f"{100 * r['ci_low']:+.1f} .. {100 * r['ci_high']:+.1f}", f"{r['p_value']:.4f}",
                      "—" if "noise_floor" not in r else f"{_pct(r['noise_floor'])}{' ~' if r['within_noise'] else ''}")
    console.print(table)


def print_comparison(result: dict[str, Any]) -> None:
    """One table per pair: delta, test, p and Holm p per scope x metric, and the flip counts."""
    from rich.table import Table

    console = make_console()
    if result["allowed_overrides"]:
        console.print(f"[yellow]contract override (--allow): {', '.join(result['allowed_overrides'])}[/]")
    unscored = {run["name"]: _unscored_note(run.get("errors", 0), run.get("missing", 0)) for run in result["runs"]}
    for run in result["runs"]:
        cost = run.get("cost")
        spent = (f"; cost {cost['total']:.4f} {cost['currency']}" if cost and cost.get("total") is not None
                 else "; cost: —" + (f" ({cost.get('total_why')})" if cost else " (score with --prices)"))
        usage = run.get("usage") or {}
        console.print(f"{run['name']}: {usage.get('prompt_tokens', 0):,} + {usage.get('completion_tokens', 0):,} "
                      f"agent tokens{spent}")
    for pair in result["pairs"]:
        table = Table(title=f"{pair['b']}{unscored.get(pair['b'], '')} vs {pair['a']}{unscored.get(pair['a'], '')}"
                            f"  (* = significant after Holm, alpha {result['alpha']})")
        for column in ("scope", "metric", pair["a"], pair["b"], "delta", "test", "p", "p Holm", "MDE", "noise"):
            table.add_column(column, justify="left" if column in ("scope", "metric", "test") else "right")
        noisy = False
        for scope, by_metric in pair["results"].items():
            for metric, r in by_metric.items():
                mark = " *" if r["significant"] else ""
                within = r.get("within_noise")
                noisy = noisy or bool(within)
                table.add_row(scope, metric, _pct(r["a_mean"]), _pct(r["b_mean"]), f"{100 * r['delta']:+.1f}{mark}",
                              r["method"], f"{r['p_value']:.4f}", f"{r['p_holm']:.4f}", _pct(r["mde"]),
                              "—" if "noise_floor" not in r else f"{_pct(r['noise_floor'])}{' ~' if within else ''}")
        console.print(table)
        if noisy:
            console.print("~ = within serving noise: the delta is smaller than what rerunning the same checkpoints "
                          "gives (`aether noise`)")
        _print_factorised_pair(pair)
        risk = pair.get("risk_coverage") or {}
        if risk.get("delta") is not None:
            console.print(f"AURC {pair['b']} - {pair['a']}: {risk['delta']:+.3f} (95% CI {risk['ci_low']:+.3f} .. "
                          f"{risk['ci_high']:+.3f}; signals {', '.join(risk['signal'])})")
        ece = risk.get("ece") or {}
        if ece.get("delta") is not None:
            console.print(f"ECE {pair['b']} - {pair['a']}: {ece['delta']:+.3f} (95% CI {ece['ci_low']:+.3f} .. "
                          f"{ece['ci_high']:+.3f}; {ece['a']:.3f} -> {ece['b']:.3f})")
        for metric, flips in pair["flips"].items():
            console.print(f"{metric} flips: wrong->right {len(flips['wrong_to_right'])}, "
                          f"right->wrong {len(flips['right_to_wrong'])}")


def register(app: typer.Typer) -> None:
    """Add this area's commands to the CLI."""

    @app.command("score")
    def score(
        run: Annotated[Path, typer.Argument(help="Run directory (run.json + traces.jsonl or predictions.jsonl).")],
        release: Annotated[Path, typer.Option("--release", help="Release directory holding eval.jsonl.")],
        compat: Annotated[str | None, typer.Option(help="Reproduce a published scorer: 'searchr1' "
                                                        "(last answer of prompt+response, two matches) or "
                                                        "'aethersearch' (their validity rules, R_task, exact, "
                                                        "per-source keys; docs/aethersearch-compat.md).")] = None,
        judge: Annotated[list[str] | None, typer.Option(help="OpenAI-compatible base URL of an LLM judge "
                                                           "(repeatable: each judge scores and is compared).")] = None,
        judge_model: Annotated[list[str] | None, typer.Option(help="Judge model name (once for all, or once per "
                                                                 "--judge; default gpt-4o-mini).")] = None,
        judge_name: Annotated[list[str] | None, typer.Option(help="Judge name in tables and metric keys "
                                                                "(default: its model).")] = None,
        judge_prompt: Annotated[list[Path] | None, typer.Option(help="A grader's prompt file ({question}, "
                                                                    "{golds}/{correct_answer}/{target}, "
                                                                    "{prediction}/{response}); default: the "
                                                                    "project's own.")] = None,
        judge_parser: Annotated[list[str] | None, typer.Option(help="How a reply reads as a verdict: three-way "
                                                                   "(CORRECT/INCORRECT/NOT_ATTEMPTED), yes-no "
                                                                   "(BrowseComp's 'correct: yes|no'), letter "
                                                                   "(SimpleQA's A/B/C).")] = None,
        judge_key_env: Annotated[str | None, typer.Option(help="Env var holding the judge API key.")] = None,
        judge_temperature: Annotated[float, typer.Option(help="Judge sampling temperature.")] = 0.0,
        judge_seed: Annotated[int | None, typer.Option(help="Judge seed sent with every call.")] = 0,
        judge_max_tokens: Annotated[int | None, typer.Option(help="Judge reply cap (default 16; 1024 for "
                                                                 "yes-no graders).")] = None,
        judge_self: Annotated[bool, typer.Option("--judge-self", help="Allow a judge on the model under test "
                                                                     "(refused otherwise; recorded).")] = False,
        judge_errors: Annotated[str, typer.Option(help="report: count judge errors beside the score; fail: "
                                                       "also exit non-zero when there are any.")] = "report",
        prices: Annotated[Path | None, typer.Option(help="Price table (YAML/JSON: models: {M: "
                                                         "{input_per_million, output_per_million}}): adds the "
                                                         "agent's and each judge's tokens and cost.")] = None,
        resamples: Annotated[int, typer.Option(help="Bootstrap resamples for the 95% CIs.")] = 1000,
        seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
        strict: Annotated[bool, typer.Option("--strict", help="Refuse (exit 3) a run with any errored or "
                                                              "missing question instead of scoring it.")] = False,
        budget_curve: Annotated[bool, typer.Option("--budget-curve", help="Also give accuracy at every smaller "
                                                   "tool-call and token budget, read from this run (refused for "
                                                   "agents whose prompt states the budget).")] = False,
    ) -> None:
        """Score a run against its verified release and write scores.json (never calls the agent).

        Refuses a release whose files do not match checksums.sha256 or whose
        eval.jsonl is not the one the run pinned in run.json.
        """
        from aethersearch.scoring.api import score_run
        from aethersearch.scoring.judge import build_judges

        judges = build_judges(judge or [], models=judge_model or [], names=judge_name or [],
                              prompts=judge_prompt or [], parsers=judge_parser or [], api_key_env=judge_key_env,
                              temperature=judge_temperature, seed=judge_seed, max_tokens=judge_max_tokens)
        print_scores(score_run(run, release, compat=compat, judges=judges, resamples=resamples, seed=seed,
                               strict=strict, budget_curve=budget_curve, judge_self=judge_self,
                               judge_errors=judge_errors, prices=prices))

    @app.command("compare")
    def compare(
        runs: Annotated[list[Path], typer.Argument(help="Scored run directories; the first is the reference.")],
        allow: Annotated[list[str] | None, typer.Option("--allow", help="Contract field allowed to differ "
                                                                       "(repeatable; recorded in the result).")] = None,
        metric: Annotated[list[str] | None, typer.Option("--metric", help="Metrics to test (default em, f1).")] = None,
        out: Annotated[Path | None, typer.Option("--out", "-o", help="Write the comparison JSON here.")] = None,
        alpha: Annotated[float, typer.Option(help="Family-wise significance level (Holm).")] = 0.05,
        reducer: Annotated[str | None, typer.Option(help="K-sample figure to compare: mean (mean@K), pass@k or "
                                                         "maj (maj@K); needed when runs differ in --samples.")] = None,
    ) -> None:
        """Paired comparison of checkpoints (e.g. Base SFT DPO RL) on one frozen contract."""
        from aethersearch.compare.checkpoints import DEFAULT_METRICS, compare_runs

        print_comparison(compare_runs(runs, allow=allow or (), metrics=metric or DEFAULT_METRICS, alpha=alpha,
                                      out_path=out, reducer=reducer))

    @app.command("noise")
    def noise(
        run: Annotated[Path, typer.Argument(help="A scored run directory (run.json, traces, scores.json).")],
        release: Annotated[Path, typer.Option("--release", help="The release the run was scored on.")],
        reruns: Annotated[int, typer.Option(help="How many times to rerun the sampled questions.")] = 3,
        sample: Annotated[int | None, typer.Option(help="How many questions to rerun (default all).")] = None,
        concurrency: Annotated[list[int] | None, typer.Option("--concurrency", help="Concurrency of each rerun, "
                                                              "cycled (repeatable; default 1, the run's, 4x).")] = None,
        metric: Annotated[str, typer.Option(help="The 0/1 metric whose flips are counted.")] = "em",
        seed: Annotated[int, typer.Option(help="Seed of the question sample.")] = 0,
        index: Annotated[Path | None, typer.Option(help="Search index the run used.")] = None,
        search_url: Annotated[str | None, typer.Option(help="Or the retrieval server it used.")] = None,
        sandbox_url: Annotated[str | None, typer.Option(help="Or the masked sandbox it used (a hint-free "
                                                             "release; with --index, in-process).")] = None,
        tools: Annotated[str | None, typer.Option(help="Tools offered (as for `aether run`).")] = None,
        api_key: Annotated[str | None, typer.Option(envvar="AETHER_API_KEY")] = None,
    ) -> None:
        """Rerun a finished run's questions under its exact settings and write its serving-noise floor (noise.json)."""
        from aethersearch.compare.fingerprints import load_fingerprint
        from aethersearch.compare.noise import measure_noise
        from aethersearch.pipeline import verify_or_refuse
        from aethersearch.sandbox_eval import SandboxTools, tools_for

        verify_or_refuse(release)
        found = tools_for(release, agent=load_fingerprint(run).agent, index=index, search_url=search_url,
                          sandbox_url=sandbox_url, tools=tools, run_dir=run / "noise")
        search = found.search if isinstance(found, SandboxTools) else found
        result = measure_noise(run, release, search, reruns=reruns, sample=sample, concurrencies=concurrency,
                               metric=metric, seed=seed, api_key=api_key, progress=typer.echo)
        rate, floor = result.flip_rate, result.floor_at_run_size
        if (rate is None or floor is None  # both None together: no question had two usable runs
                or rate.mean is None or rate.ci_low is None or rate.ci_high is None):
            typer.echo("no question had two usable runs: no flip rate", err=True)
            raise typer.Exit(3)
        typer.echo(f"flip rate ({metric}): {100 * rate.mean:.1f}% (95% CI {100 * rate.ci_low:.1f}-"
                   f"{100 * rate.ci_high:.1f}%) over {result.questions_measured} questions x "
                   f"{result.reruns + 1} runs; {result.questions_flipping} flipped at least once; "
                   f"noise floor of a delta over {result.run_size} questions: "
                   f"{100 * floor:.1f} points -> {run / 'noise.json'}")

    @app.command("report")
    def report(
        runs: Annotated[list[Path] | None, typer.Argument(help="Run directories; the first is the comparison "
                                                               "reference (none: --history only).")] = None,
        out: Annotated[Path, typer.Option("--out", "-o", help="HTML file to write.")] = Path("report.html"),
        release: Annotated[Path | None, typer.Option(help="Release, to score runs not scored yet.")] = None,
        history: Annotated[Path | None, typer.Option(help="History JSONL written by `aether watch`.")] = None,
        allow: Annotated[list[str] | None, typer.Option("--allow", help="Contract field allowed to differ.")] = None,
        label: Annotated[list[str] | None, typer.Option("--label", help="Run label, one per run in order "
                                                        "(default: the model name).")] = None,
        viewer_url: Annotated[str, typer.Option(help="Where `aether view` runs: flipped questions link there "
                                                     "when it answers ('' for no links).")] = VIEWER_URL,
    ) -> None:
        """Write one self-contained HTML report (paper table and figures, comparison, curve, flipped traces)."""
        from aethersearch.report.html import write_report

        path = write_report(runs or [], out, release_dir=release, history=history, allow=allow or (), strict=True,
                            labels=label or (), viewer_url=viewer_url or None)
        typer.echo(f"wrote {path}")

    @app.command("watch")
    def watch_command(
        target: Annotated[Path, typer.Argument(help="Checkpoint directory, or a file of `name url \\[step]` lines.")],
        release: Annotated[Path, typer.Option(help="Frozen release to evaluate on.")],
        history: Annotated[Path, typer.Option(help="History JSONL to append to.")] = Path("history.jsonl"),
        endpoint: Annotated[str | None, typer.Option(help="For a checkpoint directory: the OpenAI-compatible "
                                                          "server that loads checkpoints by path (model=path).")] = None,
        search_url: Annotated[str | None, typer.Option(help="Retrieval server (`aether serve`).")] = None,
        agent: Annotated[str, typer.Option(help="Agent to evaluate with.")] = "search-r1",
        runs_dir: Annotated[Path, typer.Option(help="Where each checkpoint's run directory goes.")] = Path("runs/watch"),
        plot: Annotated[Path | None, typer.Option(help="SVG training curve to rewrite after each checkpoint "
                                                       "(default: the history path with .svg).")] = None,
        poll: Annotated[float, typer.Option(help="Seconds between polls.")] = 60.0,
        settle: Annotated[float, typer.Option(help="A checkpoint dir must be unchanged this long.")] = 30.0,
        once: Annotated[bool, typer.Option(help="Evaluate what is there now and exit.")] = False,
        logger: Annotated[list[str] | None, typer.Option("--logger", help="Also log to wandb (offline) or "
                                                         "tensorboard (repeatable; optional extras).")] = None,
        metric_keys: Annotated[str, typer.Option(help="Metric key style: searchr1, verl or both.")] = "both",
        samples: Annotated[int, typer.Option(help="K rollouts per question (as verl's val_kwargs.n); the history "
                                                  "then logs mean@K, pass@K and maj@K of EM.")] = 1,
        temperature: Annotated[float, typer.Option(help="Sampling temperature (> 0 for --samples K > 1).")] = 0.0,
    ) -> None:
        """Evaluate each new checkpoint on the frozen split as it appears; append to a history; plot the curve."""
        import re

        from aethersearch.api import evaluate_run
        from aethersearch.compare.watch import Checkpoint, watch
        from aethersearch.errors import ConfigError
        from aethersearch.records import Decoding

        if target.is_dir() and endpoint is None:
            raise ConfigError("a checkpoint directory needs --endpoint (a server that loads a checkpoint by path)",
                              fix="pass --endpoint URL, or list served checkpoints in a file (`name url [step]`)")

        def evaluate_checkpoint(checkpoint: Checkpoint) -> dict[str, Any]:
            url = checkpoint.location if checkpoint.kind == "endpoint" else str(endpoint)
            model = checkpoint.name if checkpoint.kind == "endpoint" else checkpoint.location
            run_dir = runs_dir / re.sub(r"[^A-Za-z0-9_.-]", "_", checkpoint.name)
            result = evaluate_run(url, release, model=model, agent=agent, search_url=search_url, run_dir=run_dir,
                                  metric_keys=metric_keys, samples=samples,
                                  decoding=Decoding(temperature=temperature))
            micro = result.scores.overall.micro
            sampled = {f"{name}": micro.reducers["em"][name].mean for name in (f"pass@{samples}", f"maj@{samples}")
                       } if samples > 1 else {}
            return {**result.metrics, "em": micro.metrics["em"].mean, "f1": micro.metrics["f1"].mean, **sampled}

        from aethersearch.compare.loggers import make_loggers
        from aethersearch.interop.metric_keys import check_style

        check_style(metric_keys)
        loggers = make_loggers(logger or [], log_dir=history.parent)
        plot = plot if plot is not None else history.with_suffix(".svg")
        try:
            result = watch(target, evaluate_checkpoint, history=history, plot=plot, poll_s=poll, settle_s=settle,
                           max_polls=1 if once else None, loggers=loggers)
        finally:
            for opened in loggers:
                opened.close()
        for row in result.evaluated:
            typer.echo(f"{row.checkpoint} (step {row.step}): em={(row.metrics or {})['em']:.3f}")
        if result.evaluated:
            typer.echo(f"history: {history}  curve: {plot}")
        for failure in result.failed:  # recorded in the history as failed, never as a score
            then = "will retry with backoff" if failure.will_retry else "giving up"
            typer.echo(f"FAILED {failure.checkpoint} (attempt {failure.attempt}, {then}): {failure.error}", err=True)
        if once and result.failed:
            raise typer.Exit(3)
