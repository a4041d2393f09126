"""Hint-free construction on a real Wikipedia dump: the Wikispeedia construction, fed by the dump importer.

Nothing here constructs: the dump's articles (:mod:`aethersearch.corpus.wikipedia`)
go to :func:`~aethersearch.construct.hintfree.build_wikispeedia_release` as its
``documents``, with the redirects as page aliases, so every rule of that
construction (seeds, screens, validators, hop choice, release writer) applies
to a dump unchanged. The manifest's corpus record names the dump file and
what the import read and dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from aethersearch.construct.hintfree import BuiltRelease, ConstructionConfig, PageSource, build_wikispeedia_release
from aethersearch.construct.validate import ChainValidator
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
                            config: ConstructionConfig | None = None, overwrite: bool = False,
                            workers: int = 1, keep_disambiguation: bool = False,
                            validators: Sequence[ChainValidator] | None = None, screen: Any | None = None,
                            on_candidate: Callable[[int, int, int], None] | None = None) -> BuiltRelease:
    """A MediaWiki export + real seed questions -> a hint-free release (``seeds_root`` default: the dump's
    grandparent, ``../shared/data`` for ``../shared/data/wikipedia/DUMP``)."""
    documents, source = read_wikipedia_pages(dump, workers=workers, keep_disambiguation=keep_disambiguation)
    seeds = Path(seeds_root) if seeds_root is not None else Path(dump).resolve().parent.parent
    return build_wikispeedia_release(dump, out_dir, config=config, overwrite=overwrite, documents=documents,
                                     seeds_root=seeds, validators=validators, screen=screen,
                                     on_candidate=on_candidate, source=source)


__all__ = ["build_wikipedia_release", "read_wikipedia_pages"]
