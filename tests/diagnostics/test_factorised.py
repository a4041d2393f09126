"""Factorised metrics on hand-built traces whose right values are worked out by hand."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from aethersearch.corpus.base import DocumentStore
from aethersearch.diagnostics.chain_evidence import chain_mask, served_pages
from aethersearch.diagnostics.factorised import (
    episode_from_sandbox,
    episode_from_text,
    factorise,
    factorised_metrics,
    gathered_ids,
    good_refusal_f1,
    knowledge_utilisation_f1,
)
from aethersearch.errors import DataError
from aethersearch.records import (
    DiagnosticsRow,
    Document,
    Outcome,
    Step,
    ToolCall,
    Trace,
)
from aethersearch.sandbox.episode import DictStore
from aethersearch.sandbox.mask import ChainMask

GOLD = ["Graham Cornes"]
# chain p0 -> p1 -> p2: hop 1 is stated on p0 ("His brother is Chad Cornes."), hop 2 on p1
CHAIN = DictStore([
    Document(id="p0", title="Kane Cornes", links=["p1", "x"],
             text="Kane Cornes is a footballer. His brother is Chad Cornes. He played in Adelaide."),
    Document(id="p1", title="Chad Cornes", links=["p2"],
             text="Chad Cornes is a footballer from Adelaide. His father is Graham Cornes. He retired in 2011."),
    Document(id="p2", title="Graham Cornes", links=["p0"], text="Graham Cornes is a coach. He is the father of "
                                                                  "Kane Cornes."),
    Document(id="a", title="A", links=["b"], text="A is a city. It lies in B."),
    Document(id="b", title="B", links=["c"], text="B is a region. Its capital is C."),
    Document(id="c", title="C", links=["d"], text="C is a town. It is the seat of D."),
    Document(id="d", title="D", links=[], text="D is a county."),
    Document(id="x", title="Kane Cornes fan page", links=["p0"],
             text="Fans of Kane Cornes meet here. Chad Cornes is Kane Cornes's brother."),
])
MASK = ChainMask(["p0", "p1", "p2"], {"p1": ["Chad Cornes"], "p2": ["Graham Cornes"]})
DIAG = DiagnosticsRow(id="q", source_dataset="hintfree", path=["p0", "p1", "p2"], hops=2,
                      evidence=["p0", "p1"], extra={"mask": MASK.to_json()})


def trace(qid: str, visits: list[str], outcome: Outcome, prediction: str | None,
          searches: list[str] = (), suppressed: list[str] = (), failed: list[str] = (),
          query: str = "x") -> Trace:
    calls = [ToolCall(tool="search", arguments={"query": query}, returned_ids=list(searches),
                      suppressed_ids=list(suppressed))]
    calls += [ToolCall(tool="visit", arguments={"page": p}, returned_ids=[p]) for p in visits]
    calls += [ToolCall(tool="visit", arguments={"page": p}, error="masked page") for p in failed]
    response = f"<answer> {prediction} </answer>" if prediction is not None else ""
    return Trace(id=qid, question_seen="?", agent="t", steps=[Step(index=0, tool_calls=calls)],
                 response=response, prediction=prediction, outcome=outcome, stop_reason="answer")


def ep(qid, visits, outcome, prediction, parametric=(), diag=DIAG, **kw):
    return episode_from_sandbox(trace(qid, visits, outcome, prediction, **kw), diag, GOLD, store=CHAIN,
                                parametric=parametric)


FULL, HALF = ["p0", "p1"], ["p0"]


def matrix():
    """sufficient/insufficient × correct/wrong/refused."""
    return [
        ep("A", FULL, Outcome.ANSWERED, "Graham Cornes"),  # sufficient, correct
        ep("B", FULL, Outcome.ANSWERED, "Chad Cornes"),    # sufficient, wrong
        ep("C", FULL, Outcome.ABSTAINED, "I don't know"),  # sufficient, refused
        ep("D", HALF, Outcome.ANSWERED, "the Graham Cornes"),    # insufficient, correct (lucky)
        ep("E", HALF, Outcome.ANSWERED, "Kane"),                 # insufficient, wrong
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
    # correct ∩ S = {A}; answered = {A,B,D,E} (precision over every answer), S = {A,B,C}: 2·1 / (4 + 3)
    assert m["f1_knowledge_utilisation"] == pytest.approx(2 / 7)
    assert m["precision_knowledge_utilisation"] == pytest.approx(1 / 4)
    assert m["recall_knowledge_utilisation"] == pytest.approx(1 / 3)
    # the S-only variant: answered ∩ S = {A,B}: 2·1 / (2 + 3)
    assert m["f1_knowledge_utilisation_on_sufficient"] == pytest.approx(0.4)
    assert m["gen_score"] == pytest.approx((0.4 + 2 / 7) / 2 * 0.5)
    assert m["pass_at_1"] == pytest.approx(2 / 6)  # A and the lucky D
    assert m["search_score"] == pytest.approx(3 / 6)  # 0/1: only the full chains A, B, C connect
    assert m["evidence_coverage"] == pytest.approx((1 + 1 + 1 + 0.5 + 0.5 + 0) / 6)
    assert m["search_only_sufficiency"] == pytest.approx(0.5)


def test_per_cell_classification() -> None:
    cells = {e.id: (e.sufficient, e.correct, e.refused) for e in matrix()}
    assert cells == {"A": (True, True, False), "B": (True, False, False), "C": (True, False, True),
                     "D": (False, True, False), "E": (False, False, False), "F": (False, False, True)}


# ----------------------------------------------------------------------------- the evidence rule


def test_evidence_is_one_item_per_hop_and_excludes_the_answer_page() -> None:
    read_on_p1 = ep("h", FULL, Outcome.ANSWERED, "Graham Cornes")
    # answered from p1 (which states "His father is Graham Cornes.") without opening p2: sufficient
    assert read_on_p1.evidence == ("p0", "p1") and read_on_p1.sufficient and read_on_p1.correct
    only_answer_page = ep("o", ["p2"], Outcome.ANSWERED, "Graham Cornes")
    assert only_answer_page.gathered == frozenset()  # the answer page states no hop of the chain


def test_a_snippet_states_a_hop_only_once_its_page_was_visited() -> None:
    # p1's hop-2 statement is "... His father is Graham Cornes."; before p1 is visited Graham Cornes is locked,
    # so the sandbox's snippet of p1 leaves that sentence out and the scorer, replaying the visits, agrees
    early = ep("s", ["p0"], Outcome.ANSWERED, "Graham Cornes", searches=["p1"], query="Chad Cornes father")
    assert early.gathered == {"p0"} and not early.sufficient
    calls = [ToolCall(tool="visit", arguments={"page": "p0"}, returned_ids=["p0"]),
             ToolCall(tool="visit", arguments={"page": "p1"}, returned_ids=["p1"]),
             ToolCall(tool="search", arguments={"query": "Chad Cornes father"}, returned_ids=["p1"])]
    later = Trace(id="s2", question_seen="?", agent="t", steps=[Step(index=0, tool_calls=calls)],
                  response="<answer> Graham Cornes </answer>", prediction="Graham Cornes",
                  outcome=Outcome.ANSWERED, stop_reason="answer")
    served = [s.text for s in served_pages(later, CHAIN, chain_mask(DIAG, CHAIN)) if s.tool == "search"]
    assert served and "His father is Graham Cornes." in served[0]
    # a hit on the very same page whose snippet does not state the hop gathers nothing: not by page id
    untold = ep("u", ["p0"], Outcome.ANSWERED, "Graham Cornes", searches=["p1"], query="retired 2011")
    assert untold.gathered == {"p0"} and not untold.sufficient


def test_served_text_not_page_id_decides_and_masked_or_failed_calls_never_count() -> None:
    # the fan page x repeats the hop-1 fact in its own words, but the mask withholds that sentence off p0
    fan = ep("f", ["x"], Outcome.ANSWERED, "Graham Cornes")
    assert fan.gathered == frozenset()
    failed = ep("g", [], Outcome.ANSWERED, "x", failed=["p0", "p1"])
    masked = ep("m", [], Outcome.ANSWERED, "x", searches=["p1"], suppressed=["p1"], query="Chad Cornes father")
    assert failed.gathered == masked.gathered == frozenset()


def test_unmasked_environment_serves_full_pages_to_search() -> None:
    t = trace("n", [], Outcome.ANSWERED, "Graham Cornes", searches=["p0", "p1"], query="footballer")
    e = episode_from_sandbox(t, DIAG, GOLD, store=CHAIN, masked=False)
    assert e.sufficient and e.gathered == {"p0", "p1"}
    masked = episode_from_sandbox(t, DIAG, GOLD, store=CHAIN)  # sandbox: the snippets do not state the hops
    assert masked.gathered == frozenset()


def test_a_hop_stated_only_by_a_link_is_gathered_by_visiting_its_page() -> None:
    row = DiagnosticsRow(id="l", source_dataset="hintfree", path=["a", "b", "c", "d"],
                         extra={"mask": ChainMask(["a", "b", "c", "d"], {"b": ["B"], "c": ["Cee"], "d": ["D"]}
                                                  ).to_json()})
    # b's text never says "Cee", so hop b -> c is stated only by b's link to c
    walked = episode_from_sandbox(trace("l", ["a", "b", "c"], Outcome.ANSWERED, "D"), row, ["D"], store=CHAIN)
    assert walked.evidence == ("a", "b", "c") and walked.sufficient and walked.hops == 3
    searched = episode_from_sandbox(trace("l", ["a", "c"], Outcome.ANSWERED, "D", searches=["b"], query="B region"),
                                    row, ["D"], store=CHAIN)
    assert searched.gathered == {"a", "c"}


# ----------------------------------------------------------------------------- F1_GR / GenScore conventions


def test_always_wrong_agent_with_full_evidence_gets_no_credit() -> None:
    wrong = [ep(q, FULL, Outcome.ANSWERED, "Chad Cornes") for q in "xyz"]
    m = factorised_metrics(wrong)
    assert m["knowledge_sufficiency"] == 1.0 and m["pass_at_1"] == 0.0
    assert m["f1_good_refusal"] is None  # no refusal decision to get right: undefined, not 1.0
    assert m["f1_knowledge_utilisation"] == 0.0 and m["gen_score"] == 0.0  # was 0.5 under F1_GR := 1
    right = factorised_metrics([ep(q, FULL, Outcome.ANSWERED, "Graham Cornes") for q in "xyz"])
    assert right["gen_score"] == pytest.approx(1.0)


def test_no_refusals_at_all_is_defined_not_nan() -> None:
    answered_only = [e for e in matrix() if not e.refused]
    m = factorised_metrics(answered_only)
    assert m["f1_good_refusal"] == 0.0  # evidence was absent twice and never refused
    assert m["precision_good_refusal"] is None  # 0/0 is reported as undefined, F1 is not
    all_sufficient = [e for e in answered_only if e.sufficient]
    assert good_refusal_f1(all_sufficient) is None  # nothing to refuse, nothing refused
    for value in factorised_metrics(all_sufficient).values():
        assert not (isinstance(value, float) and math.isnan(value))


def test_refusing_everything_when_evidence_present_scores_zero() -> None:
    refusers = [ep(q, FULL, Outcome.ABSTAINED, "I cannot answer") for q in "xyz"]
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


def test_gathered_ids_for_text_mode_skip_masked_and_failed_calls() -> None:
    t = trace("q", [], Outcome.ANSWERED, "x", searches=["p1", "p2"], suppressed=["p2"], failed=["p1"])
    assert gathered_ids(t) == frozenset()
    assert gathered_ids(t, ("search", "visit")) == {"p1"}  # p2 was masked in that call
    later = trace("q", ["p2"], Outcome.ANSWERED, "x", searches=["p1"], suppressed=["p2"])
    assert gathered_ids(later) == {"p2"}  # masked at first, opened once unlocked


def test_parametric_knowledge_completes_partial_search() -> None:
    mixed = ep("m", HALF, Outcome.ANSWERED, "Graham Cornes", parametric=["p1"])
    assert mixed.sufficient and not mixed.sufficient_by_search and mixed.evidence_coverage == 1.0
    assert mixed.searched_route  # hop 1 served, hop 2 confirmed parametric
    foreign = ep("f", HALF, Outcome.ANSWERED, "Graham Cornes", parametric=["not-in-E"])
    assert not foreign.sufficient and foreign.evidence_coverage == 0.5 and not foreign.searched_route


def test_judge_verdict_overrides_exact_match() -> None:
    t = trace("j", FULL, Outcome.ANSWERED, "Graham Cornes Sr.")
    assert not episode_from_sandbox(t, DIAG, GOLD, store=CHAIN).correct
    assert episode_from_sandbox(t, DIAG, GOLD, store=CHAIN, correct=True).correct
    refused = trace("r", FULL, Outcome.ABSTAINED, "I don't know")
    assert not episode_from_sandbox(refused, DIAG, GOLD, store=CHAIN, correct=True).correct


def test_errors_are_excluded_from_denominators() -> None:
    eps = matrix() + [ep("err", FULL, Outcome.ENDPOINT_ERROR, None)]
    m = factorised_metrics(eps)
    assert m["n"] == 6 and m["n_errors"] == 1
    assert m["gen_score"] == pytest.approx((0.4 + 2 / 7) / 2 * 0.5)


def test_groups_by_hops_and_source() -> None:
    three = DiagnosticsRow(id="t", source_dataset="other", path=["a", "b", "c", "d"], hops=3)
    eps = matrix() + [episode_from_sandbox(trace("T", ["a", "b", "c"], Outcome.ANSWERED, "D"), three, ["D"],
                                           store=CHAIN)]
    out = factorise(eps)
    assert list(out["by_hops"]) == ["2", "3"]
    assert out["by_hops"]["3"]["n"] == 1 and out["by_hops"]["3"]["gen_score"] == pytest.approx(1.0)
    assert out["by_source"]["hintfree"]["gen_score"] == pytest.approx((0.4 + 2 / 7) / 2 * 0.5)
    assert out["n"] == 7 and set(out["overall"]) >= {"f1_good_refusal", "gen_score", "pass_at_1"}


def test_outcome_and_answer_are_the_scorers_extraction() -> None:
    t = trace("q", FULL, Outcome.ANSWERED, "x").model_copy(
        update={"response": "<answer> Chad </answer> then <answer> Graham Cornes </answer>", "prediction": "Chad"})
    e = episode_from_sandbox(t, DIAG, GOLD, store=CHAIN)
    assert e.correct  # the last answer tag is what scores.json scores
    refused = trace("r", HALF, Outcome.ANSWERED, "x").model_copy(update={"response": "<answer> unknown </answer>"})
    assert episode_from_sandbox(refused, DIAG, GOLD, store=CHAIN).refused


def test_question_without_evidence_is_a_clear_error() -> None:
    bare = DiagnosticsRow(id="nq_1", source_dataset="nq")
    with pytest.raises(DataError, match="nq_1.*no evidence chain"):
        ep("nq_1", [], Outcome.ANSWERED, "x", diag=bare)


class MemoryStore(DocumentStore):
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
    assert partial.evidence_coverage == pytest.approx(1 / 3) and not partial.searched_route
    assert both.searched_route


def test_text_mode_without_sidecar_pages_uses_the_answer_alone() -> None:
    row = DiagnosticsRow(id="h1", source_dataset="nq")
    found = episode_from_text(text_trace(["d2"], "wrong"), row, GOLD, STORE)
    assert found.sufficient and not found.correct and found.hops is None
    unknown = factorise([found])["by_hops"]["unknown"]
    assert unknown["f1_knowledge_utilisation"] == 0.0  # evidence present, answered wrongly
    assert unknown["f1_good_refusal"] is None  # nothing to refuse, nothing refused: undefined
    assert unknown["gen_score"] == 0.0  # a wrong agent with the evidence earns nothing


def test_text_mode_unknown_document_names_the_episode() -> None:
    row = DiagnosticsRow(id="h1", source_dataset="nq")
    with pytest.raises(DataError, match="h1.*missing-doc"):
        episode_from_text(text_trace(["missing-doc"], "x"), row, GOLD, STORE)


def test_a_release_without_evidence_chains_needs_the_corpus() -> None:
    from aethersearch.diagnostics.probes import episodes_for_run
    from aethersearch.errors import ConfigError
    from aethersearch.records import EvalRow

    gold = {"h1": EvalRow(id="h1", question="?", answers=GOLD, source_dataset="nq", source_split="dev",
                          source_id=None, source_row_number=1, source_file="nq.jsonl")}
    diagnostics = {"h1": DiagnosticsRow(id="h1", source_dataset="nq")}
    traces = {"h1": text_trace(["d2"], "Graham Cornes")}
    with pytest.raises(ConfigError, match="--corpus"):
        episodes_for_run(traces, diagnostics, gold, environment="search")
    (episode,) = episodes_for_run(traces, diagnostics, gold, environment="search", store=STORE)
    assert episode.sufficient and episode.correct
