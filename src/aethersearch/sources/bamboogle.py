"""Bamboogle, as the authors' Google-Sheet CSV export or as R1-Searcher's jsonl.

Citation: Press, Zhang, Min, Schmidt, Smith and Lewis, "Measuring and Narrowing
the Compositionality Gap in Language Models", Findings of EMNLP 2023
(ofirpress/self-ask, MIT). CSV layout: header ``Question,Answer`` (FireAct
``data/bamboogle/test.csv``). JSONL layout: ``{"idx", "question", "answer"}``
(RUCAIBox/R1-Searcher ``data/eval_set/bamboogle.jsonl``; the same layout as its
training files ``stage_1.jsonl``/``stage_2.jsonl``). Bamboogle has no official
ids, so ``source_id`` is null; R1-Searcher's ``idx`` goes to diagnostics.

Beware: the FireAct CSV has 13 dates mangled by a spreadsheet ("22-Apr-04");
prefer the jsonl as the answer key.
"""

from __future__ import annotations

import csv
import io

from aethersearch.errors import DataError
from aethersearch.jsonl import iter_jsonl
from aethersearch.sources.base import (
    SourceContext,
    SourceRows,
    make_candidate,
    read_text_lines,
    require_answers,
    require_mapping,
    require_str,
)

__all__ = ["read_csv", "read_jsonl"]


def read_csv(ctx: SourceContext) -> SourceRows:
    """Read the ``Question,Answer`` CSV export (RFC 4180 quoting)."""
    text = "\n".join(read_text_lines(ctx.path))
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None or [h.strip() for h in header[:2]] != ["Question", "Answer"]:
        raise DataError(ctx.path, f"expected header 'Question,Answer', got {header}", line=1, field="Question",
                        fix="use the Bamboogle sheet export with its header row")
    candidates = []
    index = 0
    for cells in reader:
        line = reader.line_num
        if not cells or not any(cell.strip() for cell in cells):
            continue
        index += 1
        if len(cells) < 2:
            raise DataError(ctx.path, f"expected 2 columns, got {len(cells)}", line=line, field="Answer",
                            fix="repair the row")
        record = {"Question": cells[0], "Answer": cells[1]}
        question = require_str(ctx.path, line, record, "Question")
        answers = require_answers(ctx.path, line, require_str(ctx.path, line, record, "Answer"), "Answer")
        candidates.append(make_candidate(ctx, index, None, question, answers))
    return SourceRows(candidates, len(candidates), {})


def read_jsonl(ctx: SourceContext) -> SourceRows:
    """Read ``{"idx", "question", "answer"}`` lines (answer: a string or a list of aliases)."""
    candidates = []
    for index, (line, value) in enumerate(iter_jsonl(ctx.path), start=1):
        record = require_mapping(ctx.path, line, value)
        question = require_str(ctx.path, line, record, "question")
        if "answer" not in record:
            require_str(ctx.path, line, record, "answer")
        answers = require_answers(ctx.path, line, record["answer"], "answer")
        extra = {"idx": record["idx"]} if "idx" in record else {}
        candidates.append(make_candidate(ctx, index, None, question, answers, {"extra": extra}))
    return SourceRows(candidates, len(candidates), {})
