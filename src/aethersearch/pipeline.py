"""``aether eval``: the main job — verify release → search → run → score → table and report.

Why a separate top-layer module: every step is owned by another layer (benchmark
verification, search, rollout, scoring, report); this module only wires them, in
small functions the CLI (and ``make demo``) compose. It is the one place on the
evaluation path that may touch gold, and only *after* the run: scoring reads
``eval.jsonl``; the runner never does.

With no release given, :func:`run_demo` builds everything from the embedded demo
world: corpus + BM25 index, the demo release, a ``lexical`` (no-LLM) run, scores,
the HTML report, and — when ``aethersearch.diagnose`` is importable — the sandbox
evaluation with its factorised metrics and probes.
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

from aethersearch.errors import AetherError, IntegrityError
from aethersearch.records import DEFAULT_CONCURRENCY, ERROR_OUTCOMES, Budget, Decoding, RunLimits
from aethersearch.rollout.samples import check_samples
from aethersearch.rollout.session import RunSettings, SearchSetup

if TYPE_CHECKING:
    from aethersearch.scoring.scores_file import MetricEstimate, Scores

DEMO_BUDGET = Budget(max_tool_calls=4, max_turns=4)


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
    from aethersearch.benchmark.verify import verify_release

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
    from aethersearch.search.client import SearchClient
    from aethersearch.search.environment import RetrievalServerEnvironment

    async def health() -> dict[str, Any]:
        async with SearchClient(url) as client:
            return await client.health()

    info = asyncio.run(health())
    return SearchSetup(lambda q: RetrievalServerEnvironment(SearchClient(url), tools=tools, close_client=True),
                       info.get("corpus_hash"), info.get("index_hash"), f"search server {url}")


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
    from aethersearch.rollout.fingerprint import release_info
    from aethersearch.rollout.session import execute_run, prepare_run

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
              ray: str | None = None, shards: int | None = None, samples: int = 1) -> Any:
    """Roll ``agent`` out over the release's rollout projection into ``run_dir`` (resumable).

    Keyword form of :func:`run_release` (the CLI's options map one to one onto
    :class:`RunSettings`). ``ray`` (``"auto"``, ``HOST:PORT`` or ``"local"`` for a
    cluster started here) spreads ``shards`` workers (default 4) over Ray into the same
    run directory. ``samples`` (K) rolls each question out K times (``--samples``).
    """
    if ray is not None:
        shards = shards or 4
    elif shards is not None and shards > 1:
        from aethersearch.errors import ConfigError

        raise ConfigError("--shards needs --ray", fix="pass --ray auto|HOST:PORT|local, or drop --shards")
    settings = RunSettings(agent=agent, agent_config=agent_config or {}, endpoint=endpoint, model=model,
                           budget=budget or Budget(), decoding=decoding or Decoding(), concurrency=concurrency,
                           limits=limits or RunLimits(), samples=check_samples(samples))
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


def build_demo_inputs(out_dir: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """Demo world corpus + BM25 index, and the demo release; returns (release_dir, index_dir)."""
    from aethersearch.benchmark.build import build_from_config
    from aethersearch.benchmark.demo_sources import write_demo_sources
    from aethersearch.corpus.importers import import_corpus
    from aethersearch.search.index_dir import build_index

    out = Path(out_dir)
    store = import_corpus("demo", "demo", out / "corpus", seed=seed, overwrite=True).store
    # ~750 pages: numpy scoring beats paying numba's JIT compile on every demo run
    build_index(store, "bm25", out / "index", config={"numba": False}, overwrite=True)
    config = write_demo_sources(out / "demo_sources", seed=seed)
    release = build_from_config(config, out / "release")
    return release.release_dir, out / "index"


def sandbox_demo(out_dir: Path) -> dict[str, Any] | None:
    """The issue-8 sandbox part of the demo, when ``aethersearch.diagnose`` provides it."""
    try:
        from aethersearch.diagnose import run_sandbox_demo
    except ImportError:
        return None
    return run_sandbox_demo(out_dir)


def run_demo(out_dir: Path, *, concurrency: int = 8, sandbox: bool = True,
             progress: Callable[[Any], None] | None = None, samples: int = 1) -> EvalResult:
    """The embedded demo: no model server, no downloads, under a minute on 2 cores.

    ``samples`` K > 1 rolls each question out K times; the lexical agent is
    deterministic, so its K samples agree and pass@k = mean@K = maj@K (the demo
    shows the keys, a sampled model shows the spread).
    """
    out = Path(out_dir)
    release_dir, index_dir = build_demo_inputs(out)
    result = run_eval(release_dir, out, index_search(index_dir), agent="lexical", budget=DEMO_BUDGET,
                      concurrency=concurrency, progress=progress, samples=samples)
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
