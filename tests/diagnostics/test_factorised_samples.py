"""Factorised metrics of a K-sample run: each sample index is a replicate, figures are averaged over K."""

from __future__ import annotations

import pytest

from aethersearch.agents.base import make_agent
from aethersearch.agents.llm import OpenAIClient
from aethersearch.diagnostics.factorised import EpisodeEvidence, factorise
from aethersearch.diagnostics.probes import factorise_run, load_traces
from aethersearch.errors import DataError
from aethersearch.records import Budget, Decoding, RolloutQuestion
from aethersearch.rollout.fingerprint import build_fingerprint, release_info
from aethersearch.rollout.runner import run_questions
from aethersearch.scoring.reducers import mean_over_samples
from aethersearch.testing.scripted_server import ScriptedServer
from tests.diagnostics.evidenceloop_rules import sandbox_path_rule

BUDGET = Budget(max_tool_calls=24, max_turns=60)


def _episode(qid: str, sufficient: bool, outcome: str, correct: bool) -> EpisodeEvidence:
    from aethersearch.records import Outcome

    return EpisodeEvidence(qid, "demo", 2, ("a", "b"), frozenset({"a", "b"} if sufficient else {"a"}),
                           frozenset(), Outcome(outcome), correct, searched_route=sufficient)


def test_set_level_figures_are_computed_per_replicate_then_averaged() -> None:
    sample0 = [_episode("q1", True, "answered", True), _episode("q2", False, "abstained", False)]
    sample1 = [_episode("q1", True, "answered", False), _episode("q2", False, "answered", False)]
    one, two = factorise(sample0), factorise(sample1)
    mean = mean_over_samples([one, two])
    for figure in ("pass_at_1", "f1_knowledge_utilisation", "gen_score", "knowledge_sufficiency"):
        assert mean["overall"][figure] == pytest.approx((one["overall"][figure] + two["overall"][figure]) / 2)
    # F1_GR is undefined in neither here; a figure undefined in one replicate averages the others
    partial = mean_over_samples([{"f1": None, "n": 2}, {"f1": 0.5, "n": 3}])
    assert partial == {"f1": 0.5, "n": 2.5}
    assert mean_over_samples([{"f1": None}, {"f1": None}]) == {"f1": None}
    assert mean["definitions"] == one["definitions"]  # text is taken as is


def test_a_two_sample_run_factorises_every_sample_and_probes_refuse_it(demo_sandbox, tmp_path) -> None:
    demo = demo_sandbox
    ids = sorted(demo.questions)[3:5]
    q = {qid: demo.questions[qid] for qid in ids}
    paths = {q[qid]: [demo.store.get(p).title for p in demo.diagnostics[qid]["path"]] for qid in ids}
    answers = {q[qid]: demo.gold[qid][0] for qid in ids}
    rule = sandbox_path_rule(paths, answers, wrong={q[ids[1]]: "Nobody In Particular"}, direct={})
    agent = make_agent("evidenceloop", n_solvers=2, max_rounds=2, actions_per_round=3)
    results = {}
    with ScriptedServer(rule) as server:
        for samples in (1, 2):
            run_dir = tmp_path / f"k{samples}"
            fingerprint = build_fingerprint(release_info(demo.release), question_count=len(demo.questions),
                                            agent=agent, budget=BUDGET, decoding=Decoding(), endpoint=server.url,
                                            model="scripted", corpus_hash=demo.store.content_hash,
                                            index_hash=demo.index.index_hash, environment="sandbox", samples=samples)
            run_questions([RolloutQuestion(id=i, question=q[i]) for i in ids], agent,
                          lambda question: demo.sandbox.episode(question.id), BUDGET, run_dir, fingerprint,
                          llm=OpenAIClient(server.url, "scripted"))
            results[samples] = factorise_run(run_dir, demo.release, store=demo.store)
    one, two = results[1], results[2]
    assert two["samples"] == 2 and "averaged over the K replicates" in two["reduced"]
    # the scripted model answers alike in both samples: the mean of two equal replicates is the replicate
    for figure in ("pass_at_1", "f1_knowledge_utilisation", "gen_score", "search_score", "n"):
        assert two["overall"][figure] == pytest.approx(one["overall"][figure])
    assert len(two["missing"]) == 2 * len(one["missing"])
    rows = (tmp_path / "k2" / "factorised_questions.jsonl").read_text().splitlines()
    assert len(rows) == 2 * len(ids) and '"sample":1' in rows[-1]
    with pytest.raises(DataError, match="2 samples per question"):
        load_traces(tmp_path / "k2")
