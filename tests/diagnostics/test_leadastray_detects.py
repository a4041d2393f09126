"""The paper's Lead-astray must detect an agent derailed by its *own* trajectory, and only that.

A test agent walks the chain's stating pages v0..v(n-1) (so its evidence is
sufficient), then wanders to an unrelated page (its own noise) and answers from
the last page it saw: the wander is what makes it wrong. Re-asked with only
the clean hop statements it was served, the wander is refused and it reads the
answer off v(n-1): led astray. An agent that is wrong whatever it reads is
eligible but never fixed: rate 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import pytest

from aethersearch.agents.base import Agent, AgentOutput, Episode, finish
from aethersearch.diagnostics.probes import factorise_run, lead_astray_probe, load_traces, read_probes
from aethersearch.records import Budget, Decoding, RolloutQuestion
from aethersearch.rollout.fingerprint import build_fingerprint, release_info
from aethersearch.rollout.runner import run_questions

BUDGET = Budget(max_tool_calls=12, max_turns=12)


class WanderingAgent(Agent):
    """Visits the given titles in order, then answers with the last link of the last page it was shown."""

    name: ClassVar[str] = "wandering-test"
    needs_llm: ClassVar[bool] = False
    environment: ClassVar[str] = "sandbox"

    def __init__(self, walks: Mapping[str, list[str]], store: Any, stubborn: bool = False) -> None:
        self.walks, self.store, self.stubborn = dict(walks), store, stubborn

    async def solve(self, episode: Episode) -> AgentOutput:
        last = None
        for title in self.walks[episode.question.question]:
            result = await episode.env.visit(title)
            episode.add_step(tool_calls=[result.call])
            if result.documents:
                last = result.documents[0]
        if self.stubborn or last is None or not last.links:
            return finish("", "Nobody In Particular", "done")
        return finish("", self.store.get(last.links[-1]).title, "done")


@pytest.mark.parametrize("stubborn", [False, True])
def test_lead_astray_counts_failures_fixed_by_clean_evidence(demo_sandbox, tmp_path, stubborn) -> None:
    demo = demo_sandbox
    ids = [i for i in sorted(demo.questions)
           if demo.store.get(demo.diagnostics[i]["path"][-1]).title in demo.gold[i]][:3]
    chain_pages = {p for i in ids for p in demo.diagnostics[i]["path"]}
    detour = next(d for d in demo.store if d.id not in chain_pages and d.links
                  and demo.store.get(d.links[-1]).title not in {a for i in ids for a in demo.gold[i]})
    walks = {demo.questions[i]: [demo.store.get(p).title for p in demo.diagnostics[i]["path"][:-1]] + [detour.title]
             for i in ids}
    agent = WanderingAgent(walks, demo.store, stubborn=stubborn)
    run_dir = tmp_path / "run"
    fingerprint = build_fingerprint(release_info(demo.release), question_count=len(demo.questions), agent=agent,
                                    budget=BUDGET, decoding=Decoding(), endpoint=None, model=None,
                                    corpus_hash=demo.store.content_hash, index_hash=demo.index.index_hash,
                                    environment="sandbox")
    run_questions([RolloutQuestion(id=i, question=demo.questions[i]) for i in ids], agent,
                  lambda question: demo.sandbox.episode(question.id), BUDGET, run_dir, fingerprint, llm=None)
    overall = factorise_run(run_dir, demo.release, store=demo.store)["overall"]
    assert overall["n_sufficient"] == 3 and overall["pass_at_1"] == 0.0  # every failure had the evidence
    summary = lead_astray_probe(run_dir, demo.release, store=demo.store, agent=agent)
    assert summary["n_eligible"] == 3 and summary["eligible_ids"] == ids
    assert all(n == len(demo.diagnostics[i]["path"]) - 1 for i, n in summary["clean_pages"].items())
    reasked = load_traces(run_dir / summary["probe_dir"])
    assert set(reasked) == set(ids)  # only the eligible failures were re-asked
    refused = [c for t in reasked.values() for s in t.steps for c in s.tool_calls if c.error]
    assert len(refused) == 3  # each re-ask's wander found nothing: the noise is gone
    if stubborn:
        assert summary["lead_astray_rate"] == 0.0 and summary["led_astray_ids"] == []
    else:
        assert summary["lead_astray_rate"] == 1.0 and summary["led_astray_ids"] == ids
    degradation = read_probes(run_dir).line()["degradation"]
    assert degradation["lead_astray_rate"] == summary["lead_astray_rate"]
    assert degradation["lead_astray_n_eligible"] == 3 and degradation["forget_minus_lead_astray"] is None
