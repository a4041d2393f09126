"""BM25 at wiki-18 scale: bm25-maxscore vs bm25s on the same index, per thread, exact.

Run ``.venv/bin/python benchmarks/search_scale.py --passages 1000000`` (``--passages
1000000,5000000`` for several sizes; ``--quick`` = 100k passages, 200 queries).

Corpus (``benchmarks/wiki18_corpus.py``): generated with wiki-18's shape, fitted to the
real Wikipedia text of Wikispeedia's 4,604 articles: a 2-4 word title plus 100 words
(DPR's 100-word split of the 2018 dump), a vocabulary following Wikipedia's
rank-frequency law with a fitted power-law tail (wiki-18 has millions of distinct
words). ``--corpus articles`` (default): passages in runs of one article sharing its
title, words drawn from a stretch of a real article mixed with the global law, the mix
fitted so that words repeat within a passage as often as in real 100-word Wikipedia
passages (printed with the fit). ``--corpus iid``: words drawn independently, no topic
and no locality, so pruning bounds are at their weakest (the conservative setting).
Queries: the real NQ-Open dev and HotpotQA dev questions in ``../shared/data``.

For each size it builds the ``bm25-maxscore`` index in a child process (streaming,
so the corpus is never held in memory; build time and the child's peak RSS are
reported), then, in one process and with the same token ids, times one query at a
time on one thread:

* ours: the MaxScore kernel (``topk_rows``), and end to end (``search``: tokenising,
  ids) for top-3 and top-1000;
* bm25s (numba backend) scoring the very same arrays (its CSC layout) with
  ``retrieve(..., n_threads=0)``.

* candidates, when installed (skipped with the reason printed otherwise), on the same
  generated passages and questions, for corpora up to ``--candidates-max`` passages
  (their builds re-read the corpus): tantivy (Rust, block-max WAND; its analyzer set up
  as ours: the same regex, lower-case, the same stopwords, the English stemmer; but its
  BM25 has k1 fixed at 1.2 and one-byte document lengths) and PISA through
  pyterrier-pisa (C++, MaxScore/block-max; its own tokenizer, Porter2 and our
  stopwords, k1/b as ours). Neither is exact against this index (different k1 or
  tokenisation, quantised lengths); the benchmark reports how often their top-k rows
  differ from ours.

It checks exactness on a sample (ours == exhaustive accumulator, bit for bit) and
reports top-k agreement with bm25s (which adds in float32, so near-ties may swap).
Output: q/s per thread (median of ``--repeats`` passes after one untimed warm-up pass), the ratio ours/bm25s, build
time, peak RSS, index bytes per posting; ``--json`` writes them. Exit status 2 when a
result differs from exhaustive scoring or a build fails, 1 when 21M passages were
measured and a rate is under the issue's 100 q/s per thread. Rates are CPU time
of the process (``time.process_time``: every thread of it, so bm25s's numba threads
count too), which a loaded machine disturbs far less than wall time; wall-clock rates
are printed beside them. The machine is small and shared: run it quiet
(``nice -n 10``) and quote the printed load averages with the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from wiki18_corpus import GeneratedPassages, WordModel, fail, fit_mix

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("AETHER_SHARED_DATA", ROOT.parent / "shared" / "data"))
WIKISPEEDIA = SHARED / "wikispeedia" / "plaintext_articles.tar.gz"
NQ = SHARED / "qa" / "nq_open" / "NQ-open.dev.jsonl"
HOTPOT = SHARED / "qa" / "hotpotqa" / "hotpotqa_dev_questions_and_answers.json"
TARGET_QPS = 100  # issue 16: queries per second per thread at 21M passages, top-3 and top-1000


def load_questions(per_source: int) -> list[str]:
    """NQ-Open dev and HotpotQA dev question text (the first ``per_source`` of each, file order)."""
    for path in (NQ, HOTPOT):
        if not path.is_file():
            fail(f"{path} is missing (set AETHER_SHARED_DATA to the shared data folder)")
    nq = [json.loads(line)["question"] for line in NQ.read_text().splitlines() if line.strip()]
    hotpot = [row["question"] for row in json.loads(HOTPOT.read_text())]
    return nq[:per_source] + hotpot[:per_source]


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _build(source: GeneratedPassages, out: str, queue: Any) -> None:
    from aethersearch.search.bm25_maxscore import BM25MaxScoreConfig, BM25MaxScoreIndex

    n = len(source)
    last = [time.perf_counter()]

    def progress(done: int) -> None:
        if time.perf_counter() - last[0] > 30 or done == n:
            last[0] = time.perf_counter()
            print(f"  tokenised {done:,}/{n:,} passages (peak RSS {_peak_rss_mb():,.0f} MB)", flush=True)

    started = time.perf_counter()
    stats = BM25MaxScoreIndex.build(source, BM25MaxScoreConfig(), Path(out), progress)  # type: ignore[arg-type]
    queue.put({**stats, "build_s": round(time.perf_counter() - started, 1), "build_peak_rss_mb": _peak_rss_mb()})


def _rate(fn: Any, items: list[Any], repeats: int) -> tuple[float, float]:
    """Median queries/s of ``repeats`` passes of ``fn`` over ``items``, one at a time: (CPU time, wall time)."""
    cpu, wall = [], []
    for _ in range(repeats):
        started, clock = time.process_time(), time.perf_counter()
        for item in items:
            fn(item)
        cpu.append(len(items) / max(time.process_time() - started, 1e-9))
        wall.append(len(items) / (time.perf_counter() - clock))
    return statistics.median(cpu), statistics.median(wall)


def _overlap(exact: list[list[int]], other: list[list[int]]) -> dict[str, float]:
    """How a candidate's top-k rows compare with the exact ones: mean overlap, share of queries differing."""
    same = [len(set(a) & set(b)) / max(len(a), 1) for a, b in zip(exact, other, strict=True)]
    return {"mean_overlap": round(float(np.mean(same)), 4),
            "queries_differing": round(float(np.mean([a != b for a, b in zip(exact, other, strict=True)])), 4)}


def tantivy_candidate(n: int, out: Path, source: Any, words: list[str], token_lists: list[list[str]],
                      exact: dict[int, list[list[int]]], repeats: int) -> dict[str, Any]:
    """Build a tantivy index of the same passages (analyzer as ours) and time the same token queries."""
    try:
        import tantivy
    except ImportError:
        return {"skipped": "tantivy is not installed (pip install tantivy)"}
    from aethersearch.search.bm25 import document_text

    analyzer = (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(r"(?u)\b\w\w+\b"))
                .filter(tantivy.Filter.lowercase()).filter(tantivy.Filter.custom_stopword(words))
                .filter(tantivy.Filter.stemmer("english")).build())
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("body", stored=False, tokenizer_name="ours")
    builder.add_unsigned_field("row", stored=True)
    schema = builder.build()
    path = out / "tantivy"
    fresh = not (path / "meta.json").is_file()
    path.mkdir(parents=True, exist_ok=True)
    index = tantivy.Index(schema, path=str(path))
    index.register_tokenizer("ours", analyzer)
    started = time.perf_counter()
    if fresh:
        writer = index.writer(heap_size=512_000_000, num_threads=1)
        for row in range(n):
            writer.add_document(tantivy.Document(body=document_text(source.raw_at(row)), row=row))
        writer.commit()
        writer.wait_merging_threads()
    index.reload()
    build_s = round(time.perf_counter() - started, 1) if fresh else None
    searcher = index.searcher()
    queries = [tantivy.Query.boolean_query([(tantivy.Occur.Should, tantivy.Query.term_query(schema, "body", t))
                                            for t in tokens]) for tokens in token_lists]
    row: dict[str, Any] = {"build_s": build_s, "segments": searcher.num_segments}
    for k, rows in exact.items():
        qps = _rate(lambda q, k=k: searcher.search(q, k, count=False), queries, repeats)
        got = []
        for q in queries[: len(rows)]:
            hits = searcher.search(q, k, count=False).hits
            got.append([int(searcher.doc(address)["row"][0]) for _, address in hits])
        row[f"top{k}"] = {"qps": round(qps[0], 1), "wall_qps": round(qps[1], 1), **_overlap(rows, got)}
    return row


@contextlib.contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """Send file descriptor 2 (native libraries' output too) to ``path`` for the block."""
    sys.stderr.flush()
    saved = os.dup(2)
    with path.open("ab") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def pisa_candidate(n: int, out: Path, source: Any, questions: list[str],
                   exact: dict[int, list[list[int]]], repeats: int) -> dict[str, Any]:
    """Build a PISA index (pyterrier-pisa) of the same passages and time the same questions, one thread."""
    try:
        import pandas as pd
        from pyterrier_pisa import PisaIndex
    except ImportError as error:
        return {"skipped": f"pyterrier-pisa is not usable ({error}; pip install pyterrier-pisa)"}
    from aethersearch.search.bm25 import document_text

    # "lucene" is the same 33-word list as ours (a list is refused at retrieval by pyterrier-pisa 0.4.9)
    index = PisaIndex(str(out / "pisa"), text_field="text", stemmer="porter2", stops="lucene", threads=1)
    started = time.perf_counter()
    fresh = not index.built()
    if fresh:
        index.index({"docno": str(row), "text": document_text(source.raw_at(row))} for row in range(n))
    row: dict[str, Any] = {"build_s": round(time.perf_counter() - started, 1) if fresh else None}
    frame = pd.DataFrame({"qid": [str(i) for i in range(len(questions))], "query": questions})
    for k, rows in exact.items():
        retriever = index.bm25(k1=1.5, b=0.75, num_results=k, threads=1)
        retriever(frame.iloc[:1])  # the first call builds its block-max scoring index
        cpu, wall = [], []
        for _ in range(repeats):  # PISA's own loop over the batch: one thread, no per-query Python
            started, clock = time.process_time(), time.perf_counter()
            result = retriever(frame)
            cpu.append(len(frame) / max(time.process_time() - started, 1e-9))
            wall.append(len(frame) / (time.perf_counter() - clock))
        ranked = result.sort_values(["qid", "rank"]).groupby("qid")["docno"].apply(list).to_dict()
        got = [[int(d) for d in ranked.get(str(i), [])] for i in range(len(rows))]
        row[f"top{k}"] = {"qps": round(statistics.median(cpu), 1), "wall_qps": round(statistics.median(wall), 1),
                          **_overlap(rows, got)}
    return row


def measure(n: int, args: argparse.Namespace, questions: list[str], corpus: Any) -> dict[str, Any]:
    import bm25s

    from aethersearch.search.bm25_maxscore import (
        INDEX_DIR,
        BM25MaxScoreConfig,
        BM25MaxScoreIndex,
    )
    from aethersearch.search.impact_build import BLOCK_FILES, bytes_per_posting, write_blocks
    from aethersearch.search.maxscore import exhaustive_topk

    out = Path(args.keep) / (f"n{n}" if args.corpus == "iid" else f"{args.corpus}-n{n}")
    manifest = out / "build.json"
    if not manifest.is_file():
        out.mkdir(parents=True, exist_ok=True)
        print(f"building {n:,} passages into {out} ...", flush=True)
        queue: Any = multiprocessing.get_context("fork").Queue()
        child = multiprocessing.get_context("fork").Process(
            target=_build, args=(corpus(n), str(out), queue))
        child.start()
        child.join()
        if child.exitcode != 0:
            fail(f"index build of {n:,} passages exited {child.exitcode}")
        manifest.write_text(json.dumps(queue.get()))
    build = json.loads(manifest.read_text())
    if not all((out / INDEX_DIR / name).is_file() for name in BLOCK_FILES):  # cached before some pruning bounds existed
        started = time.perf_counter()
        write_blocks(out / INDEX_DIR, 32_000_000)
        print(f"  added the pruning bounds to the cached index in {time.perf_counter() - started:.1f} s", flush=True)
    build["bytes_per_posting"] = round(bytes_per_posting(out / INDEX_DIR), 3)  # every file now on disk
    index = BM25MaxScoreIndex(out / INDEX_DIR, GeneratedPassages(n, None),  # type: ignore[arg-type]
                              BM25MaxScoreConfig(), "generated", "generated")
    kept = [(q, np.asarray(index.query_token_ids(q), dtype=np.int64)) for q in questions]
    kept = [(q, t) for q, t in kept if len(t)]  # a question with no indexed token has no hits anywhere
    questions = [q for q, _ in kept]
    ids = [t for _, t in kept]
    index.warm_up()
    # One untimed pass maps the index's pages into this process (a server's steady state): the
    # first timed pass would otherwise pay the page faults (counted in CPU time), and only the
    # engine measured first would pay them. bm25s reads the same arrays, so it is warm too.
    started = time.perf_counter()
    for t in ids:
        index.topk_rows(t, max(args.k))
    print(f"n={n:,}: untimed warm-up pass over the {len(ids):,} queries in {time.perf_counter() - started:.1f} s",
          flush=True)
    reference = bm25s.BM25(k1=1.5, b=0.75, method="lucene", backend="numba")
    reference.scores = {"data": index.impacts, "indices": index.docs, "indptr": index.indptr, "num_docs": n}
    reference.vocab_dict = index._vocab
    reference.unique_token_ids_set = set(range(len(index._vocab)))
    reference.nonoccurrence_array = None  # lucene has no score for absent terms
    reference.retrieve([ids[0].tolist()], k=3, show_progress=False, n_threads=0)  # compile
    id_lists = [t.tolist() for t in ids]
    postings = [int((index.indptr[t + 1] - index.indptr[t]).sum()) for t in ids]
    row: dict[str, Any] = {"passages": n, **build, "queries": len(ids),
                           "mean_query_tokens": round(float(np.mean([len(t) for t in ids])), 2),
                           "mean_query_postings": round(float(np.mean(postings)))}
    exact: dict[int, list[list[int]]] = {}
    for k in args.k:
        # exactness on a sample: pruned == exhaustive, bit for bit
        exact[k] = []
        for t in ids[: args.check]:
            got = index.topk_rows(t, k)
            rows, scores = exhaustive_topk(index.indptr, index.docs, index.impacts, t, k)
            if got != list(zip(rows.tolist(), scores.tolist(), strict=True)):
                fail(f"n={n} k={k}: MaxScore differs from exhaustive scoring for token ids {t.tolist()}")
            exact[k].append(rows.tolist())
        agree = []
        for t, mine in zip(id_lists[: args.check], exact[k], strict=True):
            docs, _ = reference.retrieve([t], k=min(k, n), show_progress=False, n_threads=0, return_as="tuple")
            theirs = set(np.asarray(docs)[0].tolist())
            agree.append(len(theirs.intersection(mine)) / max(len(mine), 1))
        ours = _rate(lambda t, k=k: index.topk_rows(t, k), ids, args.repeats)
        ours_e2e = _rate(lambda q, k=k: index.search([q], k), questions, args.repeats)
        theirs = _rate(lambda t, k=k: reference.retrieve([t], k=k, show_progress=False, n_threads=0),
                       id_lists, args.repeats)
        row[f"top{k}"] = {"ours_qps": round(ours[0], 1), "ours_wall_qps": round(ours[1], 1),
                          "ours_end_to_end_qps": round(ours_e2e[0], 1), "bm25s_qps": round(theirs[0], 1),
                          "bm25s_wall_qps": round(theirs[1], 1), "ratio": round(ours[0] / theirs[0], 2),
                          "exact_checked": len(exact[k]), "topk_overlap_with_bm25s": round(float(np.mean(agree)), 4)}
        print(f"n={n:,} top-{k}: ours {ours[0]:,.1f} q/s/thread (CPU time; wall {ours[1]:,.1f}; end to end "
              f"{ours_e2e[0]:,.1f}), bm25s {theirs[0]:,.1f} (wall {theirs[1]:,.1f}), ratio {ours[0] / theirs[0]:.2f}x; "
              f"exact on {len(exact[k])} queries; overlap with bm25s {np.mean(agree):.4f}; load {os.getloadavg()}",
              flush=True)
    row["search_peak_rss_mb"] = _peak_rss_mb()
    print(f"n={n:,}: build {build['build_s']} s, build peak RSS {build['build_peak_rss_mb']:,.0f} MB, "
          f"{build['postings']:,} postings ({row['mean_query_postings']:,} per query on average), "
          f"{build['bytes_per_posting']} bytes/posting, search-process peak RSS {row['search_peak_rss_mb']:,.0f} MB",
          flush=True)
    if n > args.candidates_max:
        print(f"n={n:,}: candidates skipped (more than --candidates-max {args.candidates_max:,} passages)", flush=True)
        return row
    from aethersearch.search.bm25 import Tokenizer

    vocab = index._vocab
    token_lists = [[tok for tok in index._tokenize(q) if tok in vocab] for q in questions]
    stopwords = sorted(Tokenizer(BM25MaxScoreConfig()).stopwords)
    for name, run in (("tantivy", lambda: tantivy_candidate(n, out, corpus(n), stopwords,
                                                            token_lists, exact, args.repeats)),
                      ("pisa", lambda: pisa_candidate(n, out, corpus(n), questions,
                                                      exact, args.repeats))):
        print(f"n={n:,}: {name} ... (its native log: {out / (name + '.log')})", flush=True)
        with _stderr_to(out / f"{name}.log"):  # PISA's C++ progress bars write a line per percent
            result = run()
        row[name] = result
        if "skipped" in result:
            print(f"n={n:,}: {name} skipped: {result['skipped']}", flush=True)
            continue
        for k in args.k:
            got = result[f"top{k}"]
            print(f"n={n:,} top-{k}: {name} {got['qps']:,.1f} q/s/thread (wall {got['wall_qps']:,.1f}), "
                  f"ours/{name} {row[f'top{k}']['ours_qps'] / got['qps']:.2f}x; top-{k} rows differ from exact on "
                  f"{got['queries_differing']:.1%} of {len(exact[k])} queries (mean overlap {got['mean_overlap']:.4f}); "
                  f"build {result['build_s']} s", flush=True)
    row["peak_rss_after_candidates_mb"] = _peak_rss_mb()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--passages", default="1000000", help="comma-separated corpus sizes")
    parser.add_argument("--questions", type=int, default=500, help="questions per source (NQ, HotpotQA)")
    parser.add_argument("--k", default="3,1000")
    parser.add_argument("--vocab", type=int, default=2_000_000, help="distinct words including the fitted tail")
    parser.add_argument("--corpus", choices=("articles", "iid"), default="articles",
                        help="passages in runs of one topical article (fitted to real text), or i.i.d. words")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--check", type=int, default=100, help="queries checked against exhaustive scoring")
    parser.add_argument("--keep", default=str(Path(tempfile.gettempdir()) / "aethersearch-search-scale"),
                        help="where generated indexes are built and reused (not in the repository)")
    parser.add_argument("--candidates-max", type=int, default=1_000_000,
                        help="build and time tantivy/PISA only up to this many passages (their builds re-read the corpus)")
    parser.add_argument("--quick", action="store_true", help="100k passages, 100 questions per source")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    if args.quick:
        args.passages, args.questions = "100000", 100
    args.k = [int(x) for x in args.k.split(",")]
    Path(args.keep).mkdir(parents=True, exist_ok=True)
    questions = load_questions(args.questions)
    print(f"{len(questions)} questions (NQ-Open dev + HotpotQA dev); load: {os.getloadavg()}", flush=True)
    model = WordModel(WIKISPEEDIA, args.vocab)
    mix = 0.0
    if args.corpus == "articles":
        fit = fit_mix(model)
        mix = fit["mix"]
        print(f"articles corpus: a word comes from its article with probability {mix} (fitted: words repeat in a "
              f"passage {fit['burstiness_articles']} times on average where present, real 100-word Wikipedia passages "
              f"{fit['burstiness_real']}, i.i.d. draws {fit['burstiness_iid']}; a passage's words recur in the next "
              f"passage of its article {fit['locality_articles']:.1%} of the time, real {fit['locality_real']:.1%})",
              flush=True)

    def corpus(n: int) -> GeneratedPassages:
        return GeneratedPassages(n, model, args.corpus, mix)

    rows = [measure(int(n), args, questions, corpus) for n in args.passages.split(",")]
    measured_21m = [r for r in rows if r["passages"] >= 21_000_000]
    missed = False
    for r in measured_21m:
        for k in args.k:
            got = r[f"top{k}"]
            met = got["ours_qps"] >= TARGET_QPS
            missed |= not met
            print(f"top-{k}: MEASURED at {r['passages']:,} passages (wiki-18 size): ours {got['ours_qps']:,.1f} "
                  f"q/s/thread, bm25s {got['bm25s_qps']:,.1f}, ratio {got['ratio']:.2f}x; "
                  f"{'meets' if met else 'DOES NOT MEET'} the >= {TARGET_QPS} q/s/thread target", flush=True)
    if len(rows) > 1 and not measured_21m:
        for k in args.k:
            xs = np.array([r["passages"] for r in rows], dtype=np.float64)
            cost = np.array([1.0 / r[f"top{k}"]["ours_qps"] for r in rows])
            their_cost = np.array([1.0 / r[f"top{k}"]["bm25s_qps"] for r in rows])
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
            their_slope, their_icept = np.polyfit(xs, their_cost, 1)
            their_21m = their_icept + their_slope * 21e6
            print(f"top-{k}: EXTRAPOLATED (not measured) to 21M passages, linearly in CPU seconds/query from {sizes}: "
                  f"ours {1.0 / at_21m:,.1f} q/s/thread, bm25s {1.0 / their_21m:,.1f} q/s/thread, "
                  f"ratio {their_21m / at_21m:.2f}x; index ~{index_gib:,.1f} GiB "
                  f"({per[-1]:.1f} postings/passage x {rows[-1]['bytes_per_posting']} bytes)", flush=True)
    print(f"load after: {os.getloadavg()}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    if missed:  # the target, measured at its size and missed: a failure, as the rollout benchmark's
        sys.exit(1)


if __name__ == "__main__":
    main()
