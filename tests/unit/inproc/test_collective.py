"""The rank threads' all-reduce: each call waits for every rank's call of the same number and
returns their least value; once a rank has left, every waiting call ends."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from zephon_chaos.inproc.collective import CollectiveBroken, ThreadCollective

JOIN_S = 30.0


def _in_threads(world: int, body: Callable[[int], object]) -> dict[int, object]:
    results: dict[int, object] = {}

    def run(rank: int) -> None:
        try:
            results[rank] = body(rank)
        except Exception as exc:
            results[rank] = exc

    threads = [threading.Thread(target=run, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_S)
    assert not any(t.is_alive() for t in threads)
    return results


def test_each_call_returns_the_least_value_of_its_number_on_every_rank() -> None:
    collective = ThreadCollective(3)
    values = {0: (1, 1, 0), 1: (1, 0, 1), 2: (1, 1, 1)}

    def body(rank: int) -> list[int]:
        return [collective.all_min(rank, v) for v in values[rank]]

    assert _in_threads(3, body) == {r: [1, 0, 0] for r in range(3)}


def test_a_call_waits_for_every_rank() -> None:
    collective = ThreadCollective(2)
    arrived = threading.Event()
    order: list[str] = []

    def body(rank: int) -> int:
        if rank == 1:
            assert arrived.wait(JOIN_S)
            order.append("late rank calls")
        else:
            arrived.set()
        result = collective.all_min(rank, rank + 1)
        order.append(f"rank {rank} returns")
        return result

    assert _in_threads(2, body) == {0: 1, 1: 1}
    assert order[0] == "late rank calls"


def test_a_rank_that_left_ends_the_calls_waiting_for_it() -> None:
    collective = ThreadCollective(2)

    def body(rank: int) -> object:
        if rank == 1:
            collective.break_("rank 1 left the group: RuntimeError: boom")
            return None
        return collective.all_min(rank, 1)

    results = _in_threads(2, body)
    assert isinstance(results[0], CollectiveBroken)
    assert "rank 1 left the group" in str(results[0])
    with pytest.raises(CollectiveBroken):
        collective.all_min(0, 1)  # and every call after it
