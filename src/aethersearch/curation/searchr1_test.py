"""The Search-R1 test parquet as a release of its own: every row, under the release contract.

Why: AetherSearch's repository runs its fixed eval, and the EM table in its
README, on Search-R1's merged test parquet (51,713 rows over seven
``data_source`` values; ``PeterJinGo/nq_hotpotqa_train``, test split), the
Eval-1400 card's earlier release. Building it as a release gives those numbers
the same guarantees as ours: checksummed files, a manifest that pins the source
file's sha256, ids bound to the upstream row (``source_id`` is Search-R1's
``id``, ``source_row_number`` its one-based row), verification and replay.

The plan is the file itself: one source per ``data_source``, planned at its row
count, no training-set isolation and no audit (this set is published as it is).
The build's own duplicate removal stays on, so a file with repeated questions
fails with a shortage that names the source, rather than silently shrinking.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from aethersearch.errors import DataError
from aethersearch.jsonl import atomic_write_bytes, sha256_file

__all__ = ["CITATION", "source_counts", "write_searchr1_test_config"]

CITATION = ("Jin et al., \"Search-R1: Training LLMs to Reason and Leverage Search Engines with Reinforcement "
            "Learning\", 2025; merged test parquet of PeterJinGo/nq_hotpotqa_train "
            "(scripts/data_process/qa_search_test_merge.py)")


def source_counts(parquet: Path) -> dict[str, int]:
    """Rows per ``data_source`` of a Search-R1 parquet, in first-seen order."""
    import pyarrow.parquet as pq

    try:
        column = pq.read_table(parquet, columns=["data_source"]).column("data_source").to_pylist()
    except Exception as exc:  # pyarrow raises several unrelated types for a bad or foreign file
        raise DataError(parquet, f"cannot read its data_source column: {exc}",
                        fix="pass Search-R1's processed test parquet (columns id, question, golden_answers, "
                            "data_source, ...)") from None
    counts = Counter(str(value) for value in column)
    if not counts:
        raise DataError(parquet, "the file has no rows", fix="pass Search-R1's processed test parquet")
    return dict(counts)


def write_searchr1_test_config(parquet: Path, out_dir: Path, *, name: str = "searchr1_test") -> Path:
    """Write ``build.yaml`` that makes a release of every row of ``parquet``; returns its path."""
    parquet, out_dir = Path(parquet).resolve(), Path(out_dir)
    if not parquet.is_file():
        raise DataError(parquet, "no such file", fix="pass the path of Search-R1's test parquet")
    counts = source_counts(parquet)
    out_dir.mkdir(parents=True, exist_ok=True)
    sha = sha256_file(parquet)
    sources: list[dict[str, Any]] = [
        {"dataset": source, "format": "searchr1_parquet", "path": parquet.name, "split": "test",
         "planned": count, "options": {"data_source": source}, "source_file": parquet.name, "sha256": sha,
         "citation": CITATION, "license": "as the upstream datasets (see the Search-R1 repository)"}
        for source, count in counts.items()]
    config = {"name": name, "data_root": os.path.relpath(parquet.parent, out_dir.resolve()), "revision": "1.0.0",
              "seed": 42, "planned_per_source": 0, "sources": sources,
              "description": f"Every row of {parquet.name} ({sum(counts.values()):,} rows, "
                             f"{len(counts)} sources), Search-R1's test set as published.",
              "deviations": ["not the Eval-1400 card: the whole Search-R1 test parquet, no sampling, no "
                             "training-set isolation, no audit"]}
    path = out_dir / "build.yaml"
    atomic_write_bytes(path, yaml.safe_dump(config, sort_keys=False).encode())
    return path
