"""BlockedInt32 hands over exactly the values appended, in order, whatever the block boundaries."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from aethersearch.corpus.blocked_array import BlockedInt32

_INT32 = st.integers(-(2**31), 2**31 - 1)


@given(calls=st.lists(st.one_of(_INT32, st.lists(_INT32, max_size=9)), max_size=60), block=st.integers(1, 8))
def test_take_gives_every_value_in_order_once(calls: list[int | list[int]], block: int) -> None:
    values = BlockedInt32(block)
    expected: list[int] = []
    for call in calls:
        if isinstance(call, int):
            values.append(call)
            expected.append(call)
        else:
            values.extend(call)
            expected.extend(call)
        assert len(values) == len(expected)
    taken = values.take()
    assert taken.dtype == np.int32 and taken.tolist() == expected
    assert len(values) == 0 and values.take().tolist() == []  # handed over, not kept
    values.extend(expected[:3])
    assert values.take().tolist() == expected[:3]  # and usable again
