"""Dense retrieval at 1M passages x 384 dimensions: our server path vs bare faiss, and three index kinds.

Prints, measured side by side in one run, with faiss searching on ``--threads`` (default 1):

* for **every kind**, q/s per thread of **our server path** (``search.server.Retriever`` over a
  ``FaissIndex``: query -> vector -> ``index.search`` -> store rows -> documents -> wire dicts)
  and of **bare faiss** (``index.search`` on the same vectors) on the same index, passes alternated,
  the ratio ours / bare (goal >= 0.9), twice: one query per call (an agent's single search, where
  our per-query overhead shows most) and ``--batch`` queries per call (the server's regime under
  load: its micro-batcher hands the index every waiting query at once, and a Search-R1 client sends
  a whole turn's queries in one request); and both again with pre-encoded hits (``--wire-rows``,
  ``search.wire``), which splice each hit's JSON in unparsed. On Flat at 1M a search costs hundreds of milliseconds, so
  the ratio there says little; HNSW32 and IVF-PQ answer in about a millisecond;
* Flat vs ``HNSW32`` vs ``IVF4096,PQ64``: recall@10 against Flat on the same queries, bare q/s,
  index bytes, build seconds (training and adding on ``--build-threads``, default every core);
* peak RSS of the process, and the memory of each kind extrapolated to wiki-18's 21M
  passages (bytes per vector x 21,015,324, at 384 and at e5-base's 768 dimensions);
* the 1/5/15-minute load averages when the run starts and ends: the machine is shared, so
  a q/s figure is only as good as the load beside it (both sides of a ratio share it).

Vectors: encoding 1M passages takes hours on two CPU cores, so passages and queries are
seeded synthetic unit vectors drawn around 4,096 Gaussian centres (clustered, as text
embeddings are; uniform random vectors would understate approximate recall). Both sides
skip text encoding (our encoder is replaced by a lookup of the query's precomputed vector);
the encoder's own cost is what ``benchmarks/encoders.py`` measures. The store holds 1M
short synthetic passages. Usage::

    python benchmarks/dense.py [--n 1000000] [--kinds Flat HNSW32 IVF4096,PQ64] [--queries 100]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from aethersearch.corpus.store import build_store
from aethersearch.records import Document
from aethersearch.search.faiss_index import FaissConfig, FaissIndex, _new_index, _train, apply_search_knobs, recall_at_k
from aethersearch.search.server import Retriever
from aethersearch.search.wire import DEFAULT_URL_PREFIX, WireRows, write_wire_rows

WIKI18 = 21_015_324


def clustered(rng: np.random.Generator, centres: np.ndarray, n: int, spread: float = 0.35) -> np.ndarray:
    """``n`` unit vectors, each a random centre plus Gaussian noise."""
    picks = rng.integers(0, len(centres), n)
    out = centres[picks] + spread * rng.standard_normal((n, centres.shape[1]), dtype=np.float32) / np.sqrt(centres.shape[1])
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out.astype(np.float32)


def vectors(n: int, dim: int, queries: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((4096, dim), dtype=np.float32) / np.sqrt(dim)
    base = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 100_000):
        base[start:start + 100_000] = clustered(rng, centres, min(100_000, n - start))
    return base, clustered(rng, centres, queries)


class LookupEncoder:
    """Stands in for the text encoder: the query ``q<i>`` encodes to precomputed vector ``i``."""

    def __init__(self, table: np.ndarray) -> None:
        self.table = table

    def encode(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        if len(texts) == 1:  # a view, as the bare side's ``queries[i:i + 1]`` is: neither side pays for a copy
            row = int(texts[0][1:])
            return self.table[row:row + 1]
        return self.table[[int(t[1:]) for t in texts]]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def per_second(fn: Any, count: int, batch: int) -> float:
    """Queries per second of ``fn(start, stop)`` over ``count`` queries, ``batch`` per call."""
    start = time.perf_counter()
    for first in range(0, count, batch):
        fn(first, min(first + batch, count))
    return count / (time.perf_counter() - start)


def ours_vs_bare(index: Any, store: Any, queries: np.ndarray, passes: int, batch: int,
                 wire_rows: WireRows) -> tuple[float, float, float]:
    """Median q/s of our server path (hits built per request), of it with pre-encoded hits (``--wire-rows``)
    and of bare ``index.search``; ``batch`` queries per call, passes alternated."""
    def server(rows: WireRows | None) -> Retriever:
        return Retriever(FaissIndex(index, LookupEncoder(queries), store, FaissConfig(), "bench", "bench",
                                    gpu_enabled=False, cpu_type=type(index).__name__, wire_rows=rows), store)
    built, encoded = server(None), server(wire_rows)
    names = [f"q{i}" for i in range(len(queries))]
    ours, wired, bare = [], [], []
    for _ in range(passes):  # alternated, so machine noise hits all alike
        bare.append(per_second(lambda a, b: index.search(queries[a:b], 10), len(queries), batch))
        ours.append(per_second(lambda a, b: built([names[a:b]], 10), len(queries), batch))
        wired.append(per_second(lambda a, b: encoded([names[a:b]], 10), len(queries), batch))
    return statistics.median(ours), statistics.median(wired), statistics.median(bare)


def load_text() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--timed-queries", type=int, default=None,
                        help="time q/s on the first N queries (default all); recall always uses all")
    parser.add_argument("--batch", type=int, default=100,
                        help="also time calls of this many queries (a Search-R1 client sends a turn's queries at once)")
    parser.add_argument("--threads", type=int, default=1, help="faiss threads while searching")
    parser.add_argument("--build-threads", type=int, default=os.cpu_count() or 1, help="faiss threads while building")
    parser.add_argument("--kinds", nargs="+", default=["Flat", "HNSW32", "IVF4096,PQ64"], help="Flat first")
    parser.add_argument("--train-size", type=int, default=4096 * 40)
    args = parser.parse_args()
    import faiss

    kinds = args.kinds
    timed = min(args.timed_queries or args.queries, args.queries)
    say = lambda text: print(text, flush=True)  # noqa: E731
    t0 = time.perf_counter()
    base, queries = vectors(args.n, args.dim, args.queries)
    say(f"{args.n:,} x {args.dim} clustered unit vectors + {args.queries} queries in {time.perf_counter() - t0:.1f}s; "
        f"faiss {faiss.__version__}, search on {args.threads} thread(s), build on {args.build_threads}; "
        f"{os.cpu_count()} cores, shared; {load_text()}")
    with tempfile.TemporaryDirectory(prefix="aether-dense-bench-") as tmp:
        t0 = time.perf_counter()
        store = build_store((Document(id=f"p{i}", title=f"Passage {i}", text=f"synthetic passage number {i}")
                             for i in range(args.n)), Path(tmp) / "store")
        say(f"store of {len(store):,} passages in {time.perf_counter() - t0:.1f}s")
        t0 = time.perf_counter()
        (Path(tmp) / "wire").mkdir()
        written = write_wire_rows(store, Path(tmp) / "wire", DEFAULT_URL_PREFIX)
        wire_rows = WireRows(Path(tmp) / "wire", DEFAULT_URL_PREFIX, len(store))
        say(f"pre-encoded hits (--wire-rows) in {time.perf_counter() - t0:.1f}s: {written['bytes'] / 1e6:.1f} MB "
            f"({written['bytes'] / len(store):.0f} B/passage; the store's rows: "
            f"{(Path(tmp) / 'store' / 'documents.jsonl').stat().st_size / len(store):.0f} B)")
        exact_ids = None
        rows = []
        for kind in kinds:
            config = FaissConfig(factory=kind, train_size=args.train_size)
            faiss.omp_set_num_threads(args.build_threads)
            t0 = time.perf_counter()
            index = _new_index(faiss, args.dim, kind)
            _train(faiss, index, base, config)
            for start in range(0, args.n, 100_000):
                index.add(base[start:start + 100_000])
            apply_search_knobs(faiss, index, config)
            build_s = time.perf_counter() - t0
            path = Path(tmp) / "index.faiss"
            faiss.write_index(index, str(path))
            size = path.stat().st_size
            path.unlink()
            faiss.omp_set_num_threads(args.threads)
            _, ids = index.search(queries, 10)
            if exact_ids is None:
                exact_ids = ids
            recall = recall_at_k(exact_ids, ids)
            row = {"kind": kind, "recall@10": round(recall, 4), "bytes": size, "build_s": round(build_s, 1),
                   "gb_21m_384": round(size / args.n * WIKI18 / 1e9, 2)}
            for batch in (1, args.batch):
                ours_qps, wired_qps, bare_qps = ours_vs_bare(index, store, queries[:timed], args.passes, batch,
                                                             wire_rows)
                row[f"batch{batch}"] = {"bare_qps": round(bare_qps, 2), "ours_qps": round(ours_qps, 2),
                                        "ratio": round(ours_qps / bare_qps, 3), "wire_rows_qps": round(wired_qps, 2),
                                        "wire_rows_ratio": round(wired_qps / bare_qps, 3)}
                say(f"{kind}, {batch} quer{'y' if batch == 1 else 'ies'} per call, {args.threads} thread(s), median of "
                    f"{args.passes} alternated passes of {timed}: bare faiss {bare_qps:.2f} q/s; our server path "
                    f"{ours_qps:.2f} q/s, ratio {ours_qps / bare_qps:.3f}; with --wire-rows {wired_qps:.2f} q/s, "
                    f"ratio {wired_qps / bare_qps:.3f} (goal >= 0.9); {load_text()}")
            rows.append(row)
            say(f"{kind}: recall@10 vs Flat {row['recall@10']:.4f}, {size / 1e6:.1f} MB "
                f"({size / args.n:.0f} B/vector), built in {row['build_s']}s; 21M x {args.dim}: {row['gb_21m_384']} GB; "
                f"peak RSS so far {peak_rss_mb():.0f} MB")
            del index
        say("21M extrapolation at e5-base's 768 dimensions: Flat {:.1f} GB (4 B x 768 per vector); HNSW32 adds "
            "{:.1f} GB of links; IVF4096,PQ64 stays about {:.1f} GB (64-byte codes + 8-byte ids)".format(
                WIKI18 * 768 * 4 / 1e9, WIKI18 * 32 * 2 * 4 / 1e9, WIKI18 * 72 / 1e9))
    say(f"peak RSS {peak_rss_mb():.0f} MB; {load_text()}")
    print(*(str(r) for r in rows), sep="\n", file=sys.stderr)


if __name__ == "__main__":
    main()
