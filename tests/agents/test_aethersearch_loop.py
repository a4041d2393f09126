"""``--agent aethersearch`` against AetherSearch's own eval loop, driven by the same scripted model.

The fixtures hold what their ``async_eval_worker._evaluate_row`` (commit in the
file) did on every question of a release under each behaviour of
:mod:`tests.agents.aethersearch_behaviours`: the actions, every observation
(sha256), the search count and R_task (``scripts/record_aethersearch_loop.py``).
Our loop runs here through the runner's episode function, the scripted server
(ChatML template, its tokenizer) and the same ranking, and must match each one.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from aethersearch.agents.aethersearch_loop import AetherSearchAgent
from aethersearch.agents.llm import OpenAIClient
from aethersearch.agents.prompts import search_r1_question
from aethersearch.jsonl import sha256_file
from aethersearch.records import Budget, Decoding, RolloutQuestion, Trace
from aethersearch.release_layout import release_layout
from aethersearch.rollout.runner import run_episode
from aethersearch.scoring.aethersearch_compat import episode_score, trace_actions
from aethersearch.scoring.join import load_release
from aethersearch.testing.scripted_server import Reply, ScriptedRequest, ScriptedServer
from tests.agents.aethersearch_behaviours import ASSISTANT, EOS, OverlapEnv, behaviours, corpus
from tests.conftest import Eval1400Build, require_shared

FIXTURES = Path(__file__).parent / "fixtures"
CONCURRENCY = 32


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False).encode()).hexdigest()[:16]


def _run_all(release_dir: Path, env: OverlapEnv, name: str) -> dict[str, Trace]:
    rows = load_release(release_dir)
    gold = {search_r1_question(row.question): row.answers[0] for row in rows}
    behaviour = behaviours(gold)[name]

    def respond(request: ScriptedRequest) -> Reply:
        return Reply(behaviour(request.text))

    async def go() -> dict[str, Trace]:
        agent = AetherSearchAgent()
        limit = asyncio.Semaphore(CONCURRENCY)
        with ScriptedServer(respond, chat_template="chatml") as server:
            async with OpenAIClient(server.url, "m") as llm:
                async def one(row: Any) -> Trace:
                    async with limit:
                        question = RolloutQuestion(id=row.id, question=row.question)
                        return await run_episode(question, agent, env, llm, Budget(max_tool_calls=None,
                                                                                   max_turns=None), Decoding())
                traces = await asyncio.gather(*(one(row) for row in rows))
        return {trace.id: trace for trace in traces}

    return asyncio.run(go())


def _check_release(fixture: Path, release_dir: Path, wikispeedia: Path) -> None:
    recorded = json.loads(gzip.decompress(fixture.read_bytes()))
    assert recorded["their_commit"].startswith("d2a21bd")
    assert recorded["release_eval_sha256"] == sha256_file(release_layout(release_dir).eval), \
        "the fixture was recorded on another build of this release"
    golds = {row.id: row.answers for row in load_release(release_dir)}
    env = OverlapEnv(corpus(wikispeedia))
    by_behaviour: dict[str, list[dict[str, Any]]] = {}
    for episode in recorded["episodes"]:
        by_behaviour.setdefault(episode["behaviour"], []).append(episode)
    assert len(by_behaviour) == 4
    for name, episodes in by_behaviour.items():
        traces = _run_all(release_dir, env, name)
        assert len(episodes) == recorded["rows"] == len(traces)
        mismatches = []
        for theirs in episodes:
            trace = traces[theirs["id"]]
            actions = trace_actions(trace)
            score = episode_score(actions.actions, golds[theirs["id"]], system_valid=actions.system_valid,
                                  queries=actions.queries)
            mine = {"actions": _digest(list(actions.actions)), "n_actions": len(actions.actions),
                    "search_count": len(actions.queries),
                    "observations": [_digest(s.observation) for s in trace.steps if s.observation is not None],
                    "r_task": score.r_task, "answer": score.answer, "system_valid": actions.system_valid}
            if any(mine[key] != theirs[key] for key in mine):
                mismatches.append(theirs["id"])
        assert mismatches == [], f"{name}: {len(mismatches)} of {len(episodes)} differ, first {mismatches[:3]}"


@pytest.mark.realdata
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_demo_release_matches_their_loop(tmp_path: Path) -> None:
    from aethersearch.curation.build import build_from_config
    from aethersearch.sources.demo import write_demo_sources

    release_dir = tmp_path / "demo_release"
    build_from_config(write_demo_sources(tmp_path / "demo_release_sources"), release_dir)
    _check_release(FIXTURES / "aethersearch_loop_demo.json.gz", release_dir, require_shared("wikispeedia"))


@pytest.mark.realdata
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_eval1400_matches_their_loop(eval1400_build: Eval1400Build) -> None:
    """All 1,400 questions of the real release (the session's shared build of ../shared/data)."""
    _check_release(FIXTURES / "aethersearch_loop_eval1400.json.gz", eval1400_build.release_dir,
                   require_shared("wikispeedia"))


def test_eos_stays_in_the_context_and_no_stop_strings_are_sent() -> None:
    bodies: list[dict[str, Any]] = []
    script = ["<think>a</think><search> Paris </search>", "<answer> Paris </answer>"]

    def respond(request: ScriptedRequest) -> Reply:
        if request.text == "Hello":  # the token-route probe's one-token generation (vLLM's form)
            return Reply("hi")
        bodies.append(request.body)
        return Reply(script[len(bodies) - 1])

    async def go() -> Trace:
        with ScriptedServer(respond, chat_template="chatml") as server:
            async with OpenAIClient(server.url, "m") as llm:
                env = OverlapEnv(corpus(require_shared("wikispeedia"), n=5))
                return await run_episode(RolloutQuestion(id="q", question="Where is Paris"), AetherSearchAgent(),
                                         env, llm, Budget(max_tool_calls=None, max_turns=None), Decoding())

    trace = asyncio.run(go())
    assert all(not body.get("stop") for body in bodies)
    second = bodies[1]["prompt"]
    assert second.split(ASSISTANT, 1)[1].startswith(script[0] + EOS + "<information>")
    assert trace.prediction == "Paris" and trace.steps[0].notes["continuation"] == "text"
