"""The resumable async rollout runner: questions in, one durable trace per question out.

Why it is built like this:

* it only ever receives ``RolloutQuestion`` rows (``id``, ``question``): gold is
  out of reach by construction (and by an import-boundary test);
* every episode runs under its own :class:`~aethersearch.rollout.budget.BudgetTracker`,
  with the agent holding only budget-wrapped tools and model; ``BudgetExhausted``
  ends the episode with one forced final-answer request and ``stop_reason="budget"``;
  if that request yields an answer (or a refusal) the outcome is ``answered``
  (``abstained``) — it is a real prediction, as in Search-R1's final rollout, and
  ``stop_reason`` still says the budget ended it — otherwise the outcome is ``budget``,
  never a plain wrong answer;
* every failure becomes a recorded outcome — ``endpoint_error`` for the model or a
  per-question deadline, ``tool_error`` for tools or agent faults — never a crash of
  the run; errored ids are retried when the same command is run again, finished ids
  never are;
* a question counts as done only once its trace is fsynced, so ``kill -9`` at any
  point loses at most in-flight work (including traces still in the current
  100 ms group-commit window), which the next run redoes;
* the hot path is lean (issue 16; ``benchmarks/rollout.py``): traces are committed
  in windows, a finished question frees its model slot before its commit, the
  store keeps finished traces without their steps, and the cyclic GC is
  relaxed for the run (:func:`run_gc_policy`).

Programmatic use (also by diagnostics probes)::

    summary = run_questions(questions, make_agent("search-r1"), env_factory, Budget(),
                            run_dir, fingerprint, llm=OpenAIClient(url, model), concurrency=64)
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, NamedTuple

from aethersearch.agents.base import NO_MODEL, Agent, AgentOutput, Episode
from aethersearch.agents.llm import LLM
from aethersearch.environment import Environment
from aethersearch.errors import AetherError, BudgetExhausted, DataError, EndpointError, ToolUnavailable
from aethersearch.records import (
    DETERMINISTIC_KINDS,
    ERROR_OUTCOMES,
    SCHEMA_VERSION,
    Budget,
    Decoding,
    ErrorKind,
    Outcome,
    RolloutQuestion,
    RunFingerprint,
    Trace,
    Usage,
)
from aethersearch.rollout.budget import BudgetedEnvironment, BudgetedLLM, BudgetTracker
from aethersearch.rollout.deadlines import Deadlines
from aethersearch.rollout.health import ErrorReport, error_report
from aethersearch.rollout.samples import pending_units, sample_decoding, sample_keys
from aethersearch.rollout.store import RunStore, kept_summary

__all__ = ["ENDPOINT_DOWN_KINDS", "EnvironmentFactory", "NoEnvironment", "Progress", "RUN_GC_THRESHOLD",
    "RunSummary", "TOOL_DOWN_KINDS", "endpoint_error_kind", "run_episode", "run_gc_policy", "run_questions",
    "run_questions_async"]

EnvironmentFactory = Callable[[RolloutQuestion], "Environment | Awaitable[Environment]"]


class Progress(NamedTuple):
    """A progress event after each finished question (for the CLI's progress bar)."""

    done: int
    errored: int
    total: int
    skipped: int
    elapsed_s: float


class RunSummary(NamedTuple):
    """What a run did: counts per outcome, what it skipped, where it wrote.

    Counts are of rollouts, one per (question, sample): ``total`` is questions x K.
    """

    run_dir: Path
    total: int
    skipped: int
    attempted: int
    errored: int
    outcomes: dict[str, int]
    elapsed_s: float
    predictions_path: Path
    torn_tail_path: Path | None
    errors: ErrorReport


class NoEnvironment:
    """The environment of the ``direct`` baseline: no tools at all."""

    tools: tuple[str, ...] = ()

    async def search(self, query: str, k: int) -> Any:
        """Refused: this environment has no search tool."""
        raise AetherError("this environment offers no tools (agent 'direct')")

    async def visit(self, page: str) -> Any:
        """Refused: this environment has no visit tool."""
        raise AetherError("this environment offers no tools (agent 'direct')")

    async def close(self) -> None:
        """Nothing to release."""


def _usage(episode: Episode) -> Usage:
    prompt = completion = tools = turns = 0
    for step in episode.steps:
        if step.llm is not None:
            turns += 1
            prompt += step.llm.prompt_tokens
            completion += step.llm.completion_tokens
        tools += len(step.tool_calls)
    return Usage.trusted(prompt_tokens=prompt, completion_tokens=completion, turns=turns, tool_calls=tools)


async def run_episode(question: RolloutQuestion, agent: Agent, env: Environment, llm: LLM | None,
                      budget: Budget, decoding: Decoding, *, attempt: int = 1,
                      timeout_s: float | None = None, effective: Decoding | None = None,
                      deadlines: Deadlines | None = None, sample: int = 0) -> Trace:
    """Run one question to a Trace; every failure becomes an outcome, never an exception.

    ``sample`` is recorded on the trace (which of the run's K rollouts of the
    question this is); the caller passes the sample's own decoding (its seed).

    ``effective`` is ``agent.effective_decoding(decoding)`` when the caller already has it
    (the runner computes it once per run, not once per question). ``deadlines`` is the
    run's shared deadline queue for ``timeout_s`` (the runner keeps one per run: one
    timer for all questions); without it a question past ``timeout_s`` is stopped all the same.
    """
    start = time.monotonic()
    tracker = BudgetTracker(budget)
    episode = Episode(question=question, question_seen=agent.question_seen(question.question),
                      env=BudgetedEnvironment(env, tracker),
                      llm=BudgetedLLM(llm, tracker) if llm is not None else NO_MODEL,
                      decoding=effective if effective is not None else agent.effective_decoding(decoding),
                      charge=tracker.charge_tool, calls_left=tracker.tool_calls_left)
    error: str | None = None
    kind: ErrorKind | None = None
    output: AgentOutput
    if not timeout_s:
        deadlines = None
    elif deadlines is None or deadlines.seconds != timeout_s:
        deadlines = Deadlines(timeout_s)
    # in this task (wait_for made a second task per question), one timer per run (see Deadlines)
    guard = deadlines.start() if deadlines is not None else None
    try:
        with guard if guard is not None else nullcontext():
            try:  # inline, not a helper coroutine: every resume of the episode passes each await layer
                output = await agent.solve(episode)
            except BudgetExhausted:
                tracker.grant_final()
                output = await agent.final_answer(episode)  # its own BudgetExhausted is caught below
        if tracker.final_granted:
            output = output._replace(stop_reason="budget")
    except ToolUnavailable as exc:  # the tool's server failed: no answer the agent could have used
        output, error = AgentOutput("", None, Outcome.TOOL_ERROR, "tool_error"), str(exc)
        kind = ErrorKind(exc.kind)
    except EndpointError as exc:
        kind = endpoint_error_kind(exc)
        outcome = Outcome.REQUEST_REJECTED if kind in DETERMINISTIC_KINDS else Outcome.ENDPOINT_ERROR
        output, error = AgentOutput("", None, outcome, outcome.value), str(exc)
    except BudgetExhausted as exc:  # the forced final answer itself tried to overrun
        output, error = AgentOutput("", None, Outcome.BUDGET, "budget"), str(exc)
    except Exception as exc:  # noqa: BLE001 — a tool or agent fault is this question's outcome
        if guard is not None and guard.expired and isinstance(exc, TimeoutError):  # this question's deadline
            output, kind = AgentOutput("", None, Outcome.ENDPOINT_ERROR, "deadline"), ErrorKind.DEADLINE
            error = f"question {question.id!r} passed its {timeout_s:g}s deadline"
        else:  # a tool's own TimeoutError included: the deadline did not fire, so it is not one
            output, kind = AgentOutput("", None, Outcome.TOOL_ERROR, "tool_error"), ErrorKind.TOOL
            error = f"{type(exc).__name__}: {exc}"
    finally:
        try:
            await env.close()
        except Exception:  # noqa: BLE001 — closing must not turn a result into a crash
            pass
    if error is not None and tracker.exhausted and output.outcome not in ERROR_OUTCOMES:
        error = f"budget: {tracker.exhausted}; {error}"
    # not validated again (Record.trusted): every field is the runner's own value or the agent's typed output
    return Trace.trusted(schema_version=SCHEMA_VERSION, id=question.id, question_seen=episode.question_seen,
                         agent=agent.name, steps=list(episode.steps), response=output.response,
                         prediction=output.prediction, outcome=output.outcome, stop_reason=output.stop_reason,
                         error=error, error_kind=kind, usage=_usage(episode),
                         elapsed_s=round(time.monotonic() - start, 6), attempt=attempt, sample=sample)


#: Error kinds that say the endpoint itself is failing (not this one question).
ENDPOINT_DOWN_KINDS = frozenset({ErrorKind.CONNECTION, ErrorKind.TIMEOUT, ErrorKind.SERVER_ERROR,
                                 ErrorKind.RATE_LIMITED, ErrorKind.MALFORMED_REPLY, ErrorKind.AUTH,
                                 ErrorKind.NOT_FOUND, ErrorKind.DEADLINE})


#: Error kinds that say a tool's server is failing (every question would fail the same way).
TOOL_DOWN_KINDS = frozenset({ErrorKind.TOOL_UNREACHABLE, ErrorKind.TOOL_WRONG_API, ErrorKind.TOOL_SERVER_ERROR})


def endpoint_error_kind(exc: EndpointError) -> ErrorKind:
    """The recorded kind of an endpoint failure (an unknown or missing kind is ``endpoint``)."""
    try:
        return ErrorKind(exc.kind) if exc.kind else ErrorKind.ENDPOINT
    except ValueError:
        return ErrorKind.ENDPOINT


#: Young-generation threshold of the cyclic GC while a run is in progress (CPython's default is 700).
RUN_GC_THRESHOLD = 20_000
_gc_lock = threading.Lock()
_gc_runs = 0
_gc_saved: tuple[int, ...] = ()


@contextmanager
def run_gc_policy() -> Iterator[None]:
    """While a run is in progress: freeze the heap built before it and collect young objects less often.

    Why: a model call allocates hundreds of short-lived container objects (aiohttp
    requests, reply dicts, trace records), so with CPython's default threshold the
    cyclic collector ran every ~700 allocations and each pass also walked the run's
    long-lived objects; that was ~15-30% of the harness's CPU per call. ``gc.freeze``
    moves everything that existed before the run (modules, the question list, the
    traces of a resumed run) out of the collector's sight, and a higher young
    threshold makes each pass cover more calls. Nothing is leaked: reference
    counting still frees acyclic garbage at once, cycles are collected at the
    higher threshold, and both settings are restored when the last concurrent run
    (threads of one process share the collector) ends.
    """
    global _gc_runs, _gc_saved
    with _gc_lock:
        if _gc_runs == 0:
            _gc_saved = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(max(RUN_GC_THRESHOLD, _gc_saved[0]), *_gc_saved[1:])
        _gc_runs += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_runs -= 1
            if _gc_runs == 0:
                gc.set_threshold(*_gc_saved)
                gc.unfreeze()


async def _make_env(factory: EnvironmentFactory, question: RolloutQuestion) -> Environment:
    env = factory(question)
    if inspect.isawaitable(env):
        env = await env
    return env


async def run_questions_async(
    questions: Sequence[RolloutQuestion],
    agent: Agent,
    environment_factory: EnvironmentFactory,
    budget: Budget,
    run_dir: str | Path,
    fingerprint: RunFingerprint,
    *,
    llm: LLM | None = None,
    decoding: Decoding | None = None,
    concurrency: int = 16,
    question_timeout_s: float | None = None,
    progress: Callable[[Progress], None] | None = None,
    stop_after_failures: int | None = None,
) -> RunSummary:
    """Run every unfinished (question, sample) of ``questions`` into ``run_dir`` (resuming if it exists).

    Each question is rolled out ``fingerprint.samples`` times (K, ``--samples``),
    sample k with the seed :func:`~aethersearch.rollout.samples.sample_seed` derives.

    ``environment_factory(question)`` returns (or awaits to) a fresh Environment per
    episode; ``llm`` is an :class:`~aethersearch.agents.llm.LLM` (None for no-LLM agents).
    The fingerprint is checked against an existing ``run.json`` and the run refused
    if they differ. ``stop_after_failures`` stops starting new questions once that
    many in a row failed on the endpoint itself (connection, timeout, 5xx, …): a
    dead server then fails the run in one wave instead of one per question; the
    questions not started have no trace and run when the command is rerun.
    """
    start = time.monotonic()
    seen: set[str] = set()
    for row, question in enumerate(questions, start=1):
        if question.id in seen:
            raise DataError("<questions>", f"duplicate question id {question.id!r}", line=row,
                            fix="ids must be unique")
        seen.add(question.id)
    if agent.needs_llm and llm is None:
        raise AetherError(f"agent {agent.name!r} needs an LLM endpoint",
                          fix="pass --endpoint URL --model NAME, or use the 'lexical' agent")
    decoding = decoding or fingerprint.decoding
    store = RunStore.open(run_dir, fingerprint)
    try:
        with run_gc_policy():
            return await _run_locked(store, questions, agent, environment_factory, budget, llm=llm,
                                     decoding=decoding, concurrency=concurrency,
                                     question_timeout_s=question_timeout_s, progress=progress, start=start,
                                     stop_after_failures=stop_after_failures)
    finally:
        store.close()


async def _run_locked(store: RunStore, questions: Sequence[RolloutQuestion], agent: Agent,
                      environment_factory: EnvironmentFactory, budget: Budget, *, llm: LLM | None,
                      decoding: Decoding, concurrency: int, question_timeout_s: float | None,
                      progress: Callable[[Progress], None] | None, start: float,
                      stop_after_failures: int | None = None) -> RunSummary:
    """The body of a run, while this process holds the run directory's lock."""
    samples = store.fingerprint.samples
    todo = pending_units(questions, samples, store.finished_ids())
    skipped = len(questions) * samples - len(todo)
    counts: Counter[str] = Counter()
    done = errored = in_a_row = 0
    stopped: str | None = None
    semaphore = asyncio.Semaphore(max(1, concurrency))
    writer = store.writer()
    running = len(todo)  # episodes not yet finished (or skipped)
    effective = agent.effective_decoding(decoding)  # agents are stateless across episodes: one per run
    deadlines = Deadlines(question_timeout_s) if question_timeout_s else None  # one timer for every question

    def leave() -> None:
        """An episode is finished or skipped; after the last one, commit without waiting for the window."""
        nonlocal running
        running -= 1
        if running == 0:  # called before the last append: the commit runs once its row is in the window
            asyncio.get_running_loop().call_soon(writer.commit_now)

    async def one(question: RolloutQuestion, sample: int) -> None:
        nonlocal done, errored, in_a_row, stopped
        async with semaphore:
            if stopped is not None:
                leave()
                return  # the endpoint is down: leave the question unstarted (rerun runs it)
            try:
                env = await _make_env(environment_factory, question)
            except Exception as exc:  # noqa: BLE001 — an environment that fails to open is a tool error
                trace = Trace(id=question.id, question_seen=question.question, agent=agent.name,
                              outcome=Outcome.TOOL_ERROR, stop_reason="tool_error",
                              error=f"environment: {type(exc).__name__}: {exc}",
                              error_kind=ErrorKind.ENVIRONMENT,
                              attempt=store.next_attempt(question.id, sample), sample=sample)
            else:
                trace = await run_episode(question, agent, env, llm, budget, decoding,
                                          attempt=store.next_attempt(question.id, sample),
                                          timeout_s=question_timeout_s,
                                          effective=sample_decoding(effective, question.id, sample, samples),
                                          deadlines=deadlines, sample=sample)
            # the endpoint's health is judged as soon as the outcome is known, before the slot is freed,
            # so a dead server stops new questions at once
            if (trace.outcome is Outcome.ENDPOINT_ERROR and trace.error_kind in ENDPOINT_DOWN_KINDS) or (
                    trace.outcome is Outcome.TOOL_ERROR and trace.error_kind in TOOL_DOWN_KINDS):
                in_a_row += 1
                if stop_after_failures and in_a_row >= stop_after_failures and stopped is None:
                    stopped = (f"stopped starting questions after {in_a_row} in a row failed on the endpoint "
                               f"(last: {trace.error_kind}); --stop-after-failures {stop_after_failures}")
            elif trace.outcome not in ERROR_OUTCOMES:
                in_a_row = 0
        # outside the semaphore: a finished question waiting for its group commit holds no model slot;
        # it counts as done only once its trace is fsynced
        leave()
        durable = writer.submit(trace)  # encoded now; the full trace is let go before the wait (see submit)
        trace = kept_summary(trace)
        await durable
        store.record(trace)
        counts[trace.outcome.value] += 1
        done += 1
        errored += trace.outcome in ERROR_OUTCOMES
        if progress is not None:
            progress(Progress(done, errored, len(todo), skipped, time.monotonic() - start))

    try:
        await asyncio.gather(*(one(q, k) for q, k in todo))
    finally:
        await asyncio.to_thread(writer.close)
    predictions = store.export_predictions(q.id for q in questions)
    return RunSummary(run_dir=store.run_dir, total=len(questions) * samples, skipped=skipped,
                      attempted=len(todo), errored=errored, outcomes=dict(counts),
                      elapsed_s=time.monotonic() - start, predictions_path=predictions,
                      torn_tail_path=store.torn_tail_path,
                      errors=error_report(store.latest, sample_keys((q.id for q in questions), samples),
                                          stopped=stopped))


def run_questions(questions: Sequence[RolloutQuestion], agent: Agent,
                  environment_factory: EnvironmentFactory, budget: Budget, run_dir: str | Path,
                  fingerprint: RunFingerprint, **options: Any) -> RunSummary:
    """Synchronous wrapper of :func:`run_questions_async` (closes ``llm`` when it has ``aclose``)."""

    async def main() -> RunSummary:
        try:
            return await run_questions_async(questions, agent, environment_factory, budget, run_dir,
                                             fingerprint, **options)
        finally:
            llm = options.get("llm")
            if llm is not None:
                await llm.aclose()

    return asyncio.run(main())
