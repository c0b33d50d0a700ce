"""A launch's deadline: what its reference took, scaled, plus its faults' bounds and a margin,
never above the flat deadline; measured from the reference's records. Pure, no launches."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zephon_chaos.oracles.faults import failure_bound_s
from zephon_chaos.runner.deadlines import (
    MARGIN_FACTOR,
    MARGIN_S,
    ROUND_S,
    Ceiling,
    CeilingKind,
    Deadline,
    LaunchPlan,
    ReferenceTiming,
    every_rank_began,
    launch_deadline,
    measure_reference,
    plan_of,
)
from zephon_chaos.scenario import Launch, ProxyFault, StoreFault
from zephon_chaos.workload.records import BEGAN_RECORD, RecordWriter, read_phase, record_path
from zephon_chaos.workload.spec import CheckpointAt, PipelineSpec, RankLag, WorkloadSpec

FLAT = (Ceiling(CeilingKind.FLAT, 120.0),)
REFERENCE = ReferenceTiming(
    ranks=2, steps=8, startup_s=5.0, pipeline_s=1.0, step_s=0.5, teardown_s=1.0
)
"""A reference on 2 ranks: 5 s to begin, 1 s to its first batch, 0.5 s a step, 1 s to end."""
CORES = 2
T = 2.0


def deadline_of(
    plan: LaunchPlan, load: float = 0.0, reference: ReferenceTiming = REFERENCE
) -> Deadline:
    return launch_deadline(reference, plan, FLAT, load=load, cores=CORES)


def test_a_plain_launch_gets_the_margin_over_what_it_should_take_and_one_failing_wait() -> None:
    plan = LaunchPlan(ranks=2, steps=4, rounds=1, timeout_s=T)
    expected = 5.0 + 1.0 + 4 * 0.5 + ROUND_S + 1.0
    deadline = deadline_of(plan)
    assert deadline.expected_s == pytest.approx(expected)
    assert deadline.seconds == pytest.approx(
        MARGIN_FACTOR * expected + failure_bound_s(T) + MARGIN_S
    )
    assert deadline.limited_by is None
    assert deadline.describe().startswith(f"deadline {deadline.seconds:.0f}s = ")


@pytest.mark.parametrize(
    ("ranks", "load", "reference_load", "times"),
    [
        (4, 0.0, 0.0, 2.0),  # twice the ranks per core
        (1, 0.0, 0.0, 1.0),  # fewer ranks: never expected faster
        (2, 8.0, 2.0, 4.0),  # the machine 4 times as loaded as when the reference ran
        (2, 1.0, 6.0, 1.0),  # quieter now: still the reference's time
        (4, 4.0, 0.0, 4.0),  # both
    ],
)
def test_the_expected_time_scales_with_ranks_per_core_and_with_the_machines_load(
    ranks: int, load: float, reference_load: float, times: float
) -> None:
    plain = deadline_of(LaunchPlan(ranks=2, steps=4, rounds=0, timeout_s=T))
    reference = replace(REFERENCE, load=reference_load)
    scaled = deadline_of(LaunchPlan(ranks=ranks, steps=4, rounds=0, timeout_s=T), load, reference)
    assert scaled.expected_s == pytest.approx(times * plain.expected_s)


def test_steps_past_the_data_the_reference_drew_cost_nothing() -> None:
    """A launch that runs dry (10000 steps of a finite source) draws what is left, at most
    what the reference drew."""
    dry = deadline_of(LaunchPlan(ranks=2, steps=10_000, rounds=0, timeout_s=T))
    assert dry.expected_s == deadline_of(LaunchPlan(2, REFERENCE.steps, 0, T)).expected_s


def test_each_fault_term_adds_its_own_bound() -> None:
    plain = LaunchPlan(ranks=2, steps=4, rounds=2, timeout_s=T)
    base = deadline_of(plain)
    faulted = deadline_of(LaunchPlan(2, 4, 2, T, attempts=2, faulted_waits=2, stall_s=7.0))
    assert faulted.waits == 3 and faulted.bound_s == failure_bound_s(T, attempts=2)
    assert faulted.limited_by is None
    assert faulted.seconds - base.seconds == pytest.approx(
        3 * failure_bound_s(T, 2) - failure_bound_s(T) + 7.0
    )
    assert "3 failing wait(s)" in faulted.describe() and "stall 7.0s" in faulted.describe()
    restarted = deadline_of(LaunchPlan(2, 4, 2, T, restarts=1))
    assert restarted.expected_s == pytest.approx(2 * base.expected_s)
    respawned = deadline_of(LaunchPlan(2, 4, 2, T, respawns=1))
    assert respawned.expected_s > base.expected_s + REFERENCE.pipeline_s


def test_the_flat_deadline_stays_the_ceiling_and_the_budget_caps_below_it() -> None:
    long = deadline_of(LaunchPlan(ranks=2, steps=4, rounds=1, timeout_s=30.0))
    assert long.seconds == 120.0 and long.limited_by is CeilingKind.FLAT
    assert "the flat --deadline, below" in long.describe()
    capped = long.capped(Ceiling(CeilingKind.BUDGET, 40.0))
    assert capped.seconds == 40.0 and capped.limited_by is CeilingKind.BUDGET
    assert long.capped(Ceiling(CeilingKind.BUDGET, 500.0)) == long


def test_without_a_measured_reference_the_launch_gets_the_lowest_ceiling() -> None:
    stall = Ceiling(CeilingKind.STALL, 39.0)
    deadline = launch_deadline(None, LaunchPlan(2, 4, 1, T), (*FLAT, stall))
    assert deadline.seconds == 39.0 and deadline.limited_by is CeilingKind.STALL
    assert "no measured reference run" in deadline.describe()


@given(
    reference=st.builds(
        ReferenceTiming,
        ranks=st.integers(1, 8),
        steps=st.integers(0, 50),
        startup_s=st.floats(0, 500),
        pipeline_s=st.floats(0, 500),
        step_s=st.floats(0, 10),
        teardown_s=st.floats(0, 100),
        load=st.floats(0, 64),
    ),
    plan=st.builds(
        LaunchPlan,
        ranks=st.integers(1, 8),
        steps=st.integers(0, 10_000),
        rounds=st.integers(0, 6),
        timeout_s=st.floats(0.5, 300),
        attempts=st.integers(1, 3),
        faulted_waits=st.integers(0, 10),
        stall_s=st.floats(0, 30),
        respawns=st.integers(0, 2),
        restarts=st.integers(0, 2),
    ),
    flat=st.floats(1, 1000),
    load=st.floats(0, 64),
)
def test_a_deadline_is_never_longer_than_the_flat_one(
    reference: ReferenceTiming, plan: LaunchPlan, flat: float, load: float
) -> None:
    deadline = launch_deadline(reference, plan, (Ceiling(CeilingKind.FLAT, flat),), load, CORES)
    assert deadline.seconds <= flat
    assert deadline.seconds == flat or deadline.seconds >= MARGIN_FACTOR * deadline.expected_s


def test_a_phase_plan_counts_the_waits_its_faults_may_fail() -> None:
    spec = WorkloadSpec(pipeline=PipelineSpec(aggregate_timeout_s=T), retry="lockstep")
    checkpoints = (CheckpointAt(1), CheckpointAt(2))
    link = Launch(3, 4, checkpoints, proxy_faults=(ProxyFault(1, "down", at="shard"),))
    assert plan_of(link, spec) == LaunchPlan(3, 4, 2, T, attempts=2, faulted_waits=3)
    restored = WorkloadSpec(restore_from="ckpt-1.pkl")
    assert plan_of(Launch(2, 3, checkpoints), restored).rounds == 3
    store = Launch(3, 4, checkpoints, store_faults=(StoreFault("sigstop", "shard", 5.0),))
    stalled = plan_of(store, WorkloadSpec())
    assert (stalled.faulted_waits, stalled.stall_s, stalled.attempts) == (3 + 2, 5.0, 1)
    lagged = plan_of(Launch(2, 4, checkpoints, sync="free", lags=(RankLag(1),)), WorkloadSpec())
    assert lagged.faulted_waits == 2
    assert plan_of(Launch(2, 4, checkpoints, max_restarts=1), WorkloadSpec()).restarts == 1


def _rank(
    out: Path, rank: int, began: float, ends: list[float], lanes: list[int], dry: float = 0.0
) -> None:
    """A rank's records: it began, drew a batch ending at each of ``ends``, and (``dry``)
    found its data exhausted by a next() that ended then."""
    writer = RecordWriter(out, rank)
    writer.write(BEGAN_RECORD, at=began)
    writer.write("start", rank=rank, world=2, lanes=lanes)
    for i, end in enumerate(ends):
        writer.write("batch", i=i, lane=lanes[0], ids=[], ckpts=0, fetch_at=end - 0.1, fetch_s=0.1)
    if dry:
        writer.write("exhausted", after_batches=len(ends), fetch_at=dry - 0.5, fetch_s=0.5)
    writer.close()


def test_the_reference_is_measured_from_its_ranks_records(tmp_path: Path) -> None:
    _rank(tmp_path, 0, 104.0, [106.0, 106.5, 107.0, 107.5], [0])  # 4 steps, one lane
    _rank(tmp_path, 1, 105.0, [106.0, 106.5, 107.0, 107.5, 108.0, 108.5], [1, 2])  # 3 steps
    timing = measure_reference(read_phase(tmp_path, 2), 100.0, 110.0, load=3.0)
    assert timing == ReferenceTiming(
        ranks=2, steps=4, startup_s=5.0, pipeline_s=2.0, step_s=1.25, teardown_s=1.5, load=3.0
    )


def test_a_rank_whose_data_ran_out_before_its_first_batch_is_measured_by_that_next(
    tmp_path: Path,
) -> None:
    _rank(tmp_path, 0, 104.0, [106.0, 106.5], [0])
    _rank(tmp_path, 1, 104.0, [], [1], dry=107.0)
    timing = measure_reference(read_phase(tmp_path, 2), 100.0, 110.0)
    assert timing is not None
    assert (timing.steps, timing.pipeline_s, timing.step_s, timing.teardown_s) == (2, 3.0, 0.5, 3.0)


def test_a_reference_with_a_rank_that_never_began_is_not_measured(tmp_path: Path) -> None:
    _rank(tmp_path, 0, 104.0, [106.0], [0])
    assert measure_reference(read_phase(tmp_path, 2), 100.0, 110.0) is None


def test_counted_from_formation_the_deadline_drops_only_the_first_start_up() -> None:
    """Formation stands for the first attempt's start-up: the rest of the formula stays."""
    plan = LaunchPlan(ranks=4, steps=4, rounds=1, timeout_s=T, restarts=1)
    deadline = deadline_of(plan)
    startup = 5.0 * 2.0  # 4 ranks on 2 cores against the reference's 2
    assert deadline.startup_s == pytest.approx(startup)
    assert deadline.formula_s is not None
    assert deadline.after_formation_s == pytest.approx(
        deadline.formula_s - MARGIN_FACTOR * startup
    )
    said = deadline.describe(formed_s=42.0)
    assert f"{deadline.after_formation_s:.0f}s after the group formed (at 42.0s)" in said
    unmeasured = launch_deadline(None, plan, FLAT)
    assert unmeasured.after_formation_s is None


def test_a_launch_formed_once_every_rank_wrote_that_it_began(tmp_path: Path) -> None:
    formed = every_rank_began(tmp_path, 2)
    assert not formed()  # no records yet
    _rank(tmp_path, 0, 104.0, [], [0])
    assert not formed()
    rank1 = RecordWriter(tmp_path, 1)
    rank1.write("placement", rank=1)
    rank1.close()
    assert not formed()  # a record before the loop is not the loop
    with record_path(tmp_path, 1).open("a") as f:
        f.write('{"kind": "beg')  # a line still being written
        f.flush()
        assert not formed()
        f.write('an", "at": 1.0}\n')
    assert formed()
