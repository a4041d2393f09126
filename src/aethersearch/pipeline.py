"""``aether eval``: the main job — verify release → search → run → score → table and report.

Why a separate top-layer module: every step is owned by another layer (benchmark
verification, search, rollout, scoring, report); this module only wires them, in
small functions the CLI (and ``make demo``) compose. It is the one place on the
evaluation path that may touch gold, and only *after* the run: scoring reads
``eval.jsonl``; the runner never does.

With no release given, ``aether eval`` runs the embedded demo instead
(``aethersearch.demo.run_demo``), which composes these same functions.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from aethersearch.errors import AetherError, ConfigError, IntegrityError
from aethersearch.records import DEFAULT_CONCURRENCY, ERROR_OUTCOMES, Budget, Decoding, RunLimits
from aethersearch.rollout.samples import check_samples
from aethersearch.rollout.session import RunSettings, SearchSetup

if TYPE_CHECKING:
    from aethersearch.scoring.scores_file import MetricEstimate, Scores

__all__ = ["EvalResult", "index_search", "no_search", "report", "run_agent", "run_eval", "run_release", "score",
    "search_for", "search_server_process", "server_search", "source_table", "verify_or_refuse"]

class EvalResult(NamedTuple):
    """One finished evaluation: the run, its scores, the per-source table and the report."""

    run_dir: Path
    release_dir: Path
    summary: Any
    scores: Scores
    table: list[dict[str, Any]]
    report_path: Path | None
    extra: dict[str, Any]


def verify_or_refuse(release_dir: Path) -> None:
    """Run the full release verifier; any failed check refuses the evaluation (IntegrityError)."""
    from aethersearch.release.verify import verify_release

    report = verify_release(release_dir)
    if not report.ok:
        lines = "\n    ".join(check.line() for check in report.failures)
        raise IntegrityError(f"{release_dir}: the release fails verification; refusing to evaluate:\n    {lines}",
                             fix="restore or rebuild the release (`aether build`), then `aether verify` it")


def index_search(index_dir: Path, tools: tuple[str, ...] = ("search",)) -> SearchSetup:
    """Search in-process on a built index directory (no HTTP)."""
    from aethersearch.search.environment import IndexEnvironment
    from aethersearch.search.index_dir import open_index

    opened = open_index(index_dir)
    env = IndexEnvironment(opened.index, opened.store, tools=tools)
    return SearchSetup(lambda q: env, opened.store.content_hash, opened.index.index_hash,
                       f"in-process index {index_dir}", builder=lambda: index_search(index_dir, tools).factory)


def server_search(url: str, tools: tuple[str, ...] = ("search",)) -> SearchSetup:
    """Search through a running retrieval server; its /health gives the hashes."""
    from aethersearch.sandbox.contract import SANDBOX_SERVICE
    from aethersearch.search.client import SearchClient
    from aethersearch.search.environment import RetrievalServerEnvironment

    async def health() -> dict[str, Any]:
        async with SearchClient(url) as client:
            return await client.health()

    info = asyncio.run(health())
    if info.get("service") == SANDBOX_SERVICE:  # its /health answers, its /retrieve would 404 every search
        raise ConfigError(f"{url} is a masked sandbox (`aether sandbox serve`), not a retrieval server",
                          fix="this URL is a sandbox: pass it as --sandbox-url, with its hint-free release")
    return SearchSetup(lambda q: RetrievalServerEnvironment(SearchClient(url), tools=tools, close_client=True),
                       info.get("corpus_hash"), info.get("index_hash"), f"search server {url}",
                       mode_aliases=info.get("mode_aliases") or None)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def search_server_process(index_dir: Path, *, timeout_s: float = 60.0) -> Iterator[str]:
    """Start ``aether serve INDEX`` as a subprocess on a free loopback port; yield its URL."""
    import httpx

    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "aethersearch.cli", "serve", str(index_dir), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise AetherError(f"the search server exited: {proc.stderr.read().decode()[-500:] if proc.stderr else ''}",
                                  fix=f"check `aether serve {index_dir}` by hand")
            try:
                if httpx.get(url + "/health", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AetherError(f"the search server on {url} did not come up in {timeout_s:g}s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def no_search() -> SearchSetup:
    """No tools (the ``direct`` baseline)."""
    from aethersearch.rollout.runner import NoEnvironment

    return SearchSetup(lambda q: NoEnvironment(), None, None, "no tools")


def run_release(release_dir: Path, run_dir: Path, settings: RunSettings, search: SearchSetup, *,
                api_key: str | None = None, progress: Callable[[Any], None] | None = None, verify: bool = True,
                enforce: bool = True, agent: Any | None = None, llm: Any | None = None,
                shards: int | None = None, executor: str = "ray", ray_address: str | None = None) -> Any:
    """Release + settings → a verified, fingerprinted, resumable run: the one run path.

    ``aether run``/``eval``, :func:`aethersearch.api.evaluate` and the sandbox demo
    all call this, so identical settings write an identical ``run.json``. It runs
    the full release verifier (``verify``; gold is read here, one layer above the
    runner, which never opens ``eval.jsonl``), then
    :func:`~aethersearch.rollout.session.prepare_run` and
    :func:`~aethersearch.rollout.session.execute_run`. A run with more questions
    in error than ``settings.limits.max_error_rate`` raises
    :class:`~aethersearch.errors.RunFailed` (``enforce``) instead of returning
    something that would score as a number.
    """
    from aethersearch.release.manifest import is_hintfree_release
    from aethersearch.rollout.fingerprint import release_info
    from aethersearch.rollout.session import execute_run, prepare_run

    if search.environment != "sandbox" and is_hintfree_release(release_dir):  # whoever calls: CLI, API, noise
        raise ConfigError(f"{release_dir} is a hint-free release: it is evaluated only inside the masked sandbox "
                          f"(its chain pages unlock one visit at a time), not with {search.description}",
                          fix="run it with --index DIR (the sandbox in-process) or --sandbox-url URL; from Python, "
                              "aethersearch.sandbox_eval.tools_for(...).search")
    if verify:
        verify_or_refuse(Path(release_dir))
    prepared = prepare_run(release_info(release_dir), settings, search, agent=agent, llm=llm, api_key=api_key)
    return execute_run(prepared, run_dir, progress=progress, enforce=enforce, shards=shards, executor=executor,
                       api_key=api_key, ray_address=ray_address)


def run_agent(release_dir: Path, run_dir: Path, search: SearchSetup, *, agent: str = "lexical",
              agent_config: dict[str, Any] | None = None, endpoint: str | None = None, model: str | None = None,
              api_key: str | None = None, budget: Budget | None = None, decoding: Decoding | None = None,
              concurrency: int = DEFAULT_CONCURRENCY, limits: RunLimits | None = None,
              progress: Callable[[Any], None] | None = None, verify: bool = True, enforce: bool = True,
              ray: str | None = None, shards: int | None = None, samples: int = 1,
              profile: dict[str, Any] | None = None) -> Any:
    """Roll ``agent`` out over the release's rollout projection into ``run_dir`` (resumable).

    Keyword form of :func:`run_release` (the CLI's options map one to one onto
    :class:`RunSettings`). ``ray`` (``"auto"``, ``HOST:PORT`` or ``"local"`` for a
    cluster started here) spreads ``shards`` workers (default 4) over Ray into the same
    run directory. ``samples`` (K) rolls each question out K times (``--samples``).
    ``profile`` is what ``run.json`` records of the agent profile (``rollout.profile_run``).
    """
    if ray is not None:
        shards = shards or 4
    elif shards is not None and shards > 1:
        raise ConfigError("--shards needs --ray", fix="pass --ray auto|HOST:PORT|local, or drop --shards")
    settings = RunSettings(agent=agent, agent_config=agent_config or {}, endpoint=endpoint, model=model,
                           budget=budget or Budget(), decoding=decoding or Decoding(), concurrency=concurrency,
                           limits=limits or RunLimits(), samples=check_samples(samples), profile=profile)
    return run_release(release_dir, run_dir, settings, search, api_key=api_key, progress=progress, verify=verify,
                       enforce=enforce, shards=shards, executor="ray",
                       ray_address=None if ray in (None, "local") else ray)


def score(run_dir: Path, release_dir: Path) -> Scores:
    """Score with the scoring layer (writes scores.json)."""
    from aethersearch.scoring.api import score_run

    return score_run(run_dir, release_dir)


def source_table(scores: Scores, metrics: tuple[str, ...] = ("em", "f1", "subem")) -> list[dict[str, Any]]:
    """Rows ``{source, n, <metric>..., answered, abstained, errors}`` per source, then ``all``."""
    rows = []
    micro = scores.overall.micro
    entries: list[tuple[str, int, Mapping[str, MetricEstimate], Mapping[str, int]]] = [
        (source, entry.n, entry.metrics, entry.outcomes) for source, entry in scores.by_source.items()]
    entries.append(("all", micro.n, micro.metrics, scores.outcomes))
    for source, n, estimates, counts in entries:
        row: dict[str, Any] = {"source": source, "n": n}
        for metric in metrics:
            value = estimates.get(metric)
            row[metric] = value.mean if value is not None else None
        row["answered"] = counts.get("answered", 0)
        row["abstained"] = counts.get("abstained", 0)
        row["errors"] = sum(counts.get(o.value, 0) for o in ERROR_OUTCOMES)
        rows.append(row)
    return rows


def report(run_dir: Path, release_dir: Path, out_path: Path) -> Path:
    """Write the HTML report of the run."""
    from aethersearch.report.html import write_report

    return write_report([run_dir], out_path, release_dir=release_dir)


def run_eval(release_dir: Path, out_dir: Path, search: SearchSetup, **run_options: Any) -> EvalResult:
    """Verify → run → score → report, into ``out_dir/run`` and ``out_dir/report.html``."""
    release_dir, out_dir = Path(release_dir), Path(out_dir)
    verify_or_refuse(release_dir)
    run_dir = out_dir / "run"
    summary = run_agent(release_dir, run_dir, search, verify=False, **run_options)
    scores = score(run_dir, release_dir)
    report_path = report(run_dir, release_dir, out_dir / "report.html")
    return EvalResult(run_dir, release_dir, summary, scores, source_table(scores), report_path, {})


def search_for(index: Path | None, search_url: str | None, agent: str, tools: str) -> Any:
    """The tools an agent gets: a retrieval server, an in-process index, or none for tool-free agents.

    ``aether run``, ``aether eval`` and ``aether noise`` resolve their ``--index``/``--search-url`` options here.
    """
    from aethersearch.agents.base import make_agent

    offered = tuple(t for t in tools.split(",") if t)
    if search_url:
        return server_search(search_url, offered)
    if index is not None:
        return index_search(index, offered)
    if make_agent(agent).environment == "none":
        return no_search()
    raise ConfigError(f"agent {agent!r} needs a search tool", fix="pass --index DIR or --search-url URL")
