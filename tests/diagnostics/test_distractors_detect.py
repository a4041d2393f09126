"""The distractor probe must detect degradation: an agent that IS misled by injected noise gets a nonzero rate.

The demo's browse agent ignores distractors (rate 0.0), so a 0.0 alone cannot
show the probe works. Here a deliberately gullible agent walks the whole chain
(so its evidence stays accessible under noise) but answers with the title of
the *last* document of its last observation: clean, that is the answer page;
with distractors appended after the visited page, it is a distractor.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import pytest

from aethersearch.agents.base import Agent, AgentOutput, Episode, finish
from aethersearch.diagnostics.probes import distractor_probe, load_traces
from aethersearch.records import Budget, Decoding, RolloutQuestion
from aethersearch.rollout.fingerprint import build_fingerprint, release_info
from aethersearch.rollout.runner import run_questions

BUDGET = Budget(max_tool_calls=12, max_turns=12)


class GullibleAgent(Agent):
    """Visits the given chain titles in order; answers with the last document it was shown."""

    name: ClassVar[str] = "gullible-test"
    needs_llm: ClassVar[bool] = False
    environment: ClassVar[str] = "sandbox"

    def __init__(self, chains: Mapping[str, list[str]], answer_last: bool = True) -> None:
        self.chains = dict(chains)
        self.answer_last = answer_last

    async def solve(self, episode: Episode) -> AgentOutput:
        last = None
        for title in self.chains[episode.question.question]:
            result = await episode.env.visit(title)
            episode.add_step(tool_calls=[result.call], observation=" | ".join(d.title for d in result.documents))
            if result.documents:
                last = result.documents[-1] if self.answer_last else result.documents[0]
        return finish("", last.title if last else "I don't know", "done")


def _run(demo, agent: Agent, ids: list[str], run_dir) -> None:
    fingerprint = build_fingerprint(release_info(demo.release), question_count=len(demo.questions),
                                    agent=agent, budget=BUDGET, decoding=Decoding(), endpoint=None,
                                    model=None, corpus_hash=demo.store.content_hash,
                                    index_hash=demo.index.index_hash, environment="sandbox")
    run_questions([RolloutQuestion(id=i, question=demo.questions[i]) for i in ids], agent,
                  lambda question: demo.sandbox.episode(question.id), BUDGET, run_dir, fingerprint, llm=None)


def _chains(demo, ids: list[str]) -> dict[str, list[str]]:
    return {demo.questions[i]: [demo.store.get(p).title for p in demo.diagnostics[i]["path"]] for i in ids}


@pytest.mark.parametrize("answer_last, misled", [(True, True), (False, False)])
def test_distractor_rate_is_nonzero_for_an_agent_misled_by_noise(demo_sandbox, tmp_path, answer_last,
                                                                   misled) -> None:
    demo = demo_sandbox
    ids = [i for i in sorted(demo.questions)
           if demo.store.get(demo.diagnostics[i]["path"][-1]).title in demo.gold[i]][:4]
    assert len(ids) == 4
    agent = GullibleAgent(_chains(demo, ids), answer_last=answer_last)
    run_dir = tmp_path / "run"
    _run(demo, agent, ids, run_dir)
    summary = distractor_probe(run_dir, demo.release, store=demo.store, ratio=0.5, seed=0, agent=agent,
                               environment_factory=lambda question: demo.sandbox.episode(question.id))
    assert summary["n"] == 4 and summary["pass_at_1_clean"] == 1.0
    assert summary["n_eligible"] == 4  # the whole chain was still visited under noise
    if misled:
        assert summary["distractor_rate"] == 1.0 and summary["pass_at_1_drop"] == 1.0
        assert summary["distracted_ids"] == ids
        noisy = load_traces(run_dir / summary["probe_dir"])
        assert all(any("_noise" in c.arguments for s in t.steps for c in s.tool_calls) for t in noisy.values())
    else:  # same noise, an agent that reads the page it asked for: not led astray
        assert summary["distractor_rate"] == 0.0 and summary["pass_at_1_drop"] == 0.0
