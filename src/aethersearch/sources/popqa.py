"""PopQA ``test.tsv``: a header row, then one tab-separated row per question.

Citation: Mallen, Asai, Zhong, Das, Khashabi and Hajishirzi, "When Not to Trust
Language Models: Investigating Effectiveness of Parametric and Non-Parametric
Memories", ACL 2023 (AlexTMallen/adaptive-retrieval, ``data/popQA.tsv`` /
HF ``akariasai/PopQA`` ``test.tsv``). Columns: ``id, subj, prop, obj, subj_id,
prop_id, obj_id, s_aliases, o_aliases, s_uri, o_uri, s_wiki_title,
o_wiki_title, s_pop, o_pop, question, possible_answers``; ``possible_answers``
is a JSON list string. The entity metadata goes to the diagnostics sidecar.
"""

from __future__ import annotations

import csv
import io

import orjson

from aethersearch.errors import DataError
from aethersearch.sources.base import (
    SourceContext,
    SourceRows,
    make_candidate,
    read_text_lines,
    require_answers,
    require_str,
)

__all__ = ["METADATA", "REQUIRED", "read"]

REQUIRED = ("id", "question", "possible_answers")
METADATA = ("subj", "prop", "obj", "s_wiki_title", "o_wiki_title", "s_pop", "o_pop", "s_uri", "o_uri")


def read(ctx: SourceContext) -> SourceRows:
    """Read PopQA's TSV; ``possible_answers`` must parse as a JSON list of strings."""
    lines = read_text_lines(ctx.path)
    if not lines:
        raise DataError(ctx.path, "empty file; expected a header row", line=1, fix="re-download test.tsv")
    header = lines[0].split("\t")
    missing = [name for name in REQUIRED if name not in header]
    if missing:
        raise DataError(ctx.path, f"header lacks columns {missing}; found {header}", line=1, field=missing[0],
                        fix="use the official PopQA test.tsv (with its header row)")
    reader = csv.reader(io.StringIO("\n".join(lines[1:])), delimiter="\t", quoting=csv.QUOTE_NONE)
    candidates = []
    index = 0
    for offset, cells in enumerate(reader, start=2):
        if not cells or not any(cell.strip() for cell in cells):
            continue
        index += 1
        if len(cells) != len(header):
            raise DataError(ctx.path, f"expected {len(header)} tab-separated columns, got {len(cells)}",
                            line=offset, fix="repair the row (a stray tab or newline in a field)")
        record = dict(zip(header, cells, strict=True))
        question = require_str(ctx.path, offset, record, "question")
        source_id = require_str(ctx.path, offset, record, "id")
        try:
            parsed = orjson.loads(record["possible_answers"])
        except orjson.JSONDecodeError:
            raise DataError(ctx.path, f"not a JSON list: {record['possible_answers']!r:.80}", line=offset,
                            field="possible_answers", fix="possible_answers must be a JSON list string") from None
        answers = require_answers(ctx.path, offset, parsed, "possible_answers")
        extra = {name: record[name] for name in METADATA if name in record}
        candidates.append(make_candidate(ctx, index, source_id, question, answers,
                                         {"question_type": record.get("prop"), "extra": extra}))
    return SourceRows(candidates, len(candidates), {})
