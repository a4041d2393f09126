"""Search benchmark: index build time / peak memory, and in-process vs HTTP-server throughput.

Run ``.venv/bin/python benchmarks/search.py`` (1M generated passages + Wikispeedia) or
``--quick`` (50k passages; Wikispeedia only with ``--wikispeedia``).

For each corpus it measures, side by side in one run and with the same queries:

* store import and BM25 index build time, and the build's peak RSS (the build runs in a
  child process so its peak is not mixed with this process's);
* in-process batched retrieval (``search()`` + fetching ``contents``, what the server does
  per request) in queries/s;
* the real server (``aether serve`` as a separate process on 127.0.0.1, with 1 and 2
  worker processes) under 32 concurrent clients, sending 1 query per request (one
  rollout step) and 16 per request (Search-R1 batches a generation step's queries):
  queries/s and p50/p99 latency per request;
* the ratio server / in-process (target >= 0.8);
* ``--impl h11,fast`` compares uvicorn's pure-Python stack (h11 + asyncio) with
  httptools + uvloop (``uvicorn[standard]``) side by side in the same run.

The load generator is one aiohttp process on uvloop (when installed), so it spends
as little of the shared cores as possible on itself.

``--keep DIR`` keeps the generated corpus and builds so a rerun measures only retrieval.

The machine is small and shared: quote medians of ``--repeats`` runs and note the load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("AETHER_SHARED_DATA", ROOT.parent / "shared" / "data"))
SYLLABLES = "ka vel mor tin sa ren dor li ath quo bra zen fi lo mar ces ul tav ri on gal pe thu vor ny".split()


def generate_corpus(n: int, path: Path, seed: int = 0) -> list[str]:
    """Write ``n`` passages of 30-70 Zipf-distributed fictional words as Search-R1 JSONL; return the vocabulary."""
    import orjson

    rng = np.random.default_rng(seed)
    vocab_size = 50_000
    words = np.array(sorted({"".join(rng.choice(SYLLABLES, size=rng.integers(2, 5))) for _ in range(vocab_size * 2)}
                            )[:vocab_size])
    rng.shuffle(words)
    weights = 1.0 / (np.arange(len(words)) + 2.7) ** 1.07
    lengths = rng.integers(30, 71, size=n)
    flat = rng.choice(len(words), size=int(lengths.sum()), p=weights / weights.sum())
    ends = np.cumsum(lengths)
    with path.open("wb") as handle:
        start = 0
        for i, end in enumerate(ends.tolist()):
            idx = flat[start:end]
            title = " ".join(words[idx[:2]]).title()
            handle.write(orjson.dumps({"id": str(i), "contents": f'"{title}"\n' + " ".join(words[idx[2:]])}) + b"\n")
            start = end
    return [str(w) for w in words]


def _build(corpus: str, fmt: str, out: str, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    from aethersearch.corpus.importers import import_corpus
    from aethersearch.search.index_dir import build_index

    started = time.perf_counter()
    store = import_corpus(fmt, corpus, Path(out) / "store").store
    imported = time.perf_counter() - started
    manifest = build_index(store, "bm25", Path(out) / "bm25").manifest
    queue.put({"import_s": imported, "index_s": manifest.build_stats["seconds"],
               "documents": manifest.corpus_size, "vocabulary": manifest.build_stats["vocabulary"],
               "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})


def build_in_child(corpus: Path, fmt: str, out: Path) -> dict[str, float]:
    """Import + index in a spawned child process; its own peak RSS is what is reported."""
    ctx = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue = ctx.Queue()  # type: ignore[type-arg]
    proc = ctx.Process(target=_build, args=(str(corpus), fmt, str(out), queue))
    proc.start()
    result = queue.get()
    proc.join()
    return result  # type: ignore[no-any-return]


def make_queries(vocab: list[str], n: int, seed: int = 1) -> list[str]:
    """``n`` queries of 2-4 words from the middle of the frequency range (selective-ish, like questions)."""
    rng = np.random.default_rng(seed)
    pool = vocab[50:20_000] if len(vocab) > 20_000 else vocab
    return [" ".join(rng.choice(pool, size=int(rng.integers(2, 5)))) for _ in range(n)]


class InProcess:
    """Batched ``search()`` + contents fetch (the server's per-call work), one thread."""

    def __init__(self, index_dir: Path, queries: list[str], k: int, batch: int) -> None:
        from aethersearch.search.index_dir import open_index
        from aethersearch.search.server import Retriever

        opened = open_index(index_dir)
        self.retriever = Retriever(opened.index, opened.store)
        self.queries, self.k, self.batch = queries, k, batch
        opened.index.warm_up()  # type: ignore[attr-defined]  # numba compile, outside the timing
        self.retriever(queries[:64], k)  # page cache

    def run(self) -> float:
        """Queries/s of one pass over the queries."""
        started = time.perf_counter()
        for i in range(0, len(self.queries), self.batch):
            self.retriever(self.queries[i:i + self.batch], self.k)
        return len(self.queries) / (time.perf_counter() - started)


IMPLS = {"auto": [], "h11": ["--http", "h11", "--loop", "asyncio"], "fast": ["--http", "httptools", "--loop", "uvloop"]}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _hammer(url: str, queries: list[str], k: int, clients: int, per_request: int) -> tuple[float, list[float]]:
    """``clients`` concurrent loops, each posting ``per_request`` queries per request until all are sent.

    The load generator is aiohttp, not httpx: at 32 concurrent connections httpx's own
    connection pool measured ~190 requests/s here (aiohttp ~1,500 against the same
    server), so an httpx load generator would measure the client, not the server.
    """
    import aiohttp
    import orjson

    latencies: list[float] = []
    position = 0
    async with aiohttp.ClientSession(url, connector=aiohttp.TCPConnector(limit=clients)) as session:
        async def worker() -> None:
            nonlocal position
            while position < len(queries):
                chunk = queries[position:position + per_request]
                position += per_request
                started = time.perf_counter()
                async with session.post("/retrieve", data=orjson.dumps(
                        {"queries": chunk, "topk": k, "return_scores": True}),
                        headers={"content-type": "application/json"}) as response:
                    response.raise_for_status()
                    await response.read()
                latencies.append(time.perf_counter() - started)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        elapsed = time.perf_counter() - started
    return len(queries) / elapsed, latencies


class Server:
    """``aether serve`` as a separate process on a free loopback port."""

    def __init__(self, index_dir: Path, extra: list[str]) -> None:
        import httpx

        port = _free_port()
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-m", "aethersearch.cli", "serve", str(index_dir),
                                      "--port", str(port), *extra], stdout=self.log, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.close()
                    self.log.seek(0)
                    raise RuntimeError(f"server {' '.join(extra)} did not start:\n"
                                       f"{self.log.read().decode(errors='replace')[-2000:]}") from None
                time.sleep(0.2)

    def run(self, queries: list[str], k: int, clients: int, per_request: int) -> tuple[float, list[float]]:
        """One load-generator pass; uvloop (when installed) keeps the client's own CPU cost low (measured
        ~15% more requests/s than asyncio's loop against the same server on the 2 shared cores)."""
        try:
            import uvloop
        except ImportError:
            return asyncio.run(_hammer(self.url, queries, k, clients, per_request))
        return uvloop.run(_hammer(self.url, queries, k, clients, per_request))

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)


def bench(name: str, corpus: Path | None, fmt: str, queries: list[str], args: argparse.Namespace, work: Path) -> None:
    out = work / name
    saved = out / "build.json"
    if saved.exists():
        build = json.loads(saved.read_text())
        print(f"\n== {name}: reusing the build in {out} (measured when it was built)")
    else:
        assert corpus is not None
        build = build_in_child(corpus, fmt, out)
        saved.write_text(json.dumps(build))
        print(f"\n== {name}")
    print(f"  {build['documents']:,} documents, vocabulary {build['vocabulary']:,}")
    print(f"  import {build['import_s']:.1f}s   bm25 index build {build['index_s']:.1f}s   "
          f"build peak RSS {build['peak_rss_mb']:.0f} MB")
    index_dir = out / "bm25"
    local = InProcess(index_dir, queries, args.k, args.batch)
    base = [] if args.micro_batch else ["--no-micro-batch"]
    servers: dict[tuple[int, str], Server] = {}
    try:
        for p in args.processes:
            for impl in args.impl:
                servers[p, impl] = Server(index_dir, base + ["--processes", str(p)] + IMPLS[impl])
    except RuntimeError:
        for server in servers.values():  # never leave the already started servers running
            server.close()
        raise
    # Interleave the rounds (in-process, then every server setting) so that the shared
    # machine's changing load hits all sides alike; report medians over rounds.
    local_rates: list[float] = []
    remote: dict[tuple[int, str, int], list[tuple[float, list[float]]]] = {
        (p, impl, n): [] for p in args.processes for impl in args.impl for n in args.per_request}
    try:
        local.run()  # warm the page cache of the memory-mapped index
        for (p, impl, n) in remote:
            servers[p, impl].run(queries[:64], args.k, args.clients, n)  # warm up
        for _ in range(args.repeats):
            local_rates.append(local.run())
            for (p, impl, n), runs in remote.items():
                runs.append(servers[p, impl].run(queries, args.k, args.clients, n))
    finally:
        for server in servers.values():
            server.close()
    local_qps = statistics.median(local_rates)
    print(f"  in-process batched (batch {args.batch}, 1 thread): {local_qps:,.0f} q/s  (rounds: "
          f"{', '.join(f'{r:,.0f}' for r in local_rates)})")
    for (p, impl, n), runs in remote.items():
        rates = [r for r, _ in runs]
        latencies = np.array([lat for _, lats in runs for lat in lats]) * 1000
        qps = statistics.median(rates)
        print(f"  HTTP server ({p} process{'es' if p > 1 else ''}, {impl}), {args.clients} clients x {n} query/request: "
              f"{qps:,.0f} q/s  p50 {np.percentile(latencies, 50):.1f} ms  p99 {np.percentile(latencies, 99):.1f} ms"
              f"  ratio server/in-process {qps / local_qps:.2f} (target >= 0.8)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="50k passages instead of 1M")
    parser.add_argument("--passages", type=int, default=None)
    parser.add_argument("--queries", type=int, default=None)
    parser.add_argument("--wikispeedia", action="store_true", help="also run Wikispeedia in --quick mode")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--batch", type=int, default=256, help="in-process batch size")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--per-request", type=lambda v: [int(x) for x in v.split(",")], default=[1, 16],
                        help="queries per HTTP request, comma-separated (1 = one query per call; 16 = Search-R1-style "
                             "batched calls)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="work folder to keep and reuse builds across runs (default: a temporary folder)")
    parser.add_argument("--no-micro-batch", dest="micro_batch", action="store_false")
    parser.add_argument("--processes", type=lambda v: [int(x) for x in v.split(",")], default=[1, 2],
                        help="server worker processes to compare, comma-separated (aether serve --processes)")
    parser.add_argument("--impl", type=lambda v: v.split(","), default=["auto"],
                        help="uvicorn HTTP/loop implementations to compare, comma-separated: auto (httptools+uvloop "
                             "when installed), h11 (pure-Python h11 + asyncio), fast (httptools + uvloop)")
    args = parser.parse_args()
    unknown = [impl for impl in args.impl if impl not in IMPLS]
    if unknown:
        parser.error(f"unknown --impl {unknown}; choose from {', '.join(IMPLS)}")
    passages = args.passages or (50_000 if args.quick else 1_000_000)
    n_queries = args.queries or (1_000 if args.quick else 3_000)
    print(f"search benchmark: {passages:,} generated passages, {n_queries:,} queries, k={args.k}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (shared machine)")
    with tempfile.TemporaryDirectory(prefix="aether-bench-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        corpus = work / f"generated-{passages}.jsonl"
        vocab_file = work / f"generated-{passages}.vocab.json"
        if vocab_file.exists():
            vocab = json.loads(vocab_file.read_text())
        else:
            started = time.perf_counter()
            vocab = generate_corpus(passages, corpus)
            vocab_file.write_text(json.dumps(vocab))
            print(f"generated corpus in {time.perf_counter() - started:.1f}s")
        bench(f"generated-{passages}", corpus, "jsonl", make_queries(vocab, n_queries), args, work)
        wiki = SHARED / "wikispeedia"
        if (not args.quick or args.wikispeedia) and (wiki / "plaintext_articles.tar.gz").exists():
            wiki_queries = [
                " ".join(q.split()[:4]) for q in (SHARED / "wikispeedia" / "wikispeedia_paths-and-graph" /
                                                  "articles.tsv").read_text().splitlines()
                if q and not q.startswith("#")]
            from urllib.parse import unquote

            wiki_queries = [unquote(q).replace("_", " ") + " history" for q in wiki_queries][:n_queries]
            bench("wikispeedia", wiki, "wikispeedia", wiki_queries, args, work)
        elif not args.quick:
            print(f"(Wikispeedia skipped: {wiki} not found)")


if __name__ == "__main__":
    main()
