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

from tests.zephon.test_faults_round import assert_round_fault_judged, faulted_scenario, round_cases
from zephon_chaos.faults.dir_interposer import AGG_DIR_NAME, DIR_PHASES, phase_of_file
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
    events = assert_round_fault_judged(outcome, fault)
    key = PurePosixPath(events[0]["key"])
    assert key.parent.name == AGG_DIR_NAME and phase_of_file(str(key)) == point, key
    evidence = outcome.phases[0].fault.verdict.evidence
    assert str(key) in evidence[0], evidence
