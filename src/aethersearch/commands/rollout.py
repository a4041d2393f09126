"""``aether run`` (roll an agent out into a resumable run dir) and ``aether eval`` (the main job).

Thin: parse options, call one function of :mod:`aethersearch.pipeline`, print with rich.
A progress bar shows done/errored/rate/ETA; nothing is logged per question.
Heavy imports stay inside the command functions so ``aether --help`` stays fast.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from aethersearch.commands.options import parse_key_values
from aethersearch.commands.progress import make_console
from aethersearch.records import DEFAULT_CONCURRENCY, RunLimits

__all__ = ["CALL_TIMEOUT_HELP", "CORPUS_HELP", "DEADLINE_HELP", "ENDPOINT_HELP", "ERROR_RATE_HELP", "INDEX_HELP",
    "NEXT_STEPS", "PRESET_HELP", "PROBES_HELP", "PROFILE_HELP", "PROMPT_VARIANT_HELP", "RETRIES_HELP",
    "RUN_AGENT_DEFAULT", "SAMPLES_HELP", "SANDBOX_URL_HELP", "STOP_HELP", "TOOLS_HELP", "register"]

console = make_console()
_LIMITS = RunLimits()
_QUESTION_DEADLINE = _LIMITS.question_deadline_s or 0.0
_STOP_AFTER = _LIMITS.stop_after_failures or 0
ENDPOINT_HELP = ("OpenAI-compatible base URL (several replicas: comma-separated, balanced with failover), "
                 "or vllm-offline (the vllm extra) with --model PATH")
STOP_HELP = ("stop starting questions after this many in a row failed on the endpoint itself (0: never); "
             "a rerun runs the rest")
PRESET_HELP = ("named budget: webdetective = the paper's agents (40 tool calls, 32K context, no turn limit); "
               "--max-tool-calls/--max-turns/--token-budget/--context-tokens override it")
CALL_TIMEOUT_HELP = "seconds one model call may take before it is retried"
DEADLINE_HELP = "seconds one question may take in all (0: no deadline); a stalled server cannot hold it longer"
RETRIES_HELP = "retries of a failed model call (transient failures only: connection, timeout, 429, 5xx, bad 200)"
SAMPLES_HELP = ("K rollouts per question (sample k seeded from --seed, the id and k); scores.json then holds "
                "mean@K, pass@1..K and maj@K; use --temperature > 0 or the K samples are identical")
ERROR_RATE_HELP = ("share of questions allowed to end in error before the run fails (exit 3) with a summary; "
                   "0: any question still in error after its retries fails the run")


def _agent_config(pairs: list[str], prompt_format: str | None = None, topk: int | None = None,
                  prompt_variant: str | None = None) -> dict[str, Any]:
    """``--agent-config KEY=VALUE`` options (JSON values where they parse), plus ``--prompt-format``, ``--topk``
    and ``--prompt-variant`` (Search-R1's ``stated-confidence`` variant; ``aethersearch.stated_confidence``).

    ``--topk`` is the one spelling of "documents per search" across the CLI (``aether search --topk``);
    it sets the agent's ``topk``, so run.json records what the agent really asks for.
    """
    config = parse_key_values(pairs, flag="--agent-config", example="--agent-config prompt_format=raw")
    if prompt_format is not None:
        config["prompt_format"] = prompt_format
    if topk is not None:
        config["topk"] = topk
    if prompt_variant is not None:
        config["prompt_variant"] = prompt_variant
    return config


@contextlib.contextmanager
def _progress_bar(enabled: bool):  # type: ignore[no-untyped-def]
    """Rollout progress fed by the runner's events: a live bar on a terminal, periodic plain lines
    (done/total, rate, ETA, errored) when redirected, nothing with ``--no-progress`` or ``aether --quiet``."""
    if not enabled:
        yield None
        return
    from aethersearch.commands.progress import progress

    with progress("rollout", unit=" q", fields={"errored": 0}) as report:

        def update(event: Any) -> None:
            report(event.done, event.total, errored=event.errored)

        yield update


def _limits(call_timeout: float, question_deadline: float, max_retries: int, max_error_rate: float,
            stop_after_failures: int) -> Any:
    """The run's :class:`RunLimits` from the CLI options (a clear error for an out-of-range value)."""
    from pydantic import ValidationError

    from aethersearch.errors import ConfigError
    from aethersearch.records import RunLimits
    from aethersearch.rollout.health import check_rate

    check_rate(max_error_rate)
    try:
        return RunLimits(call_timeout_s=call_timeout, question_deadline_s=question_deadline or None,
                         max_retries=max_retries, max_error_rate=max_error_rate,
                         stop_after_failures=stop_after_failures or None)
    except ValidationError as exc:
        problem = exc.errors()[0]
        raise ConfigError(f"--{str(problem['loc'][0]).replace('_s', '').replace('_', '-')}: {problem['msg']}",
                          fix="timeouts are positive seconds, --max-retries a whole number >= 0") from None


def _warn_identical_samples(samples: int, temperature: float, agent: str | None) -> None:
    """K > 1 samples that cannot differ are K copies of one rollout: say so once, before spending K times the calls.

    Two causes: an agent that makes no random choice (``can_sample = False``), or greedy decoding.
    """
    if samples <= 1:
        return
    from aethersearch.agents.base import AGENTS
    from aethersearch.registry import resolve

    if agent in AGENTS and not resolve("agent", agent, AGENTS).can_sample:
        console.print(f"[yellow]--samples {samples}: agent {agent!r} makes no random choice, so its {samples} "
                      "samples are identical (pass@k = mean@K = maj@K); the `lexical` agent samples without "
                      "a model[/]")
    elif temperature == 0:
        console.print(f"[yellow]--samples {samples} at --temperature 0: greedy decoding makes the {samples} "
                      "samples identical (pass@k = mean@K = maj@K); pass --temperature > 0 to sample[/]")


def _print_summary(summary: Any) -> None:
    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(summary.outcomes.items())) or "nothing new"
    console.print(f"{summary.attempted} run, {summary.skipped} already finished, {summary.errored} errored "
                  f"({outcomes}) in {summary.elapsed_s:.1f}s -> {escape(str(summary.run_dir))}")
    if summary.torn_tail_path is not None:
        console.print(f"[yellow]a torn last line was set aside to {escape(str(summary.torn_tail_path))}[/]")
    report = summary.errors
    if report.errored:  # tolerated by --max-error-rate, but never silent
        console.print(f"[yellow]{report.errored} of {report.total} questions are in error "
                      f"(within --max-error-rate):[/]")
        for line in report.lines():
            console.print(f"[yellow]    {escape(line)}[/]")
        for fix in report.fixes():
            console.print(f"[yellow]  fix: {escape(fix)}[/]")


def _print_table(scores: Any) -> None:
    """The same per-source table as `aether score` (same metrics, 95% CIs, error counts) and the HTML report."""
    from aethersearch.commands.scoring import print_scores

    print_scores(scores)


INDEX_HELP = ("search in-process on this index directory; a hint-free release runs in its masked sandbox "
              "over it (the index of the corpus the release was built from: its hash is checked)")
SANDBOX_URL_HELP = ("hint-free release: run in this masked sandbox (`aether sandbox serve RELEASE --index DIR`); "
                    "its /health must name the release and its corpus")
CORPUS_HELP = ("hint-free release: the page store (default: the --index's own); with --sandbox-url, the local copy "
               "the factorised metrics rebuild served text from")
TOOLS_HELP = "comma-separated tools offered (default search; a hint-free release's sandbox offers search,visit)"
PROBES_HELP = ("hint-free release: after the run, the Forget (with the run's model), Lead-astray and distractor "
               "probes; factorised.json is always written")
RUN_AGENT_DEFAULT = "search-r1"
PROFILE_HELP = ("agent profile file (YAML/JSON; the schema of aethersearch/agents/profiles/*.json): your trainer's "
                "prompt, action grammar, limits and budget; --agent NAME uses its shipped profile")
PROMPT_VARIANT_HELP = ("search-r1 agent: search-r1 (its own prompt, default) or stated-confidence (asks for "
                       "'Confidence: N%' inside the answer tags, as BrowseComp-Plus does; never compared with the "
                       "plain prompt)")
"""The agent of `aether run` and of `aether eval RELEASE` (one default for both)."""


def _check_release_dir(release: Path) -> None:
    """Name a missing release as missing (before any other option is looked at)."""
    from aethersearch.errors import ConfigError

    if not Path(release).is_dir():
        raise ConfigError(f"release directory {release} does not exist",
                          fix="pass a release built by `aether build` (or omit RELEASE for the embedded demo)")


def register(app: typer.Typer) -> None:
    """Add ``run`` and ``eval``."""

    @app.command("run")
    def run(
        release: Path = typer.Argument(..., help="release directory (verified first; the runner reads only rollout_questions.jsonl)"),
        out: Path = typer.Option(..., "--out", "-o", help="run directory (rerun the same command to resume)"),
        agent: str | None = typer.Option(None, "--agent", help="search-r1 (default), aethersearch, react, direct, naive-rag, lexical, ..."),
        profile: Path | None = typer.Option(None, "--profile", help=PROFILE_HELP),
        agent_config: list[str] = typer.Option([], "--agent-config", help="KEY=VALUE (JSON value), repeatable"),
        prompt_format: str | None = typer.Option(None, "--prompt-format", help="auto (default: the chat template when the server reports one), chat or raw"),
        prompt_variant: str | None = typer.Option(None, "--prompt-variant", help=PROMPT_VARIANT_HELP),
        endpoint: str | None = typer.Option(None, "--endpoint", help=ENDPOINT_HELP),
        model: str | None = typer.Option(None, "--model"),
        api_key: str | None = typer.Option(None, "--api-key", envvar="AETHER_API_KEY"),
        index: Path | None = typer.Option(None, "--index", help=INDEX_HELP),
        search_url: str | None = typer.Option(None, "--search-url", help="or through this retrieval server"),
        sandbox_url: str | None = typer.Option(None, "--sandbox-url", help=SANDBOX_URL_HELP),
        corpus: Path | None = typer.Option(None, "--corpus", help=CORPUS_HELP),
        tools: str | None = typer.Option(None, "--tools", help=TOOLS_HELP),
        preset: str | None = typer.Option(None, "--preset", help=PRESET_HELP),
        max_tool_calls: int | None = typer.Option(None, "--max-tool-calls", help="tool calls per question (default 8)"),
        max_turns: int | None = typer.Option(None, "--max-turns", help="model calls per question (default 4)"),
        token_budget: int | None = typer.Option(None, "--token-budget", help="completion tokens per question, all calls together"),
        context_tokens: int | None = typer.Option(None, "--context-tokens", help="context of each model call, prompt + reply"),
        temperature: float = typer.Option(0.0, "--temperature"),
        top_p: float = typer.Option(1.0, "--top-p"),
        max_tokens: int | None = typer.Option(None, "--max-tokens", help="max_tokens of each model call (default: the agent profile's, else 500)"),
        topk: int | None = typer.Option(None, "--topk", "-k", min=1, help="documents per search (the agent's topk)"),
        seed: int | None = typer.Option(0, "--seed"),
        samples: int = typer.Option(1, "--samples", help=SAMPLES_HELP),
        concurrency: int = typer.Option(DEFAULT_CONCURRENCY, "--concurrency", help="questions in flight at once"),
        call_timeout: float = typer.Option(_LIMITS.call_timeout_s, "--call-timeout", help=CALL_TIMEOUT_HELP),
        question_deadline: float = typer.Option(_QUESTION_DEADLINE, "--question-deadline",
                                                help=DEADLINE_HELP),
        max_retries: int = typer.Option(_LIMITS.max_retries, "--max-retries", help=RETRIES_HELP),
        max_error_rate: float = typer.Option(_LIMITS.max_error_rate, "--max-error-rate", help=ERROR_RATE_HELP),
        stop_after_failures: int = typer.Option(_STOP_AFTER, "--stop-after-failures", help=STOP_HELP),
        progress: bool = typer.Option(True, "--progress/--no-progress"),
        ray: str | None = typer.Option(None, "--ray", help="run shards on Ray: auto (a running cluster), HOST:PORT, or local (the ray extra)"),
        shards: int | None = typer.Option(None, "--shards", help="Ray workers (with --ray; default 4)"),
    ) -> None:
        """Roll an agent out over a release into a resumable run directory.

        Exits non-zero (3) with a summary of error kinds, counts and the fix when more
        questions end in error than --max-error-rate allows (default: any).
        """
        from aethersearch import pipeline
        from aethersearch.records import Decoding
        from aethersearch.rollout.profile_run import apply_profile
        from aethersearch.rollout.session import SearchSetup
        from aethersearch.sandbox_eval import tools_for

        _check_release_dir(release)
        _warn_identical_samples(samples, temperature, agent)
        chosen = apply_profile(agent, _agent_config(agent_config, prompt_format, topk, prompt_variant),
                               profile_file=profile, preset=preset, max_tool_calls=max_tool_calls,
                               max_turns=max_turns, token_budget=token_budget, context_tokens=context_tokens,
                               max_tokens=max_tokens)
        search = tools_for(release, agent=chosen.agent, index=index, corpus=corpus, search_url=search_url,
                           sandbox_url=sandbox_url, tools=tools, run_dir=out)
        limits = _limits(call_timeout, question_deadline, max_retries, max_error_rate, stop_after_failures)
        with _progress_bar(progress) as update:
            setup = search if isinstance(search, SearchSetup) else search.search
            summary = pipeline.run_agent(
                release, out, setup, agent=chosen.agent, agent_config=chosen.agent_config, endpoint=endpoint,
                model=model, api_key=api_key, budget=chosen.budget, profile=chosen.profile,
                decoding=Decoding(temperature=temperature, top_p=top_p, max_tokens=chosen.max_tokens, seed=seed),
                concurrency=concurrency, limits=limits, progress=update, ray=ray, shards=shards, samples=samples)
        _print_summary(summary)

    @app.command("eval")
    def eval_(
        release: Path | None = typer.Argument(None, help="release directory; omit to run the embedded demo"),
        out: Path = typer.Option(Path("eval_out"), "--out", "-o", help="output directory (run/, report.html)"),
        agent: str | None = typer.Option(None, "--agent", help="as for `aether run` (default search-r1); "
                                                                "the demo without RELEASE uses the lexical agent"),
        profile: Path | None = typer.Option(None, "--profile", help=PROFILE_HELP),
        agent_config: list[str] = typer.Option([], "--agent-config", help="KEY=VALUE (JSON value), repeatable"),
        prompt_format: str | None = typer.Option(None, "--prompt-format", help="auto (default), chat or raw"),
        prompt_variant: str | None = typer.Option(None, "--prompt-variant", help=PROMPT_VARIANT_HELP),
        endpoint: str | None = typer.Option(None, "--endpoint", help="OpenAI-compatible base URL, or vllm-offline"),
        model: str | None = typer.Option(None, "--model"),
        api_key: str | None = typer.Option(None, "--api-key", envvar="AETHER_API_KEY"),
        index: Path | None = typer.Option(None, "--index", help="index directory (in-process, or --serve it)"),
        serve: bool = typer.Option(False, "--serve", help="start `aether serve --index` as a subprocess"),
        search_url: str | None = typer.Option(None, "--search-url", help="connect to a running search server"),
        sandbox_url: str | None = typer.Option(None, "--sandbox-url", help=SANDBOX_URL_HELP),
        corpus: Path | None = typer.Option(None, "--corpus", help=CORPUS_HELP),
        tools: str | None = typer.Option(None, "--tools", help=TOOLS_HELP),
        probes: bool = typer.Option(True, "--probes/--no-probes", help=PROBES_HELP),
        preset: str | None = typer.Option(None, "--preset", help=PRESET_HELP),
        max_tool_calls: int | None = typer.Option(None, "--max-tool-calls", help="tool calls per question (default 8)"),
        max_turns: int | None = typer.Option(None, "--max-turns", help="model calls per question (default 4)"),
        token_budget: int | None = typer.Option(None, "--token-budget", help="completion tokens per question, all calls together"),
        context_tokens: int | None = typer.Option(None, "--context-tokens", help="context of each model call, prompt + reply"),
        temperature: float = typer.Option(0.0, "--temperature"),
        top_p: float = typer.Option(1.0, "--top-p"),
        max_tokens: int | None = typer.Option(None, "--max-tokens", help="max_tokens of each model call (default: the agent profile's, else 500)"),
        topk: int | None = typer.Option(None, "--topk", "-k", min=1, help="documents per search (the agent's topk)"),
        seed: int | None = typer.Option(0, "--seed"),
        samples: int = typer.Option(1, "--samples", help=SAMPLES_HELP),
        concurrency: int = typer.Option(DEFAULT_CONCURRENCY, "--concurrency", help="questions in flight at once"),
        call_timeout: float = typer.Option(_LIMITS.call_timeout_s, "--call-timeout", help=CALL_TIMEOUT_HELP),
        question_deadline: float = typer.Option(_QUESTION_DEADLINE, "--question-deadline", help=DEADLINE_HELP),
        max_retries: int = typer.Option(_LIMITS.max_retries, "--max-retries", help=RETRIES_HELP),
        max_error_rate: float = typer.Option(_LIMITS.max_error_rate, "--max-error-rate", help=ERROR_RATE_HELP),
        stop_after_failures: int = typer.Option(_STOP_AFTER, "--stop-after-failures", help=STOP_HELP),
        progress: bool = typer.Option(True, "--progress/--no-progress"),
        sandbox: bool = typer.Option(True, "--sandbox/--no-sandbox", help="demo only: add the sandbox evaluation"),
    ) -> None:
        """Verify the release, start or connect to search, run, score, print a per-source table, write the report.

        With no RELEASE: the embedded demo (demo world, demo release, lexical agent), no model server needed.
        """
        from aethersearch import demo, pipeline, sandbox_eval
        from aethersearch.errors import ConfigError
        from aethersearch.records import Decoding
        from aethersearch.release.manifest import is_hintfree_release
        from aethersearch.rollout.profile_run import apply_profile

        if release is not None:
            _check_release_dir(release)
        _warn_identical_samples(samples, temperature, agent)
        chosen = apply_profile(agent, _agent_config(agent_config, prompt_format, topk, prompt_variant),
                               profile_file=profile, preset=preset, max_tool_calls=max_tool_calls,
                               max_turns=max_turns, token_budget=token_budget, context_tokens=context_tokens,
                               max_tokens=max_tokens)
        agent = chosen.agent
        with _progress_bar(progress) as update:
            if release is None:
                console.print(f"embedded demo -> {escape(str(out))} (demo world, demo release, lexical agent)")
                result = demo.run_demo(out, sandbox=sandbox, progress=update, samples=samples,
                                       temperature=temperature, seed=seed)
            else:
                options = dict(agent=agent, agent_config=chosen.agent_config, endpoint=endpoint, model=model,
                               api_key=api_key, budget=chosen.budget, profile=chosen.profile,
                               decoding=Decoding(temperature=temperature, top_p=top_p, max_tokens=chosen.max_tokens,
                                                   seed=seed), concurrency=concurrency, progress=update, samples=samples,
                               limits=_limits(call_timeout, question_deadline, max_retries, max_error_rate, stop_after_failures))
                offered = tuple(t for t in (tools or "search").split(",") if t)
                if serve and is_hintfree_release(release):
                    raise ConfigError("--serve starts a retrieval server, which serves pages unmasked; a hint-free "
                                      "release runs only in its masked sandbox",
                                      fix="drop --serve (the sandbox runs in-process over --index), or start "
                                          "`aether sandbox serve RELEASE --index DIR` and pass --sandbox-url")
                if serve:
                    if index is None:
                        raise ConfigError("--serve needs --index DIR", fix="pass the index directory to serve")
                    with pipeline.search_server_process(index) as url:
                        result = pipeline.run_eval(release, out, pipeline.server_search(url, offered), **options)
                else:
                    search = sandbox_eval.tools_for(release, agent=agent, index=index, corpus=corpus,
                                                    search_url=search_url, sandbox_url=sandbox_url, tools=tools,
                                                    run_dir=out / "run")
                    result = (sandbox_eval.evaluate(release, out, search, probes=probes, **options)
                              if isinstance(search, sandbox_eval.SandboxTools)
                              else pipeline.run_eval(release, out, search, **options))
        _print_summary(result.summary)
        _print_table(result.scores)
        sandbox_summary = result.extra.get("sandbox")
        if sandbox_summary:
            _print_sandbox(sandbox_summary)
        if result.extra.get("sandbox_error"):
            console.print(f"[yellow]warning: {escape(result.extra['sandbox_error'])}[/]")
        if result.report_path is not None:
            console.print(f"report: {escape(str(result.report_path))}")
        if release is None:
            _print_next_steps(out)


#: what a newcomer does after the demo, in order: look at it, try a real model, build the real benchmark
NEXT_STEPS: tuple[tuple[str, str], ...] = (
    ("browse each question's trace and score", "aether view {out}/run"),
    ("evaluate a real checkpoint behind an OpenAI-compatible server",
     "aether eval {out}/release --index {out}/index --agent search-r1 \\\n      --endpoint URL --model M --out runs/m"),
    ("build the real Eval-1400 release from the public sources",
     "aether eval1400-config ../shared/data --out cfg && aether build cfg/build.yaml --out eval1400"),
)


def _print_next_steps(out: Path) -> None:
    """The demo's last lines: three commands a newcomer runs next (what to type, not where to read)."""
    console.print("[bold]next:[/]")
    for why, command in NEXT_STEPS:
        console.print(f"  # {why}\n  {escape(command.format(out=out))}", highlight=False)


def _em_text(em: float | None) -> str:
    """EM as printed; a run with no scored answer says so rather than printing 0.000."""
    return "not scored" if em is None else f"{em:.3f}"


def _print_sandbox(summary: dict[str, Any]) -> None:
    """The sandbox evaluation: the factorised table (overall, by hop count, by source), then each probe's line."""
    from aethersearch.commands.diagnostics import print_factorised, print_probe

    console.print(f"[bold]sandbox evaluation[/] ({escape(str(summary.get('agent')))}, {summary.get('questions')} "
                  f"questions, masked sandbox): em {_em_text(summary.get('em'))}")
    print_factorised(summary["factorised_table"])
    probes = summary.get("probes") or {}
    shown = {"forget": ("forget_rate", "n_forget", "n_eligible"), "lead_astray": ("lead_astray_rate", "n_eligible"),
             "distractors": ("distractor_rate", "n_eligible", "ratio")}
    for probe, keys in shown.items():
        if probe in probes:
            print_probe(probe, probes[probe], keys)
