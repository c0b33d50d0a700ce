"""DP x TP layouts: the validity rules, generation, coverage cells and signatures of them."""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, find, settings

from zephon_chaos.dimensions.cells import Dim, LayoutChange, Why, cell
from zephon_chaos.explore.landing import cells_of
from zephon_chaos.explore.signature import signature
from zephon_chaos.explore.space import declare
from zephon_chaos.oracles.global_batches import Contract, Verdict
from zephon_chaos.problem import Area, Problem, ProblemKind
from zephon_chaos.runner import Resume, ResumeFact, ScenarioOutcome
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.scenario_rules import (
    REFUSAL_ERROR,
    Refusal,
    laid_out_tp,
    normalised,
    refusal,
    violations,
)
from zephon_chaos.strategies import DOWNSTREAM_TP_ODDS, TP_CHOICES, TP_ODDS, scenarios, tp_odds
from zephon_chaos.workload.spec import CheckpointAt, PipelineSpec

REACH = settings(
    database=None,
    max_examples=3000,
    suppress_health_check=list(HealthCheck),
    deadline=None,
    phases=[Phase.generate],
)
SHRINK = settings(REACH, phases=[Phase.generate, Phase.shrink])


def _two(first: Launch, second: Launch, c: int = 4) -> Scenario:
    return Scenario(pipeline=PipelineSpec(canonical_replicas=c), launches=(first, second))


def test_tp_must_divide_the_world_and_is_named() -> None:
    s = _two(Launch(3, 2, (CheckpointAt(2),), tp=2), Launch(2, 2))
    [v] = violations(s)
    assert v.field == "launches[0].tp" and "must divide world_size 3" in v.text
    assert normalised(s).launches[0].tp == 1


def test_with_tp_c_must_be_a_multiple_of_the_dp_groups_as_the_adapter_requires() -> None:
    s = _two(Launch(4, 2, (CheckpointAt(2),), tp=2), Launch(2, 2), c=3)
    [v] = violations(s)
    assert v.field == "launches[0].tp" and "not a multiple" in v.text
    assert normalised(s).launches[0].tp == 1
    assert laid_out_tp(4, 2, 4) == 2 and laid_out_tp(4, 2, 3) == 1 and laid_out_tp(6, 4, 3) == 2


def test_zephon_refuses_more_dp_groups_than_lanes_not_more_ranks() -> None:
    """``canonical_replicas ... must be >= dp_degree`` (Engine._resolve_parallelism_params)."""
    accepted = _two(Launch(4, 2, (CheckpointAt(2),), tp=2), Launch(2, 2), c=2)
    assert violations(accepted) == [] and refusal(accepted, 0) is None
    refused = normalised(_two(Launch(4, 2, (CheckpointAt(2),)), Launch(2, 2), c=2))
    assert refusal(refused, 0) is Refusal.MORE_RANKS_THAN_LANES
    assert refused.launches[0].expect_failure and refused.launches[0].expect_error == REFUSAL_ERROR


def test_a_mid_window_resume_is_exact_when_the_dp_groups_keep_their_lanes() -> None:
    same_groups = ResumeFact(1, 4, 2, True, from_tp=2, to_tp=1)
    assert same_groups.resized and not same_groups.relaid
    assert ResumeFact(1, 4, 4, True, from_tp=2, to_tp=1).relaid
    track = Resume(restore_from="ckpt", taken_at=4, taken_tp=2, taken_mid_window=True)
    track, _ = track.resumed(1, 2, 1)
    assert track.exact
    track, _ = track.resumed(2, 4, 1)
    assert not track.exact


def test_tp_shrinks_to_one() -> None:
    s = find(scenarios(), lambda s: True, settings=SHRINK)
    assert [ph.tp for ph in s.launches] == [1]
    assert TP_CHOICES[0] == 1


def _changes(s: Scenario) -> set[LayoutChange]:
    return {
        LayoutChange(c.value[0]) for c in cells_of(s, None) if c.dim is Dim.LAYOUT_CHANGE
    }


def test_generation_reaches_every_layout_change() -> None:
    for change in LayoutChange:
        s = find(
            scenarios(tier="torchrun", profile="downstream"),
            lambda s, change=change: change in _changes(s),
            settings=REACH,
        )
        assert violations(s) == []


def test_a_dp_x_tp_launch_shrinks_to_one_launch_of_one_group_of_two() -> None:
    s = find(scenarios(), lambda s: any(ph.tp > 1 for ph in s.launches), settings=SHRINK)
    assert [(ph.world_size, ph.tp) for ph in s.launches] == [(2, 2)]


def test_the_downstream_profile_makes_tp_2_common_on_torchrun() -> None:
    two = TP_CHOICES.index(2)
    assert tp_odds("torchrun", "downstream") == DOWNSTREAM_TP_ODDS
    assert DOWNSTREAM_TP_ODDS[two] / sum(DOWNSTREAM_TP_ODDS) > 0.5
    assert TP_ODDS[0] / sum(TP_ODDS) > 0.5 and tp_odds("inproc", "downstream") == TP_ODDS


def test_the_space_declares_tp_values_and_layout_changes_with_reasons() -> None:
    space = declare("torchrun", max_world=4)
    for t in TP_CHOICES:
        assert space.why_not(cell(Dim.TP, t)) is None
    for change in LayoutChange:
        assert space.why_not(cell(Dim.LAYOUT_CHANGE, change.value)) is None
    small = declare("torchrun", max_world=3)
    assert small.why_not(cell(Dim.TP, 4)) is Why.TP_ABOVE_WORLD
    dp_only = cell(Dim.LAYOUT_CHANGE, LayoutChange.DP_ONLY.value)
    assert small.why_not(dp_only) is Why.NO_SUCH_LAYOUTS  # tp 2 over 1 and 2 groups: 4 ranks
    assert small.why_not(cell(Dim.LAYOUT_CHANGE, LayoutChange.BOTH.value)) is None
    s = _two(Launch(4, 2, (CheckpointAt(2),), tp=2), Launch(2, 2, tp=2))
    assert {cell(Dim.TP, 2), dp_only} <= cells_of(s, None)


def test_a_dp_group_divergence_has_a_signature_of_its_own() -> None:
    text = "DP group 0 diverged: rank 1's batch 2 differs from rank 0's (lane, ids)"
    line = Problem(Area.BATCHES_IDENTICAL, ProblemKind.DP_GROUP_DIVERGED, text, rank=1).in_phase(1)
    outcome = ScenarioOutcome(
        _two(Launch(4, 2, (CheckpointAt(2),), tp=2), Launch(2, 2)),
        None,
        problems=[line],
        verdict=Verdict(True, Contract.IDENTICAL),
        resumes=[ResumeFact(1, 4, 2, False, 2, 1)],
    )
    assert signature(outcome) == "batches-identical.dp-group-diverged.resized.boundary"
