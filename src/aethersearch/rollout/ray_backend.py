"""Optional Ray backend: shard a run's questions across Ray workers, one run-dir contract.

Why: one asyncio process saturates one core; a large checkpoint sweep against a
pool of model servers wants many. Each worker runs the ordinary runner
(:func:`~aethersearch.rollout.runner.run_questions`) on its shard into its own
sub-directory ``<run>/shards/shard-<k>/`` (same fingerprint, so each shard is itself
resumable), and the driver merges every shard's traces into ``<run>/traces.jsonl``
(one fsync per merge) and re-exports ``predictions.jsonl``. The result is the same
run directory a single-process run writes, so resume, scoring and comparison do not
know which backend made it.

Crash safety follows from three rules:

* the driver merges any shard traces left by an earlier, interrupted run *before*
  it decides what is unfinished, so a finished question is never run again;
* a merged trace that equals the run's latest trace for its id is skipped, so a
  crash between the merge's fsync and the shard's removal duplicates nothing;
* before a retry, the errored trace of each id is copied into its shard's log, so
  the shard's runner numbers the new attempt after it.

Workers must build their own model client and environments (sockets do not
pickle), so the backend takes *builders*: ``env_builder() -> environment factory``
and ``llm_builder() -> LLM | None``, both picklable (Ray uses cloudpickle, so
closures are fine). ``executor="local"`` runs the shards in threads of this
process (no Ray needed; used by the tests); ``executor="ray"`` needs the ``ray``
extra and an initialised (or auto-started) Ray cluster.
"""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from aethersearch.agents.base import make_agent
from aethersearch.errors import ConfigError
from aethersearch.jsonl import dumps, read_jsonl_tolerant, validate_row
from aethersearch.records import (
    ERROR_OUTCOMES,
    Budget,
    RolloutQuestion,
    RunFingerprint,
    Trace,
)
from aethersearch.rollout.health import error_report
from aethersearch.rollout.runner import EnvironmentFactory, RunSummary, run_questions
from aethersearch.rollout.samples import pending_units, sample_keys
from aethersearch.rollout.store import TRACES, RunStore

SHARDS_DIR = "shards"
EXECUTORS = ("local", "ray")


def shard_questions(questions: Sequence[RolloutQuestion], shards: int) -> list[list[RolloutQuestion]]:
    """Deal ``questions`` round-robin into ``shards`` lists (empty lists dropped); deterministic."""
    if shards < 1:
        raise ConfigError(f"shards must be at least 1, got {shards}", fix="pass --shards 1 or more")
    dealt: list[list[RolloutQuestion]] = [[] for _ in range(shards)]
    for number, question in enumerate(questions):
        dealt[number % shards].append(question)
    return [part for part in dealt if part]


def run_shard(questions: list[RolloutQuestion], agent: str, agent_config: dict[str, Any],
              env_builder: Callable[[], EnvironmentFactory], llm_builder: Callable[[], Any] | None,
              budget: Budget, shard_dir: str, fingerprint: RunFingerprint, concurrency: int,
              question_timeout_s: float | None = None, stop_after_failures: int | None = None) -> str:
    """One worker's job: the ordinary runner on one shard, into its own directory.

    The shard runs under the same per-question deadline as a single-process run
    (``question_timeout_s``, from the run's :class:`~aethersearch.records.RunLimits`).
    """
    llm = llm_builder() if llm_builder is not None else None
    run_questions(questions, make_agent(agent, **agent_config), env_builder(), budget, shard_dir,
                  fingerprint, llm=llm, concurrency=concurrency, question_timeout_s=question_timeout_s,
                  stop_after_failures=stop_after_failures)
    return shard_dir


def _append_durably(path: Path, traces: list[Trace]) -> None:
    if not traces:
        return
    with path.open("ab") as handle:
        handle.write(b"".join(dumps(t) + b"\n" for t in traces))
        handle.flush()
        os.fsync(handle.fileno())


def merge_shards(run_dir: Path, store: RunStore) -> int:
    """Fold every ``shards/shard-*/traces.jsonl`` into the run's log, then remove the shards.

    Returns how many traces were added. A torn last line of a shard (a worker killed
    mid-append) is ignored: that question was not finished and will run again.
    """
    shards_root = run_dir / SHARDS_DIR
    if not shards_root.is_dir():
        return 0
    added: list[Trace] = []
    shard_dirs = sorted(p for p in shards_root.iterdir() if p.is_dir())
    for shard_dir in shard_dirs:
        log = shard_dir / TRACES
        read = read_jsonl_tolerant(log)
        for line, row in enumerate(read.rows, start=1):
            trace = validate_row(log, line, row, Trace)
            key = (trace.id, trace.sample)
            if store.latest.get(key) == trace:  # a seeded copy, or already merged before a crash
                continue
            added.append(trace)
            store.latest[key] = trace
    _append_durably(store.traces_path, added)
    for shard_dir in shard_dirs:
        shutil.rmtree(shard_dir)
    return len(added)


def _seed_shard(shard_dir: Path, store: RunStore, fingerprint: RunFingerprint,
                questions: list[RolloutQuestion]) -> None:
    """Create the shard's run dir, carrying the traces of its ids' samples.

    The errored ones give the retry its attempt number; the finished samples of a
    question whose other samples are still to run are skipped by the shard's runner.
    """
    RunStore.open(shard_dir, fingerprint).close()
    keys = sample_keys((q.id for q in questions), fingerprint.samples)
    seeds = [store.latest[key] for key in keys if key in store.latest]
    _append_durably(shard_dir / TRACES, seeds)


def _run_all(jobs: list[tuple[Any, ...]], executor: str, address: str | None = None) -> None:
    if executor == "local":
        with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
            for future in [pool.submit(run_shard, *job) for job in jobs]:
                future.result()
        return
    try:
        import ray
    except ImportError:
        raise ConfigError("the Ray backend needs the ray package",
                          fix="pip install 'aethersearch[ray]', or use executor='local'") from None
    if not ray.is_initialized():
        try:  # None starts a local cluster; "auto" or HOST:PORT joins a running one
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        except ConnectionError as exc:
            raise ConfigError(f"could not reach the Ray cluster at {address!r}: {exc}",
                              fix="start it with `ray start --head`, pass its address to --ray, "
                                  "or drop --ray to run in one process") from None
    remote = ray.remote(run_shard)
    ray.get([remote.remote(*job) for job in jobs])


def run_sharded(questions: Sequence[RolloutQuestion], agent: str, env_builder: Callable[[], EnvironmentFactory],
                budget: Budget, run_dir: str | Path, fingerprint: RunFingerprint, *,
                agent_config: dict[str, Any] | None = None, llm_builder: Callable[[], Any] | None = None,
                shards: int = 4, concurrency: int = 16, executor: str = "ray",
                question_timeout_s: float | None = None, stop_after_failures: int | None = None,
                ray_address: str | None = None) -> RunSummary:
    """Run every unfinished question of ``questions`` into ``run_dir`` over ``shards`` workers.

    Same contract as :func:`~aethersearch.rollout.runner.run_questions`: the fingerprint is
    checked against ``run.json``, finished ids are skipped, errored ones retried, and the
    run directory is locked against a second writer. Callers with a release and settings
    go through :func:`aethersearch.rollout.session.execute_run` (``shards=``), which
    builds the fingerprint and the workers' model clients the same way as a plain run.
    """
    if executor not in EXECUTORS:
        raise ConfigError(f"unknown executor {executor!r}", fix=f"use one of {', '.join(EXECUTORS)}")
    start = time.monotonic()
    run_dir = Path(run_dir)
    with RunStore.open(run_dir, fingerprint) as store:
        return _run_sharded_locked(questions, agent, env_builder, budget, run_dir, fingerprint, store,
                                   agent_config=agent_config, llm_builder=llm_builder, shards=shards,
                                   concurrency=concurrency, executor=executor, start=start,
                                   question_timeout_s=question_timeout_s, stop_after_failures=stop_after_failures,
                                   ray_address=ray_address)


def _run_sharded_locked(questions: Sequence[RolloutQuestion], agent: str,
                        env_builder: Callable[[], EnvironmentFactory], budget: Budget, run_dir: Path,
                        fingerprint: RunFingerprint, store: RunStore, *, agent_config: dict[str, Any] | None,
                        llm_builder: Callable[[], Any] | None, shards: int, concurrency: int, executor: str,
                        start: float, question_timeout_s: float | None,
                        stop_after_failures: int | None, ray_address: str | None) -> RunSummary:
    """The body of :func:`run_sharded` while this process holds the run directory's lock."""
    merge_shards(run_dir, store)  # work an interrupted run finished counts as finished
    samples = fingerprint.samples
    units = pending_units(questions, samples, store.finished_ids())
    todo = list({question.id: question for question, _ in units}.values())  # a question goes to one shard
    config = dict(agent_config or {})
    jobs = []
    for number, part in enumerate(shard_questions(todo, shards) if todo else []):
        shard_dir = run_dir / SHARDS_DIR / f"shard-{number:03d}"
        _seed_shard(shard_dir, store, fingerprint, part)
        jobs.append((part, agent, config, env_builder, llm_builder, budget, str(shard_dir), fingerprint,
                     concurrency, question_timeout_s, stop_after_failures))
    if jobs:
        _run_all(jobs, executor, ray_address)
    merge_shards(run_dir, store)
    predictions = store.export_predictions(q.id for q in questions)
    new = [store.latest[(q.id, k)] for q, k in units if (q.id, k) in store.latest]
    counts = Counter(t.outcome.value for t in new)
    errored = sum(t.outcome in ERROR_OUTCOMES for t in new)
    total = len(questions) * samples
    return RunSummary(run_dir=run_dir, total=total, skipped=total - len(units),
                      attempted=len(units), errored=errored, outcomes=dict(counts),
                      elapsed_s=time.monotonic() - start, predictions_path=predictions,
                      torn_tail_path=store.torn_tail_path,
                      errors=error_report(store.latest, sample_keys((q.id for q in questions), samples)))


def ray_available() -> bool:
    """True when the ``ray`` package can be imported (the tests skip the Ray path otherwise)."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


__all__ = ["merge_shards", "ray_available", "run_shard", "run_sharded", "shard_questions"]
