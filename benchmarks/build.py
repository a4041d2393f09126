"""Full real-data release build time, with its per-stage breakdown.

Usage: ``.venv/bin/python benchmarks/build.py [--repeats N] [--quick]``.
Builds the eval1400 release from ../shared/data (PopQA with a 150 plan, since
only slices of PopQA are public) N times and prints the median seconds of each
stage (read sources, exclusion sets, dedup, select, write, verify) and of the
whole build. ``--quick`` builds the embedded demo instead (no shared data
needed). There is no external reference implementation to compare against;
the stage shares show where the time goes.
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

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("AETHER_SHARED_DATA", ROOT.parent / "shared" / "data"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="build the embedded demo instead of the real data")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.quick:
            from aethersearch.sources.demo import write_demo_sources

            config = write_demo_sources(work / "src")
            label = "demo (140 questions)"
        else:
            if not (SHARED / "SOURCES.json").is_file():
                print(f"real data not found at {SHARED}; run with --quick or set AETHER_SHARED_DATA", file=sys.stderr)
                return 2
            from aethersearch.curation.eval1400 import write_eval1400_config

            config = write_eval1400_config(SHARED, work / "cfg", popqa_plan={"planned": 150})
            label = "eval1400 over ../shared/data"
        runs: list[dict[str, float]] = []
        totals: list[float] = []
        for repeat in range(args.repeats):
            start = perf_counter()
            result = build_from_config(config, work / f"release{repeat}")
            totals.append(perf_counter() - start)
            runs.append(result.timings)
        m = result.manifest
        label += (f" ({m.question_count} questions from {m.isolation['input_rows']} rows; "
                  f"{m.training.union_size} training keys)")
        same = len({(work / f"release{i}" / "eval.jsonl").read_bytes() for i in range(args.repeats)}) == 1
    print(f"build: {label}; {args.repeats} repeats, medians (CPU {os.cpu_count()} cores, shared with other jobs)")
    total = statistics.median(totals)
    for stage in STAGES:
        value = statistics.median(run[stage] for run in runs)
        print(f"  {stage:<15} {value * 1000:9.1f} ms  {100 * value / total:5.1f}%")
    # what no stage timer covers (config parsing, manifest assembly): the breakdown then adds up to the total
    other = statistics.median(t - sum(run.values()) for t, run in zip(totals, runs, strict=True))
    print(f"  {'other':<15} {other * 1000:9.1f} ms  {100 * other / total:5.1f}%")
    print(f"  {'total':<15} {total * 1000:9.1f} ms  (min {min(totals) * 1000:.1f}, max {max(totals) * 1000:.1f})")
    print(f"  byte-identical across repeats: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
