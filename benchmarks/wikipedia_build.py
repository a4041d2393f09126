"""Wikipedia dump import at scale: pages/s per core, peak RSS and graph bytes per link, on a generated dump.

The dump is generated in the official MediaWiki export format (bz2), with what
costs time in a real one: an infobox template holding links, prose paragraphs
with piped and plain links, ``<ref>`` citations with cite templates, a heading,
a category line and interlanguage links, and redirects (``--redirects`` per
article, 1.6 by default as in English Wikipedia: about 11M redirects for 6.8M
articles; 10% of links go through one). Link degrees follow Wikipedia's shape: the
out-degree of a page is drawn from a discrete power law (Zipf exponent 2.1,
mean about ``--mean-links``) and link targets are drawn by preferential
attachment (page rank r chosen with probability ~ 1/r^0.9), so a few pages
collect most in-links. Text words follow a Zipf law over a fixed vocabulary.

For each size and worker count a fresh process imports the dump exactly as
``aether corpus import wikipedia`` does (pass 1: stream, parse, spool; between
the passes: resolve redirects and links; pass 2: write the page store, fill the
CSR graph) and
reports wall time, CPU time (itself and its workers), peak RSS (the main
process and, separately, the largest worker), and the graph's bytes per link.
pages/s per core = pages / CPU seconds. ``--compare`` first measures the
candidate libraries side by side on the real enwiki excerpt: wikitextparser vs
mwparserfromhell (text per second) and the standard library's pull parser vs
mwxml (pages read per second).

Run: ``python benchmarks/wikipedia_build.py --pages 1000000,2000000 --workers 1`` (two sizes give the
slope of peak RSS beyond the graph; ``--workers 1,2`` adds the two-process parse, ``--compare`` the libraries).
"""

from __future__ import annotations

import argparse
import bz2
import json
import multiprocessing
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple
from xml.sax.saxutils import escape

import numpy as np

FULL_ARTICLES = 6_800_000
FULL_LINKS = 150_000_000
EXCERPT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "wikipedia" / \
    "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"

HEAD = """<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" xml:lang="en">
  <siteinfo>
    <sitename>Wikipedia</sitename>
    <base>https://en.wikipedia.org/wiki/Main_Page</base>
    <case>first-letter</case>
    <namespaces>
      <namespace key="0" case="first-letter" />
      <namespace key="6" case="first-letter">File</namespace>
      <namespace key="10" case="first-letter">Template</namespace>
      <namespace key="14" case="first-letter">Category</namespace>
    </namespaces>
  </siteinfo>
"""


class _Shape(NamedTuple):
    """What every chunk of one generated dump shares: titles, out-degrees, the in-link law, redirects."""

    titles: list[str]
    degree: np.ndarray
    rank_to_page: np.ndarray
    cdf: np.ndarray
    redirect_target: np.ndarray


def _shape(pages: int, mean_links: float, redirects: float, seed: int) -> _Shape:
    rng = np.random.default_rng(seed)
    titles = [f"Topic {i} {VOCABULARY[i % len(VOCABULARY)]}" for i in range(pages)]
    # out-degree: discrete power law (Zipf a=2.1, heavy tail capped at 3,000), scaled to the wanted mean
    degree = np.minimum(rng.zipf(2.1, pages), 3000).astype(np.float64)
    degree = np.maximum(1, np.round(degree * mean_links / degree.mean())).astype(np.int64)
    # in-degree: preferential attachment over a random rank order of pages
    weights = 1.0 / np.arange(1, pages + 1) ** 0.9
    rank_to_page = rng.permutation(pages)
    cdf = np.cumsum(weights / weights.sum())
    redirect_target = rng.integers(0, pages, int(pages * redirects))
    return _Shape(titles, degree, rank_to_page, cdf, redirect_target)


#: the generated text's words, drawn by a Zipf law over their ranks
VOCABULARY = np.array([f"w{i}" for i in range(5000)])
#: words per sentence kind: lead, prose sentence (four links each), reference title, history paragraph
_LEAD, _SENTENCE, _CITE, _HISTORY = 12, 30, 5, 40


#: articles per bz2 stream (and per generator seed): fixed, so the dump does not depend on the processes
CHUNK_ARTICLES = 5_000
#: the dump being generated, set before the pool forks (the workers read it instead of a pickled copy)
_SHAPE: _Shape | None = None


def _chunk(path: Path, start: int, stop: int, seed: int) -> tuple[int, int]:
    """Write articles ``start:stop`` as one bz2 stream; returns (links written, article XML bytes).

    Each chunk draws from its own generator seeded by (seed, start), so chunks can be written in parallel
    and the dump is the same whatever the number of processes."""
    shape = _SHAPE
    assert shape is not None, "generate_dump sets the shape before its pool starts"
    pages = len(shape.titles)
    rng = np.random.default_rng([seed, start])
    n_redirects = len(shape.redirect_target)
    links_written = xml_bytes = 0
    with bz2.open(path, "wb", compresslevel=1) as out:
        for i in range(start, stop):
            degree = int(shape.degree[i])
            targets = shape.rank_to_page[np.minimum(np.searchsorted(shape.cdf, rng.random(degree)), pages - 1)]
            via_redirect = rng.random(degree) < 0.1 if n_redirects else np.zeros(degree, dtype=bool)
            redirect_ids = rng.integers(0, max(n_redirects, 1), degree)
            names = [f"R{r}" if v else shape.titles[t] for t, v, r in zip(targets.tolist(), via_redirect.tolist(),
                                                                           redirect_ids.tolist(), strict=True)]
            links_written += len(names)
            infobox, prose = names[:3], names[3:]
            sentences = max(-(-len(prose) // 4), 1)
            words = VOCABULARY[np.minimum(rng.zipf(1.3, _LEAD + sentences * (_SENTENCE + _CITE) + _HISTORY),
                                          len(VOCABULARY)) - 1].tolist()
            body = ["{{Infobox thing\n" + "".join(f"| field{k} = [[{n}]]\n" for k, n in enumerate(infobox)) + "}}",
                    f"'''{shape.titles[i]}''' is a " + " ".join(words[:_LEAD]) + "."]
            at = _LEAD
            for first in range(0, sentences * 4, 4):
                sentence, cite = words[at:at + _SENTENCE], words[at + _SENTENCE:at + _SENTENCE + _CITE]
                at += _SENTENCE + _CITE
                for k, name in enumerate(prose[first:first + 4]):
                    sentence.insert(3 + 6 * k, f"[[{name}|{VOCABULARY[k]} link]]" if k % 2 else f"[[{name}]]")
                body.append(" ".join(sentence) + ".<ref>{{cite web |url=http://example.org/" + str(i) +
                            " |title=" + " ".join(cite) + "}}</ref>")
            body.append("== History ==\n" + " ".join(words[at:at + _HISTORY]) + ".")
            body.append(f"[[Category:Things {i % 100}]]\n[[fr:Sujet {i}]]\n[[de:Thema {i}]]")
            xml_bytes += out.write(_page(shape.titles[i], 10 + i, "\n\n".join(body)).encode())
    return links_written, xml_bytes


def generate_dump(path: Path, pages: int, *, mean_links: float, redirects: float, seed: int,
                  processes: int = 1) -> dict[str, Any]:
    """Write a bz2 MediaWiki export of ``pages`` articles (+ redirects); returns what was written.

    The file is a *multistream* bz2 (the siteinfo, one stream per chunk of articles, the redirects),
    as Wikipedia publishes its ``pages-articles-multistream`` dumps; chunks are generated by
    ``processes`` processes side by side."""
    global _SHAPE
    shape = _SHAPE = _shape(pages, mean_links, redirects, seed)
    parts = [path.with_name(f"{path.name}.{k}") for k in range(-(-pages // CHUNK_ARTICLES) + 2)]
    with bz2.open(parts[0], "wb", compresslevel=1) as out:
        out.write(HEAD.encode())
    starts = range(0, pages, CHUNK_ARTICLES)
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork")) as pool:
        done = list(pool.map(_chunk, parts[1:-1], starts, [min(s + CHUNK_ARTICLES, pages) for s in starts],
                             [seed] * len(starts)))
    with bz2.open(parts[-1], "wb", compresslevel=1) as out:
        for r, target in enumerate(shape.redirect_target.tolist()):
            out.write(_page(f"R{r}", 10 + pages + r, None, redirect=shape.titles[target]).encode())
        out.write(b"</mediawiki>\n")
    with path.open("wb") as whole:
        for part in parts:
            with part.open("rb") as piece:
                shutil.copyfileobj(piece, whole, 1 << 22)
            part.unlink()
    return {"articles": pages, "redirects": len(shape.redirect_target),
            "links_written": sum(links for links, _ in done), "article_xml_bytes": sum(size for _, size in done),
            "compressed_bytes": path.stat().st_size}


def _page(title: str, number: int, text: str | None, redirect: str | None = None) -> str:
    head = f"  <page>\n    <title>{escape(title)}</title>\n    <ns>0</ns>\n    <id>{number}</id>\n"
    if redirect is not None:
        head += f'    <redirect title="{escape(redirect)}" />\n'
        text = f"#REDIRECT [[{redirect}]]"
    return (head + f"    <revision>\n      <id>{number}0</id>\n      <model>wikitext</model>\n"
            f'      <text xml:space="preserve">{escape(text or "")}</text>\n    </revision>\n  </page>\n')


def node_table_bytes(graph: Any) -> int:
    """The graph's node table: one page id object per node and its pointer (``LinkGraph.ids``), which the
    construction needs with the CSR arrays; each object as CPython's allocator holds it (16-byte blocks)."""
    return int(graph.ids.nbytes) + sum(-(-sys.getsizeof(page) // 16) * 16 for page in graph.ids.tolist())


def run_one(dump: Path, workers: int, store: Path) -> dict[str, Any]:
    """Import ``dump`` here (a fresh process) and report time, CPU, RSS and graph size."""
    from aethersearch.corpus.store import build_store
    from aethersearch.corpus.wikipedia import WikipediaDump

    start, cpu0 = time.perf_counter(), time.process_time()
    reader = WikipediaDump(dump, workers=workers)
    build_store(reader.documents(), store, source=f"wikipedia:{dump.name}", overwrite=True)
    graph = reader.graph()
    wall = time.perf_counter() - start
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (time.process_time() - cpu0) + children.ru_utime + children.ru_stime
    graph_bytes = graph.indptr.nbytes + graph.indices.nbytes
    node_bytes = node_table_bytes(graph)
    return {"workers": workers, "articles": reader.stats.articles, "links": graph.n_edges, "wall_s": wall,
            "cpu_s": cpu, "pages_per_s": reader.stats.articles / wall, "pages_per_cpu_s": reader.stats.articles / cpu,
            "peak_rss_mib": own.ru_maxrss / 1024, "worker_peak_rss_mib": children.ru_maxrss / 1024,
            "graph_bytes_per_link": graph_bytes / max(graph.n_edges, 1), "graph_mib": graph_bytes / 2**20,
            "graph_ids_mib": node_bytes / 2**20}


def compare_libraries(repeat: int = 3) -> None:
    """Parsers and readers side by side on the real excerpt (skipped with a note when it is absent)."""
    if not EXCERPT.exists():
        print(f"compare: {EXCERPT} not found, skipped")
        return
    import mwparserfromhell
    import mwxml
    import wikitextparser

    from aethersearch.corpus.mediawiki import open_dump, read_dump

    pages = [p.text for p in read_dump(EXCERPT) if p.redirect is None and p.namespace == 0]
    size = sum(len(t) for t in pages)
    print(f"compare on the real excerpt: {len(pages)} articles, {size / 1e6:.1f} MB of wikitext (median of {repeat})")
    results: dict[str, float] = {}
    for name, convert in (("wikitextparser plain_text", lambda t: wikitextparser.parse(t).plain_text()),
                          ("mwparserfromhell strip_code", lambda t: mwparserfromhell.parse(t).strip_code())):
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            for text in pages:
                convert(text)
            times.append(time.perf_counter() - t0)
        results[name] = statistics.median(times)
        print(f"  {name:30s} {len(pages) / results[name]:7.1f} pages/s  {size / results[name] / 1e6:5.2f} MB/s")
    ratio = results["mwparserfromhell strip_code"] / results["wikitextparser plain_text"]
    print(f"  wikitextparser is {ratio:.2f}x as fast as mwparserfromhell")
    readers: dict[str, float] = {}
    for name in ("stdlib XMLPullParser (ours)", "mwxml"):
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            if name == "mwxml":
                stream, raw = open_dump(EXCERPT)
                count = sum(1 for page in mwxml.Dump.from_file(stream) for _ in page)
                raw.close()
            else:
                count = sum(1 for _ in read_dump(EXCERPT))
            times.append(time.perf_counter() - t0)
        readers[name] = statistics.median(times)
        print(f"  {name:30s} {count / readers[name]:7.0f} pages/s")
    print(f"  mwxml takes {readers['mwxml'] / readers['stdlib XMLPullParser (ours)']:.2f}x as long")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", default="100000", help="comma-separated article counts")
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    parser.add_argument("--mean-links", type=float, default=FULL_LINKS / FULL_ARTICLES)
    parser.add_argument("--redirects", type=float, default=1.6,
                        help="redirect pages per article (English Wikipedia: about 11M for 6.8M articles)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", type=Path, default=None, help="where dumps and stores go (default: a temp dir)")
    parser.add_argument("--keep-dumps", type=Path, default=None,
                        help="keep generated dumps in this folder and reuse them on the next run")
    parser.add_argument("--generate-processes", type=int, default=os.cpu_count() or 1,
                        help="processes writing the generated dump's chunks (the dump is the same for any number)")
    parser.add_argument("--compare", action="store_true", help="first compare the candidate libraries")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of each --compare measurement")
    parser.add_argument("--run-one", nargs=3, metavar=("DUMP", "WORKERS", "STORE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_one:
        print(json.dumps(run_one(Path(args.run_one[0]), int(args.run_one[1]), Path(args.run_one[2]))))
        return
    if args.compare:
        compare_libraries(args.repeat)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        rows = []
        for pages in (int(p) for p in args.pages.split(",") if p):
            dump = _dump(Path(tmp), args.keep_dumps, pages, args)
            for workers in (int(w) for w in args.workers.split(",") if w):
                out = subprocess.run([sys.executable, __file__, "--run-one", str(dump), str(workers),
                                      str(Path(tmp) / "store")], check=True, capture_output=True, text=True,
                                     env={**os.environ})
                row = {"pages": pages, **json.loads(out.stdout.strip().splitlines()[-1])}
                rows.append(row)
                print(f"  {pages:>9,} pages, {workers} worker(s): {row['wall_s']:7.1f} s wall, "
                      f"{row['pages_per_s']:6.0f} pages/s, {row['pages_per_cpu_s']:6.0f} pages/s per core, "
                      f"peak RSS {row['peak_rss_mib']:6.0f} MiB (largest worker {row['worker_peak_rss_mib']:.0f}), "
                      f"{row['links']:,} links, graph {row['graph_bytes_per_link']:.2f} B/link", flush=True)
        _extrapolate(rows)


def _dump(tmp: Path, keep: Path | None, pages: int, args: argparse.Namespace) -> Path:
    """The generated dump of ``pages`` articles: reused from ``keep`` when a run with the same parameters
    left it there (generating 100k articles takes longer than importing them), else written (and kept)."""
    name = f"gen2-{pages}-s{args.seed}-l{args.mean_links:.3f}-r{args.redirects:.3f}.xml.bz2"
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        if (keep / name).is_file():
            print(f"reusing {keep / name} ({(keep / name).stat().st_size / 2**20:.1f} MiB bz2)", flush=True)
            return keep / name
    dump = (keep or tmp) / name
    part = dump.with_name(f".{name}.part")
    t0 = time.perf_counter()
    made = generate_dump(part, pages, mean_links=args.mean_links, redirects=args.redirects, seed=args.seed,
                         processes=args.generate_processes)
    os.replace(part, dump)
    print(f"generated {pages:,} articles + {made['redirects']:,} redirects, {made['links_written']:,} links, "
          f"{made['article_xml_bytes'] / pages:,.0f} bytes of XML per article, "
          f"{made['compressed_bytes'] / 2**20:.1f} MiB bz2, in {time.perf_counter() - t0:.0f} s", flush=True)
    return dump


def _rss_beyond(row: dict[str, Any], parts: tuple[str, ...]) -> float:
    """A run's peak RSS (MiB) less the named parts of what it built."""
    return float(row["peak_rss_mib"] - sum(row[part] for part in parts))


def _rss_slope(small: dict[str, Any], big: dict[str, Any], parts: tuple[str, ...]) -> float:
    """MiB per article that peak RSS beyond ``parts`` grows between two runs."""
    return (_rss_beyond(big, parts) - _rss_beyond(small, parts)) / float(big["pages"] - small["pages"])


def _extrapolate(rows: list[dict[str, Any]]) -> None:
    single = [r for r in rows if r["workers"] == 1]
    if not single:
        return
    last = max(single, key=lambda r: r["pages"])
    per_core = last["pages_per_cpu_s"]
    graph_mib = (4 * FULL_LINKS + 8 * (FULL_ARTICLES + 1)) / 2**20
    print(f"extrapolation to {FULL_ARTICLES:,} articles / {FULL_LINKS:,} links at {per_core:.0f} pages/s per core "
          f"(pages of the generated size): {FULL_ARTICLES / per_core / 3600:.1f} core-hours; graph "
          f"{graph_mib:,.0f} MiB ({graph_mib * 2**20 / FULL_LINKS:.2f} B/link)")
    if len(single) >= 2:
        small, big = sorted(single, key=lambda r: r["pages"])[0], last
        beyond_csr = _rss_slope(small, big, ("graph_mib",))
        beyond_graph = _rss_slope(small, big, ("graph_mib", "graph_ids_mib"))
        print(f"peak RSS beyond the CSR arrays grows {beyond_csr * 2**20:.0f} bytes per article, beyond the graph "
              f"(CSR and node ids) {beyond_graph * 2**20:.0f}, between {small['pages']:,} and {big['pages']:,}")
        full_graph = graph_mib + big["graph_ids_mib"] * FULL_ARTICLES / big["pages"]
        full = _rss_beyond(big, ("graph_mib", "graph_ids_mib")) + \
            beyond_graph * (FULL_ARTICLES - big["pages"]) + full_graph
        print(f"at {FULL_ARTICLES:,} articles, straight on from {big['pages']:,}: about {full / 1024:.1f} GiB peak "
              f"(the graph {full_graph / 1024:.1f} GiB of it)")
    ratios = {r["pages"]: r for r in rows if r["workers"] == 2}
    for pages, two in ratios.items():
        one = next((r for r in single if r["pages"] == pages), None)
        if one:
            print(f"2 workers vs 1 at {pages:,} pages: {one['wall_s'] / two['wall_s']:.2f}x faster in wall time")


if __name__ == "__main__":
    main()
