"""Top-level diagnostics orchestration: the sandbox demo and the environments probes rerun in.

``run_sandbox_demo(out_dir)`` is what ``aether eval`` (``make demo``) calls to add
a sandbox evaluation on the embedded demo world: it builds the demo hint-free
sandbox release, runs a no-LLM browsing baseline in the masked sandbox through
the ordinary runner, scores the run, computes the factorised metrics and the
probes (Forget, Lead-astray, distractor robustness), and writes ``scores.json``, ``factorised.json`` and ``probes.json`` into
the run directory. Everything is seeded; it takes a few seconds.

The baseline is ``lexical-browse`` (``agents.browse.LexicalBrowseAgent``), a
no-LLM reader of the masked sandbox: it answers from the sentences it was served
and abstains when its reading grammar finds none, so the demo's factorised table
shows its real failure modes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from aethersearch.agents.base import Agent
from aethersearch.agents.browse import LexicalBrowseAgent
from aethersearch.environment import Environment
from aethersearch.errors import ConfigError
from aethersearch.records import Budget, RolloutQuestion


def agent_for(run_dir: Path) -> Agent:
    """The agent a run used, rebuilt from its run.json (``agent`` + ``agent_config``) through the registry."""
    from aethersearch.agents.base import make_agent
    from aethersearch.scoring.probes import load_fingerprint

    fingerprint = load_fingerprint(run_dir)
    return make_agent(fingerprint.agent, **fingerprint.agent_config)


def environment_factory_for(run_dir: Path, release_dir: Path, store: Any,
                            index_dir: Path | None) -> Callable[[RolloutQuestion], Environment]:
    """The clean environment a run used, rebuilt from its run.json (for probes that rerun it).

    ``sandbox`` runs reopen the masked sandbox of the release over the index;
    ``search`` runs an in-process index environment.
    """
    from aethersearch.scoring.probes import load_fingerprint
    from aethersearch.search.environment import IndexEnvironment
    from aethersearch.search.index_dir import open_index

    fingerprint = load_fingerprint(run_dir)
    if fingerprint.environment == "none":
        from aethersearch.rollout.runner import NoEnvironment

        return lambda _q: NoEnvironment()
    if index_dir is None:
        raise ConfigError(f"rerunning a {fingerprint.environment!r} run needs its search index",
                          fix="pass --index DIR (the index the run searched)")
    index = open_index(index_dir, store).index
    if fingerprint.environment == "sandbox":
        from aethersearch.sandbox.episode import open_sandbox

        sandbox = open_sandbox(release_dir, index, store)
        return lambda q: sandbox.episode(q.id, run_id="lead-astray")
    return lambda _q: IndexEnvironment(index, store)


DEMO_BUDGET = Budget(max_tool_calls=10, max_turns=None)


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
    """
    from aethersearch.construct.build import build_demo_sandbox_release
    from aethersearch.corpus.importers import import_corpus
    from aethersearch.report.html import write_report
    from aethersearch.pipeline import run_release
    from aethersearch.rollout.session import RunSettings, SearchSetup
    from aethersearch.sandbox.episode import open_sandbox
    from aethersearch.scoring.api import score_run
    from aethersearch.scoring.probes import (
        distractor_probe,
        factorise_run,
        forget_probe,
        lead_astray_probe,
    )
    from aethersearch.search.index_dir import build_index

    out = Path(out_dir)
    release_dir = build_demo_sandbox_release(out / "sandbox_release", seed=seed)
    store = import_corpus("demo", "demo", out / "sandbox_corpus", seed=seed, overwrite=True).store
    # ~1,100 pages: plain numpy scoring beats paying numba's JIT compile on every demo run
    opened = build_index(store, "bm25", out / "sandbox_index", config={"numba": False}, overwrite=True)
    sandbox = open_sandbox(release_dir, opened.index, store)
    agent = LexicalBrowseAgent()
    run_dir = out / "sandbox_run"
    # the one run path (verified release, same run.json fields as `aether run`), with the masked sandbox as tools
    search = SearchSetup(lambda q: sandbox.episode(q.id, run_id="demo"), store.content_hash,
                         opened.index.index_hash, "masked sandbox", environment="sandbox")
    summary = run_release(release_dir, run_dir, RunSettings(agent=agent.name, budget=DEMO_BUDGET,
                                                            concurrency=concurrency), search, agent=agent)
    scores = score_run(run_dir, release_dir)
    factorised = factorise_run(run_dir, release_dir, store=store)
    forget = forget_probe(run_dir, release_dir, llm=None, store=store)
    lead_astray = lead_astray_probe(run_dir, release_dir, store=store, agent=agent, concurrency=concurrency)
    distractors = distractor_probe(run_dir, release_dir, store=store, ratio=ratio, seed=seed, agent=agent,
                                   environment_factory=lambda q: sandbox.episode(q.id, run_id="demo-noisy"),
                                   concurrency=concurrency)
    # the sandbox run's own report: written after the probes so it shows their rates
    report_path = write_report([run_dir], out / "sandbox_report.html", release_dir=release_dir)
    return {
        "run_dir": str(run_dir),
        "report": str(report_path),
        "release_dir": str(release_dir),
        "agent": agent.name,
        "questions": summary.total,
        "outcomes": summary.outcomes,
        "em": scores.overall.micro.metrics["em"].mean,
        "factorised": factorised["overall"],
        "factorised_by_hops": factorised["by_hops"],
        "budget": factorised["run"]["budget"],
        "probes": {"forget": forget, "lead_astray": lead_astray, "distractors": distractors},
    }

