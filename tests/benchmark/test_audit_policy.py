"""The conservative auto-decision policy: distinct questions are retained, rewordings excluded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aethersearch.audit.policy import auto_decide
from aethersearch.audit.review import TODO, apply_review_file, load_reviews, pair_key


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
    # real flagged pairs of the Eval-1400 build (NQ is all lower case: no capitals mark its entities)
    ("how many times has psg won champions league", "how many times has madrid won the uefa champions league",
     "retain", "changed entity"),
    ("what is the meaning of shalom in english", "what is the meaning of ayesha in english", "retain",
     "changed entity"),
    ("who does the voice of marceline on adventure time", "who does the voice of jake in adventure time",
     "retain", "changed entity"),
    ("when does season 3 of the riveras start", "when does jane the virgin season 3 start", "retain",
     "changed entity"),
    ("What is the place of birth of the director of film And The Spring Comes?",
     "what is the date of birth of the director of film wandering fires", "retain", "changed entity"),
    ("Who's the sibling of the player who won the men's wimbledon championship 2016?",
     "who won the men 's wimbledon championship 2016", "retain", "reasoning target"),
    ("Malachite is an ore of which metal?", "malachite is a principal ore of which metal", "exclude", "rewording"),
    ("when is season 2 of jessica jones being released", "when does jessica jones season 2 come out", "exclude",
     "rewording"),
    ("who sings theme tune to orange is the new black", "who sang the orange is the new black theme song",
     "exclude", "rewording"),
    ("where did they film the book of eli", "where was the movie book of eli filmed", "exclude", "rewording"),
    ("when is the last time the philadelphia won the superbowl", "when was the last time philly won a superbowl",
     "exclude", "rewording"),
    ("Who was the Norse god of mischief?", "in norse mythology who was the god of mischief", "exclude", "rewording"),
    ("when did the usa join ww1", "when did the us join world war one", "exclude", "rewording"),
    ("what is the full form of ib board", "what is the full form of c o p d", "retain", "changed entity"),
    ("Which area of London derives its name from a hunting call hum medieval times?",
     "which area of london is believed to derive its name from a former hunting cry", "exclude", "rewording"),
    ("Which metal is obtained from the ore haematite?", "what metal is obtained from the ore haematite", "exclude",
     "rewording"),
    ("Where is Amílcar Cabral International Airport?", "amilcar cabral international airport is in which country",
     "exclude", "rewording"),
    ("When was the Eiffel Tower built?", "what year was the eiffel tower built", "exclude", "rewording"),
    ("which way does the earth orbit the sun", "what direction does the earth orbit around the sun", "exclude",
     "rewording"),
    ("what languages are spoken in india the most", "what is the most widely spoken language in india", "exclude",
     "rewording"),
    ("who was first governor general of british india", "who is the first woman governor in india", "retain",
     "changed entity"),
    ("who is the robot in lost in space 2018", "who plays robot on the new lost in space", "exclude", "rewording"),
    ("Where did the director of film Circus Girl (Film) die?", "when did the director of film krull (film) die",
     "retain", "answer slot"),
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
    # the release says who decided: the person, or the policy `--auto` applied
    assert decisions[pair_key(*entries[0]["pair"])].decided_by == "review"
    assert decisions[pair_key(*entries[1]["pair"])].decided_by == "auto-review policy"
