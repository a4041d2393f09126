"""A hint-free release is evaluated inside the masked sandbox, and nowhere else: its tools, refusals and outputs.

Why a module of its own above the pipeline's wiring: a WebDetective question
names only its subject, and its chain is discoverable only page by page. Run on
a plain index, every chain page is searchable at once, or (when the index is of
another corpus) none is, and the run reads as 60 honest abstentions. So the
tools of a run are chosen here from the *release*, not from whichever flag the
user passed: a hint-free release (manifest ``kind``) gets the masked sandbox,
in-process over the store and index it was built from (its corpus hash is
checked against the manifest's) or through a running ``aether sandbox serve``
(``--sandbox-url``, checked by its ``/health``); a hint-free release with plain
search tools, or a sandbox for a plain release, is refused with the fix. The
sandbox's policy goes into ``run.json`` (``RunFingerprint.sandbox``), so
``compare`` never pairs a masked run with an unmasked one.

:func:`diagnose` then computes what the paper reports from the same command:
``factorised.json`` (overall, by hop count, with the report's bootstrap CIs),
the Forget probe (with the run's model), the Lead-astray probe and the
distractor probe.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NamedTuple

from aethersearch.environment import Environment
from aethersearch.errors import ConfigError, DataError, IntegrityError
from aethersearch.jsonl import atomic_write_bytes
from aethersearch.records import RolloutQuestion
from aethersearch.release_layout import release_layout
from aethersearch.rollout.session import SearchSetup

__all__ = ["HttpEpisodes", "SandboxTools", "diagnose", "sandbox_in_process", "sandbox_server", "summary_of",
    "tools_for"]

#: where a run keeps the owner token of the sandbox episodes it opens (``owner_token``)
OWNER_FILE = "sandbox_owner"
#: What the sandbox offers every episode (``--tools`` cannot narrow it: the paper's agents browse).
SANDBOX_TOOLS = ("search", "visit")
_WHY = "a hint-free release is evaluated only inside the masked sandbox (its chain pages unlock one visit at a time)"
_SANDBOX_FIX = ("pass --index DIR (the index over the corpus the release was built from: the sandbox runs "
                "in-process), or --sandbox-url URL of `aether sandbox serve RELEASE --index DIR`")


class SandboxTools(NamedTuple):
    """A run's masked sandbox: the tools for the runner and the page store the diagnostics read."""

    search: SearchSetup
    store: Any | None  # the corpus the pages come from (None: a remote sandbox without a local copy)
    clean_factory: Callable[[str], Callable[[RolloutQuestion], Environment | Awaitable[Environment]]]


def _expected_corpus(release_dir: Path) -> str:
    """The corpus hash the release was constructed from (a release without one cannot be served)."""
    from aethersearch.release.manifest import hintfree_corpus_hash

    expected = hintfree_corpus_hash(release_dir)
    if expected is None:
        raise DataError(release_layout(release_dir).manifest, "no corpus.corpus_hash: the pages the questions were "
                        "constructed from are unknown", fix="rebuild the release with `aether construct`")
    return expected


def _check_corpus(release_dir: Path, expected: str, found: str | None, where: str) -> None:
    """Refuse a sandbox over pages other than those the release was constructed from, naming both hashes."""
    if found != expected:
        raise IntegrityError(f"{where} holds corpus {found}, but release {release_dir} was constructed from corpus "
                             f"{expected}: its chains and masks name pages of that corpus",
                             fix="point at the store and index built from the release's own corpus "
                                 "(`aether corpus import` of the same source, then `aether index build`)")


def _contract() -> Any:
    from aethersearch.sandbox.contract import sandbox_contract

    return sandbox_contract(SANDBOX_TOOLS)


def sandbox_in_process(release_dir: str | Path, index_dir: str | Path, corpus_dir: str | Path | None = None, *,
                       run_label: str = "run") -> SandboxTools:
    """The masked sandbox of ``release_dir`` in this process, over the index (and its store, or ``corpus_dir``)."""
    from aethersearch.corpus.store import open_store
    from aethersearch.sandbox.episode import open_sandbox
    from aethersearch.search.index_dir import open_index

    release = Path(release_dir)
    opened = open_index(index_dir, open_store(corpus_dir) if corpus_dir is not None else None)
    _check_corpus(release, _expected_corpus(release), opened.store.content_hash, f"the store of index {index_dir}")
    sandbox = open_sandbox(release, opened.index, opened.store, corpus_hash=opened.store.content_hash,
                           index_hash=opened.index.index_hash)

    def factory(label: str) -> Callable[[RolloutQuestion], Environment]:
        return lambda q: sandbox.episode(q.id, run_id=label)

    search = SearchSetup(factory(run_label), opened.store.content_hash, opened.index.index_hash,
                         f"masked sandbox (in-process, index {index_dir})", environment="sandbox",
                         sandbox=_contract(),
                         builder=lambda: sandbox_in_process(release, index_dir, corpus_dir,
                                                            run_label=run_label).search.factory)
    return SandboxTools(search, opened.store, factory)


class HttpEpisodes:
    """Opens one episode per (question, sample) on a running sandbox, under this run's own run id.

    The client is made in the event loop that runs the episodes (an aiohttp session
    is bound to one loop). Each opening of a question gets the next number in the
    run id, so K samples of one question are K episodes; a resumed run takes back
    the episodes its crashed predecessor left open (``replace``), which are its own.
    """

    def __init__(self, url: str, label: str, owner: str | None = None) -> None:
        self.url = url
        self.label = label
        self.owner = owner  # the run's owner token: a resumed run may replace only its own episodes
        self._client: Any = None
        self._opened: Counter[str] = Counter()

    async def __call__(self, question: RolloutQuestion) -> Environment:
        from aethersearch.sandbox.client import SandboxClient

        if self._client is None:
            self._client = SandboxClient(self.url, close_when_idle=True)
        number = self._opened[question.id]
        self._opened[question.id] += 1
        episode: Environment = await self._client.create_episode(question.id, run_id=f"{self.label}#{number}",
                                                                 replace=True, owner=self.owner)
        return episode


async def _health(url: str) -> dict[str, Any]:
    from aethersearch.sandbox.client import SandboxClient

    client = SandboxClient(url, retries=2, deadline_s=10.0)
    try:
        return await client.health()
    finally:
        await client.aclose()


def owner_token(run_dir: str | Path) -> str:
    """The run's secret for the sandbox episodes it opens (``run_dir/sandbox_owner``, made once, mode 0600).

    Why kept in the run directory: a run resumed after a crash must take back the
    episodes its predecessor left open (``replace``), and the sandbox lets only the
    client holding an episode's owner token do that, so no other client can.
    """
    path = Path(run_dir) / OWNER_FILE
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, secrets.token_hex(16).encode())
        os.chmod(path, 0o600)
    return path.read_text(encoding="utf-8").strip()


def sandbox_server(url: str, release_dir: str | Path, *, corpus_dir: str | Path | None = None,
                   index_dir: str | Path | None = None, run_label: str = "run",
                   owner: str | None = None) -> SandboxTools:
    """Episodes on a running ``aether sandbox serve`` (checked: a sandbox, of this release, of its corpus)."""
    from aethersearch.sandbox.contract import MASK_POLICY, SANDBOX_SERVICE

    release = Path(release_dir)
    health = asyncio.run(_health(url))
    if health.get("service") != SANDBOX_SERVICE:
        raise ConfigError(f"{url} is not a masked sandbox (its /health says service {health.get('service')!r})",
                          fix="pass the URL of `aether sandbox serve RELEASE --index DIR` (a retrieval server "
                              "`aether serve` serves unmasked pages)")
    from aethersearch.release.manifest import load_hintfree_manifest

    manifest = load_hintfree_manifest(release)
    release_id = manifest.release_id if manifest is not None else None
    if health.get("release_id") != release_id:
        raise ConfigError(f"the sandbox at {url} serves release {health.get('release_id')!r}, not {release_id!r} "
                          f"({release})", fix="start `aether sandbox serve` on this release, or evaluate its own")
    if health.get("mask_policy") != MASK_POLICY:
        raise ConfigError(f"the sandbox at {url} masks by policy {health.get('mask_policy')!r}; this toolkit "
                          f"evaluates under {MASK_POLICY!r}", fix="serve the sandbox with this version of aethersearch")
    expected = _expected_corpus(release)
    _check_corpus(release, expected, health.get("corpus_hash"), f"the sandbox at {url}")
    store = None
    if corpus_dir is not None or index_dir is not None:
        store = _local_store(corpus_dir, index_dir)
        _check_corpus(release, expected, store.content_hash, f"the local store {corpus_dir or index_dir}")

    def factory(label: str) -> Callable[[RolloutQuestion], Awaitable[Environment]]:
        return HttpEpisodes(url, label, owner)

    search = SearchSetup(factory(run_label), health.get("corpus_hash"), health.get("index_hash"),
                         f"masked sandbox {url}", environment="sandbox", sandbox=_contract(),
                         builder=lambda: factory(run_label))
    return SandboxTools(search, store, factory)


def _local_store(corpus_dir: str | Path | None, index_dir: str | Path | None) -> Any:
    from aethersearch.corpus.store import open_store
    from aethersearch.search.index_dir import open_index

    return open_store(corpus_dir) if corpus_dir is not None else open_index(index_dir or "").store


def run_label(run_dir: str | Path) -> str:
    """The sandbox run id of a run directory: its name and a digest of its absolute path (stable on resume)."""
    resolved = Path(run_dir).resolve()
    return f"{resolved.name}-{hashlib.sha256(str(resolved).encode()).hexdigest()[:10]}"


def tools_for(release_dir: str | Path, *, agent: str, index: Path | None = None, corpus: Path | None = None,
              search_url: str | None = None, sandbox_url: str | None = None, tools: str | None = None,
              run_dir: str | Path = "run") -> SearchSetup | SandboxTools:
    """The tools of a run of ``agent`` on ``release_dir``: the masked sandbox for a hint-free release, else search.

    Refused (``ConfigError``, exit 2, with the fix): a hint-free release with
    ``--search-url`` or without ``--index``/``--sandbox-url``; a sandbox for a
    release that has no chain masks; ``--tools`` other than the sandbox's own.
    """
    from aethersearch.pipeline import search_for
    from aethersearch.release.manifest import is_hintfree_release

    release = Path(release_dir)
    if not is_hintfree_release(release):
        if sandbox_url:
            raise ConfigError(f"{release} is not a hint-free release: it has no chain masks, so there is no sandbox "
                              "to run it in", fix="pass --index DIR or --search-url URL (a retrieval server)")
        plain: SearchSetup = search_for(index, search_url, agent, tools or "search")
        return plain
    if tools is not None and tuple(t for t in tools.split(",") if t) != SANDBOX_TOOLS:
        raise ConfigError(f"--tools {tools}: the sandbox offers {','.join(SANDBOX_TOOLS)} to every agent",
                          fix="drop --tools (an agent uses the tools it knows)")
    if search_url:
        raise ConfigError(f"{_WHY}; --search-url {search_url} would serve it unmasked", fix=_SANDBOX_FIX)
    label = run_label(run_dir)
    if sandbox_url:
        return sandbox_server(sandbox_url, release, corpus_dir=corpus, index_dir=index, run_label=label,
                              owner=owner_token(run_dir))
    if index is None:
        raise ConfigError(f"{_WHY}; no sandbox was given", fix=_SANDBOX_FIX)
    return sandbox_in_process(release, index, corpus, run_label=label)


def diagnose(run_dir: Path, release_dir: Path, tools: SandboxTools, *, agent: Any, llm: Any | None,
             concurrency: int = 8, probes: bool = True, ratio: float = 0.5, seed: int = 0) -> dict[str, Any]:
    """The paper's outputs of a finished sandbox run: factorised metrics (overall, by hop), then the probes.

    Writes ``factorised.json`` (+ rows) and ``probes.json`` into the run directory
    and returns a summary for the caller to print. ``llm`` is the run's own model
    (the Forget probe asks it each hop without search; a no-LLM agent has no
    parametric memory, which the probe records as not applicable). Without a
    local page store (a remote sandbox and no ``--corpus``) nothing served can be
    rebuilt, so the command refuses rather than factorise on partial evidence.
    """
    from aethersearch.diagnostics.probes import distractor_probe, factorise_run, forget_probe, lead_astray_probe

    store = tools.store
    if store is None:
        raise ConfigError("the factorised metrics rebuild the text each episode was served, from the page store",
                          fix="pass --corpus STORE (or --index DIR) beside --sandbox-url: the store the sandbox "
                              "serves (its hash is checked)")
    found: dict[str, Any] = {}
    if probes:  # first: what the model knows without search counts toward sufficiency (factorise reads it)
        found["forget"] = forget_probe(run_dir, release_dir, llm=llm, store=store, concurrency=concurrency)
    factorised = factorise_run(run_dir, release_dir, store=store)
    if probes:
        found["lead_astray"] = lead_astray_probe(run_dir, release_dir, store=store, llm=llm, agent=agent,
                                                 concurrency=concurrency)
        found["distractors"] = distractor_probe(run_dir, release_dir, store=store, llm=llm, agent=agent, ratio=ratio,
                                                seed=seed, concurrency=concurrency,
                                                environment_factory=tools.clean_factory(
                                                    f"{run_label(run_dir)}-distractors"))
    return {"run_dir": str(run_dir), "release_dir": str(release_dir), "factorised": factorised, "probes": found}


def _model_for_probes(run_options: dict[str, Any]) -> Any | None:
    """The run's own model client for the probes (None for an agent that runs without a model)."""
    from aethersearch.agents.base import make_agent
    from aethersearch.rollout.session import RunSettings, make_llm

    agent = make_agent(run_options.get("agent", "search-r1"), **(run_options.get("agent_config") or {}))
    if not agent.needs_llm:
        return None
    settings = RunSettings(agent=agent.name, endpoint=run_options.get("endpoint"), model=run_options.get("model"),
                           concurrency=run_options.get("concurrency", 8),
                           **({"limits": run_options["limits"]} if run_options.get("limits") else {}))
    return make_llm(settings, api_key=run_options.get("api_key"))


def summary_of(run_dir: Path, release_dir: Path, found: dict[str, Any], *, questions: int,
               outcomes: dict[str, int], em: float | None, report: Path | None) -> dict[str, Any]:
    """What ``aether eval`` prints and returns of a sandbox evaluation (the demo's sandbox part too)."""
    factorised = found["factorised"]
    return {"run_dir": str(run_dir), "report": None if report is None else str(report),
            "release_dir": str(release_dir), "agent": factorised["run"]["agent"], "questions": questions,
            "outcomes": outcomes, "em": em, "factorised": factorised["overall"],
            "factorised_by_hops": factorised["by_hops"], "factorised_table": factorised,
            "budget": factorised["run"]["budget"], "probes": found["probes"]}


def evaluate(release_dir: Path, out_dir: Path, tools: SandboxTools, *, probes: bool = True,
             **run_options: Any) -> Any:
    """``aether eval`` of a hint-free release: verify → run in the sandbox → score → factorise, probes → report.

    Writes ``out_dir/run`` (run.json, traces, scores.json, factorised.json,
    probes.json) and ``out_dir/report.html``; returns the pipeline's
    ``EvalResult`` with the sandbox summary in ``extra["sandbox"]``.
    """
    from aethersearch.pipeline import EvalResult, report, run_agent, score, source_table, verify_or_refuse

    release_dir, out_dir = Path(release_dir), Path(out_dir)
    verify_or_refuse(release_dir)
    run_dir = out_dir / "run"
    summary = run_agent(release_dir, run_dir, tools.search, verify=False, **run_options)
    scores = score(run_dir, release_dir)
    found = diagnose(run_dir, release_dir, tools, agent=None, llm=_model_for_probes(run_options),
                     concurrency=run_options.get("concurrency", 8), probes=probes)
    report_path = report(run_dir, release_dir, out_dir / "report.html")  # after the probes: it shows their rates
    em = scores.overall.micro.metrics.get("em")
    extra = {"sandbox": summary_of(run_dir, release_dir, found, questions=scores.overall.micro.n,
                                   outcomes=dict(scores.outcomes), em=None if em is None else em.mean,
                                   report=report_path)}
    return EvalResult(run_dir, release_dir, summary, scores, source_table(scores), report_path, extra)
