"""BM25 at wiki-18 scale: bm25-maxscore vs bm25s on the same index, per thread, exact.

Run ``.venv/bin/python benchmarks/search_scale.py --passages 1000000`` (``--passages
1000000,5000000`` for several sizes; ``--quick`` = 100k passages, 200 queries).

Corpus: generated with wiki-18's shape. Passages are a 2-4 word title plus 100 words
(DPR's 100-word split of the 2018 dump), words drawn i.i.d. from the rank-frequency
distribution of the real Wikipedia text in Wikispeedia's 4,604 articles (14.3M words,
247K distinct), extended past its last rank by a power-law tail fitted on ranks
1,000-50,000 up to ``--vocab`` distinct words (wiki-18 has millions). Real text is
burstier than i.i.d. draws, so per-term document frequencies are somewhat higher
here than in wiki-18 for the same word: a conservative setting for pruning.
Queries: the real NQ-Open dev and HotpotQA dev questions in ``../shared/data``.

For each size it builds the ``bm25-maxscore`` index in a child process (streaming,
so the corpus is never held in memory; build time and the child's peak RSS are
reported), then, in one process and with the same token ids, times one query at a
time on one thread:

* ours: the MaxScore kernel (``search_rows``), and end to end (``search``: tokenising,
  ids) for top-3 and top-1000;
* bm25s (numba backend) scoring the very same arrays (its CSC layout) with
  ``retrieve(..., n_threads=0)``.

It checks exactness on a sample (ours == exhaustive accumulator, bit for bit) and
reports top-k agreement with bm25s (which adds in float32, so near-ties may swap).
Output: q/s per thread (median of ``--repeats`` passes), the ratio ours/bm25s, build
time, peak RSS, index bytes per posting; ``--json`` writes them. The machine is small
and shared: run it quiet and quote ``uptime`` with the figures.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import resource
import statistics
import sys
import tarfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("AETHER_SHARED_DATA", ROOT.parent / "shared" / "data"))
WIKISPEEDIA = SHARED / "wikispeedia" / "plaintext_articles.tar.gz"
NQ = SHARED / "qa" / "nq_open" / "NQ-open.dev.jsonl"
HOTPOT = SHARED / "qa" / "hotpotqa" / "hotpotqa_dev_questions_and_answers.json"
WORD = re.compile(r"(?u)\b\w\w+\b")
BLOCK = 50_000


def _fail(message: str) -> None:
    print(f"FAIL: {message}", file=sys.stderr)
    raise SystemExit(2)


def word_distribution(vocab_size: int, cache: Path | None) -> tuple[list[str], np.ndarray]:
    """Words and probabilities: Wikispeedia's counts, then a fitted power-law tail to ``vocab_size``."""
    if cache is not None and cache.is_file():
        counts: dict[str, int] = json.loads(cache.read_text())
    else:
        if not WIKISPEEDIA.is_file():
            _fail(f"{WIKISPEEDIA} is missing: the corpus is fitted to real Wikipedia text "
                  "(set AETHER_SHARED_DATA to the shared data folder)")
        counter: Counter[str] = Counter()
        with tarfile.open(WIKISPEEDIA) as tar:
            for member in tar:
                handle = tar.extractfile(member) if member.isfile() else None
                if handle is not None:
                    counter.update(WORD.findall(handle.read().decode("utf-8", "replace").lower()))
        counts = dict(counter)
        if cache is not None:
            cache.write_text(json.dumps(counts))
    words = sorted(counts, key=lambda w: (-counts[w], w))
    freq = np.array([counts[w] for w in words], dtype=np.float64)
    ranks = np.arange(1, len(freq) + 1, dtype=np.float64)
    fit = slice(1_000, min(50_000, len(freq)))
    slope, intercept = np.polyfit(np.log(ranks[fit]), np.log(freq[fit]), 1)
    extra = max(vocab_size - len(words), 0)
    tail_ranks = np.arange(len(words) + 1, len(words) + extra + 1, dtype=np.float64)
    tail = np.exp(intercept + slope * np.log(tail_ranks))
    letters = "bcdfghjklmnpqrstvwxz"
    tail_words = []
    for i in range(extra):  # letters only, so the tokenizer keeps them as one token
        code, n = [], i
        while True:
            code.append(letters[n % 20])
            n //= 20
            if not n:
                break
        tail_words.append("zq" + "".join(code))
    probs = np.concatenate([freq, tail])
    print(f"vocabulary: {len(words):,} Wikispeedia words + {extra:,} tail words (Zipf slope {slope:.3f})", flush=True)
    return words + tail_words, probs / probs.sum()


class GeneratedPassages:
    """A read-once document source with the store's ``raw_at``/``id_at``, generated block by block."""

    def __init__(self, n: int, words: list[str], probs: np.ndarray, seed: int = 0) -> None:
        self.n, self.words, self.cdf, self.seed = n, np.array(words, dtype=object), np.cumsum(probs), seed
        self._block = -1
        self._rows: list[dict[str, str]] = []

    def __len__(self) -> int:
        return self.n

    def _make(self, block: int) -> None:
        rng = np.random.default_rng((self.seed, block))
        size = min(BLOCK, self.n - block * BLOCK)
        title_len = rng.integers(2, 5, size=size)
        draws = np.searchsorted(self.cdf, rng.random(int(title_len.sum()) + 100 * size) * self.cdf[-1])
        draws = np.minimum(draws, len(self.words) - 1)
        text = self.words[draws]
        rows, at = [], 0
        for t in title_len.tolist():
            rows.append({"title": " ".join(text[at:at + t]).title(), "text": " ".join(text[at + t:at + t + 100])})
            at += t + 100
        self._rows, self._block = rows, block

    def raw_at(self, row: int) -> dict[str, str]:
        block = row // BLOCK
        if block != self._block:
            self._make(block)
        return self._rows[row - block * BLOCK]

    def id_at(self, row: int) -> str:
        return str(row)


def load_questions(per_source: int) -> list[str]:
    """NQ-Open dev and HotpotQA dev question text (the first ``per_source`` of each, file order)."""
    for path in (NQ, HOTPOT):
        if not path.is_file():
            _fail(f"{path} is missing (set AETHER_SHARED_DATA to the shared data folder)")
    nq = [json.loads(line)["question"] for line in NQ.read_text().splitlines() if line.strip()]
    hotpot = [row["question"] for row in json.loads(HOTPOT.read_text())]
    return nq[:per_source] + hotpot[:per_source]


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _build(n: int, vocab: int, cache: str, out: str, queue: Any) -> None:
    from aethersearch.search.bm25_maxscore import BM25MaxScoreConfig, BM25MaxScoreIndex

    words, probs = word_distribution(vocab, Path(cache))
    source = GeneratedPassages(n, words, probs)
    last = [time.perf_counter()]

    def progress(done: int) -> None:
        if time.perf_counter() - last[0] > 30 or done == n:
            last[0] = time.perf_counter()
            print(f"  tokenised {done:,}/{n:,} passages (peak RSS {_peak_rss_mb():,.0f} MB)", flush=True)

    started = time.perf_counter()
    stats = BM25MaxScoreIndex.build(source, BM25MaxScoreConfig(), Path(out), progress)  # type: ignore[arg-type]
    queue.put({**stats, "build_s": round(time.perf_counter() - started, 1), "build_peak_rss_mb": _peak_rss_mb()})


def _rate(fn: Any, items: list[Any], repeats: int) -> float:
    """Median queries/s of ``repeats`` passes of ``fn`` over ``items``, one at a time."""
    rates = []
    for _ in range(repeats):
        started = time.perf_counter()
        for item in items:
            fn(item)
        rates.append(len(items) / (time.perf_counter() - started))
    return statistics.median(rates)


def measure(n: int, args: argparse.Namespace, questions: list[str]) -> dict[str, Any]:
    import bm25s

    from aethersearch.search.bm25_maxscore import (
        INDEX_DIR,
        BM25MaxScoreConfig,
        BM25MaxScoreIndex,
    )
    from aethersearch.search.maxscore import exhaustive_topk

    out = Path(args.keep) / f"n{n}"
    manifest = out / "build.json"
    if not manifest.is_file():
        out.mkdir(parents=True, exist_ok=True)
        print(f"building {n:,} passages into {out} ...", flush=True)
        queue: Any = multiprocessing.get_context("fork").Queue()
        child = multiprocessing.get_context("fork").Process(
            target=_build, args=(n, args.vocab, str(Path(args.keep) / "wikispeedia_counts.json"), str(out), queue))
        child.start()
        child.join()
        if child.exitcode != 0:
            _fail(f"index build of {n:,} passages exited {child.exitcode}")
        manifest.write_text(json.dumps(queue.get()))
    build = json.loads(manifest.read_text())
    index = BM25MaxScoreIndex(out / INDEX_DIR, GeneratedPassages(n, ["x"], np.ones(1)),  # type: ignore[arg-type]
                              BM25MaxScoreConfig(), "generated", "generated")
    ids = [np.asarray(index.query_token_ids(q), dtype=np.int64) for q in questions]
    ids = [t for t in ids if len(t)]
    index.warm_up()
    reference = bm25s.BM25(k1=1.5, b=0.75, method="lucene", backend="numba")
    reference.scores = {"data": index.impacts, "indices": index.docs, "indptr": index.indptr, "num_docs": n}
    reference.vocab_dict = index._vocab
    reference.unique_token_ids_set = set(range(len(index._vocab)))
    reference.nonoccurrence_array = None  # lucene has no score for absent terms
    reference.retrieve([ids[0].tolist()], k=3, show_progress=False, n_threads=0)  # compile
    id_lists = [t.tolist() for t in ids]
    row: dict[str, Any] = {"passages": n, **build, "queries": len(ids),
                           "mean_query_tokens": round(float(np.mean([len(t) for t in ids])), 2)}
    for k in args.k:
        # exactness on a sample: pruned == exhaustive, bit for bit
        for t in ids[: args.check]:
            got = index.search_rows(t, k)
            rows, scores = exhaustive_topk(index.indptr, index.docs, index.impacts, t, k)
            if got != list(zip(rows.tolist(), scores.tolist(), strict=True)):
                _fail(f"n={n} k={k}: MaxScore differs from exhaustive scoring for token ids {t.tolist()}")
        agree = []
        for t in id_lists[: args.check]:
            mine = [r for r, _ in index.search_rows(t, k)]
            docs, _ = reference.retrieve([t], k=min(k, n), show_progress=False, n_threads=0, return_as="tuple")
            theirs = set(np.asarray(docs)[0].tolist())
            agree.append(len(theirs.intersection(mine)) / max(len(mine), 1))
        ours = _rate(lambda t, k=k: index.search_rows(t, k), ids, args.repeats)
        ours_e2e = _rate(lambda q, k=k: index.search([q], k), questions, args.repeats)
        theirs_rate = _rate(lambda t, k=k: reference.retrieve([t], k=k, show_progress=False, n_threads=0),
                            id_lists, args.repeats)
        row[f"top{k}"] = {"ours_qps": round(ours, 1), "ours_end_to_end_qps": round(ours_e2e, 1),
                          "bm25s_qps": round(theirs_rate, 1), "ratio": round(ours / theirs_rate, 2),
                          "exact_checked": min(args.check, len(ids)),
                          "topk_overlap_with_bm25s": round(float(np.mean(agree)), 4)}
        print(f"n={n:,} top-{k}: ours {ours:,.1f} q/s/thread (end to end {ours_e2e:,.1f}), "
              f"bm25s {theirs_rate:,.1f} q/s/thread, ratio {ours / theirs_rate:.2f}x; "
              f"exact on {min(args.check, len(ids))} queries; overlap with bm25s {np.mean(agree):.4f}", flush=True)
    row["search_peak_rss_mb"] = _peak_rss_mb()
    print(f"n={n:,}: build {build['build_s']} s, build peak RSS {build['build_peak_rss_mb']:,.0f} MB, "
          f"{build['postings']:,} postings, {build['bytes_per_posting']} bytes/posting, "
          f"search-process peak RSS {row['search_peak_rss_mb']:,.0f} MB", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--passages", default="1000000", help="comma-separated corpus sizes")
    parser.add_argument("--questions", type=int, default=500, help="questions per source (NQ, HotpotQA)")
    parser.add_argument("--k", default="3,1000")
    parser.add_argument("--vocab", type=int, default=2_000_000, help="distinct words including the fitted tail")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--check", type=int, default=100, help="queries checked against exhaustive scoring")
    parser.add_argument("--keep", default=str(ROOT / ".bench_search_scale"), help="where indexes are built/reused")
    parser.add_argument("--quick", action="store_true", help="100k passages, 100 questions per source")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    if args.quick:
        args.passages, args.questions = "100000", 100
    args.k = [int(x) for x in args.k.split(",")]
    Path(args.keep).mkdir(parents=True, exist_ok=True)
    questions = load_questions(args.questions)
    print(f"{len(questions)} questions (NQ-Open dev + HotpotQA dev); load: {os.getloadavg()}", flush=True)
    rows = [measure(int(n), args, questions) for n in args.passages.split(",")]
    if len(rows) > 1:
        for k in args.k:
            xs = np.array([r["passages"] for r in rows], dtype=np.float64)
            cost = np.array([1.0 / r[f"top{k}"]["ours_qps"] for r in rows])
            slope, icept = np.polyfit(xs, cost, 1)
            per = np.array([r["postings"] for r in rows], dtype=np.float64) / xs
            at_21m = icept + slope * 21e6
            sizes = ", ".join(f"{int(x):,}" for x in xs)
            index_gib = 21e6 * per[-1] * rows[-1]["bytes_per_posting"] / 2**30
            if slope <= 0 or at_21m <= 0:  # a larger corpus measured faster: load noise, not a trend
                print(f"top-{k}: NO EXTRAPOLATION to 21M: seconds/query did not grow from {sizes} passages "
                      f"(the machine's load varied during the run; rerun it quiet); index ~{index_gib:,.1f} GiB",
                      flush=True)
                continue
            print(f"top-{k}: ours at 21M passages, extrapolated linearly in seconds/query from {sizes}: "
                  f"{1.0 / at_21m:,.1f} q/s/thread; index ~{index_gib:,.1f} GiB", flush=True)
    print(f"load after: {os.getloadavg()}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
