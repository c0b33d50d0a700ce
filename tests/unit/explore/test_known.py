"""Known defects recognise the explorer's real outcomes for them, and nothing else."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from zephon_chaos.explore.known import STRING_KEY_ZERO_CID_RESTORE, explaining, judged_ok
from zephon_chaos.explore.signature import signature
from zephon_chaos.inproc import inproc_runner
from zephon_chaos.inproc.runner import InprocScenarioRunner
from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.runner import ScenarioOutcome
from zephon_chaos.scenario import Launch, ProxyFault, Scenario
from zephon_chaos.workload.records import CHILD_FAULT_RECORD, RankRecord
from zephon_chaos.workload.spec import CheckpointAt, DataSpec, PipelineSpec, SourceSpec

KNOWN_ZERO_CID = f"known.{STRING_KEY_ZERO_CID_RESTORE.id}"

JSON_CODEC_AT_STEP_0 = Scenario(
    pipeline=PipelineSpec(canonical_replicas=2, aggregate_serializer="json"),
    launches=(Launch(2, 1, (CheckpointAt(0),)), Launch(2, 1)),
)
"""The round over two ranks goes through the json codec: the merged checkpoint's keys come
back as strings, while no lane has drawn a chunk."""
PLAIN_JSON_AT_STEP_0 = Scenario(
    pipeline=PipelineSpec(canonical_replicas=2),
    launches=(Launch(1, 1, (CheckpointAt(0),)), Launch(1, 1)),
    persist_format="plain_json",
)

PLAIN_JSON_LINK_FAULTED = Scenario(
    pipeline=PipelineSpec(canonical_replicas=3, mapping="interleaved", aggregate_timeout_s=2.0),
    launches=(
        Launch(1, 1, (CheckpointAt(0),)),
        Launch(
            2, 2, (CheckpointAt(2),), proxy_faults=(ProxyFault(0, "latency", {"latency": 200}),)
        ),
    ),
    persist_format="plain_json",
)
"""The same, found by the explorer in a launch with a link fault: the fault oracle, not the
runner, names the failure (a rank's error that is not the fault's cause)."""


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[InprocScenarioRunner]:
    with inproc_runner(tmp_path / "inproc") as r:
        yield r
    assert not [t for t in threading.enumerate() if t.name.startswith("zc-s")]


@pytest.mark.zephon_defect("string-key-zero-cid-restore")
@pytest.mark.parametrize(
    "scenario",
    [JSON_CODEC_AT_STEP_0, PLAIN_JSON_AT_STEP_0, PLAIN_JSON_LINK_FAULTED],
    ids=["json-codec", "plain-json", "plain-json-link-faulted"],
)
def test_a_string_keyed_restore_before_any_chunk_is_the_known_defect(
    runner: InprocScenarioRunner, scenario: Scenario
) -> None:
    outcome = runner.run(scenario)
    assert not outcome.ok, outcome.report()
    assert [d.id for d in explaining(outcome)] == [STRING_KEY_ZERO_CID_RESTORE.id]
    assert judged_ok(outcome)
    assert signature(outcome) == KNOWN_ZERO_CID


@pytest.mark.zephon_defect("string-key-zero-cid-restore")
def test_the_same_failure_without_string_keys_or_with_every_lane_drawn_is_not_explained(
    runner: InprocScenarioRunner,
) -> None:
    """The defect needs both: keys made strings, and a lane whose next chunk id is 0. The
    real outcome, told otherwise about either, is a violation again."""
    outcome = runner.run(JSON_CODEC_AT_STEP_0)
    assert signature(outcome) == KNOWN_ZERO_CID, outcome.report()
    words = [dataclasses.replace(p, text="reworded") for p in outcome.problems]
    assert signature(dataclasses.replace(outcome, problems=words)) == KNOWN_ZERO_CID, (
        "signatures and known defects read a problem's fields, never its words"
    )

    msgpack = dataclasses.replace(
        outcome,
        scenario=outcome.scenario.with_(
            pipeline=dataclasses.replace(outcome.scenario.pipeline, aggregate_serializer="msgpack")
        ),
    )
    assert signature(msgpack) == "launch.RuntimeError.same-size.boundary"

    drawn = _with_lane_counts(outcome, {0: 1, 1: 1})
    assert not explaining(drawn)
    assert signature(drawn) == "launch.RuntimeError.same-size.boundary"


def _with_rank_fault_consequences(outcome: ScenarioOutcome) -> ScenarioOutcome:
    """``outcome`` as the torchrun tier judges it when the restored launch also carried a
    rank fault (sigkill at shard#2 of rank 0): the fault never fired, the checkpoint due
    before it never completed, rank 0 was not the one the fault ended."""
    line = "phase 1: rank fault sigkill at shard#2"
    consequences = [
        Problem(Area.FAULT, ProblemKind.NO_EVIDENCE, f"{line} left no evidence", rank=0),
        Problem(
            Area.FAULT, ProblemKind.LOST_CHECKPOINT, f"{line}: checkpoint 0 lost", checkpoint=0
        ),
        Problem(
            Area.FAULT, ProblemKind.NOT_ENDED, f"{line}: rank 0 exited 1", checkpoint=0, rank=0
        ),
    ]
    problems = [*outcome.problems, *(p.in_phase(1) for p in consequences)]
    return dataclasses.replace(outcome, problems=problems)


@pytest.mark.zephon_defect("string-key-zero-cid-restore")
def test_what_a_launch_ended_at_its_restore_could_not_do_is_explained_with_it(
    runner: InprocScenarioRunner,
) -> None:
    """Every rank failed restoring: the launch drew no batch, so a checkpoint due before its
    rank fault, and the fault itself, are the defect's consequences, not a finding of their
    own (found as \"fault.lost-checkpoint\" by an explore run of the torchrun tier). Where a
    rank failed otherwise, they stay unexplained."""
    outcome = _with_rank_fault_consequences(runner.run(JSON_CODEC_AT_STEP_0))
    assert judged_ok(outcome) and signature(outcome) == KNOWN_ZERO_CID, outcome.report()

    restored = outcome.phases[1]
    ranks = list(restored.result.ranks)
    ranks[1] = dataclasses.replace(ranks[1], error="RuntimeError: something else")
    result = dataclasses.replace(restored.result, ranks=ranks)
    mixed = dataclasses.replace(
        outcome, phases=[outcome.phases[0], dataclasses.replace(restored, result=result)]
    )
    assert not judged_ok(mixed)
    assert signature(mixed).startswith("fault.")

    # One rank ended by the group's tear-down before its own restore failed (no error of
    # its own; seed 290's torchrun shard): the launch still ended at its restore.
    torn_ranks = list(restored.result.ranks)
    torn_ranks[1] = dataclasses.replace(torn_ranks[1], error=None, exitcode=-15)
    torn = dataclasses.replace(
        restored, result=dataclasses.replace(restored.result, ranks=torn_ranks)
    )
    torn_down = dataclasses.replace(outcome, phases=[outcome.phases[0], torn])
    assert judged_ok(torn_down) and signature(torn_down) == KNOWN_ZERO_CID, torn_down.report()


def _with_lane_counts(outcome: ScenarioOutcome, counts: dict[int, int]) -> ScenarioOutcome:
    """``outcome`` as if its first launch's checkpoints had ``counts`` batches a lane."""
    first = outcome.phases[0]
    facts = [dataclasses.replace(f, lane_counts=dict(counts)) for f in first.checkpoints.facts]
    checkpoints = dataclasses.replace(first.checkpoints, facts=facts)
    phases = [dataclasses.replace(first, checkpoints=checkpoints), *outcome.phases[1:]]
    return dataclasses.replace(outcome, phases=phases)


def _retry_outcome(first_ok: bool) -> object:
    """Rank 0 of launch 1: attempt 1 of checkpoint 0 failed (or not), the retry refused."""
    from types import SimpleNamespace

    from zephon_chaos.explore.known import MISMATCH
    from zephon_chaos.workload.records import CheckpointEvent, RankRecord

    refused = f"RuntimeError: cannot merge 3 shards:\n  - {MISMATCH}: {{'1', None}}"
    events = [
        {"kind": "checkpoint_attempt", "index": 0, "attempt": 1, "ok": first_ok, "error": None},
        {"kind": "checkpoint_attempt", "index": 0, "attempt": 2, "ok": False, "error": refused},
    ]
    record = RankRecord(
        rank=0, checkpoints=[CheckpointEvent(0, 4, False, error=refused)], events=events
    )
    return SimpleNamespace(phases=[SimpleNamespace(index=1, records=[record])])


def test_a_retry_refused_for_a_failed_attempts_round_id_is_the_missed_round_defect() -> None:
    """The fault oracle names the leader's refused retry; the known defect explains it only
    when an earlier attempt of the same checkpoint failed on that rank."""
    from zephon_chaos.explore.known import MISSED_ROUND_POISONS_NEXT

    text = "rank 0 failed with an error that names none of ['TCPStore']: 'cannot merge'"
    line = Problem(Area.FAULT, ProblemKind.NO_CAUSE, text, checkpoint=0, rank=0).in_phase(1)
    assert MISSED_ROUND_POISONS_NEXT.explains(_retry_outcome(first_ok=False), line)  # type: ignore[arg-type]
    assert not MISSED_ROUND_POISONS_NEXT.explains(_retry_outcome(first_ok=True), line)  # type: ignore[arg-type]
    other = dataclasses.replace(line, rank=1)
    assert not MISSED_ROUND_POISONS_NEXT.explains(_retry_outcome(first_ok=False), other)  # type: ignore[arg-type]


def acted(action: str) -> list[Any]:
    """The store events a hosted-store fault's watcher records for ``action`` at its point."""
    from zephon_chaos.launch.store_process import StoreAction, StoreEvent

    done = {
        "kill": [StoreAction.KILLED],
        "restart": [StoreAction.KILLED, StoreAction.RESTARTED],
        "sigstop": [StoreAction.STOPPED, StoreAction.CONTINUED],
    }[action]
    return [StoreEvent(a, 4242, 10.0 + n) for n, a in enumerate(done)]


def _killed_at(at: str, world: int, leader_s: float, action: str = "kill") -> object:
    """A launch of ``world`` ranks whose hosted store got ``action`` at ``at`` (T = 2 s); the
    leader's faulted attempt took ``leader_s``."""
    from types import SimpleNamespace

    from zephon_chaos.nemeses.hosted_store import StoreFaultLaunch
    from zephon_chaos.oracles.faults import FaultOutcome, FaultVerdict
    from zephon_chaos.scenario import StoreFault

    fault = StoreFaultLaunch(StoreFault(action, at), store=None, timeout_s=2.0)  # type: ignore[arg-type]
    fault.verdict = FaultVerdict(FaultOutcome.FAILED, 0, durations={0: leader_s, 1: 0.1})
    fault.acted = acted(action)  # what the watcher did at the point: the trigger happened
    run = SimpleNamespace(
        index=0, fault=fault, liveness=None, phase=SimpleNamespace(world_size=world)
    )
    return SimpleNamespace(phases=[run])


@pytest.mark.parametrize(
    ("at", "world", "leader_s", "action", "rank", "explained"),
    [
        ("ack#1", 4, 9.8, "kill", 0, True),  # the downstream profile's finding
        ("ack#1", 4, 9.0 + 2 * 4 * 2.0, "kill", 0, True),  # two deletes at the ceiling
        ("ack#1", 4, 9.0 + 2 * 4 * 2.0 + 0.5, "kill", 0, False),  # more than its deletes
        ("ack#1", 2, 9.8, "kill", 0, False),  # no acknowledgement to delete
        ("ack#1", 4, 9.8, "kill", 1, False),  # a follower: not the leader's clean-up
        ("shard#1", 4, 9.8, "kill", 0, False),  # before any acknowledgement
        ("ack#1", 4, 9.8, "restart", 0, False),  # a live store answers the deletes
    ],
)
def test_the_leaders_slow_failure_after_a_store_kill_at_ack_is_the_dead_store_cleanup_defect(
    at: str, world: int, leader_s: float, action: str, rank: int, explained: bool
) -> None:
    """Explained only on the leader, for a kill at a follower's acknowledgement, and only up
    to one dead-store delete per acknowledgement the leader can have read."""
    from zephon_chaos.explore.known import DEAD_STORE_ACK_CLEANUP

    text = f"rank {rank} took {leader_s:.1f}s to fail one attempt, over the bound 9.0s"
    line = Problem(Area.FAULT, ProblemKind.SLOW_FAILURE, text, phase=0, checkpoint=0, rank=rank)
    outcome = _killed_at(at, world, leader_s, action)
    assert DEAD_STORE_ACK_CLEANUP.explains(outcome, line) is explained  # type: ignore[arg-type]


PYSPY_WEDGED = """\
Process 4242: python -m zephon_chaos.rank spec.json
Python v3.11.7 (/usr/bin/python3.11)

Thread 0x7F (idle): "zephon-watchdog"
    put (/usr/lib/python3.11/multiprocessing/queues.py:94)
    {func} (/x/site-packages/zephon/_internal/runners/process.py:1284)
    _watchdog_loop (/x/site-packages/zephon/_internal/runners/process.py:1021)
Thread 0x80 (idle): "MainThread"
    _shutdown_workers (/x/site-packages/zephon/_internal/runners/process.py:1838)
    <module> (/x/site-packages/zephon_chaos/rank/__main__.py:9)
"""
"""A hung rank's py-spy dump: the watchdog blocked re-dispatching, the main thread closing."""
FAULTHANDLER_WEDGED = """\
Thread 0x00007f1e2d3c4700 (most recent call first):
  File "/usr/lib/python3.11/multiprocessing/queues.py", line 94 in put
  File "/x/zephon/_internal/runners/process.py", line 1284 in {func}
  File "/x/zephon/_internal/runners/process.py", line 1021 in _watchdog_loop

Current thread 0x00007f1e2f1b2740 (most recent call first):
  File "/x/zephon/_internal/runners/process.py", line 1838 in _shutdown_workers
"""
"""The same hang as faulthandler dumps it."""
PYSPY_LOCKED_WORKER = """\
Process 4250: python -c from multiprocessing.spawn import spawn_main
Python v3.11.7 (/usr/bin/python3.11)

Thread 4250 (idle): "MainThread"
    SemLock.__enter__ (/usr/lib/python3.11/multiprocessing/synchronize.py:95)
    Queue.get (/usr/lib/python3.11/multiprocessing/queues.py:102)
    NamedQueue.get (/x/site-packages/zephon/_internal/runners/queue.py:224)
    {func} (/x/site-packages/zephon/_internal/runners/process.py:456)
"""
"""A replacement worker of the hung rank waiting for its task queue's read lock."""
LAUNCH_TIMEOUT = Problem(Area.LAUNCH, ProblemKind.TIMEOUT, "phase 0: launch timed out", phase=0)
LAUNCH_ERROR = dataclasses.replace(LAUNCH_TIMEOUT, kind="RuntimeError")
LIVENESS_WAIT = dataclasses.replace(
    LAUNCH_TIMEOUT, area=Area.LIVENESS, kind=ProblemKind.UNBOUNDED_WAIT
)


def _wedged(stack: str, child_fault: bool = True, func: str = "_handle_dead_worker") -> object:
    """An outcome whose launch 0 (with a child fault of rank 0, or none) timed out, its
    rank 0 leaving ``stack`` with ``func`` as the watchdog's frame."""
    from types import SimpleNamespace

    from zephon_chaos.workload.spec import ChildFault

    faults = (ChildFault(0, 3),) if child_fault else ()
    phase = Launch(2, 8, child_faults=faults)
    result = SimpleNamespace(stacks={"rank 0 (pid 4242)": stack.format(func=func)})
    spec = SimpleNamespace(restore_from=None)
    killed = [{"kind": CHILD_FAULT_RECORD, "at_step": 3, "killed": [4250]}] if child_fault else []
    records = [RankRecord(rank=0, events=killed)]  # the child fault acted: its record
    run = SimpleNamespace(index=0, phase=phase, result=result, spec=spec, records=records)
    return SimpleNamespace(phases=[run])


@pytest.mark.parametrize(
    "stack", [PYSPY_WEDGED, FAULTHANDLER_WEDGED], ids=["py-spy", "faulthandler"]
)
@pytest.mark.parametrize(
    ("child_fault", "func", "problem", "explained"),
    [
        (True, "_handle_dead_worker", LAUNCH_TIMEOUT, True),
        (True, "ProcessRunner._handle_dead_worker", LAUNCH_TIMEOUT, True),  # qualified name
        (False, "_handle_dead_worker", LAUNCH_TIMEOUT, False),  # no worker was killed
        (True, "_dispatch", LAUNCH_TIMEOUT, False),  # the watchdog elsewhere
        (True, "_handle_dead_worker", LAUNCH_ERROR, False),
        (True, "_handle_dead_worker", LIVENESS_WAIT, False),
        (True, "_handle_dead_worker", dataclasses.replace(LAUNCH_TIMEOUT, phase=1), False),
    ],
    ids=[
        "wedged",
        "wedged-qualified",
        "no-child-fault",
        "no-redispatch-frame",
        "launch-error",
        "not-a-launch",
        "another-launch",
    ],
)
def test_a_hung_launch_whose_watchdog_redispatches_is_the_orphaned_lock_defect(
    stack: str, child_fault: bool, func: str, problem: Problem, explained: bool
) -> None:
    """Explained only for a launch that timed out after its child fault, with the watchdog's
    re-dispatch frame in its stacks, in either dump format the harness captures."""
    from zephon_chaos.explore.known import KILLED_WORKER_ORPHANS_QUEUE_LOCK

    outcome = _wedged(stack, child_fault, func)
    assert KILLED_WORKER_ORPHANS_QUEUE_LOCK.explains(outcome, problem) is explained  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("func", "explained"), [("_process_worker_main", True), ("_service_loop", False)]
)
def test_a_replacement_worker_waiting_for_the_queue_lock_is_the_orphaned_lock_defect(
    func: str, explained: bool
) -> None:
    """A worker of the hung launch waits for its task queue's read lock: explained with no
    watchdog frame in the stacks (a lock wait elsewhere is not)."""
    from zephon_chaos.explore.known import KILLED_WORKER_ORPHANS_QUEUE_LOCK

    outcome = _wedged(PYSPY_LOCKED_WORKER, func=func)
    assert KILLED_WORKER_ORPHANS_QUEUE_LOCK.explains(outcome, LAUNCH_TIMEOUT) is explained  # type: ignore[arg-type]


def test_the_orphaned_lock_defect_is_known_and_explains_its_hang_alone() -> None:
    """Registered with the known defects, it sets the hang aside; no other defect claims it."""
    from zephon_chaos.explore.known import KILLED_WORKER_ORPHANS_QUEUE_LOCK

    run = _wedged(PYSPY_WEDGED).phases[0]  # type: ignore[attr-defined]
    outcome = ScenarioOutcome(Scenario(), None, phases=[run], problems=[LAUNCH_TIMEOUT])
    assert explaining(outcome) == [KILLED_WORKER_ORPHANS_QUEUE_LOCK]
    assert judged_ok(outcome)


MTP_END = (
    "RuntimeError: MTP checkpoint failed in subprocess: Traceback (most recent call last): ... "
    "RuntimeError: [PID 19705] Timed out after 30.0s waiting for round id"
)
"""The error record of a rank whose next() ran the implicit round at its data's end."""
FINITE_DATA = DataSpec(sources=(SourceSpec("a", exhausted="stop"),))
ENDLESS_DATA = DataSpec(sources=(SourceSpec("a", exhausted="repeat"),))


def _ended(mtp: bool, data: DataSpec, error: str, in_next: bool) -> ScenarioOutcome:
    """Launch 0 failed with rank 2's ``error`` (raised by ``next()`` where ``in_next``)."""
    from types import SimpleNamespace

    scenario = Scenario(
        data=data,
        pipeline=PipelineSpec(canonical_replicas=4, runner="process", mtp_mode=mtp),
        launches=(Launch(3, 4),),
    )
    record = RankRecord(rank=2)
    where = {"fetch_at": 1.0} if in_next else {}
    record.events.append({"kind": "error", "error": error, **where})
    spec = SimpleNamespace(restore_from=None)
    records = [RankRecord(rank=0), record]
    run = SimpleNamespace(index=0, phase=scenario.launches[0], spec=spec, records=records)
    problem = Problem(Area.LAUNCH, "RuntimeError", "phase 0 failed", phase=0, rank=2)
    return ScenarioOutcome(scenario, None, phases=[run], problems=[problem])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("mtp", "data", "error", "in_next", "explained"),
    [
        (True, FINITE_DATA, MTP_END, True, True),
        (False, FINITE_DATA, MTP_END, True, False),  # no MTP child: no implicit round
        (True, ENDLESS_DATA, MTP_END, True, False),  # no data ends
        (True, FINITE_DATA, MTP_END, False, False),  # raised by checkpoint(), not next()
        (True, FINITE_DATA, "RuntimeError: MTP subprocess exited unexpectedly", True, False),
    ],
    ids=["end-of-data", "no-mtp", "endless", "in-checkpoint", "dead-child"],
)
def test_a_next_that_failed_the_implicit_round_at_the_data_end_is_the_mtp_defect(
    mtp: bool, data: DataSpec, error: str, in_next: bool, explained: bool
) -> None:
    from zephon_chaos.explore.known import MTP_END_OF_DATA_WAITS

    outcome = _ended(mtp, data, error, in_next)
    assert MTP_END_OF_DATA_WAITS.explains(outcome, outcome.problems[0]) is explained
    assert (explaining(outcome) == [MTP_END_OF_DATA_WAITS]) is explained
