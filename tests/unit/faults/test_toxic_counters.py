"""A toxic's held intervals: delays of two connections end out of order and may overlap."""

from __future__ import annotations

import pytest

from zephon_chaos.faults.proxy.toxics.base import ToxicCounters
from zephon_chaos.oracles.faults import overlap_s


def test_delays_that_end_out_of_order_are_all_kept() -> None:
    counters = ToxicCounters()
    counters.delayed(2.0, 2.5)  # a short delay on one connection ends first,
    counters.delayed(1.0, 3.0)  # a longer one that began earlier ends after it
    counters.delayed(5.0, 6.0)
    counters.delayed(3.0005, 4.0)  # within a millisecond of the first interval's end
    assert overlap_s(map(tuple, counters.held), 0.0, 10.0) == pytest.approx(3.9995)
    assert counters.held[0] == [1.0, 3.0]
