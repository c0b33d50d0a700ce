"""Polishing never leaves the validity model: every candidate it judges is one validation
accepts, with refusals re-derived from the rule rather than carried over."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from hypothesis import given, settings

from tests.unit.test_scenario import workers_killed
from tests.unit.test_strategies import ANY_SCENARIO
from zephon_chaos.explore.polish import candidates, normalised_candidates, polish
from zephon_chaos.scenario import Launch, ProxyFault, Scenario
from zephon_chaos.scenario_rules import REFUSAL_ERROR, normalised, violations
from zephon_chaos.workload.spec import CheckpointAt, ChildFault, PipelineSpec


@settings(max_examples=120, deadline=None, database=None)
@given(ANY_SCENARIO)
def test_no_polishing_candidate_fails_validation(scenario: Scenario) -> None:
    """``normalised_candidates`` validates each one: a gap in the rules raises here."""
    for cand in normalised_candidates(scenario):
        assert violations(cand) == []
        assert normalised(cand) == cand


def _same_size_finding() -> Scenario:
    """Before refusal.accepted.same-size.boundary: 2 ranks, then 4 refused over C=3."""
    return Scenario(
        pipeline=PipelineSpec(canonical_replicas=3),
        launches=(
            Launch(2, 2, (CheckpointAt(1),)),
            Launch(4, 1, expect_failure=True, expect_error=REFUSAL_ERROR),
        ),
    ).validate()


def test_moving_a_rank_rederives_the_refusal_from_the_rule() -> None:
    """Moving a rank from the refused launch gives 3 and 3 ranks over C=3: the raw candidate
    keeps the flag (what the explorer once reported), the normalised one drops it."""
    s = _same_size_finding()
    raw = [c for c in candidates(s) if [ph.world_size for ph in c.launches] == [3, 3]]
    assert raw and raw[0].launches[1].expect_failure
    judged = [c for c in normalised_candidates(s) if [ph.world_size for ph in c.launches] == [3, 3]]
    assert judged and not any(ph.expect_failure for ph in judged[0].launches)


def test_a_link_fault_moved_onto_one_rank_goes() -> None:
    """checkpoint.other.resized.boundary: shrinking a faulted launch to one rank drops the
    fault (one rank never contacts the store), so no 'left no evidence' finding follows."""
    s = Scenario(
        pipeline=PipelineSpec(canonical_replicas=2, aggregate_timeout_s=2.0),
        launches=(
            Launch(
                2,
                2,
                (CheckpointAt(1),),
                proxy_faults=(ProxyFault(0, "reset_peer", {"timeout": 0}, at="announce"),),
                retry="lockstep",
            ),
            Launch(2, 2),
        ),
    ).validate()
    one_rank = [c for c in normalised_candidates(s) if c.launches[0].world_size == 1]
    assert one_rank
    assert all(c.launches[0].proxy_faults == () and c.launches[0].retry == "none" for c in one_rank)


def test_polish_judges_only_valid_scenarios() -> None:
    judged: list[Scenario] = []

    def judge(s: Scenario) -> str | None:
        judged.append(s)
        return "refusal" if any(ph.expect_failure for ph in s.launches) else None

    best = polish(_same_size_finding(), "refusal", judge, time.monotonic() + 30)
    assert judged
    assert all(violations(s) == [] for s in judged)
    assert [ph.world_size for ph in best.launches] == [2]
    assert best.pipeline.canonical_replicas == 1 and best.launches[0].expect_failure


def test_polishing_can_turn_off_what_a_finding_may_not_need() -> None:
    """mtp_mode, a launch path, Zephon's codec options: each off is a smaller candidate."""
    from dataclasses import replace

    from zephon_chaos.explore.findings import size_key

    busy = Scenario(
        pipeline=PipelineSpec(
            canonical_replicas=2, mtp_mode=True, aggregate_serializer="json", shutdown_mode="hard"
        ),
        launches=(Launch(2, 2, (CheckpointAt(1),), path="c10d"), Launch(1, 1)),
    ).validate()
    plainer = {
        (
            c.pipeline.mtp_mode,
            c.pipeline.aggregate_serializer,
            c.pipeline.shutdown_mode,
            c.launches[0].path,
        )
        for c in normalised_candidates(busy)
        if size_key(c) < size_key(busy)
    }
    assert (False, "json", "hard", "c10d") in plainer
    assert (True, "msgpack", "hard", "c10d") in plainer
    assert (True, "json", "graceful", "c10d") in plainer
    assert (True, "json", "hard", "standalone") in plainer
    assert size_key(replace(busy, pipeline=replace(busy.pipeline, mtp_mode=False))) < size_key(busy)


@pytest.mark.parametrize(
    ("fault", "steps"),
    [(ChildFault(1, 3), None), (ChildFault(1, 3), 3)],
    ids=["mid-launch", "last-step"],
)
def test_polishing_offers_a_kill_dropped_and_a_kill_one_step_earlier(
    fault: ChildFault, steps: int | None
) -> None:
    """The same launch (steps and checkpoints unchanged, normalising re-derives the tail)
    without its child fault, or with it one step earlier; each normalised one validates."""
    s = workers_killed(fault, steps).validate()
    first, rest = s.launches[0], s.launches[1:]
    offered = list(candidates(s))
    assert s.with_(launches=(replace(first, child_faults=()), *rest)) in offered
    earlier = replace(fault, at_step=fault.at_step - 1)
    assert s.with_(launches=(replace(first, child_faults=(earlier,)), *rest)) in offered
    for cand in normalised_candidates(s):
        assert violations(cand) == [] and normalised(cand) == cand


def test_a_kill_at_the_first_step_is_offered_no_earlier() -> None:
    s = workers_killed(ChildFault(0, 1)).validate()
    kills = {f.at_step for c in candidates(s) for ph in c.launches for f in ph.child_faults}
    assert kills == {1}
