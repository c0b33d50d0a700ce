"""The liveness oracle on synthetic records: each promise broken once, kept once, and stalls.

Times are monotonic seconds chosen here; ``T`` is the launch's ``aggregate_timeout_s``.
The suite's torchrun test (tests/zephon/test_liveness.py) measures a real failed round.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from zephon_chaos.explore.liveness_table import LivenessTally
from zephon_chaos.explore.signature import signature
from zephon_chaos.oracles import liveness as oracle
from zephon_chaos.oracles.liveness import Effect, LivenessBounds, LivenessKind, Stall, Step
from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.runner import ScenarioOutcome
from zephon_chaos.scenario import Scenario
from zephon_chaos.workload.records import (
    Batch,
    CheckpointEvent,
    RankRecord,
    RecordWriter,
    read_rank,
)
from zephon_chaos.workload.spec import PhaseTrigger, RankFault

T = 2.0
BOUNDS = LivenessBounds()
WAIT = BOUNDS.wait_bound_s(T)  # 3 T + 3 s = 9 s
PROPAGATION = BOUNDS.propagation_bound_s(T)  # T + 3 s = 5 s


def fetches(start: float, *seconds: float) -> list[Batch]:
    out, t = [], start
    for i, s in enumerate(seconds):
        out.append(Batch(i, 0, [(0, 0, i)], 0, fetch_at=t, fetch_s=s))
        t += s + 0.01
    return out


def ckpt(index: int, start: float, end: float, ok: bool = True) -> CheckpointEvent:
    return CheckpointEvent(
        index, 4, ok, error=None if ok else "RuntimeError: x", started_at=start, ended_at=end
    )


def rank(r: int, *checkpoints: CheckpointEvent, **kw: Any) -> RankRecord:
    kw.setdefault("batches", fetches(0.0, 0.2, 0.01, 0.01))
    return RankRecord(rank=r, checkpoints=list(checkpoints), **kw)


def judge(records: list[RankRecord], **kw: Any) -> oracle.LivenessVerdict:
    return oracle.judge(records, phase=0, timeout_s=T, **kw)


def test_normal_timings_pass_and_are_measured() -> None:
    records = [
        rank(0, ckpt(0, 1.0, 1.2), restore_at=0.0, restore_s=0.001),
        rank(1, ckpt(0, 1.0, 1.25)),
    ]
    verdict = judge(records)
    assert verdict.ok, verdict.lines()
    assert verdict.waits(Step.CHECKPOINT) == pytest.approx([0.2, 0.25])
    assert len(verdict.waits(Step.FETCH)) == 6
    assert verdict.waits(Step.RESTORE) == [0.001]
    assert verdict.propagations == []


def test_a_slow_propagation_is_a_problem_with_its_numbers() -> None:
    """Rank 0 (the leader) fails at 10.5 s; rank 1 learns of it 7 s later (bound 5 s)."""
    records = [rank(0, ckpt(1, 10.0, 10.5, ok=False)), rank(1, ckpt(1, 10.0, 17.5, ok=False))]
    verdict = judge(records)
    [p] = verdict.propagations
    assert (p.first_rank, p.by_leader, p.lags) == (0, True, {1: pytest.approx(7.0)})
    [problem] = verdict.problems
    assert problem.kind is LivenessKind.SLOW_PROPAGATION
    assert (problem.phase, problem.checkpoint, problem.rank) == (0, 1, 1)
    assert problem.measured_s == pytest.approx(7.0)
    assert problem.bound_s == PROPAGATION


def test_time_a_store_link_held_data_back_is_the_networks_not_zephons() -> None:
    """Rank 0 fails at 10.5 s; rank 1 ends 7 s later (bound 5 s), but 3 s of that its link, or
    the leader's that carries the notice, held data back; a 12 s attempt (bound 9 s) held 7 s."""
    records = [
        rank(0, ckpt(1, 10.0, 10.5, ok=False)),
        rank(1, ckpt(1, 10.0, 17.5, ok=False)),
        rank(2, ckpt(1, 10.0, 22.0, ok=False)),
    ]
    assert {p.kind for p in judge(records).problems} == {
        LivenessKind.SLOW_PROPAGATION,
        LivenessKind.UNBOUNDED_WAIT,
    }
    held = {0: [(11.0, 12.0)], 1: [(12.0, 14.0), (8.0, 10.4)], 2: [(11.0, 12.0), (13.0, 19.0)]}
    verdict = judge(records, held=held)
    assert verdict.ok, verdict.lines()
    assert verdict.propagations[0].lags == {1: pytest.approx(7.0), 2: pytest.approx(11.5)}
    # Held time outside the lag excuses nothing.
    assert not judge(records, held={1: [(0.0, 10.4)], 2: [(30.0, 40.0)]}).ok


def test_a_failure_that_reaches_every_rank_in_time_passes() -> None:
    """A follower fails first; the leader's budget runs out T later: within T + 3 s."""
    records = [
        rank(0, ckpt(1, 10.0, 12.1, ok=False)),
        rank(1, ckpt(1, 10.0, 10.05, ok=False)),
        rank(2, ckpt(1, 10.0, 12.2, ok=False)),
    ]
    verdict = judge(records)
    assert verdict.ok, verdict.lines()
    [p] = verdict.propagations
    assert p.first_rank == 1 and not p.by_leader
    assert p.max_lag == pytest.approx(2.15)


def test_a_rank_that_calls_after_the_failure_is_measured_from_its_own_call() -> None:
    """A follower fails at 10.05 s; the leader, late to the round (scheduling on loaded
    cores), calls at 13 s and fails when its own budget runs out: within T + 3 s of its call,
    though 5.2 s after the failure. Had it ended 7 s after its call, it would be slow."""
    late = [rank(0, ckpt(1, 13.0, 15.25, ok=False)), rank(1, ckpt(1, 10.0, 10.05, ok=False))]
    verdict = judge(late)
    assert verdict.ok, verdict.lines()
    [p] = verdict.propagations
    assert p.lags == {0: pytest.approx(2.25)}
    slow = [rank(0, ckpt(1, 13.0, 20.0, ok=False)), rank(1, ckpt(1, 10.0, 10.05, ok=False))]
    [problem] = judge(slow).problems
    assert problem.kind is LivenessKind.SLOW_PROPAGATION and problem.measured_s == 7.0


def test_an_unbounded_wait_is_a_problem_but_the_first_fetch_may_start_runners() -> None:
    slow_fetch = fetches(0.0, 12.0, 12.0)  # the first next() starts Zephon: it has 10 s more
    records = [rank(0, batches=slow_fetch), rank(1, ckpt(0, 30.0, 30.0 + WAIT + 0.5))]
    verdict = judge(records)
    kinds = {(p.kind, p.step, p.rank) for p in verdict.problems}
    assert kinds == {
        (LivenessKind.UNBOUNDED_WAIT, Step.FETCH, 0),
        (LivenessKind.UNBOUNDED_WAIT, Step.CHECKPOINT, 1),
    }
    fetch = next(p for p in verdict.problems if p.step is Step.FETCH)
    assert (fetch.measured_s, fetch.bound_s) == (12.0, WAIT)


def test_a_failing_fetch_is_measured_from_the_error_record() -> None:
    """An unreachable store fails the first next(): the error record names when it began."""
    error = {"kind": "error", "error": "RuntimeError: Can't reach", "at": 26.0, "fetch_at": 0.5}
    verdict = judge([rank(0, batches=[], events=[error])])
    [problem] = verdict.problems
    assert (problem.step, problem.measured_s) == (Step.FETCH, 25.5)
    assert problem.bound_s == BOUNDS.wait_bound_s(T, first_fetch=True)


def test_attempts_are_rounds_and_independent_retries_are_not_shared() -> None:
    def attempt(n: int, start: float, end: float, ok: bool) -> dict[str, Any]:
        return {
            "kind": "checkpoint_attempt",
            "index": 0,
            "attempt": n,
            "ok": ok,
            "started_at": start,
            "ended_at": end,
        }

    records = [
        rank(0, events=[attempt(1, 1.0, 1.1, False), attempt(2, 1.2, 1.3, True)]),
        rank(1, events=[attempt(1, 1.0, 3.0, False), attempt(2, 9.0, 9.1, True)]),
    ]
    lockstep = judge(records, retry="lockstep")
    assert [(p.index, p.attempt) for p in lockstep.propagations] == [(0, 1)]
    assert len(lockstep.waits(Step.CHECKPOINT)) == 4
    records[1].events[1]["ok"] = False
    independent = judge(records, retry="independent")
    assert [(p.index, p.attempt) for p in independent.propagations] == [(0, 1)]


def test_steps_a_scheduled_stall_covers_are_excluded_by_its_fault_record() -> None:
    """SIGSTOP at step 2 on rank 1 (its own fault record says when): later steps are left out,
    earlier ones still judged; a stalled link from the start leaves out its whole rank."""
    fired = {"kind": "fault", "rank": 1, "at_step": 2, "action": "sigstop", "at": 20.0}
    records = [
        rank(0, ckpt(0, 5.0, 5.1), ckpt(1, 21.0, 21.5, ok=False)),
        rank(1, ckpt(0, 5.0, 5.1), ckpt(1, 21.0, 60.0, ok=False), events=[fired]),
        rank(2, ckpt(0, 5.0, 60.0)),
    ]
    stalls = oracle.stalls_of(
        records,
        rank_faults=(RankFault(1, 2, "sigstop"),),
        start_toxics={2: "timeout"},
    )
    assert stalls == [
        Stall(1, "sigstop at step 2", since=20.0),
        Stall(2, "timeout from the start", since=None),
    ]
    verdict = judge(records, stalls=stalls)
    assert verdict.ok, verdict.lines()
    assert {(t.rank, t.index) for t in verdict.excluded if t.step is Step.CHECKPOINT} == {
        (1, 1),
        (2, 0),
    }
    assert (1, 0) in {(t.rank, t.index) for t in verdict.timings if t.step is Step.CHECKPOINT}
    assert judge(records).problems, "without the stalls the same records break both bounds"


def test_an_interposer_stall_counts_from_its_fired_event() -> None:
    trigger = PhaseTrigger(1, "shard", "toxic", occurrence=2, toxic="timeout")
    latency = PhaseTrigger(0, "shard", "toxic", occurrence=2, toxic="latency")
    events = {
        1: [{"kind": "fired", "phase": "shard", "n": 2, "action": "toxic", "t": 7.5}],
        0: [{"kind": "fired", "phase": "shard", "n": 2, "action": "toxic", "t": 7.4}],
    }
    stalls = oracle.stalls_of([], triggers=(trigger, latency), interposer_events=events)
    assert stalls == [Stall(1, "timeout at shard#2", since=7.5)]
    assert oracle.stalls_of([], triggers=(trigger,), interposer_events={}) == []


def test_a_rank_cut_off_from_the_store_is_no_propagation_measurement() -> None:
    """Rank 1's link goes down at its second shard write: it fails first, rank 0 (the leader)
    ends when its budget runs out, and rank 1's own second attempt (a reconnect to a store it
    cannot reach) is judged by the waiting bound only."""
    cut = PhaseTrigger(1, "shard", "cut", occurrence=2)
    events = {1: [{"kind": "fired", "phase": "shard", "n": 2, "action": "cut", "t": 10.1}]}
    stalls = oracle.stalls_of([], triggers=(cut,), interposer_events=events)
    assert stalls == [Stall(1, "cut at shard#2", 10.1, Effect.CUT)]

    def attempt(n: int, start: float, end: float) -> dict[str, Any]:
        return {
            "kind": "checkpoint_attempt",
            "index": 1,
            "attempt": n,
            "ok": False,
            "started_at": start,
            "ended_at": end,
        }

    records = [
        rank(0, events=[attempt(1, 10.0, 12.1), attempt(2, 12.3, 14.4)]),
        rank(1, events=[attempt(1, 10.0, 10.2), attempt(2, 12.3, 20.0)]),
    ]
    verdict = judge(records, stalls=stalls, retry="lockstep")
    assert verdict.ok, verdict.lines()
    assert [(p.attempt, p.first_rank, dict(p.lags)) for p in verdict.propagations] == [
        (1, 1, {0: pytest.approx(1.9)}),
        (2, 0, {}),
    ]
    assert len(verdict.waits(Step.CHECKPOINT)) == 4
    assert not judge(records, retry="lockstep").ok, "uncut, rank 1 would learn 5.6 s late"


def test_records_carry_the_timing_fields(tmp_path: Path) -> None:
    """What the workload writes (rank/main.py) reads back as timings."""
    out = RecordWriter(tmp_path, 0)
    out.write("start", rank=0, world=1, lanes=[0], restored="x", restore_at=1.0, restore_s=0.01)
    out.write("batch", i=0, lane=0, ids=[[0, 0, 0]], ckpts=0, fetch_at=1.1, fetch_s=0.3)
    out.write("checkpoint", index=0, after_batches=1, ok=True, started_at=2.0, ended_at=2.4)
    out.write("exhausted", after_batches=1, fetch_at=3.0, fetch_s=0.05)
    out.close()
    timings = oracle.timings_of(read_rank(tmp_path, 0))
    assert [(t.step, t.started_at, round(t.seconds, 6), t.first) for t in timings] == [
        (Step.RESTORE, 1.0, 0.01, False),
        (Step.FETCH, 1.1, 0.3, True),
        (Step.FETCH, 3.0, 0.05, False),
        (Step.CHECKPOINT, 2.0, 0.4, False),
    ]


def outcome_with(lines: list[Problem]) -> ScenarioOutcome:
    return ScenarioOutcome(Scenario(), None, problems=lines)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (LivenessKind.SLOW_PROPAGATION, "liveness.slow-propagation.no-resume.no-resume"),
        (LivenessKind.UNBOUNDED_WAIT, "liveness.unbounded-wait.no-resume.no-resume"),
    ],
)
def test_liveness_problems_have_their_own_signature_area(kind: LivenessKind, expected: str) -> None:
    problem = oracle.LivenessProblem(kind, 0, Step.CHECKPOINT, 1, 1, 7.0, 5.0)
    assert signature(outcome_with([problem.problem()])) == expected
    # a checkpoint-correctness problem of the same launch names the finding first
    differs = Problem(Area.CHECKPOINT, ProblemKind.DIFFERS, "checkpoint 1 differs", checkpoint=1)
    both = [problem.problem(), differs.in_phase(0)]
    assert signature(outcome_with(both)) == "checkpoint.differs.no-resume.no-resume"


def test_the_summary_table_shows_the_measured_distributions() -> None:
    tally = LivenessTally()
    assert tally.section() == []
    records = [rank(0, ckpt(1, 10.0, 10.5, ok=False)), rank(1, ckpt(1, 10.0, 11.5, ok=False))]
    tally.add_verdict(judge(records))
    text = "\n".join(tally.section())
    assert "| checkpoint() attempt | 2 | 0.500 | 1.500 | 1.500 | 0.17 |" in text
    assert "| failure reaches the others (leader failed first) | 1 | 1.000 |" in text
    assert "| next() | 6 |" in text


def test_calls_the_harness_ended_with_its_failed_group_are_not_measured() -> None:
    """In process the launcher releases a failed group's store: a leader still waiting ends
    then, by the teardown (torchrun's SIGTERM would leave no record), not by Zephon."""
    from zephon_chaos.launch.result import GroupResult, RankOutcome

    records = [rank(0, ckpt(0, 10.0, 16.0, ok=False)), rank(1, ckpt(0, 10.0, 10.05, ok=False))]
    assert not judge(records).ok  # measured, the leader's 6 s would be slow propagation
    result = GroupResult(
        "g",
        [1],
        [
            RankOutcome(0, 0, 0, None, -15, error="GroupStopped: ...", killed_by_harness=True),
            RankOutcome(1, 1, 0, None, 1, error="RuntimeError: x"),
        ],
        timed_out=False,
        duration_s=6.0,
        workdir=Path("."),
        agent_logs=[],
        torn_down_at=10.5,
    )
    stalls = oracle._torn_down(result)
    assert [(s.rank, s.since) for s in stalls] == [(0, 10.5)]
    verdict = judge(records, stalls=stalls)
    assert verdict.ok, verdict.lines()
    assert [t.rank for t in verdict.excluded] == [0]
    assert oracle._torn_down(None) == []


def test_the_first_fetch_that_starts_worker_processes_is_not_a_wait() -> None:
    """``runner: process`` starts its workers at the first next() (26-70 s a launch here),
    bounded by nothing in Zephon: not measured; a later fetch still is."""
    slow_start = fetches(0.0, 28.0, 0.01)
    assert not judge([rank(0, batches=slow_start)]).ok
    verdict = judge([rank(0, batches=slow_start)], worker_processes=True)
    assert verdict.ok, verdict.lines()
    assert [t.seconds for t in verdict.excluded] == [28.0]
    stuck_later = fetches(0.0, 28.0, WAIT + 1.0)
    assert not judge([rank(0, batches=stuck_later)], worker_processes=True).ok


def killed_workers(at: float, killed: list[int]) -> dict[str, Any]:
    """A rank's child-fault record (rank/main.py ``_kill_children``): at step 2, at ``at``."""
    return {"kind": "child-fault", "at_step": 2, "target": "workers", "at": at, "killed": killed}


@pytest.mark.parametrize(
    ("killed", "expected"),
    [
        ([1, 2], [Stall(0, "workers killed at step 2", 20.0, Effect.RESPAWN)]),
        ([], []),
    ],
    ids=["killed", "found-none"],
)
def test_a_child_fault_that_killed_workers_is_a_respawn(
    killed: list[int], expected: list[Stall]
) -> None:
    """Only a kill that found workers makes the rank wait for replacements: a record that
    killed nothing excuses nothing."""
    assert oracle.stalls_of([rank(0, events=[killed_workers(20.0, killed)])]) == expected


def test_after_a_child_fault_only_its_ranks_fetches_are_left_unjudged() -> None:
    """Rank 0 kills its workers at 20 s: its fetch after the kill waits for replacements (no
    timeout of Zephon's bounds that), so it is not judged; its slow checkpoint after the kill,
    its slow fetch that ended before it, and rank 1's slow fetch after it still are."""
    slow = WAIT + 1.0
    own = [
        Batch(0, 0, [(0, 0, 0)], 0, fetch_at=0.0, fetch_s=0.2),
        Batch(1, 0, [(0, 0, 1)], 0, fetch_at=1.0, fetch_s=slow),  # ends at 11 s: before
        Batch(2, 0, [(0, 0, 2)], 0, fetch_at=21.0, fetch_s=30.0),  # after the kill
    ]
    other = [
        Batch(0, 1, [(0, 1, 0)], 0, fetch_at=0.0, fetch_s=0.2),
        Batch(1, 1, [(0, 1, 1)], 0, fetch_at=21.0, fetch_s=30.0),
    ]
    records = [
        rank(0, ckpt(0, 60.0, 60.0 + slow), batches=own, events=[killed_workers(20.0, [7])]),
        rank(1, ckpt(0, 60.0, 60.1), batches=other),
    ]
    stalls = oracle.stalls_of(records)
    verdict = judge(records, stalls=stalls)
    assert [(t.rank, t.step, t.index) for t in verdict.excluded] == [(0, Step.FETCH, 2)]
    found = {(p.kind, p.step, p.rank, round(p.measured_s, 6)) for p in verdict.problems}
    assert found == {
        (LivenessKind.UNBOUNDED_WAIT, Step.FETCH, 0, slow),
        (LivenessKind.UNBOUNDED_WAIT, Step.CHECKPOINT, 0, slow),
        (LivenessKind.UNBOUNDED_WAIT, Step.FETCH, 1, 30.0),
    }
    unexcused = {(p.step, p.rank, round(p.measured_s, 6)) for p in judge(records).problems}
    assert (Step.FETCH, 0, 30.0) in unexcused, "without the record the fetch would be judged"
