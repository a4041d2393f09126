"""Near-duplicate audit: planted duplicates are flagged, template siblings need a review."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz import fuzz

from aethersearch.audit.near_duplicates import TrainingUnion, audit_questions, make_audit_hooks, parse_settings
from aethersearch.audit.similarity import exhaustive_similarity
from aethersearch.errors import ConfigError, DataError, ReviewRequired
from aethersearch.sources.base import Candidate
from aethersearch.text import question_key

TRAINING = [
    "Who wrote Zen and the Art of Motorcycle Maintenance?",
    "In which year did the Berlin Wall fall?",
    "What is the capital city of Australia?",
    "Who directed the 1975 film Jaws?",
    "How many strings does a standard violin have?",
    "Which element has the chemical symbol Fe?",
    "Who painted the ceiling of the Sistine Chapel?",
    "What is the longest river in South America?",
    "When did the Titanic sink?",
    "Who was the first person to walk on the Moon?",
    "Which country hosted the 2016 Summer Olympics?",
    "What language is spoken in Brazil?",
    "Who composed the opera The Magic Flute?",
    "How tall is Mount Kilimanjaro?",
    "Which planet is known as the Red Planet?",
    "Who discovered penicillin?",
    "What is the largest desert in Asia?",
    "Who is the author of the Harry Potter books?",
    "When was the Eiffel Tower completed?",
    "What currency is used in Japan?",
]

PUNCTUATION = "In which year did the Berlin-Wall fall ?!"
SWAPPED = "Of Australia, what is the capital city?"
PARAPHRASE = "Zen and the Art of Motorcycle Maintenance was written by whom?"
SIBLING = "Who directed the 1979 film Alien?"
DISTINCT = "How many moons does Jupiter have?"


def candidate(question: str, dataset: str = "nq_open", row: int = 1) -> Candidate:
    return Candidate(dataset, "dev", None, row, f"{dataset}.jsonl", question, ["x"],
                     question_key(question), {})


def flagged_training(question: str) -> dict[str, tuple[float | None, float | None]]:
    result = audit_questions([(None, question)], TrainingUnion([question_key(q) for q in TRAINING]), parse_settings({}))
    return {p.training_key: (p.similarity, p.rare_token) for p in result.flagged}


def test_punctuation_edit_is_flagged_by_character_similarity() -> None:
    found = flagged_training(PUNCTUATION)
    similarity, _ = found[question_key(TRAINING[1])]
    assert similarity is not None and similarity >= 85


def test_swapped_word_order_is_flagged() -> None:
    found = flagged_training(SWAPPED)
    assert question_key(TRAINING[2]) in found
    similarity, rare = found[question_key(TRAINING[2])]
    # Character similarity alone misses the reordering; the rare-token pass catches it.
    assert similarity is None and rare is not None and rare >= 0.9


def test_paraphrase_with_shared_rare_entity_is_flagged_by_rare_tokens() -> None:
    found = flagged_training(PARAPHRASE)
    similarity, rare = found[question_key(TRAINING[0])]
    assert similarity is None, "character similarity misses this paraphrase"
    assert rare is not None and rare >= 0.6


def test_template_sibling_is_flagged_by_similarity_only() -> None:
    found = flagged_training(SIBLING)
    similarity, rare = found[question_key(TRAINING[3])]
    assert similarity is not None and similarity >= 85
    assert rare is None


def test_distinct_question_is_not_flagged() -> None:
    assert flagged_training(DISTINCT) == {}


def test_every_pair_is_visited() -> None:
    result = audit_questions([(None, q) for q in (PUNCTUATION, DISTINCT, SIBLING)],
                             TrainingUnion([question_key(q) for q in TRAINING]), parse_settings({}))
    assert result.methods["similarity"]["pairs_visited"] == 3 * len(TRAINING)


def hooks(tmp_path: Path, reviews: list[dict] | None, *, auto_review: bool = False):
    path = None
    if reviews is not None:
        path = tmp_path / "reviews.json"
        path.write_text(json.dumps(reviews), encoding="utf-8")
    return make_audit_hooks({}, [question_key(q) for q in TRAINING], reviews_path=path,
                            auto_review=auto_review)


def test_unreviewed_flag_stops_the_build_and_writes_a_template(tmp_path: Path) -> None:
    _, audit = hooks(tmp_path, [])
    with pytest.raises(ReviewRequired) as info:
        audit([candidate(SIBLING), candidate(DISTINCT, row=2)])
    assert question_key(SIBLING) in str(info.value)
    template = json.loads((tmp_path / "reviews.todo.json").read_text(encoding="utf-8"))
    assert [entry["pair"] for entry in template] == [[question_key(SIBLING), question_key(TRAINING[3])]]
    assert template[0]["decision"].startswith("TODO")


def test_template_sibling_is_retained_only_through_a_review_with_reason(tmp_path: Path) -> None:
    reason = "different film and director: a distinct factual question"
    _, audit = hooks(tmp_path, [{"pair": [SIBLING, TRAINING[3]], "decision": "retain", "reason": reason}])
    decision = audit([candidate(SIBLING), candidate(DISTINCT, row=2)])
    assert decision.exclude == {}
    assert [(r["pair"], r["reason"]) for r in decision.retained] == [
        ([question_key(SIBLING), question_key(TRAINING[3])], reason)]
    counts = decision.report["counts"]
    assert counts["pairs_flagged"] == 1 and counts["questions_retained_with_reason"] == 1
    assert counts["questions_excluded"] == 0


def test_auto_review_applies_the_conservative_policy_and_records_it(tmp_path: Path) -> None:
    _, audit = hooks(tmp_path, None, auto_review=True)
    decision = audit([candidate(SIBLING), candidate(PARAPHRASE, row=2), candidate(DISTINCT, row=3)])
    # the rewording is excluded; the sibling asks about another year (1979 vs 1975) and is retained as distinct
    assert set(decision.exclude) == {question_key(PARAPHRASE)}
    assert [r["pair"][0] for r in decision.retained] == [question_key(SIBLING)]
    assert "different years/numbers" in decision.retained[0]["reason"]
    assert decision.report["counts"]["pairs_auto_excluded"] == 1
    assert all(p["decided_by"] == "auto-review policy" for p in decision.report["flagged_pairs"])


def test_retain_without_reason_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="reason"):
        hooks(tmp_path, [{"pair": [SIBLING, TRAINING[3]], "decision": "retain", "reason": " "}])


def test_unknown_decision_is_refused_with_its_index(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="#1"):
        hooks(tmp_path, [{"pair": [SIBLING, TRAINING[3]], "decision": "keep", "reason": "x"}])


def test_bad_audit_config_names_the_field() -> None:
    with pytest.raises(ConfigError, match="audit.similarity.threshold"):
        parse_settings({"similarity": {"threshold": 150}})
    with pytest.raises(ConfigError, match="scorer"):
        audit_questions([(None, "x")], TrainingUnion([question_key(q) for q in TRAINING]),
                        parse_settings({"similarity": {"scorer": "ratoi"}}))


def test_pool_filter_removes_near_certain_duplicates_only(tmp_path: Path) -> None:
    pool_filter, _ = hooks(tmp_path, [])
    removed = pool_filter([candidate("in which year did the berlin wall fall?!"), candidate(SIBLING, row=2),
                           candidate(SWAPPED, row=3), candidate(DISTINCT, row=4)])
    assert set(removed) == {question_key("in which year did the berlin wall fall?!"), question_key(SWAPPED)}
    assert all(reason.startswith("pool audit:") for reason in removed.values())


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(alphabet="abc de?", min_size=0, max_size=12), min_size=1, max_size=8),
       st.lists(st.text(alphabet="abc de?", min_size=0, max_size=12), min_size=1, max_size=30),
       st.floats(min_value=40, max_value=100))
def test_blocked_uint8_pass_equals_brute_force_over_every_pair(queries: list[str], choices: list[str],
                                                               threshold: float) -> None:
    # block_bytes=7 forces many row blocks; the float re-score must decide at the exact threshold.
    result = exhaustive_similarity(queries, choices, threshold=threshold, block_bytes=7)
    expected = {(i, j, fuzz.ratio(q, c)) for i, q in enumerate(queries) for j, c in enumerate(choices)
                if fuzz.ratio(q, c) >= threshold}
    got = set(zip(result.query_index.tolist(), result.choice_index.tolist(), result.score.tolist(), strict=True))
    assert got == expected
    assert result.pairs_visited == len(queries) * len(choices)


def test_review_required_without_a_reviews_file_says_where_reviews_go(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`aether build` has no --reviews flag: the fix must name the config's audit.reviews field."""
    monkeypatch.chdir(tmp_path)
    _, audit = hooks(tmp_path, None)
    with pytest.raises(ReviewRequired) as info:
        audit([candidate(SIBLING)])
    assert "audit.reviews" in info.value.fix and "--reviews" not in info.value.fix
    assert (tmp_path / "audit_reviews.todo.json").exists()
