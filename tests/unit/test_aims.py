"""Aims: an aimed launch lands in its cell, and the search aims at what it reached least."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zephon_chaos.aims import (
    CHILD_POINTS,
    LAYOUT_PAIRS,
    SETTING_LAUNCHES,
    WORKER_PROCESS_COST,
    Aim,
    AimKind,
    Draws,
    aimed,
)
from zephon_chaos.dimensions.cells import Cell, Dim
from zephon_chaos.explore.aiming import aim_at, aims
from zephon_chaos.explore.landing import cells_of
from zephon_chaos.explore.space import declare
from zephon_chaos.inproc import inproc_runner
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.scenario_rules import HEALING_TOXICS, is_finite, normalised, violations
from zephon_chaos.strategies import STORE_FAULT_TIMEOUT_S, scenarios
from zephon_chaos.strategies.aiming import COST_SCALE, MIN_GROUP_CELLS, group_odds, one_aim
from zephon_chaos.workload.spec import (
    CHILD_TARGETS,
    ROUND_END,
    CheckpointAt,
    DataSpec,
    PipelineSpec,
    RankFault,
    SourceSpec,
)

ALWAYS = (0, 1)
"""Aim odds (free, aimed) that aim every scenario."""


def _aimable(tier: str) -> list[Cell]:
    space = declare(tier, store_faults=True)
    return [c for c in space.reachable() if aim_at(c) is not None]


@pytest.mark.parametrize("tier", ["inproc", "torchrun"])
def test_every_reachable_fault_cell_has_an_aim(tier: str) -> None:
    cells = _aimable(tier)
    dims = {c.dim for c in cells}
    assert len(cells) > 100, cells  # the four-way products are there
    assert len(dims) >= 4, dims


@pytest.mark.parametrize("tier", ["inproc", "torchrun"])
@settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_an_aimed_scenario_lands_in_its_cell_and_is_valid(tier: str, data: st.DataObject) -> None:
    cells = _aimable(tier)
    # A group first, as the strategies draw: each kind of aim gets its share of examples.
    groups = sorted({_group(c) for c in cells})
    group = data.draw(st.sampled_from(groups), label="group")
    cell = data.draw(st.sampled_from([c for c in cells if _group(c) == group]), label="cell")
    aim = aim_at(cell)
    assert aim is not None
    scenario = data.draw(
        scenarios(tier=tier, store_faults=True, aims=(aim,), aim_odds=ALWAYS),  # type: ignore[arg-type]
        label="scenario",
    )
    assert cell in cells_of(scenario, None), scenario
    assert violations(scenario) == []


def test_aims_name_the_cells_never_reached_and_end_once_all_were() -> None:
    space = declare("inproc", store_faults=True)
    cells = _aimable("inproc")
    counts = {c: 1 for c in cells}
    holes = [cells[3], cells[40]]
    for c in holes:
        counts[c] = 0
    assert aims(space, counts) == tuple(aim_at(c) for c in holes)
    counts.update({c: 1 for c in holes})
    assert aims(space, counts) == ()


def test_every_hole_is_aimed_at_whether_or_not_its_kind_was_reached() -> None:
    space = declare("torchrun", store_faults=True)
    cells = _aimable("torchrun")
    sigstops = [c for c in cells if _group(c) == ("rank fault", "sigstop")]
    assert len(sigstops) > 20
    # One sigstop cell reached: the other sigstop cells stay aims beside untouched kinds.
    counts = {sigstops[0]: 1}
    assert aims(space, counts) == tuple(aim_at(c) for c in cells if c != sigstops[0])


def test_a_groups_odds_are_its_cells_over_their_cost_with_a_floor() -> None:
    found = aims(declare("torchrun", store_faults=True), {})
    odds = group_odds(found)
    sigkill, mtp = ("rank fault", "sigkill"), ("pipeline setting", "mtp_mode")
    cells = Counter(a.group for a in found)
    assert cells[sigkill] > MIN_GROUP_CELLS > cells[mtp] == 1
    # A killed rank's cell costs one unit, a setting's (worker processes) the most: a
    # group's aimed time goes as its cells (at least the floor), not as its cost.
    assert odds[sigkill] == cells[sigkill] * COST_SCALE
    assert odds[mtp] == MIN_GROUP_CELLS * COST_SCALE // WORKER_PROCESS_COST
    for g, n in odds.items():
        cost = max(a.cost for a in found if a.group == g)
        assert n * cost == max(cells[g], MIN_GROUP_CELLS) * COST_SCALE


def test_an_aim_draws_a_cheap_large_group_far_more_often_than_a_slow_cell() -> None:
    found = aims(declare("torchrun", store_faults=True), {})
    drawn: Counter[tuple[str, ...]] = Counter()

    @settings(max_examples=300, deadline=None, database=None, derandomize=True)
    @given(st.data())
    def draw(data: st.DataObject) -> None:
        drawn[data.draw(st.composite(lambda d: one_aim(d, found))()).group] += 1

    draw()
    odds = group_odds(found)
    top, mtp = max(odds, key=odds.__getitem__), ("pipeline setting", "mtp_mode")
    assert odds[top] > 10 * odds[mtp]
    assert drawn[top] > 10 * max(drawn[mtp], 1)


@pytest.mark.parametrize("setting", [("mtp_mode", "on"), ("runner", "process")])
def test_a_setting_aim_keeps_two_launches(setting: tuple[str, str]) -> None:
    aim = Aim(AimKind.SETTING, *setting)
    fault = aim_at(_aimable("torchrun")[0])
    assert fault is not None

    @settings(max_examples=30, deadline=None, database=None)
    @given(s=scenarios(tier="torchrun", store_faults=True, aims=(aim, fault), aim_odds=ALWAYS))
    def check(s: Scenario) -> None:
        assert violations(s) == []
        # A fault aim turns both settings off: either is on only when the setting was aimed.
        if s.pipeline.mtp_mode or s.pipeline.runner == "process":
            assert len(s.launches) <= SETTING_LAUNCHES

    check()


def _group(c: Cell) -> tuple[str, ...]:
    aim = aim_at(c)
    assert aim is not None
    return aim.group


def test_a_space_without_fault_cells_aims_only_at_layout_changes() -> None:
    space = declare("inproc", faults=False, store_faults=False)
    assert {a.kind for a in aims(space, {})} == {AimKind.LAYOUT}
    assert {a.action for a in aims(space, {})} == set(LAYOUT_PAIRS)


@pytest.mark.parametrize("reverse", [False, True], ids=["grow", "shrink"])
@pytest.mark.parametrize("change", sorted(LAYOUT_PAIRS))
def test_a_layout_aim_resumes_onto_the_other_mesh_with_identical_batches(
    tmp_path: Path, change: str, reverse: bool
) -> None:
    drawn = Scenario(
        pipeline=PipelineSpec(canonical_replicas=3), launches=(Launch(3, 2), Launch(1, 2))
    )
    scenario = normalised(aimed(drawn, 0, Aim(AimKind.LAYOUT, change), Draws(rank=int(reverse))))
    assert violations(scenario) == []
    before, after = LAYOUT_PAIRS[change][::-1] if reverse else LAYOUT_PAIRS[change]
    assert [(ph.dp, ph.tp) for ph in scenario.launches] == [before, after]
    with inproc_runner(tmp_path) as runner:
        outcome = runner.run(scenario)
    assert outcome.ok, outcome.report()
    [resume] = outcome.resumes
    assert (resume.from_world, resume.to_world) == (before[0] * before[1], after[0] * after[1])


@pytest.mark.parametrize("rank", [0, 1, 5])
@pytest.mark.parametrize("point", CHILD_POINTS)
def test_a_child_aim_kills_one_ranks_workers_alone_in_the_first_launch(
    point: str, rank: int
) -> None:
    """Drawn inline, under mtp_mode, over finite data and with a rank fault: the aim turns on
    what a kill of worker processes needs and clears the rest, so normalising keeps it."""
    drawn = Scenario(
        data=DataSpec(sources=(SourceSpec("a", (12,), exhausted="stop"),), chunk_size=8),
        pipeline=PipelineSpec(canonical_replicas=3, mtp_mode=True),
        launches=(
            Launch(3, 3, (CheckpointAt(1),), rank_faults=(RankFault(0, 2, "raise"),)),
            Launch(1, 2),
            Launch(2, 2),
        ),
    )
    aim = Aim(AimKind.CHILD, CHILD_TARGETS[0], point)
    scenario = normalised(aimed(drawn, 0, aim, Draws(rank=rank)))
    assert scenario.validate() is scenario
    assert (scenario.pipeline.runner, scenario.pipeline.mtp_mode) == ("process", False)
    assert not is_finite(scenario.data)
    assert [len(ph.child_faults) for ph in scenario.launches] == [1] + [0] * (SETTING_LAUNCHES - 1)
    first = scenario.launches[0]
    [fault] = first.child_faults
    assert fault.target == CHILD_TARGETS[0] and 0 <= fault.rank < first.world_size
    assert not (first.rank_faults or first.proxy_faults or first.store_faults or first.lags)
    if point == "last":
        assert fault.at_step == first.steps
    else:
        assert 1 <= fault.at_step < first.steps


@pytest.mark.parametrize("toxic", HEALING_TOXICS)
def test_a_heal_aim_gives_the_heal_oracle_a_call_to_judge(tmp_path: Path, toxic: str) -> None:
    """The leader's link lost at its announcement and back at the round's end, under a
    lockstep retry: the retry is the call the heal oracle judges, and the strategies' own
    heal draw (made after the aims) keeps the aimed end."""
    [cell] = [
        c
        for c in _aimable("inproc")
        if c.dim is Dim.STORE_FAULT_HEAL and c.value[:2] == (toxic, "announce")
    ]
    aim = aim_at(cell)
    assert aim is not None and aim.heals and aim.group == ("store link fault", "heals")

    @settings(max_examples=20, deadline=None, database=None)
    @given(s=scenarios(tier="inproc", store_faults=True, aims=(aim,), aim_odds=ALWAYS))
    def check(s: Scenario) -> None:
        assert cell in cells_of(s, None), s

    check()
    pipeline = PipelineSpec(canonical_replicas=2, aggregate_timeout_s=STORE_FAULT_TIMEOUT_S)
    drawn = Scenario(pipeline=pipeline, launches=(Launch(2, 1),))
    scenario = normalised(aimed(drawn, 0, aim, Draws()))
    [fault] = scenario.launches[0].proxy_faults
    assert (fault.rank, fault.until, scenario.launches[0].retry) == (0, ROUND_END, "lockstep")
    with inproc_runner(tmp_path) as runner:
        outcome = runner.run(scenario)
    judged = {c.value for c in cells_of(scenario, outcome) if c.dim is Dim.STORE_FAULT_HEAL_OUTCOME}
    assert judged, outcome.report()
