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

import asyncio
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from aethersearch.errors import ConfigError
from aethersearch.records import Budget, Decoding, RolloutQuestion

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

    metrics: dict[str, float | None]
    run_dir: Path
    scores: Scores


def _search_hashes(search_url: str) -> tuple[str | None, str | None]:
    from aethersearch.search.client import SearchClient

    async def ask() -> dict[str, Any]:
        async with SearchClient(search_url) as client:
            return await client.health()

    health = asyncio.run(ask())
    return health.get("corpus_hash"), health.get("index_hash")


def evaluate_run(endpoint: str, release: Path, *, model: str, agent: str = "search-r1",
                 agent_config: dict[str, Any] | None = None, search_url: str | None = None,
                 environment_factory: EnvironmentFactory | None = None, run_dir: Path | None = None,
                 budget: Budget | None = None, decoding: Decoding | None = None, retrieval_topk: int = 3,
                 concurrency: int = 16, api_key: str | None = None, compat: str | None = None,
                 corpus_hash: str | None = None, index_hash: str | None = None) -> Evaluation:
    """Roll ``agent`` out on the release's frozen questions against ``endpoint``, score it, return everything.

    Tools come from ``search_url`` (a running ``aether serve`` retrieval server)
    or from ``environment_factory`` (one Environment per question). A rerun with
    the same ``run_dir`` resumes instead of regenerating.
    """
    from aethersearch.agents.base import make_agent
    from aethersearch.agents.llm import OpenAIClient
    from aethersearch.rollout.fingerprint import build_fingerprint, load_rollout_questions, release_info
    from aethersearch.rollout.runner import NoEnvironment, run_questions
    from aethersearch.scoring.api import score_run, searchr1_metrics

    release = Path(release)
    info = release_info(release)
    questions = load_rollout_questions(info.rollout_path)
    built = make_agent(agent, **(agent_config or {}))
    environment = getattr(built, "environment", "search")
    if environment_factory is None:
        if search_url is not None:
            from aethersearch.search.client import SearchClient
            from aethersearch.search.environment import RetrievalServerEnvironment

            corpus_hash, index_hash = (corpus_hash, index_hash) if corpus_hash else _search_hashes(search_url)

            def environment_factory(question: RolloutQuestion) -> Any:
                return RetrievalServerEnvironment(SearchClient(search_url), close_client=True)
        elif environment == "none":
            def environment_factory(question: RolloutQuestion) -> Any:
                return NoEnvironment()
        else:
            raise ConfigError(f"agent {agent!r} needs a search tool but no search server was given",
                              fix="pass search_url= (a running `aether serve`), or environment_factory=")
    budget = budget or Budget()
    decoding = decoding or Decoding()
    fingerprint = build_fingerprint(info, question_count=len(questions), agent=built, budget=budget,
                                    decoding=decoding, endpoint=endpoint, model=model, corpus_hash=corpus_hash,
                                    index_hash=index_hash, environment=environment,
                                    retrieval_topk=retrieval_topk)
    run_dir = Path(run_dir) if run_dir is not None else Path(tempfile.mkdtemp(prefix="aether-eval-"))
    llm = OpenAIClient(endpoint, model, api_key=api_key, concurrency=concurrency)
    run_questions(questions, built, environment_factory, budget, run_dir, fingerprint, llm=llm,
                  decoding=fingerprint.decoding, concurrency=concurrency)
    scores = score_run(run_dir, release, compat=compat)
    return Evaluation(searchr1_metrics(scores), run_dir, scores)


def evaluate(endpoint: str, release: Path, **options: Any) -> dict[str, float | None]:
    """Evaluate the model behind ``endpoint`` on ``release``; returns ``{"val/test_score/{source}": EM}``.

    Options are those of :func:`evaluate_run` (``model`` is required).
    """
    return evaluate_run(endpoint, release, **options).metrics
