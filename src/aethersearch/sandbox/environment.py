"""Episode factories: how a runner gets one sandbox ``Environment`` per (run, question).

Why a factory protocol: the runner should not care whether the sandbox runs
in-process or behind HTTP. Both factories below return objects satisfying
``aethersearch.environment.Environment``; the runner calls
``await factory.open(question_id, run_id=...)``, hands the result to the
agent, and ``await env.close()`` at the end of the episode.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from aethersearch.environment import Environment
from aethersearch.sandbox.client import SandboxClient
from aethersearch.sandbox.episode import PageStore, Sandbox, open_sandbox
from aethersearch.sandbox.tools import SearchBackend

__all__ = ["EpisodeFactory", "HttpSandboxFactory", "InProcessSandboxFactory"]


@runtime_checkable
class EpisodeFactory(Protocol):
    """Opens an isolated sandbox episode for one question of one run."""

    async def open(self, question_id: str, *, run_id: str = "run") -> Environment:
        """A fresh ``Environment`` for ``question_id``."""
        ...


class InProcessSandboxFactory:
    """Episodes from an in-process :class:`Sandbox` (fast, no HTTP)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    @classmethod
    def from_release(cls, release_dir: str | Path, index: SearchBackend, store: PageStore) -> InProcessSandboxFactory:
        """Build over a hint-free release and the corpus index/store it was constructed from."""
        return cls(open_sandbox(release_dir, index, store))

    async def open(self, question_id: str, *, run_id: str = "run") -> Environment:
        """A new in-process episode."""
        return self.sandbox.episode(question_id, run_id=run_id)


class HttpSandboxFactory:
    """Episodes held by a sandbox server, reached through :class:`SandboxClient`."""

    def __init__(self, client: SandboxClient, *, replace: bool = False, owner: str | None = None) -> None:
        self.client = client
        self.replace = replace
        self.owner = owner

    async def open(self, question_id: str, *, run_id: str = "run") -> Environment:
        """A new server-side episode (``replace`` re-opens one this ``owner`` left open in a crashed run)."""
        return await self.client.create_episode(question_id, run_id=run_id, replace=self.replace, owner=self.owner)
