"""Search-R1 processed parquet (verl layout), read with pyarrow.

Citation: Jin, Zeng, Yue, Yoon, Arik, Wang, Zamani and Han, "Search-R1: Training
LLMs to Reason and Leverage Search Engines with Reinforcement Learning", 2025
(PeterJinGo/Search-R1, Apache-2.0; ``scripts/data_process/qa_search_*.py``).
Columns: ``id, question, golden_answers, data_source, prompt, ability,
reward_model, extra_info[, metadata]``. Gold is ``golden_answers``; files written
by other verl pipelines without it carry ``reward_model.ground_truth.target`` or a
plain ``answer`` column, read in that order. ``data_source`` selects one dataset
of a merged file (option ``data_source``). The ``prompt`` column (the rendered
Search-R1 prompt) is never used: the release stores the question as published.
"""

from __future__ import annotations

from typing import Any

import orjson

from aethersearch.errors import DataError
from aethersearch.sources.base import (
    SourceContext,
    SourceRows,
    make_candidate,
    require_answers,
    require_str,
)
from aethersearch.sources.flashrag import metadata_diagnostics

__all__ = ["read"]

_COLUMNS = ("id", "question", "golden_answers", "answer", "reward_model", "data_source", "metadata")


def _gold(ctx: SourceContext, row: int, record: dict[str, Any]) -> list[str]:
    if record.get("golden_answers") is not None:
        return require_answers(ctx.path, row, record["golden_answers"], "golden_answers")
    reward = record.get("reward_model")
    if isinstance(reward, str):
        try:
            reward = orjson.loads(reward)
        except orjson.JSONDecodeError:
            reward = None
    if isinstance(reward, dict) and isinstance(reward.get("ground_truth"), dict):
        target = reward["ground_truth"].get("target")
        if target is not None:
            return require_answers(ctx.path, row, target, "reward_model.ground_truth.target")
    if record.get("answer") is not None:
        return require_answers(ctx.path, row, record["answer"], "answer")
    raise DataError(ctx.path, "no gold: none of golden_answers, reward_model.ground_truth.target, answer",
                    line=row, field="golden_answers", fix="use a Search-R1 processed parquet with gold answers")


def read(ctx: SourceContext, data_source: str | None = None) -> SourceRows:
    """Read a Search-R1 parquet; with ``data_source`` keep only that dataset's rows."""
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(ctx.path)
    except Exception as exc:  # pyarrow raises several unrelated types for a bad file
        raise DataError(ctx.path, f"not a readable parquet file: {exc}", fix="re-download the file") from None
    names = parquet.schema_arrow.names
    if "question" not in names:
        raise DataError(ctx.path, f"no 'question' column; found {names}", field="question",
                        fix="use a Search-R1 processed parquet")
    if data_source is not None and "data_source" not in names:
        raise DataError(ctx.path, "option data_source given but the file has no data_source column",
                        field="data_source", fix="drop the data_source option")
    table = parquet.read(columns=[c for c in _COLUMNS if c in names])
    candidates = []
    skipped = 0
    for index, record in enumerate(table.to_pylist(), start=1):
        if data_source is not None and record.get("data_source") != data_source:
            skipped += 1
            continue
        question = require_str(ctx.path, index, record, "question")
        source_id = record.get("id") if isinstance(record.get("id"), str) else None
        diagnostics = metadata_diagnostics(record.get("metadata"))
        diagnostics.setdefault("extra", {})["data_source"] = record.get("data_source")
        candidates.append(make_candidate(ctx, index, source_id, question, _gold(ctx, index, record), diagnostics))
    return SourceRows(candidates, table.num_rows, {f"data_source != {data_source}": skipped} if skipped else {})
