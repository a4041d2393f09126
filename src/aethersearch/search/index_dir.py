"""Index directories: config, corpus hash, build stats and ``index_hash``, loaded memory-mapped.

Layout of ``<dir>``::

    index.json      kind, backend, config, corpus_hash, corpus_size, store path, build_stats,
                    artefacts {relative path: sha256}, index_hash
    store/          the document store, when the index was built from a raw corpus file
    <backend>/      the backend's own files (bm25s arrays, embeddings, ...)

Why: every run fingerprint records ``corpus_hash`` and ``index_hash``, so an index
must say exactly what it was built from and with which settings. ``index_hash`` is
the sha256 of the canonical JSON of (backend, config, corpus_hash, artefact
hashes): rebuilding the same corpus with the same settings gives the same hash.
The directory is built under a temporary name and renamed into place, so a
crashed build never leaves a half index that opens.
"""

from __future__ import annotations

import os
import resource
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import ValidationError

from aethersearch.corpus.store import MANIFEST as STORE_MANIFEST
from aethersearch.corpus.store import JsonlStore, open_store
from aethersearch.errors import ConfigError, DataError, IntegrityError
from aethersearch.jsonl import atomic_write_json, dumps, sha256_bytes, sha256_file, validation_problem
from aethersearch.records import SCHEMA_VERSION
from aethersearch.search.backends import backend_class
from aethersearch.search.base import IndexManifest, SearchIndex

__all__ = ["INDEX_KIND", "INDEX_MANIFEST", "OpenedIndex", "build_index", "compute_index_hash", "open_index",
    "read_manifest"]

INDEX_KIND: Literal["aethersearch-index"] = "aethersearch-index"
INDEX_MANIFEST = "index.json"


@dataclass(frozen=True)
class OpenedIndex:
    """A loaded index, the store its hits come from, and its manifest.

    A frozen dataclass rather than a NamedTuple: a tuple's own ``index`` method
    would shadow the ``index`` field's type.
    """

    index: SearchIndex
    store: JsonlStore
    manifest: IndexManifest


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _artefacts(directory: Path, backend: str) -> dict[str, str]:
    root = directory / backend
    if not root.exists():
        return {}
    return {str(p.relative_to(directory)): sha256_file(p) for p in sorted(root.rglob("*")) if p.is_file()}


def compute_index_hash(backend: str, config: dict[str, Any], corpus_hash: str, artefacts: dict[str, str]) -> str:
    """``sha256:<hex>`` of the canonical JSON of what determines the index's results."""
    body = {"backend": backend, "config": config, "corpus_hash": corpus_hash, "artefacts": artefacts}
    return f"sha256:{sha256_bytes(dumps(body))}"


def build_index(corpus: str | Path | JsonlStore, backend: str, out_dir: str | Path, *,
                config: dict[str, Any] | None = None, corpus_format: str = "jsonl",
                links: str | Path | None = None, overwrite: bool = False,
                on_document: Callable[[str, int, int], None] | None = None) -> OpenedIndex:
    """Build a ``backend`` index of ``corpus`` (a store, a store directory or a raw corpus file).

    A raw corpus is first imported into ``<out_dir>/store``. ``on_document(phase,
    done, total)`` reports progress ("import" then "index") for the CLI's progress bar.
    """
    cls = backend_class(backend)
    settings = cls.config_model.model_validate(config or {})
    settings = cls.prepare_config(settings)
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise ConfigError(f"{out} already exists and is not empty", fix="choose another --out or pass --force")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    started = time.perf_counter()
    try:
        if isinstance(corpus, JsonlStore):
            store, store_ref = corpus, str(corpus.directory.resolve())
        elif Path(corpus).is_dir() and (Path(corpus) / STORE_MANIFEST).is_file():
            store, store_ref = open_store(corpus), str(Path(corpus).resolve())
        else:
            from aethersearch.corpus.importers import import_corpus

            report = (lambda n: on_document("import", n, 0)) if on_document else None
            store = import_corpus(corpus_format, corpus, tmp / "store", links=links, overwrite=True,
                                  on_document=report).store
            store_ref = "store"
        total = len(store)
        report_index = (lambda n: on_document("index", n, total)) if on_document else None
        stats = cls.build(store, settings, tmp, report_index)
        artefacts = _artefacts(tmp, backend)
        config_json = settings.model_dump(mode="json")
        manifest = IndexManifest(
            kind=INDEX_KIND, schema_version=SCHEMA_VERSION, backend=backend, config=config_json,
            corpus_hash=store.content_hash, corpus_size=total, store=store_ref,
            build_stats={**stats, "seconds": round(time.perf_counter() - started, 3), "peak_rss_mb": _peak_rss_mb()},
            artefacts=artefacts, index_hash=compute_index_hash(backend, config_json, store.content_hash, artefacts))
        atomic_write_json(tmp / INDEX_MANIFEST, manifest)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return open_index(out)


def read_manifest(index_dir: str | Path) -> IndexManifest:
    """The ``index.json`` of an index directory, checked for kind and fields."""
    path = Path(index_dir) / INDEX_MANIFEST
    if not path.is_file():
        raise DataError(path, "not an index directory (index.json missing)",
                        fix="build one with `aether index build <corpus> --backend bm25 --out <dir>`")
    data = orjson.loads(path.read_bytes())
    if not isinstance(data, dict) or data.get("kind") != INDEX_KIND:
        kind = data.get("kind") if isinstance(data, dict) else None
        raise DataError(path, f"kind is {kind!r}, expected {INDEX_KIND!r}")
    try:
        return IndexManifest.model_validate(data)
    except ValidationError as exc:
        raise DataError(path, f"not an index manifest: {validation_problem(exc)}", fix="rebuild the index with `aether index build`") from None


def open_index(index_dir: str | Path, store: JsonlStore | None = None, *, verify: bool = False) -> OpenedIndex:
    """Load an index directory (memory-mapped) with its store; corpus hashes must agree.

    ``verify=True`` also re-hashes the artefacts and the store (slow on big corpora).
    """
    directory = Path(index_dir)
    manifest = read_manifest(directory)
    if store is None:
        ref = Path(manifest.store)
        store = open_store(ref if ref.is_absolute() else directory / ref)
    if store.content_hash != manifest.corpus_hash:
        raise IntegrityError(f"{directory}: index was built from corpus {manifest.corpus_hash} "
                             f"but the store holds {store.content_hash}",
                             fix="rebuild the index from this store, or pass the store it was built from")
    if verify:
        store.verify()
        actual = _artefacts(directory, manifest.backend)
        if actual != manifest.artefacts:
            changed = sorted(k for k in set(actual) | set(manifest.artefacts)
                             if actual.get(k) != manifest.artefacts.get(k))
            raise IntegrityError(f"{directory}: index files changed since the build: {changed}",
                                 fix="rebuild the index")
    cls = backend_class(manifest.backend)
    return OpenedIndex(cls.load(directory, manifest, store), store, manifest)
