"""Hint-free construction on a real Wikipedia dump: the Wikispeedia construction, fed by the dump importer.

Nothing here constructs: the dump's articles (:mod:`aethersearch.corpus.wikipedia`)
go to :func:`~aethersearch.construct.page_release.build_page_release`, the
construction path Wikispeedia uses, with the redirects as page aliases, so every
rule of that construction (seeds, hint screen, entailment, screens, review, hop
mix, release writer) applies to a dump unchanged. The manifest's corpus record names the dump file and
what the import read and dropped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aethersearch.construct.hintfree import BuiltRelease, PageSource
from aethersearch.construct.page_release import build_page_release
from aethersearch.corpus.wikipedia import WikipediaDump
from aethersearch.records import Document


def read_wikipedia_pages(dump: str | Path, *, workers: int = 1,
                         keep_disambiguation: bool = False) -> tuple[list[Document], PageSource]:
    """The dump's articles and the :class:`PageSource` that names them in a release."""
    reader = WikipediaDump(dump, workers=workers, keep_disambiguation=keep_disambiguation)
    documents = list(reader.documents())
    corpus = {"kind": "wikipedia-dump", "dump": Path(dump).name, "import": reader.stats.to_json(),
              "disambiguation_pages": "kept" if keep_disambiguation else "left out"}
    return documents, PageSource("webdetective_wikipedia", "wikipedia", corpus, reader.aliases)


def build_wikipedia_release(dump: str | Path, out_dir: str | Path, *, seeds_root: str | Path | None = None,
                            workers: int = 1, keep_disambiguation: bool = False, **construction: Any) -> BuiltRelease:
    """A MediaWiki export + real seed questions -> a hint-free release (``seeds_root`` default: the dump's
    grandparent, ``../shared/data`` for ``../shared/data/wikipedia/DUMP``).

    ``construction`` takes the options of :func:`~aethersearch.construct.page_release.build_page_release`
    (config, validators, judge, screen, keep_memorised, detours_out, review, fact_seeds, overwrite, ...):
    the one construction path that Wikispeedia uses too.
    """
    documents, source = read_wikipedia_pages(dump, workers=workers, keep_disambiguation=keep_disambiguation)
    seeds = Path(seeds_root) if seeds_root is not None else Path(dump).resolve().parent.parent
    return build_page_release(documents, out_dir, name=source.name, source_dataset=source.source_dataset,
                              corpus=source.corpus, seeds_root=seeds, page_aliases=source.page_aliases,
                              **construction)


__all__ = ["build_wikipedia_release", "read_wikipedia_pages"]
