"""NQ-Open jsonl: one ``{"question": str, "answer": [str, ...]}`` object per line.

Citation: Kwiatkowski et al., "Natural Questions: a Benchmark for Question
Answering Research", TACL 2019; Lee, Chang and Toutanova, "Latent Retrieval for
Weakly Supervised Open Domain Question Answering", ACL 2019 (the open split).
Official file: google-research-datasets/natural-questions ``nq_open/NQ-open.dev.jsonl``
(CC BY-SA 3.0). NQ-Open rows have no id, so ``source_id`` is null.
"""

from __future__ import annotations

from aethersearch.errors import DataError
from aethersearch.jsonl import iter_jsonl
from aethersearch.sources.base import (
    SourceContext,
    SourceRows,
    make_candidate,
    require_answers,
    require_mapping,
    require_str,
)

__all__ = ["read"]


def read(ctx: SourceContext) -> SourceRows:
    """Read an NQ-Open jsonl file; the answer field must be a list of aliases."""
    candidates = []
    for index, (line, value) in enumerate(iter_jsonl(ctx.path), start=1):
        record = require_mapping(ctx.path, line, value)
        question = require_str(ctx.path, line, record, "question")
        if not isinstance(record.get("answer"), list):
            raise DataError(ctx.path, f"expected a list of answer aliases, got {record.get('answer')!r:.60}",
                            line=line, field="answer", fix="NQ-Open rows are {question, answer: [aliases]}")
        answers = require_answers(ctx.path, line, record["answer"], "answer")
        candidates.append(make_candidate(ctx, index, None, question, answers))
    return SourceRows(candidates, len(candidates), {})
