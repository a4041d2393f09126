"""Strings spooled to disk: read back by index and in order, exactly as they were appended."""

from __future__ import annotations

import tempfile
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aethersearch.corpus import string_spool
from aethersearch.corpus.string_spool import MappedStrings, StringSpool, spooled


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=8), max_size=40), st.integers(1, 5))
def test_strings_come_back_by_index_and_in_order(values: list[str], read_block: int) -> None:
    # read_block small: iteration crosses block boundaries of the ends file
    with tempfile.TemporaryDirectory() as folder, mock.patch.object(string_spool, "_READ", read_block):
        spooled(values, Path(folder) / "s").close()
        for in_memory in (False, True):  # end offsets mapped, or read into an array
            strings = MappedStrings(Path(folder) / "s", offsets_in_memory=in_memory)
            assert len(strings) == len(values)
            assert list(strings) == values
            assert [strings[i] for i in range(-len(values), len(values))] == values + values
            strings.close()


def test_an_index_past_either_end_is_an_index_error(tmp_path: Path) -> None:
    strings = spooled(["Zürich", "日本"], tmp_path / "s")
    for index in (2, -3):
        with pytest.raises(IndexError, match="of 2"):
            strings[index]


def test_a_data_file_that_disagrees_with_its_ends_is_refused(tmp_path: Path) -> None:
    spooled(["Alpha", "Beta"], tmp_path / "s").close()
    with (tmp_path / "s.utf8").open("ab") as data:
        data.write(b"stray")
    with pytest.raises(ValueError, match="14 bytes, but its ends file says 9"):
        MappedStrings(tmp_path / "s")


def test_the_spool_counts_what_was_appended_before_it_is_sealed(tmp_path: Path) -> None:
    spool = StringSpool(tmp_path / "s")
    for value in ("a", "", "b"):
        spool.append(value)
    assert len(spool) == 3
    spool.close()
    spool.close()  # a second close changes nothing
    assert list(MappedStrings(tmp_path / "s")) == ["a", "", "b"]
