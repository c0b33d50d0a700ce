"""An in-process launch's shared state: which threads run its ranks."""

from __future__ import annotations

import threading

from zephon_chaos.inproc.rank_group import RankThreads


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


def test_while_inheriting_the_threads_a_rank_starts_are_its_own_down_the_line() -> None:
    """Zephon logs from threads its rank threads start (a pipeline stage's warning)."""
    ranks = RankThreads()
    seen: dict[str, bool] = {}
    original = threading.Thread.start

    def look(name: str, child: str | None = None) -> None:
        seen[name] = ranks.current()
        if child is not None:
            spawn(child)

    def spawn(name: str, child: str | None = None) -> None:
        thread = threading.Thread(target=look, args=(name, child))
        thread.start()
        thread.join()

    with ranks.inheriting():
        spawn("harness's own")
        with ranks.running():
            spawn("started by a rank", child="started by its thread")
    with ranks.running():
        spawn("started by a rank, not inheriting")
    assert seen == {
        "harness's own": False,
        "started by a rank": True,
        "started by its thread": True,
        "started by a rank, not inheriting": False,
    }
    assert threading.Thread.start is original and not ranks.current()
