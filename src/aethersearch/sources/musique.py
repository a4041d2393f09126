"""MuSiQue-Ans v1.0 jsonl (answerable questions only).

Citation: Trivedi, Balasubramanian, Khot and Sabharwal, "MuSiQue: Multihop
Questions via Single-hop Question Composition", TACL 2022 (StonyBrookNLP/musique,
CC BY 4.0); official ``musique_ans_v1.0_dev.jsonl``. Each row: ``id, paragraphs,
question, question_decomposition, answer, answer_aliases, answerable``. Gold is
``answer`` plus ``answer_aliases``; rows with ``answerable: false`` are skipped
and counted (the Ans subset has none; the Full subset does). The decomposition
and the supporting paragraph titles go to the diagnostics sidecar. A JSON list of
the same rows (as HippoRAG republished them) is read too.
"""

from __future__ import annotations

from typing import Any

from aethersearch.errors import DataError
from aethersearch.jsonl import iter_jsonl
from aethersearch.sources.base import (
    SourceContext,
    SourceRows,
    load_json,
    make_candidate,
    require_answers,
    require_list,
    require_mapping,
    require_str,
    unique_in_order,
)

__all__ = ["read"]


def _records(ctx: SourceContext) -> list[tuple[int, Any]]:
    with ctx.path.open("rb") as handle:
        head = handle.read(4096).lstrip()
    if head.startswith(b"["):
        return list(enumerate(require_list(ctx.path, load_json(ctx.path), what="questions"), start=1))
    return list(iter_jsonl(ctx.path))


def _supporting_titles(paragraphs: Any) -> list[str]:
    if not isinstance(paragraphs, list):
        return []
    return unique_in_order(p["title"] for p in paragraphs
                           if isinstance(p, dict) and p.get("is_supporting") and isinstance(p.get("title"), str))


def read(ctx: SourceContext) -> SourceRows:
    """Read MuSiQue rows; ``answer_aliases`` must be a list of strings when present."""
    candidates = []
    skipped = 0
    rows_read = 0
    for index, (where, value) in enumerate(_records(ctx), start=1):
        rows_read += 1
        record = require_mapping(ctx.path, where, value)
        if record.get("answerable", True) is False:
            skipped += 1
            continue
        source_id = require_str(ctx.path, where, record, "id")
        question = require_str(ctx.path, where, record, "question")
        answer = require_str(ctx.path, where, record, "answer")
        aliases = record.get("answer_aliases", [])
        if not isinstance(aliases, list):
            raise DataError(ctx.path, "expected a list of strings", line=where, field="answer_aliases",
                            fix="use the official MuSiQue layout")
        answers = require_answers(ctx.path, where, unique_in_order([answer, *aliases]), "answer_aliases")
        decomposition = record.get("question_decomposition") or []
        if not isinstance(decomposition, list) or not all(isinstance(step, dict) for step in decomposition):
            raise DataError(ctx.path, "expected a list of step objects", line=where,
                            field="question_decomposition", fix="use the official MuSiQue layout")
        diagnostics = {
            "question_type": source_id.split("__", 1)[0] if "__" in source_id else None,
            "decomposition": decomposition,
            "supporting_pages": _supporting_titles(record.get("paragraphs")),
        }
        candidates.append(make_candidate(ctx, index, source_id, question, answers, diagnostics))
    return SourceRows(candidates, rows_read, {"unanswerable": skipped} if skipped else {})
