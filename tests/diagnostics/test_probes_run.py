"""Both probes rerun agents through the runner: EvidenceLoop in the masked sandbox, scripted model."""

from __future__ import annotations

import pytest

from aethersearch.agents.base import make_agent
from aethersearch.agents.llm import OpenAIClient
from aethersearch.diagnostics.forget import probe_questions
from aethersearch.diagnostics.probes import (
    distractor_probe,
    factorise_run,
    forget_probe,
    lead_astray_probe,
    load_diagnostics,
    load_traces,
)
from aethersearch.jsonl import loads
from aethersearch.records import Budget, Decoding, RolloutQuestion
from aethersearch.rollout.fingerprint import build_fingerprint, release_info
from aethersearch.rollout.runner import run_questions
from aethersearch.testing.scripted_server import ScriptedServer
from tests.diagnostics.evidenceloop_rules import sandbox_path_rule

BUDGET = Budget(max_tool_calls=24, max_turns=60)


@pytest.fixture(scope="module")
def probed(demo_sandbox, tmp_path_factory):
    """A 3-question EvidenceLoop run (q3 answered wrongly), then the Forget and lead-astray probes."""
    demo = demo_sandbox
    ids = sorted(demo.questions)[3:6]
    q = {qid: demo.questions[qid] for qid in ids}
    paths = {q[qid]: [demo.store.get(p).title for p in demo.diagnostics[qid]["path"]] for qid in ids}
    answers = {q[qid]: demo.gold[qid][0] for qid in ids}
    hops = probe_questions([load_diagnostics(demo.release)[qid] for qid in ids])
    # the model "knows" every hop of the first and third question in isolation, none of the second
    direct = {h.question: h.answers[0] for h in hops if h.question_id in (ids[0], ids[2])}
    rule = sandbox_path_rule(paths, answers, wrong={q[ids[2]]: "Nobody In Particular"}, direct=direct)
    run_dir = tmp_path_factory.mktemp("probed") / "run"
    agent = make_agent("evidenceloop", n_solvers=2, max_rounds=2, actions_per_round=3)
    with ScriptedServer(rule) as server:
        fingerprint = build_fingerprint(release_info(demo.release), question_count=len(demo.questions),
                                        agent=agent, budget=BUDGET, decoding=Decoding(), endpoint=server.url,
                                        model="scripted", corpus_hash=demo.store.content_hash,
                                        index_hash=demo.index.index_hash, environment="sandbox")
        run_questions([RolloutQuestion(id=i, question=q[i]) for i in ids], agent,
                      lambda question: demo.sandbox.episode(question.id), BUDGET, run_dir, fingerprint,
                      llm=OpenAIClient(server.url, "scripted"))
        before = factorise_run(run_dir, demo.release, store=demo.store)
        forget = forget_probe(run_dir, demo.release, llm=OpenAIClient(server.url, "scripted"), store=demo.store)
        after = factorise_run(run_dir, demo.release, store=demo.store)
        distracted = distractor_probe(run_dir, demo.release, store=demo.store, ratio=0.5, seed=1,
                                      llm=OpenAIClient(server.url, "scripted"),
                                      environment_factory=lambda question: demo.sandbox.episode(question.id))
        astray = lead_astray_probe(run_dir, demo.release, store=demo.store, llm=OpenAIClient(server.url, "scripted"))
    return {"ids": ids, "hops": hops, "run_dir": run_dir, "forget": forget, "distracted": distracted,
            "astray": astray, "before": before, "after": after}


def test_forget_probe_counts_hops_known_alone_but_lost_in_context(probed) -> None:
    ids, hops, forget = probed["ids"], probed["hops"], probed["forget"]
    known = [h for h in hops if h.question_id in (ids[0], ids[2])]
    # q3 walked its whole chain (every hop served) and still answered wrongly: it failed at the last hop,
    # so only that hop is forgotten, not every hop of the question
    lost = [max((h for h in hops if h.question_id == ids[2]), key=lambda h: h.hop).probe_id]
    assert forget["applicable"] and forget["n_hops"] == len(hops)
    assert forget["n_known_in_isolation"] == len(known)
    assert forget["forgotten"] == lost
    assert forget["failed_at"] == {ids[2]: len([h for h in hops if h.question_id == ids[2]])}
    assert forget["known_hop_forget_rate"] == pytest.approx(len(lost) / len(known))
    # the paper's rate: q3 is the one sufficient-evidence failure, and the hop it failed at is known alone
    assert (forget["eligible_ids"], forget["forget_ids"], forget["forget_rate"]) == ([ids[2]], [ids[2]], 1.0)
    probe_traces = load_traces(probed["run_dir"] / "probes" / "forget")
    assert set(probe_traces) == {h.probe_id for h in hops}
    assert all(t.agent == "direct" and t.usage.tool_calls == 0 for t in probe_traces.values())


def test_forget_probe_feeds_parametric_credit_into_factorised_metrics(probed) -> None:
    before, after = probed["before"], probed["after"]
    assert before["parametric_source"] is None and after["parametric_source"] == "probes.json forget"
    # q1 and q2 visited their whole chain; q3 too, but answered wrongly: sufficiency is unchanged by
    # parametric credit here, and utilisation shows the wrong answer
    assert after["overall"]["knowledge_sufficiency"] == 1.0
    assert after["overall"]["f1_knowledge_utilisation"] == pytest.approx(2 * 2 / (2 + 3))
    assert after["overall"]["pass_at_1"] == pytest.approx(2 / 3)


def test_distractor_probe_reruns_with_seeded_distractors(probed) -> None:
    astray = probed["distracted"]
    assert astray["n"] == 3 and astray["ratio"] == 0.5 and astray["seed"] == 1
    assert astray["n_eligible"] == 2  # the two clean-correct questions still reached their evidence
    assert astray["distractor_rate"] == 0.0  # this scripted policy walks the chain regardless of noise
    noisy = load_traces(probed["run_dir"] / astray["probe_dir"])
    injected = [c.arguments["_noise"]["distractor_ids"] for t in noisy.values() for s in t.steps
                for c in s.tool_calls if "_noise" in c.arguments]
    assert injected and all(injected)
    probes = loads((probed["run_dir"] / "probes.json").read_bytes())
    assert set(probes) == {"forget", "lead_astray", "distractors", "degradation"}


def test_lead_astray_reasks_the_sufficient_failure_and_sits_beside_forget(probed) -> None:
    ids, astray = probed["ids"], probed["astray"]
    assert astray["eligible_ids"] == [ids[2]] and astray["n_eligible"] == 1
    assert astray["lead_astray_rate"] == 0.0  # the scripted model answers q3 wrongly whatever it reads
    assert set(load_traces(probed["run_dir"] / astray["probe_dir"])) == {ids[2]}
    degradation = loads((probed["run_dir"] / "probes.json").read_bytes())["degradation"]
    assert degradation["forget_rate"] == 1.0 and degradation["lead_astray_rate"] == 0.0
    assert degradation["forget_n_eligible"] == degradation["lead_astray_n_eligible"] == 1
    assert degradation["forget_minus_lead_astray"] == 1.0
