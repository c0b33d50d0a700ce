"""What gloo's all-reduce is to a launch's rank processes, for its rank threads.

A torchrun rank meets its peers before each lockstep checkpoint and agrees with them after
each attempt under the lockstep and skip policies (``rank.meetings.meet`` and
``rank.hooks.agree``, all-reduces over the process group). Rank threads have no process
group; without these a thread whose ``checkpoint()`` failed at once ran on to its next
checkpoint while its peers still waited in the failed round, and joined that round with a
later shard: a failure no lockstep trainer can meet, reported as Zephon's. Every rank makes
the same collective calls in the same order, so a call is matched to its peers' by its
number.
"""

from __future__ import annotations

import threading

POLL_S = 0.2
"""A waiting thread wakes this often: the launcher's teardown raises in it asynchronously,
which Python delivers only between bytecodes, not inside a lock's wait."""


class CollectiveBroken(RuntimeError):
    """A peer left the launch (its thread ended with an error) before this call met it."""


class ThreadCollective:
    """An all-reduce (MIN) over a launch's ``world`` rank threads."""

    def __init__(self, world: int) -> None:
        self._world = world
        self._cond = threading.Condition()
        self._calls: dict[int, int] = {}
        self._values: dict[int, dict[int, int]] = {}
        self._broken: str | None = None

    def all_min(self, rank: int, value: int) -> int:
        """The least ``value`` every rank brought to its call of this number; raises
        :class:`CollectiveBroken` once a peer has left (see :meth:`break_`)."""
        with self._cond:
            n = self._calls.get(rank, 0)
            self._calls[rank] = n + 1
            values = self._values.setdefault(n, {})
            values[rank] = value
            self._cond.notify_all()
            while len(values) < self._world:
                if self._broken is not None:
                    raise CollectiveBroken(self._broken)
                self._cond.wait(POLL_S)
            return min(values.values())

    def break_(self, why: str) -> None:
        """No call completes from now on: a rank left, so the ones waiting for it stop."""
        with self._cond:
            if self._broken is None:
                self._broken = why
            self._cond.notify_all()
