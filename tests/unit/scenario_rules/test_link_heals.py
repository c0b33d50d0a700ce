"""The rules of a link fault that heals (``ProxyFault.until``): both views, and the files
written before it existed."""

from __future__ import annotations

import json
from dataclasses import asdict, replace

import pytest

from tests.unit.scenario_files import written_as
from zephon_chaos.scenario import Launch, ProxyFault, Scenario, ScenarioError
from zephon_chaos.scenario_rules import Rule, normalised, violations
from zephon_chaos.workload.spec import NEVER, ROUND_END, CheckpointAt, PipelineSpec

HEALED = ProxyFault(1, "reset_peer", {"timeout": 0}, at="shard", until=ROUND_END)


def launch(fault: ProxyFault) -> Scenario:
    return Scenario(
        pipeline=PipelineSpec(canonical_replicas=2),
        launches=(
            Launch(2, 3, (CheckpointAt(1), CheckpointAt(2)), proxy_faults=(fault,)),
            Launch(2, 2),
        ),
    )


def test_a_down_or_reset_at_a_round_point_may_heal() -> None:
    for fault in (HEALED, replace(HEALED, toxic="down", attributes={})):
        assert launch(fault).validate().launches[0].proxy_faults == (fault,)


@pytest.mark.parametrize(
    ("fault", "rule"),
    [
        (replace(HEALED, until="later"), Rule.LINK_HEAL_KNOWN),
        (replace(HEALED, toxic="latency", attributes={"latency": 10}), Rule.LINK_HEAL_TOXIC),
        (replace(HEALED, toxic="timeout"), Rule.LINK_HEAL_TOXIC),
        (replace(HEALED, toxic="down", attributes={}, at="start"), Rule.LINK_HEAL_AT_ROUND),
    ],
)
def test_a_heal_that_cannot_hold_is_refused_naming_its_rule(fault: ProxyFault, rule: Rule) -> None:
    assert [v.rule for v in violations(launch(fault))] == [rule]
    with pytest.raises(ScenarioError, match=r"proxy_faults\[0\]\.until") as refused:
        launch(fault).validate()
    assert refused.value.rule is rule


@pytest.mark.parametrize(
    "fault",
    [
        replace(HEALED, toxic="latency", attributes={"latency": 10}),
        replace(HEALED, toxic="down", attributes={}, at="start"),
    ],
)
def test_normalising_keeps_the_fault_and_drops_a_heal_it_cannot_have(fault: ProxyFault) -> None:
    (kept,) = normalised(launch(fault)).launches[0].proxy_faults
    assert kept == replace(fault, until=NEVER)


def test_a_reset_at_start_moved_to_the_first_round_keeps_its_heal() -> None:
    (kept,) = normalised(launch(replace(HEALED, rank=0, at="start"))).launches[0].proxy_faults
    assert (kept.at, kept.until) == ("announce", ROUND_END)


@pytest.mark.parametrize("version", [1, 2])
def test_a_file_written_before_heals_loads_with_every_fault_to_the_end(version: int) -> None:
    raw = written_as(json.loads(launch(HEALED).to_json()), version)
    del raw["phases"][0]["proxy_faults"][0]["until"]
    if version == 1:
        raw.pop("deployment")
    loaded = Scenario.from_json(json.dumps(raw))
    assert loaded.launches[0].proxy_faults[0].until == NEVER
    assert asdict(loaded.launches[0].proxy_faults[0]) == {**asdict(HEALED), "until": NEVER}


def test_a_heal_round_trips() -> None:
    assert Scenario.from_json(launch(HEALED).to_json()) == launch(HEALED)
