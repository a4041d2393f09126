"""TriviaQA, in its official JSON layout and in the DPR/pyserini TSV layout.

Citation: Joshi, Choi, Weld and Zettlemoyer, "TriviaQA: A Large Scale Distantly
Supervised Challenge Dataset for Reading Comprehension", ACL 2017 (Apache-2.0).
Official layout (``unfiltered.nocontext`` / ``unfiltered-web-dev.json``):
``{"Data": [{"Question", "QuestionId", "Answer": {"Aliases", "NormalizedAliases",
"Value", ...}, ...}], "Version", "Split", ...}``.
DPR layout (Karpukhin et al., "Dense Passage Retrieval for Open-Domain Question
Answering", EMNLP 2020; anserini-tools ``topics.dpr.trivia.*.txt``): one
``question<TAB>['alias', ...]`` line per question, no ids.

Answer aliases: the official ``Answer.Aliases`` in published order, with
``Answer.Value`` appended when it is not already one of them (this is exactly
the alias list DPR published). ``NormalizedAliases`` and ``NormalizedValue`` are
lower-cased forms of the same strings; they go to the diagnostics sidecar.
"""

from __future__ import annotations

import ast
import csv
import io

from aethersearch.errors import DataError
from aethersearch.sources.base import (
    SourceContext,
    SourceRows,
    load_json,
    make_candidate,
    read_text_lines,
    require_answers,
    require_list,
    require_mapping,
    require_str,
    unique_in_order,
)

__all__ = ["parse_alias_list", "read_dpr_tsv", "read_official"]


def read_official(ctx: SourceContext) -> SourceRows:
    """Read the official TriviaQA JSON (``Data[]``); a row without ``Answer`` is a DataError."""
    document = load_json(ctx.path)
    if not isinstance(document, dict) or "Data" not in document:
        raise DataError(ctx.path, "expected a JSON object with a 'Data' list (official TriviaQA layout)",
                        field="Data", fix="use format triviaqa_dpr_tsv for the DPR TSV layout")
    rows = require_list(ctx.path, document["Data"], what="questions")
    candidates = []
    for index, value in enumerate(rows, start=1):
        record = require_mapping(ctx.path, index, value, what=f"Data[{index - 1}]")
        question = require_str(ctx.path, index, record, "Question")
        qid = require_str(ctx.path, index, record, "QuestionId")
        answer = record.get("Answer")
        if not isinstance(answer, dict):
            raise DataError(ctx.path, "no Answer object (a test-without-answers file cannot be evaluated)",
                            line=index, field="Answer", fix="use the dev (or train) file with answers")
        aliases = require_answers(ctx.path, index, answer.get("Aliases"), "Answer.Aliases")
        value_text = require_str(ctx.path, index, answer, "Value")
        answers = unique_in_order([*aliases, value_text])
        diagnostics = {"extra": {
            "normalized_aliases": list(answer.get("NormalizedAliases") or []),
            "normalized_value": answer.get("NormalizedValue"),
            "answer_type": answer.get("Type"),
            "question_source": record.get("QuestionSource"),
        }}
        candidates.append(make_candidate(ctx, index, qid, question, answers, diagnostics))
    return SourceRows(candidates, len(candidates), {})


def parse_alias_list(ctx: SourceContext, line: int, literal: str) -> object:
    """A Python list literal of aliases, e.g. ``['Sunset Blvd', "Ol' Blue"]``.

    Fast path, exact by construction: when the literal has no double quote and
    no backslash, every element is a plain single-quoted string without a quote
    inside (``repr`` would have used double quotes or escapes otherwise), so
    splitting on ``', '`` is what ``ast.literal_eval`` returns. Anything else
    goes through ``ast.literal_eval``.
    """
    if literal.startswith("['") and literal.endswith("']") and '"' not in literal and "\\" not in literal:
        return literal[2:-2].split("', '")
    if literal == "[]":
        return []
    try:
        return ast.literal_eval(literal)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise DataError(ctx.path, f"answer list {literal!r:.80} is not a Python list literal",
                        line=line, field="answers", fix="repair the answer list") from None


def read_dpr_tsv(ctx: SourceContext) -> SourceRows:
    """Read ``question<TAB>python-list-of-aliases`` rows (DPR / pyserini topics).

    DPR wrote these with Python's ``csv`` module and a tab delimiter, so a field
    holding a double quote is quoted with doubled quotes; we parse them the same way.
    """
    reader = csv.reader(io.StringIO("\n".join(read_text_lines(ctx.path))), delimiter="\t")
    candidates = []
    index = 0
    for cells in reader:
        line_number = reader.line_num
        if not cells or not any(cell.strip() for cell in cells):
            continue
        index += 1
        if len(cells) != 2 or not cells[0].strip():
            raise DataError(ctx.path, f"expected 'question<TAB>[aliases]', got {len(cells)} field(s)",
                            line=line_number, field="question",
                            fix="each row needs a question, one tab, and a Python list of answers")
        question, literal = cells
        answers = require_answers(ctx.path, line_number, parse_alias_list(ctx, line_number, literal), "answers")
        candidates.append(make_candidate(ctx, index, None, question, answers))
    return SourceRows(candidates, len(candidates), {})
