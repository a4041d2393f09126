"""Episodes driven by an outside agent's tool calls, run through the same runner as every shipped agent.

Why through the runner: an agent that speaks only MCP must be held to the contract every other
agent is held to, and the surest way is to run the same code. Each question an MCP client starts
becomes one :func:`~aethersearch.rollout.runner.run_episode` of :class:`RemoteAgent`, an agent
whose "model" is the client: its ``solve`` waits for the client's next tool call, performs it
through the episode's budgeted environment (the tool budget, the sandbox's mask and refusal
rules, tool-server failures as errors) and hands the result back; the client's ``answer`` ends
the episode. The trace is then appended to the run directory exactly as ``aether run`` appends
it (durable, fsynced), under a ``run.json`` fingerprinted like any run (release, corpus and index
hashes, budget, the sandbox's mask policy, and the tool schema's sha256 as the agent's config),
so ``score``, ``factorise``, ``compare``, ``report`` and ``view`` read it like any other.

An episode belongs to its question, not to the connection: a client that disconnects and
reconnects calls ``start`` for the same question and continues it, its spent budget spent. A
question whose episode is finished is not run twice (rerunning ``aether run`` on the directory
would not either); an unfinished one when the server stops has no trace and can be started again.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

from aethersearch.agents.remote import Channel, RemoteAgent, ToolReply
from aethersearch.environment import Environment
from aethersearch.errors import AetherError, ConfigError, ToolError
from aethersearch.records import Budget, Decoding, RolloutQuestion, Trace
from aethersearch.rollout.runner import run_episode
from aethersearch.rollout.session import RunSettings, SearchSetup, prepare_run
from aethersearch.rollout.store import RunStore

__all__ = ["OpenEpisode", "RemoteRun"]


class OpenEpisode(NamedTuple):
    """A started question: its channel and the task running its episode."""

    channel: Channel
    task: asyncio.Task[Trace]


class RemoteRun:
    """A run directory whose episodes an MCP client drives, one per question it starts."""

    def __init__(self, release_dir: Path, run_dir: Path, search: SearchSetup, *, budget: Budget,
                 tool_schema_sha256: str, tools: Sequence[str], question_timeout_s: float | None = None) -> None:
        from aethersearch.rollout.fingerprint import release_info

        info = release_info(release_dir)
        self.agent = RemoteAgent(tool_schema_sha256, tools)
        settings = RunSettings(agent=self.agent.name, budget=budget, concurrency=1)
        self.prepared = prepare_run(info, settings, search, agent=self.agent)
        self.questions = {q.id: q for q in self.prepared.questions}
        self.run_dir = Path(run_dir)
        self.budget = budget
        self.question_timeout_s = question_timeout_s
        self.store = RunStore.open(self.run_dir, self.prepared.fingerprint)
        self.writer = self.store.writer()
        self.open: dict[str, OpenEpisode] = {}

    def question(self, question_id: str) -> RolloutQuestion:
        """The question ``question_id`` (a ConfigError naming a few valid ids when unknown)."""
        found = self.questions.get(question_id)
        if found is None:
            sample = ", ".join(list(self.questions)[:3])
            raise ConfigError(f"no question {question_id!r} in this release",
                              fix=f"call list_questions for the ids (e.g. {sample})")
        return found

    def finished(self, question_id: str) -> bool:
        """True when the run directory already holds a final trace of the question."""
        return (question_id, 0) in self.store.finished_ids()

    async def start(self, question_id: str) -> RolloutQuestion:
        """Open (or rejoin) the episode of ``question_id``; refused when it already finished."""
        question = self.question(question_id)
        if question_id in self.open:
            return question  # a reconnecting client continues where it was
        if self.finished(question_id):
            raise ConfigError(f"question {question_id!r} is already finished in {self.run_dir}",
                              fix="start another question; a finished episode is never run twice")
        channel = Channel()
        self.agent.channels[question_id] = channel
        made = self.prepared.search.factory(question)
        env: Environment = await made if inspect.isawaitable(made) else made
        task = asyncio.create_task(run_episode(
            question, self.agent, env, None, self.budget, Decoding(), timeout_s=self.question_timeout_s,
            attempt=self.store.next_attempt(question_id)))
        self.open[question_id] = OpenEpisode(channel, task)
        return question

    async def call(self, question_id: str, tool: str, arguments: dict[str, Any]) -> ToolReply:
        """Run one search or visit in the question's episode."""
        episode = await self._episode(question_id)
        if tool not in self.agent.tools:
            raise ToolError(f"this server offers {', '.join(self.agent.tools)}, not {tool!r}")
        reply: ToolReply = await self._send(question_id, episode, tool, arguments)
        return reply

    async def answer(self, question_id: str, answer: str | None) -> Trace:
        """End the question's episode with ``answer`` (None or "": no answer) and append its trace durably."""
        episode = await self._episode(question_id)
        await self._send(question_id, episode, "answer", {"answer": answer})
        return await self._finish(question_id, episode)

    async def _episode(self, question_id: str) -> OpenEpisode:
        found = self.open.get(question_id)
        if found is None:
            raise ConfigError(f"question {question_id!r} has no open episode",
                              fix="call start with its id first (list_questions gives the ids)")
        if found.task.done():  # ended without an answer, between two calls: a deadline or a failed tool server
            await self._ended(question_id, found)
        return found

    async def _send(self, question_id: str, episode: OpenEpisode, tool: str, arguments: dict[str, Any]) -> Any:
        call = asyncio.ensure_future(episode.channel.call(tool, arguments))
        done, _ = await asyncio.wait({call, episode.task}, return_when=asyncio.FIRST_COMPLETED)
        if call in done:
            return call.result()
        call.cancel()  # the episode ended under this call (its tool server failed, or its deadline passed)
        await self._ended(question_id, episode)

    async def _finish(self, question_id: str, episode: OpenEpisode) -> Trace:
        """The one way an episode leaves: out of the open table, its trace appended durably and recorded."""
        trace = await episode.task
        self.open.pop(question_id, None)
        self.agent.channels.pop(question_id, None)
        await self.writer.submit(trace)
        self.store.record(trace)
        return trace

    async def _ended(self, question_id: str, episode: OpenEpisode) -> NoReturn:
        """An episode that ended without an answer: record its trace, then tell the client why."""
        trace = await self._finish(question_id, episode)
        raise AetherError(f"the episode of {question_id!r} ended: {trace.error or trace.outcome.value}",
                          fix="start another question; the failure is recorded in traces.jsonl")

    async def close(self) -> None:
        """Record the episodes that already ended, stop the others (no trace: they can be started again),
        and close the run directory."""
        for question_id, found in list(self.open.items()):
            if found.task.done() and not found.task.cancelled():
                await self._finish(question_id, found)
            else:
                found.task.cancel()
        self.open.clear()
        await asyncio.to_thread(self.writer.close)
        self.store.close()
