"""Text-mode sufficiency on real HotpotQA rows (official layout, real paragraphs and supporting facts)."""

from __future__ import annotations

import json

import pytest

from aethersearch.diagnostics.factorised import episode_from_text, factorise
from aethersearch.records import (
    DiagnosticsRow,
    Document,
    Outcome,
    Step,
    ToolCall,
    Trace,
)
from tests.conftest import require_shared
from tests.diagnostics.test_factorised import MemoryStore

pytestmark = pytest.mark.realdata


def _rows():
    path = require_shared("train/hotpotqa/hipporag_v1_hotpotqa_train100_official_format.json")
    return json.loads(path.read_text(encoding="utf-8"))


def _case(record):
    docs = [Document(id=f"{record['_id']}/{i}", title=title, text=" ".join(sentences))
            for i, (title, sentences) in enumerate(record["context"])]
    facts = [(title, int(index)) for title, index in record["supporting_facts"]]
    row = DiagnosticsRow(id=record["_id"], source_dataset="hotpotqa", question_type=record["type"],
                         level=record["level"], supporting_facts=facts,
                         supporting_pages=list(dict.fromkeys(t for t, _ in facts)))
    support = {t for t, _ in facts}
    return docs, row, [d.id for d in docs if d.title in support], [d.id for d in docs if d.title not in support]


def _trace(record, ids, prediction):
    call = ToolCall(tool="search", arguments={"query": record["question"]}, returned_ids=ids)
    return Trace(id=record["_id"], question_seen=record["question"], agent="t", prediction=prediction,
                 steps=[Step(index=0, tool_calls=[call])], outcome=Outcome.ANSWERED, stop_reason="answer")


def test_supporting_paragraphs_make_real_questions_sufficient() -> None:
    episodes = []
    for record in _rows()[:40]:
        docs, row, support, distractors = _case(record)
        store = MemoryStore(docs)
        golds = [record["answer"]]
        full = episode_from_text(_trace(record, support, record["answer"]), row, golds, store)
        noise = episode_from_text(_trace(record, distractors[:3], "wrong"), row, golds, store)
        assert full.hops == len(row.supporting_pages) >= 2
        # the supporting paragraphs hold the answer for span answers; yes/no needs the pages only
        assert full.sufficient, (record["_id"], record["answer"], full.evidence, full.gathered)
        assert full.correct and not noise.sufficient and not noise.correct
        episodes += [full, noise]
    out = factorise(episodes)
    assert out["overall"]["knowledge_sufficiency"] == pytest.approx(0.5)
    assert out["overall"]["pass_at_1"] == pytest.approx(0.5)
    # precision over every answer: the wrong answers without the evidence count against F1_KU (2k / (2k + k))
    assert out["overall"]["f1_knowledge_utilisation"] == pytest.approx(2 / 3)
    assert out["overall"]["f1_knowledge_utilisation_on_sufficient"] == 1.0
    assert out["overall"]["f1_good_refusal"] == 0.0  # never refused although evidence was missing half the time
