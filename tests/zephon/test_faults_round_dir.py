"""Rank faults timed by a point of an ``aggregate_dir`` checkpoint round, on real torchrun
groups.

As ``test_faults_round`` does on the store, with aggregation ``dir``: a rank raises in its
file write, exits, is killed, terminated, or stopped (then continued by the harness) right
before its n-th write of a round file (``faults.dir_interposer``), on the leader or on a
follower. Each test proves the fault fired (the rank's interposer event, fsynced before the
action, naming the round file), takes the fault oracle's verdict on the faulted round (never
a finding), and checks that the next launch resumed from the last checkpoint that survived.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import pytest

from tests.zephon.test_faults_round import OUTCOMES, faulted_scenario, fired, round_cases
from zephon_chaos.faults.dir_interposer import AGG_DIR_NAME, DIR_PHASES, phase_of_file
from zephon_chaos.faults.round_faults import DEATH_WORDS, RoundFaultLaunch
from zephon_chaos.workload.spec import RankFault

pytestmark = [pytest.mark.cpu, pytest.mark.chaos]

WRITERS = {"announce": (0,), "shard": (0, 1), "outcome": (0,), "ack": (1,)}
"""Point -> the ranks that write its file (of 2): leader 0, follower 1."""


def dir_cases() -> list[Any]:
    assert tuple(WRITERS) == DIR_PHASES
    return round_cases(WRITERS)


@pytest.mark.parametrize(("action", "point", "rank"), dir_cases())
def test_a_rank_faulted_at_a_dir_round_point_and_the_relaunch_resumes(
    resume_check, action: str, point: str, rank: int
) -> None:
    fault = RankFault(rank, 0, action, at=f"{point}#2")
    outcome = resume_check(faulted_scenario(fault, aggregation="dir"))
    assert outcome.ok, outcome.report()
    run = outcome.phases[0]
    launch = run.fault
    assert isinstance(launch, RoundFaultLaunch) and launch.verdict is not None
    events = fired(run, fault)
    assert [e["action"] for e in events] == [action], "the fault never fired"
    key = PurePosixPath(events[0]["key"])
    assert key.parent.name == AGG_DIR_NAME and phase_of_file(str(key)) == point, key
    assert launch.verdict.outcome in OUTCOMES[action], launch.verdict.describe()
    assert str(key) in launch.verdict.evidence[0], launch.verdict.evidence
    if action in DEATH_WORDS:
        assert DEATH_WORDS[action] in run.result.rank(rank).status, run.result.summary()
    if action == "sigstop":
        assert launch.continued is not None, launch.watch_error
        assert launch.continued.stop.state in "Tt"
        assert launch.continued.stop.continued_at is not None
    assert run.restore_index is not None and run.restore_index >= 0
    assert outcome.resumes and outcome.resumes[0].phase == 1
    assert outcome.verdict is not None and outcome.verdict.ok
