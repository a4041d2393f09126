"""The LLM chain validator and the parametric screen against the real small model (skips when not installed).

SmolLM2-135M's verdicts are poor; what is checked is the plumbing a weak
model must not break: every judged candidate is recorded, only a first-word
VALID keeps it, anything else is counted under its reason, and the screen
records a prediction per question.
"""

from __future__ import annotations

import pytest

from aethersearch.construct.hintfree import ConstructionConfig, construct_hintfree
from aethersearch.construct.llm_checks import (
    INVALID_REASON,
    UNPARSEABLE_REASON,
    LLMChainValidator,
    parametric_screen,
    parse_verdict,
    screen_counts,
)
from aethersearch.construct.triples import QATriple
from aethersearch.corpus.graph import LinkGraph
from aethersearch.records import Document
from tests.realmodel.conftest import RealServer, real_server  # noqa: F401  (the session fixture)

pytestmark = pytest.mark.realmodel


def _chains() -> tuple[dict[str, Document], LinkGraph, list[QATriple]]:
    docs = [
        Document(id="Muhammad", title="Muhammad", links=["Mecca", "Islam"],
                 text="Muhammad was born in Mecca. Muhammad founded the religion of Islam in Arabia."),
        Document(id="Islam", title="Islam", links=["Mecca", "Muhammad"],
                 text="The holiest city of Islam is Mecca. Islam was founded by Muhammad."),
        Document(id="Mecca", title="Mecca", links=[], text="Mecca is a city in Saudi Arabia."),
        Document(id="Athens", title="Athens", links=["Athena", "Greece"],
                 text="The Parthenon in Athens was dedicated to Athena. Athens is the capital of Greece."),
        Document(id="Greece", title="Greece", links=["Athena", "Athens"],
                 text="The ancient Greeks of Greece worshipped the goddess Athena. Athens is its capital."),
        Document(id="Athena", title="Athena", links=[], text="Athena is a Greek goddess."),
    ]
    triples = [QATriple(id=tid, question=q, answers=[a], subject=s, answer_page=a, relation="seed:test",
                        source_dataset="x", source_split="x", source_id=tid, source_row_number=n, source_file="x")
               for n, (tid, q, s, a) in enumerate([
                   ("q1", "In what city was Muhammad born?", "Muhammad", "Mecca"),
                   ("q2", "To which goddess was the Parthenon in Athens dedicated?", "Athens", "Athena")])]
    return {d.id: d for d in docs}, LinkGraph.from_documents(docs), triples


def test_real_model_verdicts_are_recorded_and_only_a_first_word_valid_passes(real_server: RealServer) -> None:  # noqa: F811
    pages, graph, triples = _chains()
    validator = LLMChainValidator(pages, real_server.url, real_server.model, timeout_s=120)
    result = construct_hintfree(triples, graph, pages, validators=[validator],
                                config=ConstructionConfig(require_grounding=False))
    assert set(validator.records) == {"q1", "q2"}  # both candidates reached the model and were recorded
    kept = {q.triple.id for q in result.questions}
    for tid, record in validator.records.items():
        assert record["verdict"] == {"VALID": "valid", "INVALID": "invalid", None: "unparseable"}[
            parse_verdict(record["reply"])]
        assert (tid in kept) == (record["verdict"] == "valid")
    counts = validator.counts()
    assert result.rejected == {reason: n for reason, n in ((INVALID_REASON, counts["invalid"]),
                                                           (UNPARSEABLE_REASON, counts["unparseable"])) if n}
    # without a judge these mention-only chains are not entailing: they stay in the detour tier
    no_llm = construct_hintfree(triples, graph, pages, validators=[],
                                config=ConstructionConfig(require_grounding=False, keep_detours=True))
    screen = parametric_screen([*no_llm.questions, *no_llm.detours], real_server.url, real_server.model,
                               timeout_s=120)
    assert set(screen) == {"q1", "q2"} and all(s["screened"] and isinstance(s["prediction"], str)
                                               for s in screen.values())
    assert screen_counts(screen)["screened"] == 2
