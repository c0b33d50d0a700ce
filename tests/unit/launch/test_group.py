"""The launcher on real torchrun groups: every launch path, failures in words, nothing left."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from zephon_chaos.launch import LAUNCH_PATHS, Formation, TorchrunGroup
from zephon_chaos.launch.deathwatch import DeathWatch
from zephon_chaos.procs import exit_notes

pytestmark = pytest.mark.cpu

SHAPES = [
    pytest.param(
        path,
        1,
        nproc,
        marks=() if nproc == 2 else pytest.mark.slow,
    )
    for path in LAUNCH_PATHS
    for nproc in (1, 2, 3)
] + [("c10d", 2, 1), pytest.param("static", 2, 1, marks=pytest.mark.slow)]
"""Every path with two ranks, and two agents through c10d (the ``run_train.sh`` path), run
by default; the other shapes run with ``slow`` (the warm lane's tests cover every shape)."""


@pytest.mark.parametrize(("path", "nnodes", "nproc"), SHAPES)
def test_every_launch_path_runs_a_gloo_group(
    torchrun_group, allreduce_script: Path, tmp_path: Path, path: str, nnodes: int, nproc: int
) -> None:
    result = torchrun_group(
        allreduce_script,
        nproc=nproc,
        nnodes=nnodes,
        path=path,
        env={"ALLREDUCE_OUT": str(tmp_path)},
        deadline_s=90,
    )
    result.raise_for_status()
    world = nproc * nnodes
    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]
    assert [r["world"] for r in reports] == [world] * world
    assert {r["sum"] for r in reports} == {float(sum(range(world)))}
    assert sorted(o.rank for o in result.ranks) == list(range(world))
    assert all(o.exitcode == 0 and o.pid for o in result.ranks)
    assert "sum=" in result.rank(world - 1).stdout.read_text()
    # Every rank noted its moment of exit: what orders two failures within one agent poll.
    group = torchrun_group.groups[-1]
    assert set(group.workers().values()) <= set(exit_notes(group.registry.pid_dir))


@dataclass(frozen=True)
class Misbehaviour:
    how: str
    """What rank 1 does after the all-reduce (``ALLREDUCE_MISBEHAVE``)."""
    bystander: str
    """What rank 0 does meanwhile: meet it in a ``barrier`` (and fail on its closed
    connection, often within one poll of their agent) or ``wait`` to be stopped."""
    statuses: tuple[str, ...]
    """Statuses rank 1 may end with (an exception can end in SIGABRT: gloo aborts in its
    destructor with a peer still waiting)."""
    evidence: str


# Two failures are ordered by each rank's exit note, or, for a rank killed by a signal (which
# notes nothing), by the moment the death watch saw it die.
MISBEHAVIOURS = {
    "exit3": Misbehaviour("exit3", "barrier", ("exited 3",), "rank 1 exits 3 on purpose"),
    "raise": Misbehaviour(
        "raise",
        "barrier",
        ("exited 1", "killed by SIGABRT"),
        "RuntimeError: rank 1 fails on purpose",
    ),
    "sigkill": Misbehaviour(
        "sigkill", "wait", ("killed by SIGKILL",), "possibly the kernel's OOM killer"
    ),
    "sigkill-peer-in-barrier": Misbehaviour(
        "sigkill", "barrier", ("killed by SIGKILL",), "possibly the kernel's OOM killer"
    ),
}
needs_death_watch = pytest.mark.skipif(
    not DeathWatch.available(), reason="no pidfd_open here: a SIGKILL and its consequence tie"
)
CASES = [
    pytest.param(case, marks=needs_death_watch if case == "sigkill-peer-in-barrier" else ())
    for case in sorted(MISBEHAVIOURS)
]


def misbehaviour_env(case: str) -> dict[str, str]:
    m = MISBEHAVIOURS[case]
    return {"ALLREDUCE_MISBEHAVE": f"1:{m.how}", "ALLREDUCE_BYSTANDER": m.bystander}


@pytest.mark.parametrize("case", CASES)
def test_a_failing_rank_is_reported_in_words(torchrun_group, allreduce_script: Path, case: str):
    m = MISBEHAVIOURS[case]
    result = torchrun_group(allreduce_script, nproc=2, env=misbehaviour_env(case), deadline_s=60)
    assert not result.ok and not result.timed_out
    assert result.first_failure is not None and result.first_failure.rank == 1, result.report()
    assert result.rank(1).status.startswith(m.statuses)
    assert m.evidence in result.report()
    assert result.duration_s < 60
    if m.how != "sigkill":  # exit3 ends in os._exit, which skips atexit: it is noted too
        group = torchrun_group.groups[-1]
        assert group.workers()[1] in exit_notes(group.registry.pid_dir)
    if m.bystander == "wait":
        assert result.rank(0).status == "killed by SIGTERM", result.report()


def test_an_agent_that_crashes_on_a_torn_error_file_says_so(torchrun_group, allreduce_script):
    """torch's agent dies reading an empty error file: no rank may then read as a success."""
    result = torchrun_group(
        allreduce_script,
        nproc=2,
        env={"ALLREDUCE_MISBEHAVE": "1:exit3", "ALLREDUCE_BYSTANDER": "torn"},
        deadline_s=60,
    )
    assert not result.ok and not result.timed_out
    assert any("crashed reading" in note for note in result.notes), result.report()
    for outcome in result.ranks:
        assert outcome.exitcode is None, result.report()
        assert outcome.status.startswith("exit status unknown (its agent ended (exited 1)")
    assert result.first_failure is None


def test_a_hanging_rank_is_killed_at_the_deadline(torchrun_group, allreduce_script: Path):
    group = torchrun_group.spawn(
        allreduce_script, nproc=2, env={"ALLREDUCE_MISBEHAVE": "1:hang"}, deadline_s=90
    )
    announced = wait_for_text(group, rank=1, text="rank 1 hangs on purpose", timeout_s=80)
    assert announced, "rank 1 never reached its hang"
    group.deadline_in(2.0)
    result = group.wait()
    assert result.timed_out and not result.ok
    assert "passed its deadline" in result.summary()
    assert "rank 1 hangs on purpose" in result.rank(1).tail("stdout")
    assert all(o.killed_by_harness for o in result.ranks)
    assert group.registry.survivors() == []
    assert result.duration_s < 90


AFTER_S = 2.0


@pytest.mark.parametrize(
    "forms",
    [True, pytest.param(False, marks=pytest.mark.slow)],
    ids=["formed", "never-formed"],
)
def test_a_deadline_counted_from_formation_spares_a_group_slow_to_form(
    torchrun_group, allreduce_script: Path, forms: bool
) -> None:
    """A 1 s deadline would end the group before its ranks run; counted from the formation
    (here: rank 1 reached its hang, a logical event), the group runs AFTER_S past it. A group
    that never forms gets its time to form (``before_s``), not the ceiling."""
    holder: list[TorchrunGroup] = []

    def formed() -> bool:
        return forms and said(holder[0], rank=1, text="rank 1 hangs on purpose")

    ceiling, to_form = 90.0, 8.0
    spec = torchrun_group.spec(
        allreduce_script, nproc=2, env={"ALLREDUCE_MISBEHAVE": "1:hang"}, deadline_s=1
    )
    # A group that forms has the ceiling to do it in (a loaded machine is slow to form one).
    before_s = None if forms else to_form
    formation = Formation(formed, after_s=AFTER_S, ceiling_s=ceiling, before_s=before_s)
    group = torchrun_group.spawn_spec(replace(spec, formation=formation))
    holder.append(group)
    result = group.wait()
    assert result.timed_out and group.registry.survivors() == []
    if forms:
        assert result.formed_s is not None, result.summary()
        assert result.formed_s + AFTER_S <= result.duration_s < ceiling
    else:
        assert result.formed_s is None
        assert to_form <= result.duration_s < ceiling


def said(group: TorchrunGroup, rank: int, text: str) -> bool:
    """Whether ``rank`` of ``group`` logged ``text`` on its stdout (its latest attempt)."""
    logs = sorted((group.workdir / "logs").glob(f"agent0/*/attempt_0/{rank}/stdout.log"))
    return bool(logs) and text in logs[-1].read_text(errors="replace")


def wait_for_text(group, rank: int, text: str, timeout_s: float) -> bool:
    """Wait for a rank to log ``text`` (a logical event), bounded by ``timeout_s``."""
    import time

    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if said(group, rank, text):
            return True
        time.sleep(0.05)
    return False


def test_bad_launch_specs_fail_before_starting(torchrun_group, allreduce_script: Path, tmp_path):
    with pytest.raises(ValueError, match="unknown launch path 'bogus'"):
        torchrun_group(allreduce_script, path="bogus")
    with pytest.raises(ValueError, match="nnodes > 1"):
        torchrun_group(allreduce_script, nnodes=2, path="standalone")
    with pytest.raises(FileNotFoundError, match="module=True"):
        torchrun_group(tmp_path / "missing.py")
