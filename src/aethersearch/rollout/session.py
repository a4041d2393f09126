"""The one run path: rollout questions + settings → a fingerprinted, resumable, error-checked run.

Why one function: five callers set up a run (``aether run``/``eval``, the Python
API, the sandbox demo, the probes, the Ray backend), and separate copies of that
setup drift — one hard-coded ``retrieval_topk=3`` into ``run.json`` and wrote a
fingerprint ``aether compare`` refused against a CLI run of the same settings.
Every caller builds a :class:`RunSettings` and calls :func:`prepare_run`
(agent, model client, fingerprint) and :func:`execute_run` (``GET /v1/models``
unless the run is already complete, runner or Ray shards, then the
``--max-error-rate`` check), so identical
settings write an identical ``run.json`` whoever asks.

This module stays below the gold boundary: it sees only ``rollout_questions.jsonl``
(checked against the release checksums by :func:`release_info`). The full release
verifier, which reads gold, runs one layer up (:func:`aethersearch.pipeline.run_agent`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import Field

from aethersearch.errors import ConfigError, EndpointError, RunFailed
from aethersearch.jsonl import loads, read_jsonl_tolerant
from aethersearch.records import (
    DEFAULT_CONCURRENCY,
    RETRIED_OUTCOMES,
    Budget,
    Decoding,
    Record,
    RolloutQuestion,
    RunFingerprint,
    RunLimits,
    SandboxContract,
)
from aethersearch.rollout.fingerprint import (
    ReleaseInfo,
    build_fingerprint,
    load_rollout_questions,
)
from aethersearch.rollout.health import FIXES, enforce_error_rate
from aethersearch.rollout.runner import EnvironmentFactory, RunSummary, run_questions
from aethersearch.rollout.samples import sample_keys
from aethersearch.rollout.store import RUN_JSON, TRACES

if TYPE_CHECKING:
    from aethersearch.agents.base import Agent
    from aethersearch.agents.llm import LLM

__all__ = ["PreparedRun", "RunSettings", "SearchSetup", "VLLM_OFFLINE", "execute_run", "make_llm", "prepare_run",
    "served_model", "start_run", "with_served_model"]

#: ``--endpoint vllm-offline --model PATH``: generate with ``vllm.LLM`` in this process, no server.
VLLM_OFFLINE = "vllm-offline"


class RunSettings(Record):
    """Everything a caller chooses about a run except its tools and secrets (the API key).

    The CLI options of ``aether run``/``eval`` and the keyword arguments of
    ``aethersearch.api.evaluate`` both map onto this one record, with these defaults.
    """

    agent: str = "search-r1"
    agent_config: dict[str, Any] = Field(default_factory=dict)
    #: K rollouts per question (``--samples``): recorded in run.json, so part of the contract
    samples: int = Field(default=1, ge=1)
    endpoint: str | None = None
    model: str | None = None
    budget: Budget = Field(default_factory=Budget)
    decoding: Decoding = Field(default_factory=Decoding)
    concurrency: int = Field(default=DEFAULT_CONCURRENCY, ge=1)
    limits: RunLimits = Field(default_factory=RunLimits)
    #: the agent profile followed (``rollout.profile_run.apply_profile``); its sha256 is a contract field
    profile: dict[str, Any] | None = None


class SearchSetup(NamedTuple):
    """Where episodes get their tools, plus the hashes that go into run.json.

    ``environment`` overrides the agent's own environment kind (``sandbox`` for
    the masked browsing environment).
    """

    factory: EnvironmentFactory
    corpus_hash: str | None
    index_hash: str | None
    description: str
    environment: str | None = None
    builder: Callable[[], EnvironmentFactory] | None = None  # rebuilds ``factory`` in a Ray worker
    #: the masked sandbox's policy and tools (``environment="sandbox"``), recorded in run.json
    sandbox: SandboxContract | None = None
    mode_aliases: dict[str, str] | None = None  # the retrieval server's declared ``--mode-alias`` policy


class PreparedRun(NamedTuple):
    """A run ready to execute: its questions, agent, model client, tools and fingerprint."""

    questions: list[RolloutQuestion]
    agent: Agent
    llm: LLM | None
    search: SearchSetup
    fingerprint: RunFingerprint
    settings: RunSettings


def make_llm(settings: RunSettings, *, api_key: str | None = None) -> LLM:
    """The model client for ``settings``: the OpenAI-compatible client with the run's limits, or vLLM offline."""
    if not settings.endpoint or not settings.model:
        raise ConfigError(f"agent {settings.agent!r} calls a model: --endpoint and --model are required",
                          fix="pass --endpoint http://HOST:PORT/v1 --model NAME, or use --agent lexical")
    if settings.endpoint == VLLM_OFFLINE:  # the optional in-process engine (the `vllm` extra, a GPU)
        from aethersearch.agents.vllm_engine import VLLMEngine

        return VLLMEngine(settings.model)
    from aethersearch.agents.llm import OpenAIClient

    limits = settings.limits
    # a call can never outlive its question: the per-question deadline bounds every retry loop
    deadline = limits.question_deadline_s or limits.call_timeout_s * (limits.max_retries + 1) + 60.0
    if "," in settings.endpoint:  # several replicas of one model: balanced, with failover
        from aethersearch.agents.replicas import ReplicaPool, split_endpoints

        return ReplicaPool(split_endpoints(settings.endpoint), settings.model, api_key=api_key,
                           concurrency=settings.concurrency, call_timeout_s=limits.call_timeout_s,
                           deadline_s=deadline, max_retries=limits.max_retries)
    return OpenAIClient(settings.endpoint, settings.model, api_key=api_key, concurrency=settings.concurrency,
                        call_timeout_s=limits.call_timeout_s, deadline_s=deadline,
                        max_retries=limits.max_retries)


def served_model(llm: LLM, question_count: int, agent: Agent | None = None) -> dict[str, Any] | None:
    """Ask the endpoint what it serves (``GET /v1/models``); an unreachable endpoint fails the run now.

    Why before any question: against a dead endpoint every question would fail
    one by one (41 s for a 4-question evaluate without this call) and the run would
    end in a pile of errors; one preflight call says the same at once. The agent's
    :meth:`~aethersearch.agents.base.Agent.probe_server` adds what it found out about
    the server (``--agent aethersearch``: whether it continues by token ids, and why).
    """
    async def ask() -> dict[str, Any] | None:
        try:
            result = await llm.served_model()
            found = await agent.probe_server(llm) if agent is not None else {}
            return {**(result or {}), **found} if found else result
        finally:
            await llm.aclose()

    try:
        return asyncio.run(ask())
    except EndpointError as exc:
        kind = exc.kind or "endpoint"
        raise RunFailed(f"the model endpoint {llm.endpoint} failed before any question ran "
                        f"(0 of {question_count} run): {exc.message}\n    {kind:<16} (GET /v1/models)  "
                        f"{question_count} questions not run; rerunning the same command runs them", run_dir=None, total=question_count, errored=question_count,
                        kinds={kind: question_count}, retryable=question_count, max_error_rate=0.0,
                        fix=exc.fix or FIXES.get(kind, FIXES["endpoint"])) from None


def prepare_run(info: ReleaseInfo, settings: RunSettings, search: SearchSetup, *,
                questions: Sequence[RolloutQuestion] | None = None, agent: Agent | None = None,
                llm: LLM | None = None, api_key: str | None = None) -> PreparedRun:
    """Build the agent and model client and fingerprint the run (``served_model`` is filled by :func:`execute_run`).

    ``agent`` and ``llm`` may be passed prebuilt (an agent class outside the
    registry, a client shared with a probe); otherwise they are built from
    ``settings``. ``questions`` defaults to the release's rollout file.
    """
    from aethersearch.agents.base import make_agent

    rows = list(questions) if questions is not None else load_rollout_questions(info.rollout_path)
    built = agent if agent is not None else make_agent(settings.agent, **settings.agent_config)
    client = llm
    if client is None and built.needs_llm:
        client = make_llm(settings, api_key=api_key)
    sent = client.sent_decoding(built.effective_decoding(settings.decoding)) if client is not None else None
    fingerprint = build_fingerprint(
        info, question_count=len(rows), agent=built, budget=settings.budget, decoding=settings.decoding,
        endpoint=client.endpoint if client is not None else None,
        model=(settings.model or client.model) if client is not None else None,
        corpus_hash=search.corpus_hash, index_hash=search.index_hash,
        environment=search.environment or built.environment, retrieval_topk=built.retrieval_topk(),
        concurrency=settings.concurrency, limits=settings.limits, served_model=None, sent_decoding=sent,
        samples=settings.samples, sandbox=search.sandbox, retrieval_mode_aliases=search.mode_aliases,
        profile=settings.profile)
    return PreparedRun(rows, built, client, search, fingerprint, settings)


def _finished_run(run_dir: Path, ids: Sequence[str], samples: int) -> RunFingerprint | None:
    """The stored run.json when every sample of every one of ``ids`` already has a final trace."""
    run_json, traces = run_dir / RUN_JSON, run_dir / TRACES
    if not run_json.is_file() or not traces.is_file():
        return None
    try:
        stored = RunFingerprint.model_validate(loads(run_json.read_bytes()))
        latest = {(row["id"], row.get("sample", 0)): row.get("outcome")
                  for row in read_jsonl_tolerant(traces).rows}
    except (ValueError, KeyError, TypeError):
        return None  # let the run store report the damage with its file and line
    retried = {outcome.value for outcome in RETRIED_OUTCOMES}
    return stored if all(latest.get(key) not in (None, *retried) for key in sample_keys(ids, samples)) else None


def with_served_model(prepared: PreparedRun, run_dir: str | Path) -> PreparedRun:
    """Fill ``served_model`` from ``GET /v1/models`` — unless the run is already complete.

    A finished run resumes without touching the endpoint (rescoring a run must
    never need its model server): its recorded ``served_model`` stands.
    """
    if prepared.llm is None:
        return prepared
    finished = _finished_run(Path(run_dir), [q.id for q in prepared.questions], prepared.fingerprint.samples)
    served = (finished.served_model if finished is not None
              else served_model(prepared.llm, len(prepared.questions), prepared.agent))
    update: dict[str, Any] = {"served_model": served}
    if finished is None:  # exact now that the server said what it is (top_k "off")
        update["sent_decoding"] = prepared.llm.sent_decoding(prepared.agent.effective_decoding(
            prepared.settings.decoding))
    else:
        # the server was not asked what it is, so the client-side guess (top_k -1) would differ from the
        # recorded, server-exact form (llama.cpp: top_k 0) and refuse the resume: the recorded one stands
        update["sent_decoding"] = finished.sent_decoding
    return prepared._replace(fingerprint=prepared.fingerprint.model_copy(update=update))


def execute_run(prepared: PreparedRun, run_dir: str | Path, *, progress: Callable[[Any], None] | None = None,
                enforce: bool = True, shards: int | None = None, executor: str = "ray",
                api_key: str | None = None, ray_address: str | None = None) -> RunSummary:
    """Run (or resume) ``prepared`` into ``run_dir``; then refuse it if too many questions are in error.

    ``shards`` > 1 spreads the questions over Ray workers (or threads with
    ``executor="local"``) into the same run directory. ``enforce=False`` returns
    the summary without the ``--max-error-rate`` check (its ``errors`` field
    still says what failed).
    """
    prepared = with_served_model(prepared, run_dir)
    settings, limits = prepared.settings, prepared.settings.limits
    if shards is not None and shards > 1:
        from aethersearch.rollout.ray_backend import run_sharded

        factory = prepared.search.factory
        # a worker rebuilds its tools from paths/URLs; a loaded index does not travel to it
        env_builder = prepared.search.builder or (lambda: factory)
        summary = run_sharded(prepared.questions, settings.agent, env_builder, settings.budget, run_dir,
                              prepared.fingerprint, agent_config=settings.agent_config,
                              llm_builder=(lambda: make_llm(settings, api_key=api_key))
                              if prepared.llm is not None else None,
                              shards=shards, concurrency=settings.concurrency, executor=executor,
                              question_timeout_s=limits.question_deadline_s,
                              stop_after_failures=limits.stop_after_failures, ray_address=ray_address)
    else:
        summary = run_questions(prepared.questions, prepared.agent, prepared.search.factory, settings.budget,
                                run_dir, prepared.fingerprint, llm=prepared.llm, concurrency=settings.concurrency,
                                question_timeout_s=limits.question_deadline_s, progress=progress,
                                stop_after_failures=limits.stop_after_failures)
    if enforce:
        enforce_error_rate(summary.errors, limits.max_error_rate, run_dir)
    return summary


def start_run(info: ReleaseInfo, settings: RunSettings, search: SearchSetup, run_dir: str | Path, *,
              progress: Callable[[Any], None] | None = None, enforce: bool = True, **prepare: Any) -> RunSummary:
    """:func:`prepare_run` then :func:`execute_run`: the whole gold-free run path in one call."""
    return execute_run(prepare_run(info, settings, search, **prepare), run_dir, progress=progress,
                       enforce=enforce, api_key=prepare.get("api_key"))
