"""Which failed rank a group's result names first, from typed facts alone."""

from __future__ import annotations

import signal

from zephon_chaos.launch.first_failure import FailedRank, first_failure
from zephon_chaos.launch.result import RankOutcome


def _failed(rank: int, code: int = 1, *, killed: bool = False, **facts: object) -> FailedRank:
    outcome = RankOutcome(rank, rank, 0, None, code, killed_by_harness=killed)
    facts.setdefault("reported", True)
    facts.setdefault("root_cause", False)
    return FailedRank(outcome, **facts)  # type: ignore[arg-type]


def _first(*failed: FailedRank) -> int | None:
    found = first_failure(list(failed))
    return None if found is None else found.rank


def test_no_failed_rank_names_none() -> None:
    assert first_failure([]) is None


def test_a_rank_its_agent_stopped_comes_after_the_one_that_failed() -> None:
    stopped = _failed(0, -signal.SIGTERM, root_cause=True)
    assert _first(stopped, _failed(1)) == 1


def test_torchelastics_root_cause_wins_over_an_earlier_error_file() -> None:
    assert _first(_failed(0, stamp=1.0), _failed(1, root_cause=True, stamp=2.0)) == 1


def test_a_rank_the_harness_tore_down_comes_after_the_others() -> None:
    torn = _failed(0, -signal.SIGKILL, killed=True, reported=False, root_cause=False)
    assert _first(torn, _failed(1, stamp=9.0)) == 1


def test_where_the_first_was_timed_the_times_decide() -> None:
    # torchelastic's whole-second stamps tie; the ranks' own exit notes do not.
    a = _failed(0, root_cause=True, stamp=5.0, exited_at=10.2)
    b = _failed(1, stamp=5.0, exited_at=10.1)
    assert _first(a, b) == 1


def test_a_rank_without_times_keeps_its_rank_by_the_key() -> None:
    a = _failed(0, root_cause=True, stamp=5.0)
    b = _failed(1, stamp=5.0, exited_at=1.0)
    assert _first(a, b) == 0


def test_ties_go_to_the_lower_rank() -> None:
    assert _first(_failed(0, died_at=3.0), _failed(1, died_at=3.0)) == 0


def test_ranks_that_raised_are_ordered_by_their_raise_not_their_exit() -> None:
    # Rank 1 refused first, then spent its atexit tearing down an MTP child; rank 0 failed
    # of the connection rank 1 closed and exited sooner.
    refused = _failed(1, stamp=5.0, raised_at=10.0, exited_at=10.9)
    reset = _failed(0, root_cause=True, stamp=5.0, raised_at=10.5, exited_at=10.6)
    assert _first(refused, reset) == 1


def test_a_rank_killed_by_a_signal_is_timed_against_exit_notes() -> None:
    # The death watch's stamp of the killed rank may lag its peer's raise of that death.
    killed = _failed(1, -signal.SIGKILL, died_at=10.2)
    peer = _failed(0, root_cause=True, stamp=5.0, raised_at=10.1, exited_at=10.4)
    assert _first(killed, peer) == 1
