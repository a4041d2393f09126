"""HotpotQA distractor JSON: a list of ``{_id, question, answer, supporting_facts, context, type, level}``.

Citation: Yang, Qi, Zhang, Bengio, Cohen, Salakhutdinov and Manning, "HotpotQA:
A Dataset for Diverse, Explainable Multi-hop Question Answering", EMNLP 2018
(CC BY-SA 4.0); official ``hotpot_dev_distractor_v1.json``.
``supporting_facts`` is ``[[title, sentence_index], ...]`` and ``context``
``[[title, [sentence, ...]], ...]``; the supporting pages and facts, the type and
level go to the diagnostics sidecar (``context`` titles too, not its text).
"""

from __future__ import annotations

from typing import Any

from aethersearch.errors import DataError
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

__all__ = ["context_titles", "parse_supporting_facts", "read"]


def parse_supporting_facts(ctx: SourceContext, row: int, value: Any) -> list[tuple[str, int]]:
    """``[[title, sentence_index], ...]`` -> list of (title, index); anything else is a DataError."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise DataError(ctx.path, "expected a list of [title, sentence_index]", line=row,
                        field="supporting_facts", fix="use the official layout")
    facts = []
    for item in value:
        if (not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str)
                or not isinstance(item[1], int) or isinstance(item[1], bool)):
            raise DataError(ctx.path, f"supporting fact {item!r:.80} is not [title, sentence_index]", line=row,
                            field="supporting_facts", fix="use the official layout")
        facts.append((item[0], item[1]))
    return facts


def context_titles(ctx: SourceContext, row: int, value: Any) -> list[str]:
    """Titles of the ``context`` paragraphs (``[[title, sentences], ...]``)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(p, list) and p and isinstance(p[0], str) for p in value):
        raise DataError(ctx.path, "expected a list of [title, [sentences]]", line=row, field="context",
                        fix="use the official layout")
    return [paragraph[0] for paragraph in value]


def read(ctx: SourceContext) -> SourceRows:
    """Read a HotpotQA distractor-layout JSON list."""
    rows = require_list(ctx.path, load_json(ctx.path), what="questions")
    candidates = []
    for index, value in enumerate(rows, start=1):
        record = require_mapping(ctx.path, index, value)
        source_id = require_str(ctx.path, index, record, "_id")
        question = require_str(ctx.path, index, record, "question")
        answers = require_answers(ctx.path, index, require_str(ctx.path, index, record, "answer"), "answer")
        facts = parse_supporting_facts(ctx, index, record.get("supporting_facts"))
        diagnostics = {
            "question_type": record.get("type"),
            "level": record.get("level"),
            "supporting_facts": facts,
            "supporting_pages": unique_in_order(title for title, _ in facts),
            "extra": {"context_titles": context_titles(ctx, index, record.get("context"))},
        }
        candidates.append(make_candidate(ctx, index, source_id, question, answers, diagnostics))
    return SourceRows(candidates, len(candidates), {})
