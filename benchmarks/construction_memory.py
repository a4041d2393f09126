"""Construction memory at scale: peak RSS of the parts of `aether construct wikipedia` that grow with the pages.

A full English dump (6.8M articles, about 11M redirects) must build on a 24 GiB machine. The import's
own peak is measured by ``wikipedia_build.py``; this measures what construction holds after it, on the
same generated dumps (``--redirects 1.6`` by default, as English Wikipedia), in a fresh process per size:

1. ``read_wikipedia_pages``: the import into a page store, the graph, the redirects as aliases;
2. the titles of every page (``PageTexts.titles``);
3. ``extract_facts`` over every page (streamed), then the typed graph;
4. the real seed questions (``--seeds``, ``../shared/data``) read and resolved (``resolve_seeds``, which
   builds ``TitleIndex`` over every title and alias);
5. the rule-based validator's token index, for the seeds' answers and one word on most generated pages.

Resident and anonymous memory are sampled every 10 ms; each part's row is the highest of each from its
start to its end. Resident memory counts the page store's mapped file pages that a pass over every page
touches (clean page cache, which the kernel takes back under pressure); anonymous memory is what the
process holds. The slope
between the two sizes, less the graph's, says whether construction is flat apart from the graph, and the
extrapolation to 6.8M articles whether it fits. The generated text carries no typed facts, so a real
dump's facts (each with its sentence) come on top.

Run: ``python benchmarks/construction_memory.py --pages 100000,400000 --keep-dumps DIR``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wikipedia_build import FULL_ARTICLES, FULL_LINKS, _dump, node_table_bytes

ROOT = Path(__file__).resolve().parents[1]
#: one word that most generated pages hold, indexed as an answer would be
COMMON_WORD = "w4999"


def _rss_mib() -> tuple[float, float]:
    """``(resident, anonymous)`` MiB: resident counts the page store's mapped file pages too, which the
    kernel can take back (clean page cache); anonymous memory is what the process itself holds."""
    found: dict[str, float] = {}
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "RssAnon"):
                found[name] = int(value.split()[0]) / 1024
    if len(found) < 2:
        raise RuntimeError("no VmRSS/RssAnon in /proc/self/status: this benchmark reads Linux's process status")
    return found["VmRSS"], found["RssAnon"]


class _Sampler:
    """The highest resident and anonymous memory since the last :meth:`take`, sampled every 10 ms."""

    def __init__(self) -> None:
        self._peak = _rss_mib()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            self._peak = self._higher(_rss_mib())
            time.sleep(0.01)

    def _higher(self, now: tuple[float, float]) -> tuple[float, float]:
        return max(self._peak[0], now[0]), max(self._peak[1], now[1])

    def take(self) -> tuple[float, float]:
        now = _rss_mib()
        peak, self._peak = self._higher(now), now
        return peak


def run_one(dump: Path, store: Path, seeds: Path) -> dict[str, Any]:
    """Each part in order, in this process; returns each part's peak RSS (MiB) and the graph's size."""
    from aethersearch.construct.seeds import read_seed_questions, resolve_seeds
    from aethersearch.construct.typed_facts import TypedGraph, extract_facts
    from aethersearch.construct.validate import RuleBasedValidator
    from aethersearch.construct.wikipedia import read_wikipedia_pages
    from aethersearch.corpus.page_texts import page_titles

    sampler = _Sampler()
    parts: dict[str, tuple[float, float]] = {}

    def part(name: str, work: Callable[[], Any]) -> Any:
        sampler.take()
        result = work()
        parts[name] = sampler.take()
        return result

    pages, graph, source = part("import", lambda: read_wikipedia_pages(dump, store))
    titles = part("titles", lambda: page_titles(pages))
    facts = part("facts", lambda: extract_facts(pages.values(), source.page_aliases, titles=titles))
    part("typed graph", lambda: TypedGraph(facts.facts))
    questions, _ = part("seed questions", lambda: read_seed_questions(seeds))
    resolved = part("seeds resolved", lambda: resolve_seeds(questions, pages, source.page_aliases))

    def token_index() -> None:
        answers = [answer for triple in resolved.triples for answer in triple.answers] + [COMMON_WORD]
        # the lookup behind "is the answer visible on a page outside the chain?": the token index, then each
        # candidate page's normalised text (the bounded cache); private, reached on purpose
        RuleBasedValidator(pages, answers=answers)._pages_containing(COMMON_WORD)

    part("validator token index", token_index)
    return {"articles": len(graph.ids), "facts": len(facts.facts), "seeds": len(resolved.triples), "parts": parts,
            "graph_mib": (graph.indptr.nbytes + graph.indices.nbytes + node_table_bytes(graph)) / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", default="100000,400000", help="comma-separated article counts (two or more)")
    parser.add_argument("--mean-links", type=float, default=FULL_LINKS / FULL_ARTICLES)
    parser.add_argument("--redirects", type=float, default=1.6, help="redirect pages per article")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=Path, default=ROOT.parent / "shared" / "data",
                        help="the folder holding the seed question lists (qa/)")
    parser.add_argument("--keep-dumps", type=Path, default=None, help="reuse and keep generated dumps here")
    parser.add_argument("--generate-processes", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--run-one", nargs=3, metavar=("DUMP", "STORE", "SEEDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_one:
        print(json.dumps(run_one(*(Path(arg) for arg in args.run_one))))
        return
    if not (args.seeds / "qa").is_dir():
        sys.exit(f"no seed question lists under {args.seeds}: pass --seeds (the folder holding qa/)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for pages in (int(p) for p in args.pages.split(",") if p):
            dump = _dump(Path(tmp), args.keep_dumps, pages, args)
            out = subprocess.run([sys.executable, __file__, "--run-one", str(dump), str(Path(tmp) / f"store-{pages}"),
                                  str(args.seeds)], capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"the {pages:,}-article run failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
            row = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(f"{pages:,} articles ({row['facts']:,} typed facts, {row['seeds']:,} seeds resolved; "
                  f"graph and ids {row['graph_mib']:.1f} MiB), highest RSS by part:", flush=True)
            for name, (resident, anonymous) in row["parts"].items():
                print(f"  {name:24s} resident {resident:8.1f} MiB, anonymous {anonymous:8.1f} MiB")
    if len(rows) >= 2:
        small, big = rows[0], rows[-1]
        articles = big["articles"] - small["articles"]
        graph = (big["graph_mib"] - small["graph_mib"]) * 2**20 / articles
        for kind, at in (("resident", 0), ("anonymous", 1)):
            peak = [max(part[at] for part in row["parts"].values()) for row in (small, big)]
            grown = (peak[1] - peak[0]) * 2**20 / articles
            full = peak[1] + grown * (FULL_ARTICLES - big["articles"]) / 2**20
            print(f"peak {kind} memory grows {grown:,.0f} bytes an article ({grown - graph:,.0f} beyond the graph "
                  f"and its ids), {small['articles']:,} to {big['articles']:,}; at {FULL_ARTICLES:,} articles, "
                  f"straight on: about {full / 1024:.1f} GiB")


if __name__ == "__main__":
    main()
