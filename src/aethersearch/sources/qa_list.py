"""Question/answer JSON lists: ``[{"question": str, "answer": str | [str], ...}, ...]``.

Citation: the complete dev/train question lists republished by
chenyiqun/Agentic-RAG (``data/<dataset>/*_questions_and_answers.json``, derived
from the HF copies of HotpotQA, 2WikiMultiHopQA, MuSiQue and Bamboogle) and
ysymyth/ReAct ``data/hotpot_dev_v1_simplified.json`` (adds ``type``). They keep
the official question order but drop the ids, so ``source_id`` is null unless
an ``id``/``_id`` field is present; ``type`` goes to diagnostics.
"""

from __future__ import annotations

from aethersearch.sources.base import (
    SourceContext,
    SourceRows,
    load_json,
    make_candidate,
    optional_id,
    require_answers,
    require_list,
    require_mapping,
    require_str,
)

__all__ = ["read"]


def read(ctx: SourceContext) -> SourceRows:
    """Read a JSON list of question/answer objects."""
    rows = require_list(ctx.path, load_json(ctx.path), what="question/answer objects")
    candidates = []
    for index, value in enumerate(rows, start=1):
        record = require_mapping(ctx.path, index, value)
        question = require_str(ctx.path, index, record, "question")
        field = "answer" if "answer" in record else "answers" if "answers" in record else "answer"
        if field not in record:
            require_str(ctx.path, index, record, field)
        answers = require_answers(ctx.path, index, record[field], field)
        source_id = optional_id(ctx.path, index, record, "_id" if "_id" in record else "id")
        diagnostics = {"question_type": record["type"]} if isinstance(record.get("type"), str) else {}
        candidates.append(make_candidate(ctx, index, source_id, question, answers, diagnostics))
    return SourceRows(candidates, len(candidates), {})
