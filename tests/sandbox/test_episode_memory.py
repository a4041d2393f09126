"""Open episodes: memory per action bounded by design, and the ceiling enforced at start-up (issue 49, point 4).

An open episode keeps every action until it closes. Measured with ``tracemalloc``:
ordinary actions (searches and visits) hold a few hundred bytes each (as
``records.ToolCall`` objects they held ~1.8 KB), and no action, however hostile its
request, holds more than ``worst_action_bytes``, the figure the sandbox multiplies
by its caps to get the ceiling it refuses to start beyond.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from aethersearch.errors import ConfigError
from aethersearch.sandbox.action_record import EPISODE_BYTES, episode_ceiling_bytes, worst_action_bytes
from aethersearch.sandbox.episode import MAX_K, Sandbox, SandboxEpisode
from aethersearch.sandbox.server import SandboxLimits, bounded_limits, create_app

#: ordinary actions, measured 2026-12-06: ~300-400 bytes each (before: ~1,800 as ToolCall objects)
ORDINARY_BOUND = 700


def _bytes_per_action(episodes: int, actions: int, act: Callable[[SandboxEpisode, int], None],
                      sandbox: Sandbox) -> float:
    warm = sandbox.episode("q1", run_id="warm")
    for n in range(actions):
        act(warm, n)
    gc.collect()
    tracemalloc.start(1)
    try:
        before = tracemalloc.get_traced_memory()[0]
        opened = [sandbox.episode("q1", run_id=f"r{e}") for e in range(episodes)]
        gc.collect()
        fixed = tracemalloc.get_traced_memory()[0]
        for episode in opened:
            for n in range(actions):
                act(episode, n)
                episode.take_last_call()  # as the server does once the call is in the durable log
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert (fixed - before) / episodes < EPISODE_BYTES
    return (after - fixed) / (episodes * actions)


def _ordinary(episode: SandboxEpisode, n: int) -> None:
    if n % 2:
        episode.visit_sync("Kane Cornes")
    else:
        episode.search_sync(f"cornes footballer {n % 7}", 5)


def _hostile(episode: SandboxEpisode, n: int) -> None:
    # what a malformed request may log: 16 fields of 2,048 astral characters, and an error quoting them all
    huge = "\U0001f600" * 2048
    episode.log_rejected("search", {f"f{i}{n}": huge for i in range(16)}, "unknown field(s) " + huge * 8)


def test_ordinary_actions_are_compact(mini_sandbox: Sandbox) -> None:
    per_action = _bytes_per_action(20, 40, _ordinary, mini_sandbox)
    assert per_action < ORDINARY_BOUND, f"{per_action:.0f} bytes per open action"


def test_no_action_holds_more_than_the_bound(mini_sandbox: Sandbox) -> None:
    max_masked = max(len(mask.masked) for mask in mini_sandbox.masks.values())
    per_action = _bytes_per_action(5, 20, _hostile, mini_sandbox)
    assert per_action <= worst_action_bytes(MAX_K, max_masked), per_action
    episode = mini_sandbox.episode("q1")
    _hostile(episode, 0)
    (call,) = episode.trace  # cut in memory, still a readable call
    assert call.error is not None and len(call.error.encode()) <= 512


def test_the_default_caps_are_lowered_to_the_ceiling(mini_sandbox: Sandbox, tmp_path: Path) -> None:
    app = create_app(mini_sandbox, action_log=tmp_path / "a.jsonl", limits=SandboxLimits(max_episode_memory_mb=64))
    health = TestClient(app).get("/health").json()
    per_episode = episode_ceiling_bytes(400, MAX_K, 3)
    assert health["limits"]["max_open_episodes"] == (64 << 20) // per_episode < 10_000
    assert health["episode_memory_ceiling_bytes"] <= 64 << 20


def test_explicit_caps_over_the_ceiling_refuse_to_start(mini_sandbox: Sandbox, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="over --max-episode-memory-mb 64") as refused:
        create_app(mini_sandbox, action_log=tmp_path / "a.jsonl",
                   limits=SandboxLimits(max_open_episodes=10_000, max_episode_memory_mb=64))
    assert "lower --max-open-episodes to" in str(refused.value.fix)
    limits, ceiling = bounded_limits(SandboxLimits(max_open_episodes=10, max_actions=40), mini_sandbox)
    assert limits.max_open_episodes == 10 and ceiling == 10 * episode_ceiling_bytes(40, MAX_K, 3)
