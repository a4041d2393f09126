"""Long-tail and diverse selection: popularity recorded, tail first, one question per subject, no shared hop pairs,
no answer on more than 10% of a release."""

from __future__ import annotations

import json
from collections import Counter
from itertools import pairwise
from pathlib import Path

from aethersearch.construct import diversity
from aethersearch.construct.build import build_demo_release
from aethersearch.construct.hintfree import ConstructionConfig
from aethersearch.corpus.graph import LinkGraph
from aethersearch.records import Document


def test_answers_are_capped_on_the_final_count_most_popular_subjects_first() -> None:
    answers = ["Europe"] * 5 + [f"a{i}" for i in range(15)]
    popularity = [50, 10, 40, 20, 30] + [1] * 15
    kept = diversity.cap_answers(answers, popularity, 0.10)
    # 20 rows allow 2 "Europe"; once the 3 are dropped, 17 rows allow only 1: the least linked subject stays
    assert [i for i in kept if answers[i] == "Europe"] == [1] and len(kept) == 16
    assert diversity.answer_cap(9, 0.10) == 1 and diversity.answer_cap(20, 0.10) == 2


def test_overlap_is_two_or_more_shared_hops() -> None:
    taken = [diversity.hops_of(["a", "b", "c", "d"])]
    assert not diversity.overlaps(["x", "b", "c", "y"], taken)  # one shared hop is allowed
    assert diversity.overlaps(["a", "b", "c", "e"], taken)
    assert not diversity.overlaps(["d", "c", "b", "a"], taken)  # the reverse walk is other hops


def test_tail_order_puts_the_least_linked_first_and_keeps_order_within_a_bucket() -> None:
    docs = [Document(id=p, title=p, text=p * 3, links=links) for p, links in
            [("hub", []), ("x", ["hub"]), ("y", ["hub"]), ("z", ["hub", "rare"]), ("rare", [])]]
    pop = diversity.popularity(LinkGraph.from_documents(docs), {d.id: d for d in docs})
    assert pop("hub") == {"in_degree": 3, "chars": 9} and pop("rare")["in_degree"] == 1
    assert diversity.tail_order([("x", "hub"), ("y", "rare"), ("z", "hub"), ("x", "rare")], pop) == [1, 3, 0, 2]


def test_the_demo_release_is_diverse_and_its_manifest_says_how(tmp_path: Path) -> None:
    loose = build_demo_release(tmp_path / "loose",
                               config=ConstructionConfig(max_questions=60, diverse=False, max_answer_share=None))
    assert max(Counter(q.triple.subject for q in loose.result.questions).values()) > 1  # what the rules change
    built = build_demo_release(tmp_path / "rel", config=ConstructionConfig(max_questions=60))
    questions = built.result.questions
    assert len(questions) == 60
    assert max(Counter(q.triple.answer_page for q in questions).values()) <= 6
    assert len({q.triple.subject for q in questions}) == 60
    assert all(len(set(pairwise(a.path)) & set(pairwise(b.path))) <= 1
               for i, a in enumerate(questions) for b in questions[i + 1:])
    assert built.result.rejected["subject_taken"] > 0
    manifest = json.loads((built.path / "manifest.json").read_text())["construction"]["diversity"]
    assert manifest["questions"] == 60 and manifest["subjects_repeated"] == 0
    assert manifest["max_answer_share_achieved"] <= 0.10 and manifest["max_shared_hops_achieved"] <= 1
    assert set(manifest["popularity"]) == {"subject_in_degree", "answer_in_degree", "subject_chars", "answer_chars"}
    rows = [json.loads(line) for line in (built.path / "diagnostics.jsonl").read_text().splitlines()]
    assert all(set(r["extra"]["popularity"]) == {"subject", "answer"} for r in rows)


def test_goals_say_which_rule_stopped_the_build() -> None:
    met = diversity.goals(["located_in"] * 3 + ["father"], ["Europe", "Europe", "Asia", "Bob"], [2, 2, 3, 4],
                          {"not_entailing": 40, "seed_answer_not_a_page": 9000, "answer_share_cap": 7})
    assert met["goals"]["questions"] == {"target": 100, "achieved": 4, "met": False}
    assert met["goals"]["relations"]["achieved"] == 2 and met["goals"]["max_answer_share"]["achieved"] == 0.5
    assert met["goals"]["multi_hop_share"] == {"target": 0.30, "achieved": 0.5, "met": True}
    assert met["stopped_by"] == {"not_entailing": 40, "answer_share_cap": 7}  # seed-list reasons are not rules
    assert met["questions_short_by"] == 96 and not met["all_met"]


def test_the_hop_mix_says_when_the_diversity_rules_took_the_longer_chains() -> None:
    from aethersearch.construct.hintfree import hop_mix_report

    config = ConstructionConfig(hop_targets={2: 0.5, 3: 0.5})
    mix = hop_mix_report(config, {2: 10**9, 3: 10**9}, {2: 4}, [], {"not_entailing": 7}, {3: 2})
    assert mix["3"]["short_by"] == 2
    assert mix["3"]["reason"].startswith("the graph gave only 2 entailing 3-hop chain(s) among all seeds, of which "
                                         "the diversity rules left out 2")
