"""The importer's title table: exact lookups from hashes, collisions and duplicates included."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aethersearch.corpus.title_table import NOT_FOUND, DuplicateKey, TitleTable

_names = st.text(alphabet=st.sampled_from("ab_ é\u00e9X"), max_size=6)


def _table(names: list[str], more: list[str], hash_of=hash) -> TitleTable:  # type: ignore[no-untyped-def]
    hashes = np.array([hash_of(n) for n in [*names, *more]], dtype=np.int64)
    return TitleTable(hashes, names, more, hash_of=hash_of)


@settings(max_examples=60, deadline=None)
@given(st.lists(_names, unique=True, max_size=30), st.lists(_names, max_size=30), st.integers(0, 30),
       st.sampled_from([hash, lambda s: len(s) % 3, lambda s: 7]))
def test_find_answers_exactly_what_a_dict_would(keys: list[str], queries: list[str], split: int, hash_of) -> None:  # type: ignore[no-untyped-def]
    # hash_of len % 3 or a constant makes nearly every key collide: the answer must not change
    names, more = keys[:split], keys[split:]
    table = _table(names, more, hash_of)
    expected = {key: entry for entry, key in enumerate(keys)}
    assert table.find(queries + keys) == [expected.get(q, NOT_FOUND) for q in queries + keys]
    assert len(table) == len(keys) and all(table.name(e) == k for e, k in enumerate(keys))


def test_a_string_sharing_a_keys_hash_is_not_that_key() -> None:
    table = _table(["Alpha", "Beta"], [], hash_of=lambda s: len(s))  # "Gamma" hashes as "Alpha" does
    assert table.find(["Gamma", "Alpha", "Beta", "Delt"]) == [NOT_FOUND, 0, 1, NOT_FOUND]


def test_a_key_given_twice_is_refused_with_both_entries() -> None:
    with pytest.raises(DuplicateKey) as caught:
        _table(["Alpha", "Beta"], ["Gamma", "Beta"])
    assert (caught.value.key, caught.value.first, caught.value.second) == ("Beta", 1, 3)


def test_building_a_table_holds_at_most_13_bytes_a_title_beyond_its_hashes() -> None:
    # at a real dump's 2.6 titles an article the build is the import's largest moment between the passes: the
    # sort's order narrowed to int32 at once, the sorted hashes and a mask are 13 bytes a title (21 when the
    # int64 order was kept until the end), which keeps that moment under pass 2's graph (96 bytes an article)
    import tracemalloc

    count = 1 << 20
    hashes = np.random.default_rng(0).integers(-(2**63), 2**63 - 1, size=count, dtype=np.int64)
    names: list[str] = []  # never read: random 64-bit hashes do not collide here
    tracemalloc.start()
    try:
        table = TitleTable(hashes, names, _Counted(count))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(table) == count
    assert peak / count <= 13.5, f"{peak / count:.1f} bytes a title while the table was built"


class _Counted(list[str]):
    """``count`` names that are never read (the table asks for a name only on a hash collision)."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self._count = count

    def __len__(self) -> int:
        return self._count
