"""Rebuild what a finished run used -- its agent and its clean environment -- so a probe can rerun it.

Why: the Lead-astray and distractor probes (``aethersearch.diagnostics.probes``)
rerun a run's questions under the run's own settings; ``run.json`` records the
agent, its configuration and the environment kind, and these two functions turn
that record back into live objects through the agent registry and the index.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from aethersearch.agents.base import Agent
from aethersearch.environment import Environment
from aethersearch.errors import ConfigError
from aethersearch.records import RolloutQuestion

__all__ = ["agent_for", "environment_factory_for"]


def agent_for(run_dir: Path) -> Agent:
    """The agent a run used, rebuilt from its run.json (``agent`` + ``agent_config``) through the registry."""
    from aethersearch.agents.base import make_agent
    from aethersearch.diagnostics.probes import load_fingerprint

    fingerprint = load_fingerprint(run_dir)
    return make_agent(fingerprint.agent, **fingerprint.agent_config)


def environment_factory_for(run_dir: Path, release_dir: Path, store: Any,
                            index_dir: Path | None) -> Callable[[RolloutQuestion], Environment]:
    """The clean environment a run used, rebuilt from its run.json (for probes that rerun it).

    ``sandbox`` runs reopen the masked sandbox of the release over the index;
    ``search`` runs an in-process index environment.
    """
    from aethersearch.diagnostics.probes import load_fingerprint
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
