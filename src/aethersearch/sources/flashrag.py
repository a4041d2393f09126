"""FlashRAG jsonl: ``{"id", "question", "golden_answers": [...], "metadata": {...}}`` per line.

Citation: Jin, Zhang, Zhu, Dou and Dou, "FlashRAG: A Modular Toolkit for
Efficient Retrieval-Augmented Generation Research", WWW 2025 companion
(RUC-NLPIR/FlashRAG, MIT; ``FlashRAG_datasets/<name>/<split>.jsonl``).
A generic input: any dataset FlashRAG republished. ``metadata`` (PopQA entity
fields, HotpotQA/2Wiki supporting facts and context, MuSiQue decomposition) goes
to the diagnostics sidecar.
"""

from __future__ import annotations

from typing import Any

from aethersearch.jsonl import iter_jsonl
from aethersearch.sources.base import (
    SourceContext,
    SourceRows,
    make_candidate,
    optional_id,
    require_answers,
    require_mapping,
    require_str,
)

__all__ = ["metadata_diagnostics", "read"]


def metadata_diagnostics(metadata: Any) -> dict[str, Any]:
    """Map FlashRAG/Search-R1 ``metadata`` onto the diagnostics fields it carries."""
    if not isinstance(metadata, dict):
        return {}
    diagnostics: dict[str, Any] = {}
    if isinstance(metadata.get("type"), str):
        diagnostics["question_type"] = metadata["type"]
    if isinstance(metadata.get("level"), str):
        diagnostics["level"] = metadata["level"]
    facts = metadata.get("supporting_facts")
    if (isinstance(facts, dict) and isinstance(facts.get("title"), list) and isinstance(facts.get("sent_id"), list)
            and all(isinstance(s, int) and not isinstance(s, bool) for s in facts["sent_id"])):
        # (a malformed sent_id list is not coerced: it stays, untouched, in extra.metadata below)
        pairs = [(str(t), s) for t, s in zip(facts["title"], facts["sent_id"], strict=False)]
        diagnostics["supporting_facts"] = pairs
        diagnostics["supporting_pages"] = list(dict.fromkeys(t for t, _ in pairs))
    steps = metadata.get("question_decomposition")
    if isinstance(steps, list):
        diagnostics["decomposition"] = [step for step in steps if isinstance(step, dict)]
    dropped = {"question_decomposition", "context", "paragraphs"} | ({"supporting_facts"} if "supporting_facts"
                                                                      in diagnostics else set())
    small = {k: v for k, v in metadata.items() if k not in dropped}
    diagnostics["extra"] = {"metadata": small}
    return diagnostics


def read(ctx: SourceContext) -> SourceRows:
    """Read a FlashRAG jsonl file."""
    candidates = []
    for index, (line, value) in enumerate(iter_jsonl(ctx.path), start=1):
        record = require_mapping(ctx.path, line, value)
        source_id = optional_id(ctx.path, line, record, "id")
        question = require_str(ctx.path, line, record, "question")
        if "golden_answers" not in record:
            require_str(ctx.path, line, record, "golden_answers")
        answers = require_answers(ctx.path, line, record["golden_answers"], "golden_answers")
        candidates.append(make_candidate(ctx, index, source_id, question, answers,
                                         metadata_diagnostics(record.get("metadata"))))
    return SourceRows(candidates, len(candidates), {})
