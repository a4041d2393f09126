"""Factorised metrics on hand-built traces whose right values are worked out by hand."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from aethersearch.errors import DataError
from aethersearch.records import DiagnosticsRow, Document, Outcome, Step, ToolCall, Trace
from aethersearch.scoring.factorised import (
    episode_from_sandbox,
    episode_from_text,
    factorise,
    factorised_metrics,
    gathered_ids,
    good_refusal_f1,
    knowledge_utilisation_f1,
)

GOLD = ["Graham Cornes"]
DIAG = DiagnosticsRow(id="q", source_dataset="hintfree", path=["p0", "p1", "p2"], hops=2,
                      evidence=["p1", "p2"])


def trace(qid: str, visits: list[str], outcome: Outcome, prediction: str | None,
          searches: list[str] = (), suppressed: list[str] = (), failed: list[str] = ()) -> Trace:
    calls = [ToolCall(tool="search", arguments={"query": "x"}, returned_ids=list(searches),
                      suppressed_ids=list(suppressed))]
    calls += [ToolCall(tool="visit", arguments={"page": p}, returned_ids=[p]) for p in visits]
    calls += [ToolCall(tool="visit", arguments={"page": p}, error="masked page") for p in failed]
    response = f"<answer> {prediction} </answer>" if prediction is not None else ""
    return Trace(id=qid, question_seen="?", agent="t", steps=[Step(index=0, tool_calls=calls)],
                 response=response, prediction=prediction, outcome=outcome, stop_reason="answer")


def ep(qid, visits, outcome, prediction, parametric=(), diag=DIAG, **kw):
    return episode_from_sandbox(trace(qid, visits, outcome, prediction, **kw), diag, GOLD,
                                parametric=parametric)


def matrix():
    """sufficient/insufficient × correct/wrong/refused."""
    return [
        ep("A", ["p1", "p2"], Outcome.ANSWERED, "Graham Cornes"),  # sufficient, correct
        ep("B", ["p1", "p2"], Outcome.ANSWERED, "Chad Cornes"),    # sufficient, wrong
        ep("C", ["p1", "p2"], Outcome.ABSTAINED, "I don't know"),  # sufficient, refused
        ep("D", ["p1"], Outcome.ANSWERED, "the Graham Cornes"),    # insufficient, correct (lucky)
        ep("E", ["p1"], Outcome.ANSWERED, "Kane"),                 # insufficient, wrong
        ep("F", [], Outcome.ABSTAINED, "unknown"),                 # insufficient, refused
    ]


def test_matrix_values_match_hand_computation() -> None:
    m = factorised_metrics(matrix())
    assert m["n"] == 6 and m["n_sufficient"] == 3 and m["n_refused"] == 2
    assert m["knowledge_sufficiency"] == pytest.approx(0.5)
    assert m["knowledge_score"] == pytest.approx(0.5)
    # refused ∩ insufficient = {F}: 2·1 / (|R|=2 + |I|=3)
    assert m["f1_good_refusal"] == pytest.approx(0.4)
    assert m["precision_good_refusal"] == pytest.approx(0.5)
    assert m["recall_good_refusal"] == pytest.approx(1 / 3)
    # on S = {A,B,C}: correct {A}, answered {A,B}: 2·1 / (2 + 3)
    assert m["f1_knowledge_utilisation"] == pytest.approx(0.4)
    assert m["precision_knowledge_utilisation"] == pytest.approx(0.5)
    assert m["recall_knowledge_utilisation"] == pytest.approx(1 / 3)
    assert m["gen_score"] == pytest.approx((0.4 + 0.4) / 2 * 0.5)
    assert m["pass_at_1"] == pytest.approx(2 / 6)  # A and the lucky D
    assert m["search_score"] == pytest.approx((1 + 1 + 1 + 0.5 + 0.5 + 0) / 6)
    assert m["search_only_sufficiency"] == pytest.approx(0.5)


def test_per_cell_classification() -> None:
    cells = {e.id: (e.sufficient, e.correct, e.refused) for e in matrix()}
    assert cells == {"A": (True, True, False), "B": (True, False, False), "C": (True, False, True),
                     "D": (False, True, False), "E": (False, False, False), "F": (False, False, True)}


def test_no_refusals_at_all_is_defined_not_nan() -> None:
    answered_only = [e for e in matrix() if not e.refused]
    m = factorised_metrics(answered_only)
    assert m["f1_good_refusal"] == 0.0  # evidence was absent twice and never refused
    assert m["precision_good_refusal"] is None  # 0/0 is reported as undefined, F1 is not
    all_sufficient = [e for e in answered_only if e.sufficient]
    assert good_refusal_f1(all_sufficient) == 1.0  # nothing to refuse, nothing refused
    for value in factorised_metrics(all_sufficient).values():
        assert not (isinstance(value, float) and math.isnan(value))


def test_refusing_everything_when_evidence_present_scores_zero() -> None:
    refusers = [ep(q, ["p1", "p2"], Outcome.ABSTAINED, "I cannot answer") for q in "xyz"]
    m = factorised_metrics(refusers)
    assert m["f1_good_refusal"] == 0.0
    assert m["f1_knowledge_utilisation"] == 0.0
    assert m["gen_score"] == 0.0


def test_knowledge_utilisation_without_sufficient_episodes_is_zero() -> None:
    insufficient = [ep("x", [], Outcome.ANSWERED, "Graham Cornes")]
    assert knowledge_utilisation_f1(insufficient) == 0.0
    m = factorised_metrics(insufficient)
    assert m["knowledge_sufficiency"] == 0.0 and m["gen_score"] == 0.0 and m["pass_at_1"] == 1.0


def test_empty_episode_set_reports_n_zero_and_undefined_rates() -> None:
    out = factorise([])
    assert out["n"] == 0 and out["by_hops"] == {} and out["by_source"] == {}
    assert out["overall"]["gen_score"] is None and out["overall"]["pass_at_1"] is None


def test_search_results_masked_and_failed_visits_do_not_gather() -> None:
    t = trace("q", [], Outcome.ANSWERED, "x", searches=["p1", "p2"], suppressed=["p2"], failed=["p1"])
    assert gathered_ids(t) == frozenset()
    assert gathered_ids(t, ("search", "visit")) == {"p1"}  # p2 was masked in that call
    later = trace("q", ["p2"], Outcome.ANSWERED, "x", searches=["p1"], suppressed=["p2"])
    assert gathered_ids(later) == {"p2"}  # masked at first, opened once unlocked
    e = ep("q", [], Outcome.ANSWERED, "x", searches=["p1", "p2"])
    assert not e.sufficient and e.search_credit == 0.0


def test_parametric_knowledge_completes_partial_search() -> None:
    mixed = ep("m", ["p1"], Outcome.ANSWERED, "Graham Cornes", parametric=["p2"])
    assert mixed.sufficient and not mixed.sufficient_by_search and mixed.search_credit == 1.0
    foreign = ep("f", ["p1"], Outcome.ANSWERED, "Graham Cornes", parametric=["not-in-E"])
    assert not foreign.sufficient and foreign.search_credit == 0.5


def test_errors_are_excluded_from_denominators() -> None:
    eps = matrix() + [ep("err", ["p1", "p2"], Outcome.ENDPOINT_ERROR, None)]
    m = factorised_metrics(eps)
    assert m["n"] == 6 and m["n_errors"] == 1
    assert m["gen_score"] == pytest.approx(0.2)


def test_groups_by_hops_and_source() -> None:
    three = DiagnosticsRow(id="t", source_dataset="other", path=["a", "b", "c", "d"], hops=3)
    eps = matrix() + [ep("T", ["a", "b", "c", "d"], Outcome.ANSWERED, "Graham Cornes", diag=three)]
    out = factorise(eps)
    assert list(out["by_hops"]) == ["2", "3"]
    assert out["by_hops"]["3"]["n"] == 1 and out["by_hops"]["3"]["gen_score"] == pytest.approx(1.0)
    assert out["by_source"]["hintfree"]["gen_score"] == pytest.approx(0.2)
    assert out["n"] == 7 and set(out["overall"]) >= {"f1_good_refusal", "gen_score", "pass_at_1"}


def test_evidence_is_the_whole_path_when_the_sidecar_gives_none() -> None:
    row = DiagnosticsRow(id="h", source_dataset="hintfree", path=["a", "b", "c"])
    read_on_b = ep("h", ["a", "b"], Outcome.ANSWERED, "Graham Cornes", diag=row)
    # answered from b without opening the answer page c: correct, but not sufficient
    assert read_on_b.evidence == ("a", "b", "c") and read_on_b.correct and not read_on_b.sufficient
    assert read_on_b.hops == 2  # no hops field: the path's edges


def test_outcome_and_answer_are_the_scorers_extraction() -> None:
    t = trace("q", ["p1", "p2"], Outcome.ANSWERED, "x").model_copy(
        update={"response": "<answer> Chad </answer> then <answer> Graham Cornes </answer>", "prediction": "Chad"})
    e = episode_from_sandbox(t, DIAG, GOLD)
    assert e.correct  # the last answer tag is what scores.json scores
    refused = trace("r", ["p1"], Outcome.ANSWERED, "x").model_copy(update={"response": "<answer> unknown </answer>"})
    assert episode_from_sandbox(refused, DIAG, GOLD).refused


def test_question_without_evidence_is_a_clear_error() -> None:
    bare = DiagnosticsRow(id="nq_1", source_dataset="nq")
    with pytest.raises(DataError, match="nq_1.*no evidence chain"):
        ep("nq_1", [], Outcome.ANSWERED, "x", diag=bare)


class MemoryStore:
    """A minimal DocumentStore for the text-mode tests."""

    def __init__(self, docs: list[Document]) -> None:
        self._docs = {d.id: d for d in docs}

    content_hash = "test"

    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._docs

    def get(self, doc_id: str) -> Document:
        return self._docs[doc_id]

    def ids(self) -> Iterator[str]:
        return iter(self._docs)

    def __iter__(self) -> Iterator[Document]:
        return iter(self._docs.values())


STORE = MemoryStore([
    Document(id="d1", title="Kane Cornes", text="Kane Cornes is the brother of Chad Cornes."),
    Document(id="d2", title="Chad Cornes", text="Chad's father is Graham Cornes, a coach."),
    Document(id="d3", title="Grahamstown", text="Grahamstown is a town. Cornes is a surname."),
])


def text_trace(ids: list[str], prediction: str, outcome: Outcome = Outcome.ANSWERED) -> Trace:
    call = ToolCall(tool="search", arguments={"query": "q"}, returned_ids=ids)
    return Trace(id="h1", question_seen="?", agent="t", steps=[Step(index=0, tool_calls=[call])],
                 prediction=prediction, outcome=outcome, stop_reason="answer")


def test_text_mode_needs_alias_in_retrieved_text_and_supporting_pages() -> None:
    row = DiagnosticsRow(id="h1", source_dataset="hotpotqa",
                         supporting_facts=[("Kane Cornes", 0), ("Chad Cornes", 0)])
    both = episode_from_text(text_trace(["d1", "d2"], "Graham Cornes"), row, GOLD, STORE)
    assert both.evidence == ("answer", "page:Kane Cornes", "page:Chad Cornes")
    assert both.sufficient and both.correct and both.hops == 2
    # The alias is not a whole-token span of d3 ("Grahamstown ... Cornes"), and d2 is missing.
    partial = episode_from_text(text_trace(["d1", "d3"], "Graham Cornes"), row, GOLD, STORE)
    assert not partial.sufficient and partial.gathered == {"page:Kane Cornes"}
    assert partial.search_credit == pytest.approx(1 / 3)


def test_text_mode_without_sidecar_pages_uses_the_answer_alone() -> None:
    row = DiagnosticsRow(id="h1", source_dataset="nq")
    found = episode_from_text(text_trace(["d2"], "wrong"), row, GOLD, STORE)
    assert found.sufficient and not found.correct and found.hops is None
    unknown = factorise([found])["by_hops"]["unknown"]
    assert unknown["f1_knowledge_utilisation"] == 0.0  # evidence present, answered wrongly
    assert unknown["f1_good_refusal"] == 1.0  # nothing to refuse, nothing refused


def test_text_mode_unknown_document_names_the_episode() -> None:
    row = DiagnosticsRow(id="h1", source_dataset="nq")
    with pytest.raises(DataError, match="h1.*missing-doc"):
        episode_from_text(text_trace(["missing-doc"], "x"), row, GOLD, STORE)


def test_a_release_without_evidence_chains_needs_the_corpus() -> None:
    from aethersearch.errors import ConfigError
    from aethersearch.records import EvalRow
    from aethersearch.scoring.probes import episodes_for_run

    gold = {"h1": EvalRow(id="h1", question="?", answers=GOLD, source_dataset="nq", source_split="dev",
                          source_id=None, source_row_number=1, source_file="nq.jsonl")}
    diagnostics = {"h1": DiagnosticsRow(id="h1", source_dataset="nq")}
    traces = {"h1": text_trace(["d2"], "Graham Cornes")}
    with pytest.raises(ConfigError, match="--corpus"):
        episodes_for_run(traces, diagnostics, gold, environment="search")
    (episode,) = episodes_for_run(traces, diagnostics, gold, environment="search", store=STORE)
    assert episode.sufficient and episode.correct
