"""What a ``/retrieve`` hit is on the wire, and the same hits pre-encoded once at index build.

The rule (:func:`wire_hit`): a hit carries the stored row's own id (``source_id`` when the corpus
gave one) and ``contents`` (its own, else ``"Title"\\nText``), a ``url`` that ``/access`` resolves
(the row's own, else the url prefix + the quoted page id), and AetherSearch's ``title`` and ``text``,
split from ``contents`` as AetherSearch splits them. The server builds hits with it per request;
:func:`write_wire_rows` runs it once per store row at index build.

Why pre-encode (``aether index build --backend faiss --wire-rows``): after an approximate faiss
search has walked its graph or lists, the CPU caches are cold and each Python step of building a
hit costs several times its warm price: about 17 us a hit after a 64 MB sweep against 6 us warm,
i.e. 130 us for ten hits beside an HNSW32 search of about 0.5 ms at 1M passages
(``benchmarks/dense.py``). A pre-encoded row is one slice of a memory map, handed to orjson as a
``Fragment`` and spliced into the reply unparsed. Splicing the JSON from the store's own line at
request time was measured too and cost as much as parsing it (47.6 vs 44.1 us for ten hits, warm).
The price is disk: a hit's JSON holds the contents twice (``contents`` and ``title`` + ``text``), so
about twice the corpus text; hence opt-in. The rows are written for one url prefix, and the server
uses them only when it serves that prefix (else it builds hits per request, as without them).
"""

from __future__ import annotations

import mmap
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import orjson

from aethersearch.corpus.chunking import passage_page
from aethersearch.corpus.importers import row_contents
from aethersearch.errors import IntegrityError


def title_text(contents: str) -> tuple[str, str]:
    """AetherSearch's split of ``contents``: ``(first line stripped of '"', the other lines)``."""
    first, _, rest = contents.partition("\n")
    return first.strip('"'), rest


#: the url prefix a hit's url gets when its row has none (ASearcher's client hands it back to ``/access``)
DEFAULT_URL_PREFIX = "https://en.wikipedia.org/wiki/"
WIRE_ROWS_FILE = "wire_rows.jsonl"
WIRE_OFFSETS_FILE = "wire_rows.offsets.npy"

_URL_SAFE = "/:()',!*@$;~+="
#: ids ``quote(id, safe=_URL_SAFE)`` returns unchanged: ASCII letters, digits, ``_.-~`` and the safe set
_UNQUOTED_ID = re.compile(r"[A-Za-z0-9_.\-~" + re.escape(_URL_SAFE) + "]*")


def url_for(page_id: str, prefix: str) -> str:
    """The url a hit carries when its row has none: ``prefix`` + the page id, quoted so it round-trips.

    An id of letters, digits and characters ``quote`` keeps as they are is returned without the call
    (most ids; ``quote`` was a fifth of the server's own work per hit)."""
    if _UNQUOTED_ID.fullmatch(page_id):
        return prefix + page_id
    return prefix + quote(page_id, safe=_URL_SAFE)


def wire_id(raw: dict[str, Any]) -> Any:
    """The id a hit or page carries: the corpus's own (``source_id``) when it had one, else the row id."""
    own = raw.get("source_id")
    return own if own is not None else raw["id"]


def wire_hit(raw: dict[str, Any], prefix: str, *, pages_separate: bool = False) -> dict[str, Any]:
    """A stored row as a ``/retrieve`` hit (the module docstring's rule); ``pages_separate``: the rows are
    passages whose url names their page."""
    url = raw.get("url")
    if not url:
        page = passage_page(str(raw["id"])) if pages_separate else str(raw["id"])
        url = url_for(page, prefix)
    contents = row_contents(raw)
    title, text = title_text(contents)  # AetherSearch's hits carry title and text, split as they split
    return {"id": wire_id(raw), "contents": contents, "url": url, "title": title, "text": text}


def write_wire_rows(store: Any, directory: Path, prefix: str) -> dict[str, Any]:
    """Write every store row's hit JSON (for url ``prefix``) and its offsets into ``directory``.

    Rows are read with ``store.stream_raw`` (resident memory stays flat) and written in store order,
    so row ``i``'s hit is bytes ``offsets[i]:offsets[i + 1]``. The caller writes into a folder it renames
    into place when the whole build is done (``index_dir.build_index``), so no half-written set is served.
    """
    offsets = np.empty(len(store) + 1, dtype=np.int64)
    offsets[0] = 0
    written = 0
    with (directory / WIRE_ROWS_FILE).open("wb") as out:
        for row, line in enumerate(store.stream_raw()):
            encoded = orjson.dumps(wire_hit(orjson.loads(line), prefix))
            written += out.write(encoded)
            offsets[row + 1] = written
        out.flush()
        os.fsync(out.fileno())
    np.save(directory / WIRE_OFFSETS_FILE, offsets)
    return {"url_prefix": prefix, "rows": len(store), "bytes": written}


class WireRows:
    """The pre-encoded hits of one index, memory-mapped: row ``i`` -> its hit as an ``orjson.Fragment``."""

    def __init__(self, directory: Path, prefix: str, rows: int) -> None:
        self.prefix = prefix
        offsets = np.load(directory / WIRE_OFFSETS_FILE, mmap_mode="r")
        if len(offsets) != rows + 1:
            raise IntegrityError(f"{directory / WIRE_OFFSETS_FILE} has {len(offsets) - 1} rows but the store has "
                                 f"{rows}", fix="rebuild the index with `aether index build ... --wire-rows`")
        self._offsets = offsets  # kept open: ``_bounds`` views its memory map
        self._bounds = offsets.data  # Python ints per lookup, not numpy scalars
        path = directory / WIRE_ROWS_FILE
        with path.open("rb") as handle:
            self._data: mmap.mmap | bytes = (mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
                                             if path.stat().st_size else b"")

    def scored(self, hits: Sequence[tuple[int, float]]) -> tuple[list[tuple[orjson.Fragment, float]], int]:
        """``([(hit, score)], their JSON bytes)`` of ``(row, score)`` pairs, in one pass (the server's path:
        after an approximate search every Python step runs cache-cold, so fewer steps is the saving)."""
        bounds, data, fragment = self._bounds, self._data, orjson.Fragment
        out = []
        size = 0
        for row, score in hits:
            encoded = data[bounds[row]:bounds[row + 1]]
            size += len(encoded)
            out.append((fragment(encoded), float(score)))
        return out, size

    def hits(self, rows: Sequence[int]) -> list[tuple[orjson.Fragment, int]]:
        """``(hit, its JSON byte length)`` of each row, in order."""
        bounds, data, fragment = self._bounds, self._data, orjson.Fragment
        out = []
        for row in rows:
            encoded = data[bounds[row]:bounds[row + 1]]
            out.append((fragment(encoded), len(encoded)))
        return out


__all__ = ["DEFAULT_URL_PREFIX", "WireRows", "title_text", "url_for", "wire_hit", "wire_id", "write_wire_rows"]
