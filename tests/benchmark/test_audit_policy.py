"""The conservative auto-decision policy: distinct questions are retained, rewordings excluded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aethersearch.benchmark.audit_policy import auto_decide
from aethersearch.benchmark.audit_review import TODO, apply_review_file, load_reviews, pair_key


@pytest.mark.parametrize(("selected", "training", "decision", "why"), [
    # the example: an abbreviation is not a changed entity
    ("When did the USA join World War One?", "when did the us join world war one", "exclude", "rewording"),
    ("Who was the oldest man elected president of USA?", "who was the oldest president elected to office",
     "exclude", "rewording"),
    ("Zen and the Art of Motorcycle Maintenance was written by whom?",
     "who wrote zen and the art of motorcycle maintenance", "exclude", "rewording"),
    ("Who directed the 1979 film Alien?", "who directed the 1975 film jaws", "retain", "years/numbers"),
    ("Who directed Titanic?", "who directed avatar", "retain", "changed entity"),
    ("Who is the father of the father of modern Hebrew?", "who is the father of the modern country of turkey",
     "retain", "changed entity"),
    ("When was the Eiffel Tower built?", "where was the eiffel tower built", "retain", "answer slot"),
    ("What rocket was used for the mission that landed the first humans on the Moon?",
     "what was the first american mission to land on the moon", "retain", "answer slot"),
    ("Who was the first king of Norway?", "who was the last king of norway", "retain", "reasoning target"),
])
def test_policy_table(selected: str, training: str, decision: str, why: str) -> None:
    verdict = auto_decide(selected, training)
    assert verdict.decision == decision, verdict
    assert why in verdict.reason or (why == "rewording" and "rewording" in verdict.reason)


def test_review_command_merges_hand_decisions_and_the_policy(tmp_path: Path) -> None:
    template = tmp_path / "audit_reviews.todo.json"
    reviews = tmp_path / "audit_reviews.json"
    entries = [
        {"pair": ["who directed titanic", "who directed avatar"], "decision": "exclude", "reason": "same film family"},
        {"pair": ["when did the usa join world war one", "when did the us join world war one"], "decision": TODO,
         "reason": "", "selected": {"question": "When did the USA join World War One?"}},
        {"pair": ["who was the first king of norway", "who was the last king of norway"], "decision": TODO,
         "reason": "", "selected": {"question": "Who was the first king of Norway?"}},
    ]
    template.write_text(json.dumps(entries))
    assert apply_review_file(template, reviews) == (1, 0, 2)  # TODOs stay pending without --auto
    assert apply_review_file(template, reviews, auto=True) == (1, 2, 0)
    decisions = load_reviews(reviews)
    assert decisions[pair_key("who directed titanic", "who directed avatar")].decision == "exclude"  # the human's
    assert decisions[pair_key(*entries[1]["pair"])].decision == "exclude"
    assert decisions[pair_key(*entries[2]["pair"])].decision == "retain"
