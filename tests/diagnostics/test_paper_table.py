"""WebDetective's own results table, rebuilt as episodes and scored by the real path; Search Score's routes.

Four rows of the paper's table (n = 200; S sufficient, I insufficient, C correct,
r refused, h refused among I, c correct among S). Each row's counts become 200
traces on a two-hop chain; ``episodes_for_run`` + ``factorise`` (what
``aether factorise`` runs) must give the table's F1_GR, F1_KU and GenScore to
its own rounding (0.01 points).
"""

from __future__ import annotations

from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aethersearch.diagnostics.factorised import (
    EpisodeEvidence,
    episode_from_sandbox,
    factorise,
    factorised_metrics,
)
from aethersearch.diagnostics.probes import episodes_for_run
from aethersearch.records import DiagnosticsRow, Document, EvalRow, Outcome
from aethersearch.sandbox.episode import DictStore
from aethersearch.sandbox.mask import ChainMask
from tests.diagnostics.test_factorised import CHAIN, DIAG, FULL, GOLD, HALF, trace


class Row(NamedTuple):
    model: str
    S: int
    I: int  # noqa: E741 - the paper's set name
    C: int
    r: int
    h: int
    c: int
    f1_gr: float
    f1_ku: float
    gen: float


TABLE = (
    Row("o3-Pro", 142, 58, 112, 6, 3, 83, 9.37, 49.40, 20.86),
    Row("Grok-4", 148, 52, 101, 49, 19, 84, 37.63, 56.19, 34.71),
    Row("Doubao-1.6-Flash", 109, 91, 27, 124, 58, 18, 53.95, 19.46, 20.00),
    Row("DeepSeek-R1", 123, 77, 40, 40, 11, 22, 18.81, 15.55, 10.57),
)


def cells(row: Row) -> list[tuple[list[str], Outcome, str]]:
    """One (visits, outcome, prediction) per question: the six cells of sufficiency × correct/wrong/refused."""
    kinds = [
        (row.c, FULL, Outcome.ANSWERED, "Graham Cornes"),           # sufficient, correct
        (row.r - row.h, FULL, Outcome.ABSTAINED, "I don't know"),   # sufficient, refused
        (row.S - row.c - (row.r - row.h), FULL, Outcome.ANSWERED, "Chad Cornes"),  # sufficient, wrong
        (row.h, HALF, Outcome.ABSTAINED, "I don't know"),           # insufficient, refused
        (row.C - row.c, HALF, Outcome.ANSWERED, "Graham Cornes"),   # insufficient, correct (answered blind)
        (row.I - row.h - (row.C - row.c), HALF, Outcome.ANSWERED, "Kane Cornes"),  # insufficient, wrong
    ]
    assert all(count >= 0 for count, *_ in kinds) and sum(k[0] for k in kinds) == 200
    return [(visits, outcome, prediction) for count, visits, outcome, prediction in kinds for _ in range(count)]


@pytest.mark.parametrize("row", TABLE, ids=[r.model for r in TABLE])
def test_the_papers_table_rows_come_out_of_the_scoring_path(row: Row) -> None:
    traces, diagnostics, gold = {}, {}, {}
    for i, (visits, outcome, prediction) in enumerate(cells(row)):
        qid = f"q{i:03d}"
        traces[qid] = trace(qid, visits, outcome, prediction)
        diagnostics[qid] = DIAG.model_copy(update={"id": qid})
        gold[qid] = EvalRow(id=qid, question="Who is the father of Kane Cornes?", answers=GOLD,
                            source_dataset="hintfree", source_split="test", source_id=None,
                            source_row_number=i + 1, source_file="mask.jsonl")
    episodes = episodes_for_run(traces, diagnostics, gold, environment="sandbox", store=CHAIN)
    overall = factorise(episodes)["overall"]
    assert (overall["n"], overall["n_sufficient"], overall["n_correct"], overall["n_refused"],
            overall["n_refused_insufficient"], overall["n_correct_sufficient"]) == (200, row.S, row.C, row.r,
                                                                                     row.h, row.c)
    assert 100 * overall["f1_good_refusal"] == pytest.approx(row.f1_gr, abs=0.01)
    assert 100 * overall["f1_knowledge_utilisation"] == pytest.approx(row.f1_ku, abs=0.01)
    assert 100 * overall["gen_score"] == pytest.approx(row.gen, abs=0.01)
    assert overall["pass_at_1"] == pytest.approx(row.C / 200)
    # the S-only precision variant keeps its own name and gives a higher number than the paper prints
    assert overall["f1_knowledge_utilisation_on_sufficient"] > overall["f1_knowledge_utilisation"]


def synthetic(cell: tuple[bool, str]) -> EpisodeEvidence:
    sufficient, kind = cell
    outcome = Outcome.ABSTAINED if kind == "refused" else Outcome.ANSWERED
    return EpisodeEvidence("q", "s", 2, ("a", "b"), frozenset({"a", "b"} if sufficient else {"a"}), frozenset(),
                           outcome, kind == "correct", sufficient)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from(["correct", "wrong", "refused"])), min_size=1,
                max_size=40))
def test_f1_ku_precision_is_over_every_answer(cells_: list[tuple[bool, str]]) -> None:
    m = factorised_metrics([synthetic(c) for c in cells_])
    answered = sum(kind != "refused" for _, kind in cells_)
    sufficient = sum(s for s, _ in cells_)
    hits = sum(s and kind == "correct" for s, kind in cells_)
    expected = 2 * hits / (answered + sufficient) if answered + sufficient else 0.0
    assert m["f1_knowledge_utilisation"] == pytest.approx(expected)
    # answering blind more often can only lower it: F1_KU never exceeds the S-only variant
    assert m["f1_knowledge_utilisation"] <= m["f1_knowledge_utilisation_on_sufficient"] + 1e-12


# ----------------------------------------------------------------------------- Search Score routes

# chain s -> m -> a; an alternative route s -> alt -> a of the same length is recorded by construction
ROUTES = DictStore([
    Document(id="s", title="Kane Cornes", links=["m", "alt"],
             text="Kane Cornes is a footballer. His brother is Chad Cornes. He trained at Norwood Oval."),
    Document(id="m", title="Chad Cornes", links=["a"], text="Chad Cornes is a footballer. His father is Graham "
                                                           "Cornes."),
    Document(id="alt", title="Norwood Oval", links=["a"],
             text="Norwood Oval is a ground in Adelaide. Its longest-serving coach was Graham Cornes."),
    Document(id="a", title="Graham Cornes", links=[], text="Graham Cornes is a coach."),
])
ROUTE_ROW = DiagnosticsRow(id="q", source_dataset="hintfree", path=["s", "m", "a"], hops=2,
                           alternative_paths=[["s", "alt", "a"]],
                           extra={"mask": ChainMask(["s", "m", "a"], {"m": ["Chad Cornes"],
                                                                      "a": ["Graham Cornes"]}).to_json()})


def route_episode(visits: list[str], parametric: tuple[str, ...] = (), masked: bool = True) -> EpisodeEvidence:
    return episode_from_sandbox(trace("q", visits, Outcome.ANSWERED, "Graham Cornes"), ROUTE_ROW, GOLD,
                                store=ROUTES, masked=masked, parametric=parametric)


def test_a_question_held_only_from_memory_is_sufficient_but_not_searched() -> None:
    memorised = route_episode([], parametric=("s", "m"))
    assert memorised.sufficient and not memorised.searched_route
    m = factorised_metrics([memorised])
    assert m["knowledge_sufficiency"] == 1.0 and m["search_score"] == 0.0  # Search Score below sufficiency
    assert m["evidence_coverage"] == 1.0  # the partial credit cannot tell memory from search
    half = route_episode(["m"], parametric=("s",))  # one hop served, the other confirmed parametric
    assert half.sufficient and half.searched_route


def test_an_alternative_route_counts_for_search_score_not_for_sufficiency() -> None:
    # a plain search environment serves every page in full: the agent reads s, then Norwood Oval
    other_way = route_episode(["s", "alt"], masked=False)
    assert other_way.searched_route and not other_way.sufficient
    assert other_way.gathered == {"s"}  # hop s -> m is on s; hop m -> a was never served
    m = factorised_metrics([other_way])
    assert m["search_score"] == 1.0 and m["knowledge_sufficiency"] == 0.0 and m["evidence_coverage"] == 0.5
    # the reference chain still counts for both
    chain = route_episode(["s", "m"], masked=False)
    assert chain.searched_route and chain.sufficient


def test_the_sandbox_mask_withholds_the_answer_off_its_chain_predecessor() -> None:
    # in the masked sandbox the sentence naming the answer on Norwood Oval is withheld, so that route is unserved
    masked = route_episode(["s", "alt"])
    assert not masked.searched_route and not masked.sufficient


def test_an_unrelated_page_never_completes_a_route() -> None:
    assert not route_episode(["alt"], masked=False).searched_route  # hop s -> alt never served
