"""Exact string -> entry lookups over millions of keys at about 12 bytes a key, for the dump importer.

A Python ``dict`` of titles costs about 130 bytes a title (the key object, the
entry, the index, the int) and a full English dump has 6.8M articles and about
11M redirects: some 2 GiB of tables beside the graph. :class:`TitleTable` keeps
only each key's hash (8 bytes) and its entry number (4 bytes), sorted, and
answers a whole batch of lookups with one ``searchsorted``. It is exact: a hash
match counts only when the key's own string, read back through ``names`` (the
caller keeps its strings anyway: page ids in the graph, redirect titles in a
:class:`~aethersearch.corpus.string_spool.MappedStrings`), equals the string looked up, and keys whose hashes
collide go to a small ``dict`` instead. The hash is Python's own ``str`` hash:
fast and cached on the string, salted per process, which is fine because a
table lives in one process and is never stored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

#: what :meth:`TitleTable.find` gives for a string that is not a key
NOT_FOUND = -1


class DuplicateKey(ValueError):
    """Two entries have the same key string (the importer turns it into a DataError naming the title)."""

    def __init__(self, key: str, first: int, second: int) -> None:
        super().__init__(f"{key!r} is the key of entries {first} and {second}")
        self.key, self.first, self.second = key, first, second


class TitleTable:
    """Entries ``0 .. len(hashes)-1`` named by strings, found by their strings: entry ``e`` is named
    ``names[e]``, and past the end of ``names``, ``more_names[e - len(names)]`` (two tables in one: the
    importer's article page ids, then its redirects').

    ``hashes[entry]`` must be ``hash_of`` its name (Python's ``hash`` unless a test forces collisions).
    Two entries with the same name are a :class:`DuplicateKey`; two different names with the same hash
    are both kept exactly (in the collision ``dict``), so lookups never confuse them.
    """

    def __init__(self, hashes: np.ndarray, names: Sequence[str], more_names: Sequence[str] = (), *,
                 hash_of: Callable[[str], int] = hash) -> None:
        hashes = np.asarray(hashes, dtype=np.int64)
        if len(hashes) != len(names) + len(more_names):
            raise ValueError(f"{len(hashes)} hashes for {len(names) + len(more_names)} names")
        entry_type = np.int32 if len(hashes) < 2**31 else np.int64
        # the sort's int64 order is narrowed at once: beyond the hashes given, the build then holds at most 13
        # bytes a title (the order, the sorted hashes, a mask), not 21; at a real dump's 2.6 titles an article
        # the build is the largest moment between the import's passes
        order = np.argsort(hashes, kind="stable").astype(entry_type)
        ordered = hashes[order]
        self._names, self._more_names, self._hash_of = names, more_names, hash_of
        self._collided: dict[str, int] = {}
        self._collided_hashes: frozenset[int] = frozenset()
        shared = ordered[1:] == ordered[:-1]
        if shared.any():
            collided = np.unique(ordered[1:][shared])
            in_collision = np.isin(ordered, collided)
            for entry in order[in_collision].tolist():  # in entry order: the first of a duplicate is named first
                key = self.name(entry)
                if key in self._collided:
                    raise DuplicateKey(key, self._collided[key], entry)
                self._collided[key] = entry
            self._collided_hashes = frozenset(collided.tolist())
            order, ordered = order[~in_collision], ordered[~in_collision]
        self._hashes = ordered
        self._entries = order

    def __len__(self) -> int:
        return len(self._hashes) + len(self._collided)

    def name(self, entry: int) -> str:
        """The string that names ``entry``."""
        first = len(self._names)
        return self._names[entry] if entry < first else self._more_names[entry - first]

    def find(self, keys: Sequence[str]) -> list[int]:
        """The entry of each key, or :data:`NOT_FOUND`, in the order given."""
        if not keys:
            return []
        hashes = np.fromiter(map(self._hash_of, keys), dtype=np.int64, count=len(keys))
        if len(self._hashes):
            # looked up in hash order and put back: each search and read then lands near the one before,
            # where keys in link order jump across the whole table (a cache miss a level; at a million
            # articles, 1.2 us a key against 0.5 for 22,000 keys sorted first)
            order = np.argsort(hashes)
            ranked = hashes[order]
            at = np.searchsorted(self._hashes, ranked)
            at[at == len(self._hashes)] = 0
            hits = np.empty(len(keys), dtype=np.int64)
            hits[order] = np.where(self._hashes[at] == ranked, self._entries[at], NOT_FOUND)
            found = hits.tolist()
        else:
            found = [NOT_FOUND] * len(keys)
        names, more, first = self._names, self._more_names, len(self._names)
        # a hash match is the key only if the strings agree (a string that is no key can share a key's hash);
        # written out, not through name(): this line runs once per link of the dump
        found = [entry if entry != NOT_FOUND and (names[entry] if entry < first else more[entry - first]) == key
                 else NOT_FOUND for key, entry in zip(keys, found, strict=True)]
        if self._collided_hashes:
            for i, value in enumerate(hashes.tolist()):
                if value in self._collided_hashes:
                    found[i] = self._collided.get(keys[i], NOT_FOUND)
        return found


__all__ = ["NOT_FOUND", "DuplicateKey", "TitleTable"]
