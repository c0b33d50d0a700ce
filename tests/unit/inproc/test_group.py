"""An in-process launch's shared state: which threads run its ranks."""

from __future__ import annotations

import threading

from zephon_chaos.inproc.group import RankThreads


def test_a_thread_counts_as_a_rank_only_while_it_runs_one() -> None:
    ranks = RankThreads()
    seen: list[bool] = []

    def other() -> None:
        seen.append(ranks.current())

    with ranks.running():
        seen.append(ranks.current())
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    seen.append(ranks.current())
    assert seen == [True, False, False]
