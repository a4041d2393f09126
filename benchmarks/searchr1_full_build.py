"""A release of every row of a full-size Search-R1 test parquet: build time and its per-row cost.

Usage: ``.venv/bin/python benchmarks/searchr1_full_build.py [--repeats N] [--scale F]``.
Generates a parquet with Search-R1's official test counts (51,713 rows: nq 3,610,
triviaqa 11,313, popqa 14,267, hotpotqa 7,405, 2wikimultihopqa 12,576, musique
2,417, bamboogle 125; from ``searchr1_stage05_manifest.json``) and distinct
synthetic questions in Search-R1's columns, writes the config with
``write_searchr1_test_config`` and builds. The same build at a tenth of the size
runs side by side, so the ratio of per-row costs says how the build scales.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from time import perf_counter

from aethersearch.curation.build import STAGES, build_from_config
from aethersearch.curation.searchr1_test import write_searchr1_test_config

OFFICIAL = {"nq": 3610, "triviaqa": 11313, "popqa": 14267, "hotpotqa": 7405, "2wikimultihopqa": 12576,
            "musique": 2417, "bamboogle": 125}
WORDS = ("river", "king", "album", "city", "war", "film", "novel", "bridge", "painter", "island", "queen", "team")


def write_parquet(path: Path, scale: float) -> int:
    """A Search-R1-shaped parquet with ``scale`` x the official counts (distinct questions); returns rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = []
    for source, count in OFFICIAL.items():
        for i in range(max(1, round(count * scale))):
            words = " ".join(WORDS[(i // len(WORDS) ** k) % len(WORDS)] for k in range(3))
            question = f"which {words} of {source} number {i} came first"
            rows.append({"id": f"test_{len(rows)}", "question": question, "golden_answers": [f"answer {i}"],
                         "data_source": source, "ability": "fact-reasoning",
                         "prompt": [{"role": "user", "content": question}],
                         "reward_model": {"style": "rule", "ground_truth": {"target": [f"answer {i}"]}},
                         "extra_info": {"split": "test", "index": len(rows)}})
    pq.write_table(pa.Table.from_pylist(rows), path)
    return len(rows)


def timed(work: Path, scale: float, repeats: int) -> tuple[int, list[float], list[dict[str, float]]]:
    parquet = work / f"test_{scale}.parquet"
    n = write_parquet(parquet, scale)
    config = write_searchr1_test_config(parquet, work / f"cfg_{scale}")
    totals, stages = [], []
    for repeat in range(repeats):
        start = perf_counter()
        result = build_from_config(config, work / f"rel_{scale}_{repeat}")
        totals.append(perf_counter() - start)
        stages.append(result.timings)
        assert result.manifest.question_count == n, "every row must be in the release"
    return n, totals, stages


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="size relative to the official 51,713 rows")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small = timed(Path(tmp), args.scale / 10, args.repeats)
        full = timed(Path(tmp), args.scale, args.repeats)
    print(f"searchr1 test release of every row; {args.repeats} repeats, medians "
          f"(CPU {os.cpu_count()} cores, shared with other jobs)")
    for n, totals, stages in (small, full):
        total = statistics.median(totals)
        parts = ", ".join(f"{s} {statistics.median(r[s] for r in stages):.1f}s" for s in STAGES)
        print(f"  {n:>6,} rows: {total:7.1f} s ({1e3 * total / n:.3f} ms/row); {parts}")
    ratio = (statistics.median(full[1]) / full[0]) / (statistics.median(small[1]) / small[0])
    print(f"  per-row cost, full vs a tenth: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
