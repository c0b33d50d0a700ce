"""Known hangs as a launch is watched for them: each signature matches its recorded stacks
only once its trigger fired, reads the frames its defect's ``explains`` reads, and a launch
cut short by it is judged as that defect alone."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.unit.explore.test_known import (
    FAULTHANDLER_WEDGED,
    LAUNCH_TIMEOUT,
    PYSPY_LOCKED_WORKER,
    PYSPY_WEDGED,
    _wedged,
)
from zephon_chaos.diagnostics.frames import parse_stacks
from zephon_chaos.explore.known import (
    HANG_SIGNATURES,
    KILLED_WORKER_ORPHANS_QUEUE_LOCK,
    STALLED_STORE_LINK,
    explaining,
    judged_ok,
)
from zephon_chaos.explore.signature import signature
from zephon_chaos.launch.result import CutShort
from zephon_chaos.nemeses.scenario_proxy import FaultedLaunch
from zephon_chaos.runner import ScenarioOutcome
from zephon_chaos.runner.hangs import LaunchContext, hang_watch
from zephon_chaos.scenario import Launch, ProxyFault, Scenario
from zephon_chaos.workload.records import CHILD_FAULT_RECORD, RecordWriter
from zephon_chaos.workload.spec import ChildFault

ORPHAN = KILLED_WORKER_ORPHANS_QUEUE_LOCK.id
STACKS = {
    "watchdog re-dispatching": PYSPY_WEDGED.format(func="_handle_dead_worker"),
    "watchdog, faulthandler": FAULTHANDLER_WEDGED.format(func="_handle_dead_worker"),
    "replacement waiting for the lock": PYSPY_LOCKED_WORKER.format(func="_process_worker_main"),
    "watchdog elsewhere": PYSPY_WEDGED.format(func="_dispatch"),
    "lock wait outside a worker": PYSPY_LOCKED_WORKER.format(func="_service_loop"),
}
"""Recorded dumps of a hung process-runner rank (``test_known``), the last two no orphan."""
STORE_CALL_STACK = """\
Process 5150: python -m zephon_chaos.rank spec.json
Python v3.11.7 (/usr/bin/python3.11)

Thread 5150 (idle): "MainThread"
    _call (/x/site-packages/zephon/_internal/kvstore.py:220)
    wait (/x/site-packages/zephon/_internal/kvstore.py:318)
    _wait_for_outcome (/x/site-packages/zephon/_internal/coordination.py:640)
    checkpoint (/x/site-packages/zephon/_internal/pipeline.py:1210)
    take_checkpoint (/x/site-packages/zephon_chaos/rank/checkpointing.py:88)
"""
"""A rank waiting for the store's reply inside a TorchKVStore call (py-spy)."""


def _killed(out_dir: Path, killed: list[int]) -> LaunchContext:
    """A launch of 2 ranks whose rank 0 recorded killing ``killed``."""
    out = RecordWriter(out_dir, 0)
    out.write(CHILD_FAULT_RECORD, at_step=3, target="workers", at=1.0, killed=killed, before=[])
    out.close()
    return LaunchContext(Launch(2, 8, child_faults=(ChildFault(0, 3),)), out_dir)


def _recognised(context: LaunchContext, text: str) -> str | None:
    watch = hang_watch(HANG_SIGNATURES, context, quiet_s=60.0)
    return watch.recognise({"rank 0 (pid 4242)": text}) if watch.armed() else None


@pytest.mark.parametrize("name", sorted(STACKS))
def test_the_orphaned_lock_hang_matches_exactly_what_its_explains_accepts(
    tmp_path: Path, name: str
) -> None:
    """One predicate: the frames that cut a launch short are the ones that explain its
    hang at the deadline, in either dump format."""
    text = STACKS[name]
    explained = KILLED_WORKER_ORPHANS_QUEUE_LOCK.explains(_wedged(text), LAUNCH_TIMEOUT)  # type: ignore[arg-type]
    recognised = _recognised(_killed(tmp_path, [4250]), text)
    assert (recognised == ORPHAN) is explained
    assert explained is not name.startswith(("watchdog elsewhere", "lock wait outside"))


@pytest.mark.parametrize("killed", [None, []], ids=["no-child-fault-yet", "nothing-killed"])
def test_the_orphaned_lock_hang_waits_for_its_trigger(
    tmp_path: Path, killed: list[int] | None
) -> None:
    """Before a rank recorded killing workers, the same stacks are a healthy idle pipeline."""
    context = (
        LaunchContext(Launch(2, 8, child_faults=(ChildFault(0, 3),)), tmp_path)
        if killed is None
        else _killed(tmp_path, killed)
    )
    assert not hang_watch(HANG_SIGNATURES, context, quiet_s=60.0).armed()
    assert not HANG_SIGNATURES[ORPHAN].matches(
        {"rank 0": parse_stacks(STACKS["watchdog re-dispatching"])}, context
    )


@pytest.mark.parametrize(
    ("toxic", "stack", "recognised"),
    [
        ("timeout", STORE_CALL_STACK, STALLED_STORE_LINK.id),
        ("latency", STORE_CALL_STACK, None),  # not a stall: no trigger
        ("timeout", STACKS["watchdog re-dispatching"], None),  # no rank in a store call
    ],
)
def test_the_stalled_link_hang_needs_a_stalling_toxic_and_a_rank_in_a_store_call(
    tmp_path: Path, toxic: str, stack: str, recognised: str | None
) -> None:
    fault = FaultedLaunch((ProxyFault(1, toxic, at="start"),), proxies=None)  # type: ignore[arg-type]
    context = LaunchContext(Launch(2, 4), tmp_path, fault)
    assert _recognised(context, stack) == recognised


def test_a_stall_at_a_round_point_arms_only_once_its_interposer_fired(tmp_path: Path) -> None:
    from zephon_chaos.faults.interposer import events_path

    fault = FaultedLaunch((ProxyFault(1, "timeout", at="shard#1"),), proxies=None)  # type: ignore[arg-type]
    context = LaunchContext(Launch(2, 4), tmp_path, fault)
    assert _recognised(context, STORE_CALL_STACK) is None
    path = events_path(tmp_path, 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"kind": "fired", "phase": "shard", "n": 1, "t": 1.0}\n')
    assert _recognised(context, STORE_CALL_STACK) == STALLED_STORE_LINK.id


def test_a_launch_cut_short_as_the_orphaned_lock_is_judged_as_that_defect_alone() -> None:
    """Its problem is the launch's timeout, as at a deadline: explained by the defect whose
    frames matched, and by no other; its signature is the known defect's, never a new one."""
    run = _wedged(PYSPY_WEDGED).phases[0]  # type: ignore[attr-defined]
    cut = CutShort(ORPHAN, at_s=170.0, quiet_s=163.0)
    run.result = SimpleNamespace(stacks=run.result.stacks, timed_out=True, cut_short=cut)
    outcome = ScenarioOutcome(Scenario(), None, phases=[run], problems=[LAUNCH_TIMEOUT])
    assert explaining(outcome) == [KILLED_WORKER_ORPHANS_QUEUE_LOCK]
    assert judged_ok(outcome)
    assert signature(outcome) == f"known.{ORPHAN}"


PYSPY_READING_WORKER = """\
Process 4251: python -c from multiprocessing.spawn import spawn_main
Python v3.11.7 (/usr/bin/python3.11)

Thread 4251 (idle): "MainThread"
    _recv (/usr/lib/python3.11/multiprocessing/connection.py:395)
    _recv_bytes (/usr/lib/python3.11/multiprocessing/connection.py:430)
    recv_bytes (/usr/lib/python3.11/multiprocessing/connection.py:216)
    get (/usr/lib/python3.11/multiprocessing/queues.py:103)
    get (/x/site-packages/zephon/_internal/runners/queue.py:224)
    _process_worker_main (/x/site-packages/zephon/_internal/runners/process.py:456)
"""
"""A worker holding its task queue's read lock, waiting on the pipe for a command."""
PYSPY_TRACKER = """\
Thread 4260 (idle): "MainThread"
    main (/usr/lib/python3.11/multiprocessing/resource_tracker.py:227)
"""
LOCKED = PYSPY_LOCKED_WORKER.format(func="_process_worker_main")
RANK_DRAWING = """\
Thread 2539 (idle): "MainThread"
    Condition.wait (/usr/lib/python3.11/threading.py:331)
    Queue.get (/usr/lib/python3.11/queue.py:180)
    buffered_iterable.<locals>.consumer (/x/zephon/_internal/utils/buffering.py:182)
    Pipeline._iter_body (/x/zephon/_internal/pipeline.py:1812)
    run_rank (/x/zephon_chaos/rank/main.py:237)
"""
"""A rank's main thread waiting for its next batch."""
RANK_CLOSING = """\
Current thread 0x00007f1e2f1b2740 (most recent call first):
  File "/x/zephon/_internal/runners/process.py", line 1838 in _shutdown_workers
"""
"""A rank's main thread closing its pipeline (faulthandler)."""
RANK_IN_ROUND = STORE_CALL_STACK
"""A rank's main thread in a checkpoint round: not bound by its pipeline."""


@pytest.mark.parametrize(
    ("ranks", "children", "proved"),
    [
        (
            {0: RANK_DRAWING, 1: RANK_DRAWING},
            {(0, 1): LOCKED, (0, 2): LOCKED, (1, 3): PYSPY_READING_WORKER, (1, 4): LOCKED},
            True,
        ),
        ({0: RANK_CLOSING}, {(0, 1): LOCKED, (0, 5): PYSPY_TRACKER}, True),
        ({0: RANK_DRAWING}, {(0, 1): LOCKED, (0, 2): PYSPY_READING_WORKER}, False),
        ({0: RANK_IN_ROUND}, {(0, 1): LOCKED, (0, 2): LOCKED}, False),
        ({}, {(0, 1): LOCKED}, False),
        ({0: RANK_DRAWING}, {(0, 5): PYSPY_TRACKER}, False),
        ({0: RANK_DRAWING}, {}, False),
    ],
    ids=[
        "one-rank-locked-out",
        "closing-tracker-ignored",
        "a-live-reader",
        "rank-in-a-round",
        "rank-not-captured",
        "no-worker-yet",
        "none",
    ],
)
def test_the_orphaned_lock_is_proved_where_every_worker_of_a_waiting_rank_waits_for_the_lock(
    tmp_path: Path, ranks: dict[int, str], children: dict[tuple[int, int], str], proved: bool
) -> None:
    """A live holder of a read lock reads the pipe: a rank waiting on its pipeline whose
    every worker waits for the lock has lost its holder, whatever another rank's workers do;
    the proof reads whose stack it is from the capture's labels as values (``Who``), never
    their text."""
    from zephon_chaos.diagnostics.stacks import Who

    stacks = {Who("rank", rank, 100 + rank): text for rank, text in ranks.items()}
    stacks.update({Who("child", rank, pid): text for (rank, pid), text in children.items()})
    watch = hang_watch(HANG_SIGNATURES, _killed(tmp_path, [4250]), quiet_s=163.0)
    assert watch.prove is not None and watch.early_s is not None and watch.early_s < 163.0
    assert (watch.prove(stacks) == ORPHAN) is proved  # type: ignore[arg-type]
    text_only = {str(who): text for who, text in stacks.items()}
    assert watch.prove(text_only) is None


def test_the_orphaned_lock_is_never_proved_before_a_worker_was_killed(tmp_path: Path) -> None:
    from zephon_chaos.diagnostics.stacks import Who

    watch = hang_watch(HANG_SIGNATURES, _killed(tmp_path, []), quiet_s=163.0)
    assert watch.prove is not None
    stacks = {Who("rank", 0, 100): RANK_DRAWING, Who("child", 0, 1): LOCKED}
    assert watch.prove(stacks) is None  # type: ignore[arg-type]
