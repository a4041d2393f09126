"""2WikiMultiHopQA dev JSON, with its entity-alias file ``id_aliases.json`` when given.

Citation: Ho, Duong Nguyen, Sugawara and Aizawa, "Constructing A Multi-hop QA
Dataset for Comprehensive Evaluation of Reasoning Steps", COLING 2020
(Alab-NII/2wikimultihop, Apache-2.0). Each row: ``_id, type, question, context,
supporting_facts, evidences, answer`` and ``answer_id`` (the Wikidata id of the
answer entity). ``id_aliases.json`` is JSON lines ``{"Q_id", "aliases",
"demonyms"}``; as in the official ``2wikimultihop_evaluate.py`` the gold set is
``answer`` plus ``aliases[answer_id]`` (demonyms go to diagnostics only).
Evidence triples and supporting facts go to the diagnostics sidecar.
"""

from __future__ import annotations

from pathlib import Path
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
from aethersearch.sources.hotpotqa import context_titles, parse_supporting_facts

__all__ = ["read", "read_aliases"]


def read_aliases(path: Path) -> dict[str, dict[str, list[str]]]:
    """``id_aliases.json`` (JSON lines) -> Q_id -> {aliases, demonyms}."""
    table: dict[str, dict[str, list[str]]] = {}
    for line, value in iter_jsonl(path):
        record = require_mapping(path, line, value)
        qid = require_str(path, line, record, "Q_id")
        entry = {}
        for field in ("aliases", "demonyms"):
            items = record.get(field, [])
            if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
                raise DataError(path, "expected a list of strings", line=line, field=field,
                                fix="use the official id_aliases.json")
            entry[field] = items
        table[qid] = entry
    return table


def _evidences(ctx: SourceContext, row: int, value: Any) -> list[list[str]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(t, list) and all(isinstance(x, str) for x in t)
                                              for t in value):
        raise DataError(ctx.path, "expected a list of [subject, relation, object] triples", line=row,
                        field="evidences", fix="use the official layout")
    return value


def read(ctx: SourceContext, aliases: Path | None = None) -> SourceRows:
    """Read the 2Wiki dev JSON list; ``aliases`` is the path of ``id_aliases.json`` (optional)."""
    alias_table = read_aliases(aliases) if aliases is not None else {}
    rows = require_list(ctx.path, load_json(ctx.path), what="questions")
    candidates = []
    for index, value in enumerate(rows, start=1):
        record = require_mapping(ctx.path, index, value)
        source_id = require_str(ctx.path, index, record, "_id")
        question = require_str(ctx.path, index, record, "question")
        answer = require_str(ctx.path, index, record, "answer")
        answer_id = record.get("answer_id")
        entry = alias_table.get(answer_id, {}) if isinstance(answer_id, str) else {}
        answers = require_answers(ctx.path, index, unique_in_order([answer, *entry.get("aliases", [])]), "answer")
        facts = parse_supporting_facts(ctx, index, record.get("supporting_facts"))
        diagnostics = {
            "question_type": record.get("type"),
            "supporting_facts": facts,
            "supporting_pages": unique_in_order(title for title, _ in facts),
            "extra": {
                "evidences": _evidences(ctx, index, record.get("evidences")),
                "answer_id": answer_id,
                "demonyms": entry.get("demonyms", []),
                "context_titles": context_titles(ctx, index, record.get("context")),
            },
        }
        candidates.append(make_candidate(ctx, index, source_id, question, answers, diagnostics))
    return SourceRows(candidates, len(candidates), {})
