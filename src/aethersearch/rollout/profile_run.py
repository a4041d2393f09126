"""A run's agent, settings and budget from its agent profile, and what ``run.json`` records of them.

Why here: ``aether run``/``eval`` and :func:`aethersearch.api.evaluate_run` must turn
``--agent NAME`` (or ``--profile FILE``) and the budget flags into the same agent
settings and budget, and record where each limit came from; one function does it
for every caller. The profile's budget is the run's unless a preset or a flag
overrides it; ``run.json`` then holds the profile's budget, the run's budget, and
per limit its source (``flag``, ``preset:NAME``, ``profile``, ``default``), plus any
``--agent-config`` setting that departs from the profile.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from aethersearch.agents.profiles import LoadedProfile, load_profile, profile_for_agent
from aethersearch.errors import ConfigError
from aethersearch.records import Budget
from aethersearch.rollout.budget import resolve_budget

__all__ = ["ProfiledRun", "apply_profile"]

_FLAGS = {"max_tool_calls": "max_tool_calls", "max_turns": "max_turns", "max_tokens": "token_budget",
          "max_context_tokens": "context_tokens"}


#: new tokens per model call when neither ``--max-tokens`` nor a profile says (Search-R1's 500)
DEFAULT_MAX_TOKENS = 500


class ProfiledRun(NamedTuple):
    """The agent to build, its settings, the run's budget, the ``run.json`` ``profile`` record (or None),
    and each call's ``max_tokens``."""

    agent: str
    agent_config: dict[str, Any]
    budget: Budget
    profile: dict[str, Any] | None
    max_tokens: int = DEFAULT_MAX_TOKENS


def _chosen(agent: str | None, profile_file: Path | None) -> tuple[str, LoadedProfile | None]:
    if profile_file is None:
        name = agent or "search-r1"
        return name, profile_for_agent(name)
    loaded = load_profile(profile_file)
    runner = loaded.profile.runner.agent
    if agent is not None and agent != runner:
        raise ConfigError(f"--agent {agent} but the profile {profile_file} is run by {runner!r}",
                          fix="drop --agent (the profile names its loop) or pass a profile for that agent")
    return runner, loaded


def apply_profile(agent: str | None, agent_config: dict[str, Any] | None = None, *,
                  profile_file: Path | None = None, preset: str | None = None,
                  max_tool_calls: int | None = None, max_turns: int | None = None,
                  token_budget: int | None = None, context_tokens: int | None = None,
                  budget: Budget | None = None, max_tokens: int | None = None) -> ProfiledRun:
    """``--agent``/``--profile`` and the budget options as the run's agent, settings, budget and record.

    ``agent`` None is the default agent (``search-r1``), or the profile's loop with
    ``profile_file``. ``budget`` (the Python API's whole budget) replaces the
    profile's; the per-limit options override one limit each. ``max_tokens`` (``--max-tokens``)
    overrides the profile's tokens per call (``actions.max_tokens``).
    """
    name, loaded = _chosen(agent, profile_file)
    given = dict(agent_config or {})
    flags = {"max_tool_calls": max_tool_calls, "max_turns": max_turns, "token_budget": token_budget,
             "context_tokens": context_tokens}
    if loaded is None:
        base = budget
        resolved = resolve_budget(preset, base=base, **flags)
        return ProfiledRun(name, given, resolved, None, max_tokens or DEFAULT_MAX_TOKENS)
    own = loaded.profile.budget.as_budget()
    base = budget if budget is not None else own
    resolved = resolve_budget(preset, base=base, **flags)
    sources = {}
    for field, flag in _FLAGS.items():
        sources[field] = ("flag" if flags[flag] is not None else f"preset:{preset}" if preset is not None
                          else "caller" if budget is not None else "profile")
    settings = loaded.agent_settings()
    departs = {key: value for key, value in given.items() if key in settings and settings[key] != value}
    record = {**loaded.record(), "run_budget": resolved.model_dump(mode="json"), "budget_sources": sources,
              "settings_overridden": departs, "max_tokens_source": "flag" if max_tokens is not None else "profile"}
    return ProfiledRun(name, {**settings, **given}, resolved, record,
                       max_tokens or loaded.profile.actions.max_tokens)
