"""Leaving a ``with`` block closes the resource, also when the block raises."""

from __future__ import annotations

import pytest

from zephon_chaos.closing import Closing


class Resource(Closing):
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_the_block_gets_the_resource_and_leaving_closes_it_once() -> None:
    with Resource() as r:
        assert r.closed == 0
    assert r.closed == 1


def test_a_raising_block_still_closes_and_the_error_propagates() -> None:
    resource = Resource()
    with pytest.raises(ValueError, match="boom"), resource:
        raise ValueError("boom")
    assert resource.closed == 1
