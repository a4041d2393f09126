"""Python API for training loops: ``evaluate(endpoint, release, ...) -> {"val/test_score/{source}": EM}``.

Why: Search-R1 (verl) logs validation as ``val/test_score/{data_source}`` (mean
EM per source). A training loop that serves its current policy behind an
OpenAI-compatible endpoint can call ``evaluate`` every N steps and log the dict
as is; the numbers are the toolkit's, on the frozen release, with the full run
(traces, predictions, scores.json) kept on disk for later inspection, rescoring
or comparison. ``evaluate_run`` returns the run directory and full scores too;
``aether watch`` uses it.

``evaluate`` runs its own event loop (``asyncio.run``), so call it from
synchronous code, not from inside a running loop.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from aethersearch.errors import ConfigError
from aethersearch.records import DEFAULT_CONCURRENCY, Budget, Decoding, RolloutQuestion, RunLimits
from aethersearch.rollout.samples import check_samples
from aethersearch.rollout.session import RunSettings, SearchSetup

__all__ = [
    "Evaluation",
    "evaluate",
    "evaluate_run",
]

if TYPE_CHECKING:
    from aethersearch.scoring.scores_file import Scores

EnvironmentFactory = Callable[[RolloutQuestion], Any]


class Evaluation(NamedTuple):
    """An evaluation: Search-R1's metric keys, the run directory it wrote, and its full scores."""

    metrics: dict[str, float]
    run_dir: Path
    scores: Scores


def search_setup(*, agent: str, agent_config: dict[str, Any] | None = None, search_url: str | None = None,
                 index: Path | None = None, environment_factory: EnvironmentFactory | None = None,
                 corpus_hash: str | None = None, index_hash: str | None = None) -> SearchSetup:
    """The tools of an evaluation, exactly as the CLI builds them for ``--search-url`` / ``--index``.

    ``environment_factory`` (one Environment per question) is for tools the CLI
    cannot name; its corpus and index hashes are the caller's to give.
    """
    from aethersearch import pipeline
    from aethersearch.agents.base import make_agent

    if environment_factory is not None:
        return SearchSetup(environment_factory, corpus_hash, index_hash, "caller's environment factory")
    if search_url is not None:
        return pipeline.server_search(search_url)
    if index is not None:
        return pipeline.index_search(Path(index))
    if make_agent(agent, **(agent_config or {})).environment == "none":
        return pipeline.no_search()
    raise ConfigError(f"agent {agent!r} needs a search tool but no search server was given",
                      fix="pass search_url= (a running `aether serve`), index= (an index directory), "
                          "or environment_factory=")


def evaluate_run(endpoint: str, release: Path, *, model: str, agent: str = "search-r1",
                 agent_config: dict[str, Any] | None = None, search_url: str | None = None,
                 index: Path | None = None, environment_factory: EnvironmentFactory | None = None,
                 run_dir: Path | None = None, budget: Budget | None = None, decoding: Decoding | None = None,
                 retrieval_topk: int | None = None, concurrency: int = DEFAULT_CONCURRENCY,
                 limits: RunLimits | None = None, api_key: str | None = None, compat: str | None = None,
                 corpus_hash: str | None = None, index_hash: str | None = None,
                 metric_keys: str = "both", samples: int = 1, sandbox_url: str | None = None) -> Evaluation:
    """Roll ``agent`` out on the release's frozen questions against ``endpoint``, score it, return everything.

    The run goes through :func:`aethersearch.pipeline.run_release`, the same path
    as ``aether run``: the release is verified first, and identical settings
    write an identical ``run.json``. Tools come from ``search_url`` (a running
    ``aether serve``), ``index`` (an index directory, searched in-process) or
    ``environment_factory``; a hint-free release runs in its masked sandbox, over ``index``
    or through ``sandbox_url`` (``aethersearch.sandbox_eval``). ``retrieval_topk`` sets the agent's ``topk`` (what
    is recorded is what the agent sends). A rerun with the same ``run_dir``
    resumes instead of regenerating. ``metric_keys`` picks the trainers' key
    style: ``searchr1`` (``val/test_score/{source}``), ``verl``
    (``val-core/{source}/reward/mean@K``) or ``both``; each adds the overall key
    under the source ``all``. ``samples`` (K) rolls each question out K times, as
    verl's ``val_kwargs.n``; every figure is then mean@K (pass@k and maj@K are in
    ``scores.json``).

    Raises :class:`~aethersearch.errors.RunFailed` — never all-zero metrics —
    when more questions end in error than ``limits.max_error_rate`` allows
    (default: any), e.g. an unreachable or misconfigured endpoint.
    """
    from aethersearch import pipeline
    from aethersearch.interop.metric_keys import check_style, validation_metrics
    from aethersearch.release.manifest import is_hintfree_release
    from aethersearch.scoring.api import score_run

    check_style(metric_keys)  # refuse a bad style before the rollout, not after it
    from aethersearch.rollout.profile_run import apply_profile

    config = dict(agent_config or {})
    if retrieval_topk is not None:
        config["topk"] = retrieval_topk
    chosen = apply_profile(agent, config, budget=budget)  # the agent's profile: its settings and its budget
    release = Path(release)
    run_dir = Path(run_dir) if run_dir is not None else Path(tempfile.mkdtemp(prefix="aether-eval-"))
    if environment_factory is None and is_hintfree_release(release):  # only inside the masked sandbox
        from aethersearch.sandbox_eval import SandboxTools, tools_for

        found = tools_for(release, agent=agent, index=index, search_url=search_url, sandbox_url=sandbox_url,
                          run_dir=run_dir)
        search = found.search if isinstance(found, SandboxTools) else found
    else:
        search = search_setup(agent=agent, agent_config=chosen.agent_config, search_url=search_url, index=index,
                              environment_factory=environment_factory, corpus_hash=corpus_hash,
                              index_hash=index_hash)
    settings = RunSettings(agent=agent, agent_config=chosen.agent_config, endpoint=endpoint, model=model,
                           budget=chosen.budget, decoding=decoding or Decoding(max_tokens=chosen.max_tokens),
                           concurrency=concurrency,
                           limits=limits or RunLimits(), samples=check_samples(samples), profile=chosen.profile)
    pipeline.run_release(release, run_dir, settings, search, api_key=api_key)
    scores = score_run(run_dir, release, compat=compat)
    return Evaluation(validation_metrics(scores, metric_keys), run_dir, scores)


def evaluate(endpoint: str, release: Path, **options: Any) -> dict[str, float]:
    """Evaluate the model behind ``endpoint`` on ``release``; returns ``{"val/test_score/{source}": EM, ...}``.

    By default both trainers' key styles, per source and overall (``metric_keys=``).

    Options are those of :func:`evaluate_run` (``model`` is required). Raises
    :class:`~aethersearch.errors.RunFailed` (with the error summary) instead of
    returning metrics when the run's questions ended in error.
    """
    return evaluate_run(endpoint, release, **options).metrics
