"""Scoring throughput: 1M predictions, against docs/design/conventions.md's ~15 us/prediction/core (plain-Python EM/F1).

Three measurements, side by side in one run:

1. ``reference``: the plain-Python SQuAD-style evaluation docs/design/conventions.md's figure
   describes (EM and F1 each normalising prediction and golds separately);
2. ``score_all``: our fused scorer computing all six metrics (em, subem,
   squad_em, f1, cover_em, popqa_acc) with one normalisation per string;
3. ``score_run``: the whole stage on a 1M-question release, from files to
   ``scores.json``: strict JSONL parsing + validation, the id join, extraction
   outcomes, every metric, per-source/micro/macro 95% bootstrap CIs (1000
   resamples) and the atomic write.

Golds come from real NQ-Open dev answers when ../shared/data is present (else
synthetic), predictions are adversarial variants of them (case, punctuation,
articles, extra words, partial spans, wrong answers). Run:

    .venv/bin/python benchmarks/score.py            # 1,000,000 predictions
    .venv/bin/python benchmarks/score.py --quick    # 20,000, a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import string
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from aethersearch.jsonl import sha256_file, write_jsonl
from aethersearch.scoring.api import score_run
from aethersearch.scoring.metrics import score_all

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("AETHER_SHARED_DATA", ROOT.parent / "shared" / "data"))
SOURCES = ("nq", "triviaqa", "popqa", "hotpotqa", "2wikimultihopqa", "musique", "bamboogle")


def _ref_normalize(s: str) -> str:
    exclude = set(string.punctuation)
    s = s.lower()
    s = "".join(ch for ch in s if ch not in exclude)
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def _ref_f1(prediction: str, gold: str) -> float:
    p, g = _ref_normalize(prediction).split(), _ref_normalize(gold).split()
    same = sum((Counter(p) & Counter(g)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def reference(prediction: str, golds: list[str]) -> tuple[float, float]:
    """Plain SQuAD-style EM and F1 (max over golds), normalising per metric call."""
    em = max(float(_ref_normalize(prediction) == _ref_normalize(g)) for g in golds)
    return em, max(_ref_f1(prediction, g) for g in golds)


def gold_pool() -> list[list[str]]:
    path = SHARED / "qa" / "nq_open" / "NQ-open.dev.jsonl"
    if path.is_file():
        return [json.loads(line)["answer"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rng = random.Random(0)
    words = ["river", "john", "smith", "1972", "paris", "the", "united", "states", "king", "george"]
    return [[" ".join(rng.choices(words, k=rng.randint(1, 4)))] for _ in range(3000)]


def make_cases(n: int, seed: int = 0) -> list[tuple[str, list[str]]]:
    rng = random.Random(seed)
    pool = gold_pool()
    cases = []
    for i in range(n):
        golds = pool[i % len(pool)]
        gold = golds[0]
        pick = rng.random()
        if pick < 0.3:
            pred = gold.upper() + "."
        elif pick < 0.45:
            pred = f"the {gold}"
        elif pick < 0.6:
            pred = f"I think it is {gold}, probably"
        elif pick < 0.75:
            pred = gold.split()[0]
        else:
            pred = pool[(i * 7 + 3) % len(pool)][0]
        cases.append((pred, golds))
    return cases


def timed(fn, repeats: int) -> float:
    """Median CPU seconds of ``fn`` (process time: per core, robust to a loaded shared machine)."""
    runs = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        runs.append(time.process_time() - start)
    return statistics.median(runs)


def write_release_and_run(root: Path, cases: list[tuple[str, list[str]]]) -> tuple[Path, Path]:
    release, run = root / "release", root / "run"
    release.mkdir()
    run.mkdir()
    write_jsonl(release / "eval.jsonl", (
        {"id": f"q{i:07d}", "question": f"question {i}?", "answers": golds,
         "source_dataset": SOURCES[i % len(SOURCES)], "source_split": "dev", "source_id": None,
         "source_row_number": i + 1, "source_file": "bench.jsonl"} for i, (_, golds) in enumerate(cases)))
    write_jsonl(run / "predictions.jsonl", (
        {"id": f"q{i:07d}", "prediction": pred, "outcome": "answered" if i % 50 else "budget"}
        for i, (pred, _) in enumerate(cases)))
    # scoring verifies the gold against the release's checksums (a release as `aether build` writes it)
    (release / "checksums.sha256").write_text(f"{sha256_file(release / 'eval.jsonl')}  eval.jsonl\n")
    return release, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="20,000 predictions instead of 1,000,000")
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=3, help="repeats for the per-prediction timings (median)")
    args = parser.parse_args()
    n = args.n or (20_000 if args.quick else 1_000_000)
    cases = make_cases(n)
    print(f"scoring benchmark: {n:,} predictions, 1 process (other engineers may be loading this 2-core machine)")

    ref_s = timed(lambda: [reference(p, g) for p, g in cases], args.repeats)
    ours_s = timed(lambda: [score_all(p, g) for p, g in cases], args.repeats)
    for (p, g) in cases[:2000]:  # the fused scorer agrees with the reference on what both compute
        want_em, want_f1 = reference(p, g)
        got = score_all(p, g)
        assert got["em"] == want_em and abs(got["f1"] - want_f1) < 1e-12, (p, g)
    ref_us, ours_us = 1e6 * ref_s / n, 1e6 * ours_s / n
    print("times are median CPU time per prediction over --repeats runs")
    print(f"reference EM+F1 (plain Python, SQuAD-style) : median {ref_us:6.2f} us/prediction "
          f"({n / ref_s:,.0f}/s)   speed vs docs/design/conventions.md's ~15 us: {15.0 / ref_us:.2f}x (>1 = faster)")
    print(f"score_all, 6 metrics fused                  : median {ours_us:6.2f} us/prediction "
          f"({n / ours_s:,.0f}/s)   {ref_us / ours_us:.2f}x faster than the reference; vs ~15 us: {15.0 / ours_us:.2f}x")

    with tempfile.TemporaryDirectory(prefix="aether-bench-score-") as tmp:
        release, run = write_release_and_run(Path(tmp), cases)
        start, wall = time.process_time(), time.perf_counter()
        scores = score_run(run, release, resamples=1000)
        total, wall = time.process_time() - start, time.perf_counter() - wall
        size = (run / "scores.json").stat().st_size + (run / "scores_questions.jsonl").stat().st_size
    micro = scores.overall.micro.metrics
    print(f"score_run end to end (files -> scores)     : {total:6.2f} s CPU ({wall:.2f} s wall) = "
          f"{1e6 * total / n:6.2f} us/prediction ({n / total:,.0f}/s per core), outputs {size / 1e6:.1f} MB")
    em, f1 = micro["em"], micro["f1"]
    print(f"  sanity: em={em.mean:.4f} [{em.ci_low:.4f}, {em.ci_high:.4f}] "
          f"f1={f1.mean:.4f}, budget outcomes={scores.outcomes['budget']:,}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
