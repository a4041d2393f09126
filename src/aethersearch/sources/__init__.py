"""One adapter per upstream file format; each module opens with its citation.

``FORMATS`` maps a format name (as written in a build config or a training
registry) to its reader, resolved lazily with ``aethersearch.registry.resolve``
so an unknown name errors with the valid names and a did-you-mean.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aethersearch.errors import ConfigError
from aethersearch.registry import resolve
from aethersearch.sources.base import Candidate, SourceContext, SourceRows

FORMATS: dict[str, str] = {
    "nq_open_jsonl": "aethersearch.sources.nq_open:read",
    "triviaqa_json": "aethersearch.sources.triviaqa:read_official",
    "triviaqa_dpr_tsv": "aethersearch.sources.triviaqa:read_dpr_tsv",
    "dpr_tsv": "aethersearch.sources.triviaqa:read_dpr_tsv",
    "popqa_tsv": "aethersearch.sources.popqa:read",
    "hotpotqa_json": "aethersearch.sources.hotpotqa:read",
    "2wiki_json": "aethersearch.sources.twowiki:read",
    "musique_jsonl": "aethersearch.sources.musique:read",
    "bamboogle_csv": "aethersearch.sources.bamboogle:read_csv",
    "bamboogle_jsonl": "aethersearch.sources.bamboogle:read_jsonl",
    "r1searcher_jsonl": "aethersearch.sources.bamboogle:read_jsonl",
    "flashrag_jsonl": "aethersearch.sources.flashrag:read",
    "searchr1_parquet": "aethersearch.sources.searchr1:read",
    "qa_list_json": "aethersearch.sources.qa_list:read",
}

#: Options whose value is a file path (resolved against the config file; hashed into the manifest).
PATH_OPTIONS = frozenset({"aliases"})


def option_names(fmt: str) -> list[str]:
    """The keyword options a format accepts (beyond the source context)."""
    reader = resolve("source format", fmt, FORMATS)
    return [name for name in inspect.signature(reader).parameters if name != "ctx"]


def read_source(fmt: str, path: Path, *, dataset: str, split: str, source_file: str,
                options: Mapping[str, Any] | None = None) -> SourceRows:
    """Read one source file with the adapter registered as ``fmt``."""
    reader = resolve("source format", fmt, FORMATS)
    options = dict(options or {})
    valid = option_names(fmt)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ConfigError(f"format {fmt!r} has no option(s) {unknown}",
                          fix=f"valid options for {fmt}: {valid or 'none'}")
    for name in PATH_OPTIONS & set(options):
        options[name] = Path(options[name])
    rows: SourceRows = reader(SourceContext(Path(path), dataset, split, source_file), **options)
    return rows


__all__ = ["Candidate", "FORMATS", "PATH_OPTIONS", "SourceContext", "SourceRows", "option_names", "read_source"]
