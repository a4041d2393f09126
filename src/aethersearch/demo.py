"""The embedded demo (``aether eval`` with no release, ``make demo``): the main job and the sandbox evaluation.

Why a module above ``pipeline``: the demo builds its own inputs (demo world
corpus and index, demo release, hint-free sandbox release), then runs both
evaluations through the pipeline's one run path; the sandbox part also runs the
diagnostics (factorised metrics, probes). Nothing below imports it, so the
pipeline stays the plain verify → run → score → report wiring.

:func:`run_demo` builds everything from the embedded demo world: corpus + BM25
index, the demo release, a ``lexical`` (no-LLM) run, scores, the HTML report,
and :func:`run_sandbox_demo`: a hint-free sandbox release, a no-LLM browsing
baseline (``lexical-browse``, ``agents.browse.LexicalBrowseAgent``: it answers
from the sentences it was served and abstains when its reading grammar finds
none, so the factorised table shows real failure modes), its scores, factorised
metrics and probes (Forget, Lead-astray, distractor robustness). Everything is
seeded.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from aethersearch.agents.browse import LexicalBrowseAgent
from aethersearch.pipeline import EvalResult, index_search, run_eval, run_release
from aethersearch.records import Budget, Decoding

__all__ = ["DEMO_BUDGET", "SANDBOX_DEMO_BUDGET", "build_demo_inputs", "run_demo", "run_sandbox_demo", "sandbox_demo"]

DEMO_BUDGET = Budget(max_tool_calls=4, max_turns=4)


def build_demo_inputs(out_dir: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """Demo world corpus + BM25 index, and the demo release; returns (release_dir, index_dir)."""
    from aethersearch.corpus.importers import import_corpus
    from aethersearch.curation.build import build_from_config
    from aethersearch.search.index_dir import build_index
    from aethersearch.sources.demo import write_demo_sources

    out = Path(out_dir)
    store = import_corpus("demo", "demo", out / "corpus", seed=seed, overwrite=True).store
    # ~750 pages: numpy scoring beats paying numba's JIT compile on every demo run
    build_index(store, "bm25", out / "index", config={"numba": False}, overwrite=True)
    config = write_demo_sources(out / "demo_sources", seed=seed)
    release = build_from_config(config, out / "release")
    return release.release_dir, out / "index"


def sandbox_demo(out_dir: Path) -> dict[str, Any] | None:
    """The issue-8 sandbox part of the demo (:func:`run_sandbox_demo`)."""
    return run_sandbox_demo(out_dir)


def run_demo(out_dir: Path, *, concurrency: int = 8, sandbox: bool = True,
             progress: Callable[[Any], None] | None = None, samples: int = 1, temperature: float = 0.0,
             seed: int | None = 0) -> EvalResult:
    """The embedded demo: no model server, no downloads, under a minute on 2 cores.

    ``samples`` K > 1 rolls each question out K times. At ``temperature`` 0 the
    lexical agent is greedy, so its K samples agree and pass@k = mean@K = maj@K;
    above 0 it samples among its candidates, seeded per sample from ``seed``, so
    the demo shows pass@k, maj@k and the within-question spread with no model.
    """
    out = Path(out_dir)
    release_dir, index_dir = build_demo_inputs(out)
    result = run_eval(release_dir, out, index_search(index_dir), agent="lexical", budget=DEMO_BUDGET,
                      concurrency=concurrency, progress=progress, samples=samples,
                      decoding=Decoding(temperature=temperature, seed=seed))
    extra: dict[str, Any] = {}
    if sandbox:
        try:
            sandbox_summary = sandbox_demo(out)
        except ImportError as exc:  # a half-installed optional part must not sink the main result
            extra["sandbox_error"] = f"the sandbox part of the demo could not run: {exc}"
        else:
            if sandbox_summary is not None:
                extra["sandbox"] = sandbox_summary
                result = result._replace(report_path=_demo_report(result, out))
    return result._replace(extra=extra)


def _demo_report(result: EvalResult, out: Path) -> Path:
    """One demo report holding both evaluations: the benchmark run and the sandbox run.

    The sandbox run carries ``factorised.json`` and ``probes.json``, so the
    report shows the factorised table and the probe rates beside the per-source
    scores. The two runs answer different releases, so they are not compared.
    """
    from aethersearch.report.html import write_report

    return write_report([result.run_dir, out / "sandbox_run"], out / "report.html", compare=False)


SANDBOX_DEMO_BUDGET = Budget(max_tool_calls=10, max_turns=None)


def run_sandbox_demo(out_dir: Path, *, seed: int = 0, ratio: float = 0.5, concurrency: int = 8) -> dict[str, Any]:
    """Sandbox evaluation on the demo world: release, no-LLM browse run, scores, factorised metrics, probes.

    Writes under ``out_dir``: ``sandbox_release/`` (the hint-free release),
    ``sandbox_corpus/`` and ``sandbox_index/`` (store and BM25 index of the demo
    world), and ``sandbox_run/`` (run.json, traces.jsonl, scores.json,
    factorised.json, probes.json), and ``sandbox_report.html`` (the HTML report
    of that run: its factorised table and probe rates). Returns a summary for
    the caller to print and to include in its own report (``report`` is the
    sandbox report's path). Rerunning resumes (finished questions are
    not redone); the release, corpus and index are rebuilt deterministically.
    The run goes the way ``aether eval RELEASE --index DIR`` takes a hint-free
    release (``sandbox_eval``): the masked sandbox in-process, then the diagnostics.
    """
    from aethersearch.construct.build import build_demo_sandbox_release
    from aethersearch.corpus.importers import import_corpus
    from aethersearch.report.html import write_report
    from aethersearch.rollout.session import RunSettings
    from aethersearch.sandbox_eval import diagnose, sandbox_in_process, summary_of
    from aethersearch.scoring.api import score_run
    from aethersearch.search.index_dir import build_index

    out = Path(out_dir)
    release_dir = build_demo_sandbox_release(out / "sandbox_release", seed=seed)
    store = import_corpus("demo", "demo", out / "sandbox_corpus", seed=seed, overwrite=True).store
    # ~1,100 pages: plain numpy scoring beats paying numba's JIT compile on every demo run
    build_index(store, "bm25", out / "sandbox_index", config={"numba": False}, overwrite=True)
    run_dir = out / "sandbox_run"
    tools = sandbox_in_process(release_dir, out / "sandbox_index", run_label="demo")
    agent = LexicalBrowseAgent()
    # the one run path (verified release, same run.json fields as `aether run`), with the masked sandbox as tools
    summary = run_release(release_dir, run_dir, RunSettings(agent=agent.name, budget=SANDBOX_DEMO_BUDGET,
                                                            concurrency=concurrency), tools.search, agent=agent)
    scores = score_run(run_dir, release_dir)
    found = diagnose(run_dir, release_dir, tools, agent=agent, llm=None, concurrency=concurrency, ratio=ratio,
                     seed=seed)
    # the sandbox run's own report: written after the probes so it shows their rates
    report_path = write_report([run_dir], out / "sandbox_report.html", release_dir=release_dir)
    return summary_of(run_dir, release_dir, found, questions=summary.total, outcomes=summary.outcomes,
                      em=scores.overall.micro.metrics["em"].mean, report=report_path)
