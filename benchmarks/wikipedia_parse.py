"""Real wikitext: our parse (text, links, typed infobox rows) vs wikiextractor's clean text, side by side.

Both sides get the same page texts, in-process, in the same run: the articles of
the real enwiki excerpt (``../shared/data/wikipedia/``, 106 articles, 5.7 MB of
wikitext), and a Wikispeedia-sized set made of the same real pages repeated
under new titles up to ``--pages`` (4,604 by default: Wikispeedia's page count;
the text is the excerpt's, so the caches of both sides see repeats, as on a
real dump's popular link targets and templates).

* ours: :func:`aethersearch.corpus.wikitext.parse_wikitext` (plain text, article
  links, disambiguation flag and the typed infobox rows of
  :mod:`aethersearch.corpus.infobox`), what the importer's parse step runs per page;
* reference: ``wikiextractor.extract.Extractor(...).clean_text(text,
  expand_templates=False)`` (wikiextractor 3.1.0's extraction of one page without
  template expansion: templates and tables dropped, links as their text; it keeps
  no links and no infobox).

Each round times both sides with ``time.process_time`` in alternating order
(ours first in odd rounds), and the medians are printed as pages and MB of
wikitext per CPU-second with the ratio ours / reference, beside the load average.

Run: ``python benchmarks/wikipedia_parse.py`` (``--rounds 5 --pages 4604``; ``--quick``: 3 rounds, 1,000 pages).
Needs the ``bench`` extra (``pip install wikiextractor``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

EXCERPT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "wikipedia" / \
    "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"

Pages = Sequence[tuple[str, str]]


def read_pages(path: Path) -> tuple[list[tuple[str, str]], frozenset[str]]:
    """``(title, wikitext)`` of the dump's articles and its namespace prefixes (lower case), as the importer reads."""
    from aethersearch.corpus.mediawiki import DumpReader

    reader = DumpReader(path)
    pages = [(p.title, p.text) for p in reader if p.namespace == 0 and p.redirect is None]
    namespaces = frozenset(n.lower() for k, n in reader.site.namespaces.items() if n and k != 0)
    return pages, namespaces


def repeated(pages: Pages, count: int) -> list[tuple[str, str]]:
    """``count`` pages: the real ones, then again under new titles ("Title (2)") until there are enough."""
    return [(title if k < len(pages) else f"{title} ({k // len(pages) + 1})", text)
            for k, (title, text) in ((k, pages[k % len(pages)]) for k in range(count))]


def ours(namespaces: frozenset[str]) -> Callable[[Pages], int]:
    from aethersearch.corpus.wikitext import parse_wikitext

    def run(pages: Pages) -> int:
        rows = 0
        for _, text in pages:
            rows += len(parse_wikitext(text, namespaces).infobox)
        return rows
    return run


def reference(pages: Pages) -> int:
    from wikiextractor.extract import Extractor

    lines = 0
    for number, (title, text) in enumerate(pages):
        lines += len(Extractor(number, 0, "", title, [text]).clean_text(text, expand_templates=False))
    return lines


def measure(name: str, pages: Pages, sides: dict[str, Callable[[Pages], int]], rounds: int) -> dict[str, float]:
    """Median CPU seconds of each side over ``rounds`` alternating rounds; prints the table and the ratio."""
    size = sum(len(text.encode()) for _, text in pages) / 1e6
    times: dict[str, list[float]] = {side: [] for side in sides}
    order = list(sides)
    for round_ in range(rounds):
        for side in (order if round_ % 2 == 0 else order[::-1]):
            start = time.process_time()
            sides[side](pages)
            times[side].append(time.process_time() - start)
    medians = {side: statistics.median(values) for side, values in times.items()}
    print(f"\n{name}: {len(pages):,} pages, {size:.1f} MB of wikitext, median of {rounds} rounds "
          f"(load average {os.getloadavg()[0]:.2f})")
    for side, seconds in medians.items():
        spread = f"{min(times[side]):.3f}-{max(times[side]):.3f}"
        print(f"  {side:14s} {len(pages) / seconds:8.1f} pages/CPU-s  {size / seconds:6.2f} MB/CPU-s  "
              f"({seconds:.3f} s, rounds {spread})")
    first, second = order
    print(f"  ratio {first} / {second}: {medians[second] / medians[first]:.2f}x the pages per CPU-second")
    return medians


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per set (medians)")
    parser.add_argument("--pages", type=int, default=4604, help="pages of the Wikispeedia-sized set")
    parser.add_argument("--excerpt", type=Path, default=EXCERPT, help="the real enwiki excerpt")
    parser.add_argument("--quick", action="store_true", help="3 rounds, 1,000 pages")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.pages = 3, 1000
    if not args.excerpt.exists():
        print(f"the real excerpt {args.excerpt} is missing: no figure measured", file=sys.stderr)
        return 2
    try:
        import wikiextractor.extract  # noqa: F401
    except ImportError:
        print("wikiextractor is not installed (pip install 'aethersearch[bench]'): no figure measured", file=sys.stderr)
        return 2
    pages, namespaces = read_pages(args.excerpt)
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print("ours: parse_wikitext (text, links, infobox rows); wikiextractor: 3.1.0 clean_text, no template expansion")
    sides = {"ours": ours(namespaces), "wikiextractor": reference}
    measure("real enwiki excerpt", pages, sides, args.rounds)
    measure("Wikispeedia-sized (the excerpt's pages repeated)", repeated(pages, args.pages), sides, args.rounds)
    print(f"\nload average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
