"""Record AetherSearch's own scorer outputs as the parity fixture (run by hand; needs their source tree).

Usage: python scripts/record_aethersearch_scoring.py THEIR_SRC GOLD_PARQUET OUT.json.gz [COMMIT]

THEIR_SRC is the ``src`` folder of a checkout of GitHub Muradil-mamat-211/AetherSearch
(its commit is read from the checkout and stored in the fixture). Their code is
imported from there, never copied into this repository.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(their_src: str, gold_parquet: str, out: str, commit: str = "") -> None:
    import pyarrow.parquet as pq

    sys.path.insert(0, their_src)
    from agentic_rl.outcome.workers import score_trajectory_outcome  # type: ignore[import-not-found]
    from agentic_rl.runtime import async_eval_worker  # type: ignore[import-not-found]

    from tests.scoring.aethersearch_kinds import ALL_KINDS

    commit = commit or subprocess.run(["git", "-C", their_src, "rev-parse", "HEAD"], capture_output=True,
                                      text=True, check=False).stdout.strip()
    if not commit:
        raise SystemExit("give their commit as the fourth argument (THEIR_SRC is not a git checkout)")
    table = pq.read_table(gold_parquet, columns=["id", "data_source", "golden_answers"]).to_pylist()
    cases, predictions = [], []
    for row in table:
        golds = [str(g) for g in row["golden_answers"]]
        for kind, make in ALL_KINDS.items():
            actions = make(golds)
            outcome = score_trajectory_outcome(actions, golds, data_source=row["data_source"])
            parse = outcome.parse
            cases.append({"id": row["id"], "source": row["data_source"], "golds": golds, "kind": kind,
                          "actions": actions, "r_task": outcome.task_outcome,
                          "format": outcome.format_indicator, "terminal": outcome.terminal_answer_valid,
                          "answer": parse.answer, "error": parse.parser_error_type,
                          "searches": list(parse.search_queries)})
            predictions.append({"domain": row["data_source"], "R_task": outcome.task_outcome,
                                "exact": abs(outcome.task_outcome - 1.0) <= 1e-12,
                                "F_ans": outcome.format_indicator,
                                "terminal_answer_valid": outcome.terminal_answer_valid,
                                "search_count": len(parse.search_queries),
                                "queries": list(parse.search_queries)})
    # their _aggregate reads a module-level ``config`` that does not exist (a NameError as published)
    async_eval_worker.config = {"_eval_physical_gpu": 0}
    aggregate = async_eval_worker._aggregate(predictions, update=0, manifest_sha256="", actor_checksum="",
                                             wall_seconds=0.0)
    keep = ("domain", "count", "f1", "exact", "format_rate", "answer_rate", "no_answer_rate", "avg_search",
            "multi_search_rate", "repeat_query_rate", "max_turn_rate", "query_diversity", "template_similarity")
    payload = {"their_repo": "Muradil-mamat-211/AetherSearch", "their_commit": commit,
               "their_functions": ["agentic_rl.outcome.workers.score_trajectory_outcome",
                                   "agentic_rl.runtime.async_eval_worker._aggregate"],
               "gold_file": Path(gold_parquet).name, "cases": cases,
               "aggregate": [{k: record[k] for k in keep} for record in aggregate]}
    Path(out).write_bytes(gzip.compress(json.dumps(payload, sort_keys=True).encode(), mtime=0))
    print(f"{len(cases)} cases, {len(ALL_KINDS)} kinds, commit {commit}")


if __name__ == "__main__":
    main(*sys.argv[1:5])
