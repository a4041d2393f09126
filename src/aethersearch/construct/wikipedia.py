"""Hint-free construction on a real Wikipedia dump: the Wikispeedia construction, fed by the dump importer.

Nothing here constructs: the dump's articles (:mod:`aethersearch.corpus.wikipedia`)
go to :func:`~aethersearch.construct.page_release.build_page_release`, the
construction path Wikispeedia uses, with the redirects as page aliases, so every
rule of that construction (seeds, hint screen, entailment, screens, review, hop
mix, release writer) applies to a dump unchanged. The manifest's corpus record names the dump file and
what the import read and dropped.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from aethersearch.construct.hintfree import BuiltRelease, PageSource
from aethersearch.construct.page_release import build_page_release
from aethersearch.corpus.graph import LinkGraph
from aethersearch.corpus.page_texts import PageTexts
from aethersearch.corpus.wikipedia import WikipediaDump, read_infobox_hops, write_infobox_hops


def read_wikipedia_pages(dump: str | Path, store: str | Path, *, workers: int = 1,
                         keep_disambiguation: bool = False) -> tuple[PageTexts, LinkGraph, PageSource]:
    """The dump's articles written to a page store at ``store`` and read back on demand, their link graph
    (filled by the import) and the :class:`PageSource` that names them in a release.

    The pages stream from the dump into the store; nothing here holds more than one batch of page text. The
    pages' typed infobox rows go beside them (``corpus.wikipedia.INFOBOX_FILE``, read by
    :func:`~aethersearch.corpus.wikipedia.read_infobox_hops`).
    """
    reader = WikipediaDump(dump, workers=workers, keep_disambiguation=keep_disambiguation)
    pages = PageTexts.write(reader.documents(), store, source=f"wikipedia:{Path(dump).name}")
    write_infobox_hops(store, reader.infobox_hops())
    corpus = {"kind": "wikipedia-dump", "dump": Path(dump).name, "import": reader.stats.to_json(),
              "disambiguation_pages": "kept" if keep_disambiguation else "left out"}
    return pages, reader.graph(), PageSource("webdetective_wikipedia", "wikipedia", corpus, reader.aliases)


def build_wikipedia_release(dump: str | Path, out_dir: str | Path, *, seeds_root: str | Path | None = None,
                            workers: int = 1, keep_disambiguation: bool = False, store: str | Path | None = None,
                            **construction: Any) -> BuiltRelease:
    """A MediaWiki export + real seed questions -> a hint-free release (``seeds_root`` default: the dump's
    grandparent, ``../shared/data`` for ``../shared/data/wikipedia/DUMP``).

    The pages go to a page store (``store``, kept; default: a temporary one beside ``out_dir``, removed
    after the build) and the construction reads them from there, so its memory is the graph, the typed
    facts and the names, not the dump's text. ``construction`` takes the options of
    :func:`~aethersearch.construct.page_release.build_page_release` (config, validators, judge, screen,
    keep_memorised, detours_out, review, fact_seeds, overwrite, ...): the one construction path that
    Wikispeedia uses too.
    """
    seeds = Path(seeds_root) if seeds_root is not None else Path(dump).resolve().parent.parent
    if store is not None:
        return _build(dump, out_dir, Path(store), seeds, workers, keep_disambiguation, construction)
    parent = Path(out_dir).resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".aether-pages-", dir=parent) as tmp:
        return _build(dump, out_dir, Path(tmp) / "pages", seeds, workers, keep_disambiguation, construction)


def _build(dump: str | Path, out_dir: str | Path, store: Path, seeds: Path, workers: int, keep_disambiguation: bool,
           construction: dict[str, Any]) -> BuiltRelease:
    pages, graph, source = read_wikipedia_pages(dump, store, workers=workers, keep_disambiguation=keep_disambiguation)
    return build_page_release(pages, out_dir, name=source.name, source_dataset=source.source_dataset,
                              corpus=source.corpus, seeds_root=seeds, page_aliases=source.page_aliases,
                              graph=graph, infobox_hops=read_infobox_hops(store), **construction)


__all__ = ["build_wikipedia_release", "read_wikipedia_pages"]
