"""The scenario model: JSON round trip, old files still load, and errors name the field."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from tests.unit.scenario_files import written_as
from zephon_chaos.deployment import BEFORE_VERSION_2, Deployment
from zephon_chaos.scenario import (
    SCENARIO_VERSION,
    Found,
    Launch,
    ProxyFault,
    Scenario,
    ScenarioError,
    checkpoints_before_faults,
)
from zephon_chaos.scenario_rules import (
    CHANGED_C_ERROR,
    REFUSAL_ERROR,
    RUN_DRY_STEPS,
    normalised,
    violations,
)
from zephon_chaos.scenario_rules.predicates import CHILD_TAIL_ROWS, child_tail_steps
from zephon_chaos.workload.spec import (
    CheckpointAt,
    ChildFault,
    DataSpec,
    PipelineSpec,
    RankFault,
    RankLag,
    SourceSpec,
)


def two_launches(**pipeline: object) -> Scenario:
    return Scenario(
        pipeline=PipelineSpec(canonical_replicas=6, **pipeline),  # type: ignore[arg-type]
        launches=(Launch(2, 3, (CheckpointAt(2, 1),)), Launch(3, 2)),
    )


def test_json_round_trip_is_lossless() -> None:
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=4, aggregation="dir"),
        launches=(
            Launch(
                2, 3, (CheckpointAt(0), CheckpointAt(2, 1)), rank_faults=(RankFault(1, 3, "raise"),)
            ),
            Launch(5, 1, expect_failure=True, expect_error="must be >= dp_degree"),
            Launch(1, 2),
        ),
        persist_format="json",
        deployment=Deployment(run_id="per_launch"),
        plant="skip_sample",
    ).validate()
    again = Scenario.from_json(scenario.to_json())
    assert again == scenario


def test_a_file_written_before_the_newer_fields_still_loads(tmp_path: Path) -> None:
    """Version-1 files without expect_error, per-phase C, retry or backend keep loading."""
    raw = json.loads(two_launches().to_json())
    for phase in raw["launches"]:
        phase.pop("expect_error", None)
        phase.pop("canonical_replicas", None)
        phase.pop("retry", None)
    raw.pop("backend", None)
    path = tmp_path / "old.json"
    path.write_text(json.dumps(raw))
    assert Scenario.load(path) == two_launches()


FOUND = Found(tier="torchrun", launch="cli", signature="batches-identical.missing.resized.boundary")


def test_how_a_scenario_was_found_survives_the_round_trip(tmp_path: Path) -> None:
    saved = two_launches().with_(found=FOUND).save(tmp_path / "finding.json")
    again = Scenario.load(saved)
    assert again.found == FOUND
    assert again.version == SCENARIO_VERSION
    assert again == two_launches()  # how it was found is no part of what runs


def test_a_version_1_file_loads_without_a_record_of_how_it_was_found(tmp_path: Path) -> None:
    raw = written_as(json.loads(two_launches().to_json()), 1)
    del raw["found"], raw["deployment"]
    raw["run_id_policy"] = "per_launch"
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(raw))
    loaded = Scenario.load(path)
    assert loaded.found is None
    ran_under = replace(BEFORE_VERSION_2, run_id="per_launch")
    assert loaded == replace(two_launches(), found=None, deployment=ran_under)


VERSION_3_FILE = """{
 "version": 3,
 "pipeline": {"canonical_replicas": 4},
 "deployment": {"run_id": "per_launch"},
 "phases": [
  {"world_size": 2, "steps": 2, "checkpoints": [{"step": 2}], "launch": "c10d", "hosts": 2},
  {"world_size": 4, "steps": 1, "checkpoints": [{"step": 1}], "launch": "static"},
  {"world_size": 1, "steps": 1}
 ]
}"""
"""A file of version 3, as explorations and ``run`` wrote them before the launch path was
``path``: each launch names it ``launch`` (the last, none: the default)."""


def test_a_version_3_file_reads_each_launch_path_from_launch() -> None:
    loaded = Scenario.from_json(VERSION_3_FILE)
    assert [ph.path for ph in loaded.launches] == ["c10d", "static", "standalone"]
    assert loaded == Scenario(
        pipeline=PipelineSpec(canonical_replicas=4),
        deployment=Deployment(run_id="per_launch"),
        launches=(
            Launch(2, 2, (CheckpointAt(2),), path="c10d", hosts=2),
            Launch(4, 1, (CheckpointAt(1),), path="static"),
            Launch(1, 1),
        ),
    )
    assert json.loads(loaded.to_json())["launches"][0]["path"] == "c10d"  # saved as version 4


@pytest.mark.parametrize(
    ("version", "launches", "key", "field"),
    [
        (SCENARIO_VERSION, "launches", "launch", "launches[0].launch: a version-4 file"),
        (3, "phases", "path", "phases[0].path: a version-3 file names it launch"),
        (SCENARIO_VERSION, "launches", "phases", "phases: a version-4 file calls them launches"),
    ],
    ids=["launch-in-a-current-file", "path-in-a-version-3-file", "phases-in-a-current-file"],
)
def test_a_key_of_the_other_version_is_refused(
    version: int, launches: str, key: str, field: str
) -> None:
    raw = written_as(json.loads(two_launches().to_json()), version)
    first = raw[launches][0]
    first.pop("launch", None)
    first.pop("path", None)
    if key == "phases":  # a current file's launches under their old name
        raw["phases"] = raw.pop("launches")
    else:
        first[key] = "c10d"
    with pytest.raises(ScenarioError) as err:
        Scenario.from_json(json.dumps(raw))
    assert field in str(err.value)


@pytest.mark.parametrize(
    ("found", "field"),
    [
        ({"tier": "gpu", "launch": "cli", "signature": "x.y"}, "scenario.found.tier"),
        ({"tier": "inproc", "launch": "fork", "signature": "x.y"}, "scenario.found.launch"),
        ({"tier": "inproc", "launch": "warm", "signature": ""}, "scenario.found.signature"),
        ({"tier": "inproc", "launch": "warm"}, ".found: "),
        ({"tier": "inproc", "launch": "warm", "signature": "x", "seed": 3}, "found: unknown"),
    ],
    ids=["unknown-tier", "unknown-lane", "empty-signature", "no-signature", "unknown-field"],
)
def test_a_bad_record_of_how_it_was_found_names_the_field(
    found: dict[str, object], field: str
) -> None:
    raw = json.loads(two_launches().to_json())
    raw["found"] = found
    with pytest.raises(ScenarioError) as err:
        Scenario.from_json(json.dumps(raw))
    assert field in str(err.value)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda raw: raw.update(version=SCENARIO_VERSION + 1), ".version"),
        (lambda raw: raw.update(colour="red"), "unknown field(s) colour"),
        (lambda raw: raw["launches"][0].update(world_size=0), "launches[0].world_size"),
        (lambda raw: raw["launches"][1].update(world_size=9), "launches[1].world_size"),
        (lambda raw: raw["launches"][0].update(checkpoints="x"), "launches[0].checkpoints"),
        (
            lambda raw: raw["launches"][0]["checkpoints"].append({"step": 9}),
            "launches[0].checkpoints[1]",
        ),
        (
            lambda raw: raw["launches"][0].update(
                rank_faults=[{"rank": 5, "at_step": 1, "action": "raise"}]
            ),
            "launches[0].rank_faults[0].rank",
        ),
        (lambda raw: raw["pipeline"].update(runner="gpu"), "pipeline.runner"),
        (lambda raw: raw.update(persist_format="yaml"), "persist_format"),
        (lambda raw: raw["launches"][0].update(checkpoints=[]), "launches[0].checkpoints"),
        (lambda raw: raw["launches"][0].update(retry="sometimes"), "launches[0].retry"),
    ],
    ids=[
        "newer-version",
        "unknown-field",
        "no-ranks",
        "more-ranks-than-lanes",
        "checkpoints-not-a-list",
        "checkpoint-past-the-end",
        "fault-on-a-missing-rank",
        "unknown-runner",
        "unknown-format",
        "nothing-to-restore",
        "unknown-retry",
    ],
)
def test_a_bad_file_names_the_field(tmp_path: Path, mutate, field: str) -> None:
    raw = json.loads(two_launches().to_json())
    mutate(raw)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ScenarioError) as err:
        Scenario.load(path)
    assert field in str(err.value)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("{not json", "not JSON"), ("[1, 2]", "expected a JSON object")],
)
def test_malformed_json_says_so(text: str, fragment: str) -> None:
    with pytest.raises(ScenarioError, match=fragment):
        Scenario.from_json(text, where="f.json")


def test_an_unreadable_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"cannot read scenario file .*missing\.json"):
        Scenario.load(tmp_path / "missing.json")


def test_checkpoints_that_land_on_one_batch_of_some_rank_are_refused() -> None:
    """C=3 on 2 ranks: rank 1 owns one lane, so 0+1 and 1 are both its first batch."""
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=3),
        launches=(Launch(2, 2, (CheckpointAt(0, 1), CheckpointAt(1))),),
    )
    with pytest.raises(ScenarioError, match=r"launches\[0\]\.checkpoints\[1\]: .*rank 1"):
        scenario.validate()


@pytest.mark.parametrize(
    ("checkpoints", "fault", "expected"),
    [
        ((CheckpointAt(1), CheckpointAt(2)), RankFault(0, 2, "raise"), 1),
        ((CheckpointAt(1), CheckpointAt(2)), RankFault(0, 3, "raise"), 2),
        ((CheckpointAt(1),), RankFault(1, 0, "sigkill"), 0),
        # Rank 0 owns lanes 0-1: 1+1 is its 3rd batch, before its fault at batch 4.
        ((CheckpointAt(1, 1),), RankFault(0, 2, "raise"), 1),
        # Rank 1 owns lane 2 only: 1+1 is a whole step there, at its fault's batch.
        ((CheckpointAt(1, 1),), RankFault(1, 2, "raise"), 0),
    ],
)
def test_checkpoints_before_a_fault(checkpoints, fault: RankFault, expected: int) -> None:
    assert checkpoints_before_faults(checkpoints, (fault,), 2, 3, "contiguous") == expected


def test_a_crashed_phase_hands_on_its_last_checkpoint_before_the_fault() -> None:
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=4),
        launches=(
            Launch(2, 2, (CheckpointAt(1),)),
            Launch(
                2, 4, (CheckpointAt(1), CheckpointAt(3)), rank_faults=(RankFault(1, 2, "raise"),)
            ),
            Launch(2, 4, rank_faults=(RankFault(0, 0, "raise"),)),
            Launch(3, 1),
        ),
    ).validate()
    assert [scenario.restore_index(i) for i in range(4)] == [0, 0, None, None]


def test_a_refused_phase_hands_on_nothing() -> None:
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=2),
        launches=(
            Launch(1, 1, (CheckpointAt(0, 1),)),
            Launch(3, 1, expect_failure=True, expect_error=REFUSAL_ERROR),
            Launch(2, 1),
        ),
    ).validate()
    assert scenario.restore_index(1) is None
    assert scenario.reference_steps >= 2


# ---- one validity model: the explorer's false findings are refused or normalised ---------


def _store_pair(*first_faults: ProxyFault, world: tuple[int, int] = (2, 2), **first) -> Scenario:
    """Two launches aggregating through the store, the first with link faults."""
    return Scenario(
        pipeline=PipelineSpec(canonical_replicas=4),
        launches=(
            Launch(world[0], 2, (CheckpointAt(1),), proxy_faults=first_faults, **first),
            Launch(world[1], 2),
        ),
    )


def _lagged(**first: object) -> Scenario:
    """Two launches of two ranks, rank 1 late for the first one's first checkpoint (skip)."""
    fields = {"sync": "free", "lags": (RankLag(1),), "retry": "skip", **first}
    return Scenario(
        pipeline=PipelineSpec(canonical_replicas=2),
        launches=(Launch(2, 2, (CheckpointAt(1), CheckpointAt(2)), **fields), Launch(2, 1)),  # type: ignore[arg-type]
    )


RESET = {"timeout": 0}
REFUSED_OR_REPAIRED = {
    "free-running-one-rank": (Scenario(launches=(Launch(1, 2, sync="free"),)), "launches[0].sync"),
    "lag-under-lockstep": (_lagged(sync="lockstep"), "launches[0].lags"),
    "drift-beside-an-agreement": (_lagged(lags=(RankLag(1, by=1),)), "launches[0].retry"),
    "drift-past-the-checkpoints": (
        _lagged(lags=(RankLag(1, checkpoint=1, by=1),), retry="independent"),
        "launches[0].lags[0]",
    ),
    "independent-lag-beside-dcp": (
        _lagged(retry="independent").with_(persist_format="dcp"),
        "launches[0].retry",
    ),
    "lag-past-the-checkpoints": (_lagged(lags=(RankLag(1, checkpoint=2),)), "launches[0].lags[0]"),
    "lag-waiting-for-itself": (_lagged(lags=(RankLag(1, waits_for=1),)), "launches[0].lags[0]"),
    "two-lags": (_lagged(lags=(RankLag(1), RankLag(0, checkpoint=1))), "launches[0].lags"),
    "lag-beside-a-rank-fault": (
        _lagged(rank_faults=(RankFault(0, 2, "raise"),)),
        "launches[0].lags: a launch with a lag has no other fault",
    ),
    "skip-with-nothing-to-fail": (_lagged(lags=()), "launches[0].retry"),
    # refusal.accepted.same-size.boundary: polishing moved a rank and kept the flag.
    "accepted-launch-flagged": (
        Scenario(
            pipeline=PipelineSpec(canonical_replicas=3),
            launches=(
                Launch(3, 2, (CheckpointAt(1),)),
                Launch(3, 1, expect_failure=True, expect_error=REFUSAL_ERROR),
            ),
        ),
        "launches[1].expect_failure",
    ),
    # refusal.accepted.no-resume.no-resume: 1, 2 and 5 ranks over C=1, all flagged.
    "first-launch-flagged": (
        Scenario(
            pipeline=PipelineSpec(canonical_replicas=1),
            launches=tuple(
                Launch(g, 1, expect_failure=True, expect_error=REFUSAL_ERROR) for g in (1, 2, 5)
            ),
        ),
        "launches[0].expect_failure",
    ),
    # checkpoint.other.resized.boundary: a link fault on one rank, which never uses the store.
    "link-fault-on-one-rank": (
        _store_pair(ProxyFault(0, "reset_peer", RESET, at="announce"), world=(1, 2)),
        "launches[0].proxy_faults: no round can time a link fault: one rank",
    ),
    "refusal-unflagged": (
        Scenario(pipeline=PipelineSpec(canonical_replicas=2), launches=(Launch(3, 1),)),
        "launches[0].world_size",
    ),
    "refusal-without-its-error": (
        Scenario(
            pipeline=PipelineSpec(canonical_replicas=2),
            launches=(Launch(3, 1, expect_failure=True),),
        ),
        "launches[0].expect_error",
    ),
    "refusal-with-a-checkpoint": (
        Scenario(
            pipeline=PipelineSpec(canonical_replicas=2),
            launches=(
                Launch(3, 1, (CheckpointAt(1),), expect_failure=True, expect_error=REFUSAL_ERROR),
            ),
        ),
        "launches[0].checkpoints",
    ),
    "changed-C-unflagged": (
        Scenario(
            pipeline=PipelineSpec(canonical_replicas=2),
            launches=(Launch(2, 2, (CheckpointAt(1),)), Launch(2, 2, canonical_replicas=4)),
        ),
        "launches[1].canonical_replicas",
    ),
    "leader-point-on-a-follower": (
        _store_pair(ProxyFault(1, "down", at="outcome")),
        "launches[0].proxy_faults[0].rank: only the leader",
    ),
    "follower-point-on-the-leader": (
        _store_pair(ProxyFault(0, "down", at="ack")),
        "launches[0].proxy_faults[0].rank: only followers",
    ),
    "fault-on-a-missing-rank": (
        _store_pair(ProxyFault(2, "down", at="shard")),
        "launches[0].proxy_faults[0].rank: must name a rank",
    ),
    "reset-at-start": (
        _store_pair(ProxyFault(1, "reset_peer", RESET, at="start")),
        "launches[0].proxy_faults[0].at",
    ),
    "round-past-the-checkpoints": (
        _store_pair(ProxyFault(1, "down", at="shard#2")),
        "launches[0].proxy_faults[0].at: round 2",
    ),
    "link-and-rank-fault": (
        _store_pair(ProxyFault(1, "down", at="shard"), rank_faults=(RankFault(0, 2, "raise"),)),
        "launches[0].rank_faults: a launch with a link fault",
    ),
    "link-fault-without-store": (
        _store_pair(ProxyFault(1, "down", at="shard")).with_(
            pipeline=PipelineSpec(canonical_replicas=4, aggregation="dir")
        ),
        "launches[0].proxy_faults: no round",
    ),
    "link-fault-at-a-restored-step-0": (
        Scenario(
            pipeline=PipelineSpec(canonical_replicas=4),
            launches=(
                Launch(2, 2, (CheckpointAt(1),)),
                Launch(2, 2, (CheckpointAt(0),), proxy_faults=(ProxyFault(1, "down", at="shard"),)),
            ),
        ),
        "launches[1].proxy_faults: no round can time a link fault: a restored launch",
    ),
    "retry-without-a-link-fault": (
        Scenario(launches=(Launch(1, 2, (CheckpointAt(1),), retry="lockstep"),)),
        "launches[0].retry",
    ),
    "rank-fault-over-finite-data": (
        Scenario(
            data=DataSpec(sources=(SourceSpec("a", (12,), exhausted="stop"),), chunk_size=8),
            launches=(
                Launch(1, 3, rank_faults=(RankFault(0, 1, "raise"),)),
                Launch(1, RUN_DRY_STEPS),
            ),
        ),
        "launches[0].rank_faults: over finite data",
    ),
    "finite-data-not-run-dry": (
        Scenario(
            data=DataSpec(sources=(SourceSpec("a", (200,), exhausted="stop"),), chunk_size=8),
            launches=(Launch(1, 2),),
        ),
        "launches[0].steps",
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSED_OR_REPAIRED))
def test_a_scenario_outside_the_rules_is_refused_naming_the_field(name: str) -> None:
    scenario, field = REFUSED_OR_REPAIRED[name]
    with pytest.raises(ScenarioError, match=re.escape(f"scenario.{field}")):
        scenario.validate()


@pytest.mark.parametrize("name", sorted(REFUSED_OR_REPAIRED))
def test_normalising_brings_it_inside_the_rules_and_then_changes_nothing(name: str) -> None:
    scenario, _ = REFUSED_OR_REPAIRED[name]
    fixed = normalised(scenario).validate()
    assert violations(fixed) == []
    assert normalised(fixed) == fixed


def test_normalising_rederives_refusals_from_the_rule() -> None:
    scenario, _ = REFUSED_OR_REPAIRED["first-launch-flagged"]
    fixed = normalised(scenario)
    assert [ph.expect_failure for ph in fixed.launches] == [False, True, True]
    assert fixed.launches[0].expect_error == ""
    assert all(ph.expect_error == REFUSAL_ERROR for ph in fixed.launches[1:])
    same_size, _ = REFUSED_OR_REPAIRED["accepted-launch-flagged"]
    assert not normalised(same_size).launches[1].expect_failure


def test_normalising_drops_a_link_fault_no_round_can_time() -> None:
    scenario, _ = REFUSED_OR_REPAIRED["link-fault-on-one-rank"]
    first = normalised(
        scenario.with_(
            launches=(replace(scenario.launches[0], retry="lockstep"), scenario.launches[1])
        )
    )
    assert first.launches[0].proxy_faults == () and first.launches[0].retry == "none"


def test_normalising_moves_a_fault_to_a_rank_that_writes_its_point() -> None:
    leader, _ = REFUSED_OR_REPAIRED["leader-point-on-a-follower"]
    follower, _ = REFUSED_OR_REPAIRED["follower-point-on-the-leader"]
    assert normalised(leader).launches[0].proxy_faults[0].rank == 0
    assert normalised(follower).launches[0].proxy_faults[0].rank == 1


def test_a_changed_c_at_restore_is_a_refusal_with_zephons_error() -> None:
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=2),
        launches=(
            Launch(2, 2, (CheckpointAt(1),)),
            Launch(2, 2, canonical_replicas=4, expect_failure=True, expect_error=CHANGED_C_ERROR),
        ),
    )
    assert scenario.validate() is scenario


def test_a_refusal_in_a_file_without_expect_error_expects_zephons_error(tmp_path: Path) -> None:
    """Files written before ``expect_error`` existed still load, checking Zephon's refusal."""
    raw = json.loads(two_launches().to_json())
    raw["launches"][1]["checkpoints"] = [{"step": 1}]
    raw["launches"].append({"world_size": 9, "steps": 1, "expect_failure": True})
    path = tmp_path / "old-refusal.json"
    path.write_text(json.dumps(raw))
    assert Scenario.load(path).launches[2].expect_error == REFUSAL_ERROR


def test_a_free_running_launch_with_a_lag_and_a_policy_is_valid_and_round_trips() -> None:
    scenario = _lagged()
    assert violations(scenario) == [] and normalised(scenario) == scenario
    assert Scenario.from_json(scenario.to_json()) == scenario
    assert "sync free, 1 lag(s)" in scenario.summary()


def test_normalising_a_lag_under_lockstep_makes_the_launch_free_running() -> None:
    fixed = normalised(_lagged(sync="lockstep")).launches[0]
    assert (fixed.sync, fixed.lags, fixed.retry) == ("free", (RankLag(1),), "skip")


def test_normalising_drops_a_lag_it_cannot_place_and_the_policy_with_it() -> None:
    fixed = normalised(_lagged(lags=(RankLag(1, checkpoint=5),))).launches[0]
    assert (fixed.lags, fixed.retry) == ((), "none")


# ---- child faults: a rank kills its pipeline's worker processes and draws on -------------


MID_LAUNCH_KILL = ChildFault(rank=1, at_step=2)


def workers_killed(
    fault: ChildFault = MID_LAUNCH_KILL,
    steps: int | None = None,
    checkpoints: tuple[CheckpointAt, ...] | None = None,
    **first: object,
) -> Scenario:
    """Two launches of two ranks over worker processes and endless data, the first with
    ``fault``; ``steps`` defaults to what a mid-launch kill needs after it, and the first
    launch checkpoints at its end (for the second to resume) unless told otherwise."""
    s = Scenario(
        pipeline=PipelineSpec(canonical_replicas=2, runner="process"),
        launches=(Launch(2, fault.at_step), Launch(2, 1)),
    )
    if steps is None:
        steps = fault.at_step + child_tail_steps(s, 0, fault.rank)
    launch = Launch(
        2,
        steps,
        (CheckpointAt(steps),) if checkpoints is None else checkpoints,
        child_faults=(fault,),
        **first,  # type: ignore[arg-type]
    )
    return s.with_(launches=(launch, s.launches[1]))


TAIL = child_tail_steps(workers_killed(), 0, 1)
"""Steps after a mid-launch kill on rank 1 of ``workers_killed``: 4096 rows of 4, one lane."""
FINITE = DataSpec(sources=(SourceSpec("a", (12,), exhausted="stop"),), chunk_size=8)

CHILD_REFUSED: dict[str, tuple[Scenario, str, str]] = {
    "inline-runner": (
        workers_killed().with_(pipeline=PipelineSpec(canonical_replicas=2)),
        "launches[0].child_faults",
        "only runner 'process'",
    ),
    "mtp-mode": (
        workers_killed().with_(
            pipeline=PipelineSpec(canonical_replicas=2, runner="process", mtp_mode=True)
        ),
        "launches[0].child_faults",
        "without mtp_mode",
    ),
    "finite-data": (
        workers_killed().with_(data=FINITE),
        "launches[0].child_faults",
        "over finite data",
    ),
    "beside-a-rank-fault": (
        workers_killed(rank_faults=(RankFault(0, 1, "raise"),)),
        "launches[0].child_faults",
        "no other fault",
    ),
    "beside-a-lag": (
        workers_killed(sync="free", lags=(RankLag(1),), retry="skip"),
        "launches[0].child_faults",
        "no other fault",
    ),
    "at-step-0": (
        workers_killed(ChildFault(1, 0), steps=TAIL),
        "launches[0].child_faults[0].at_step",
        "at step 0 there is nothing to kill",
    ),
    "too-few-steps-after-a-mid-launch-kill": (
        workers_killed(steps=5),
        "launches[0].steps",
        f"say {2 + TAIL}",
    ),
    "free-running": (
        workers_killed(sync="free"),
        "launches[0].sync",
        "a child fault needs sync 'lockstep'",
    ),
    "two-kills": (
        # A mid-launch kill's tail would turn a last-step kill into one without a tail.
        workers_killed().with_(
            launches=(
                replace(
                    workers_killed().launches[0],
                    child_faults=(MID_LAUNCH_KILL, ChildFault(0, 2 + TAIL)),
                ),
                workers_killed().launches[1],
            )
        ),
        "launches[0].child_faults",
        "another child fault included",
    ),
}


def test_a_child_fault_round_trips_through_json() -> None:
    scenario = workers_killed().validate()
    raw = json.loads(scenario.to_json())
    assert raw["launches"][0]["child_faults"] == [{"rank": 1, "at_step": 2, "target": "workers"}]
    assert Scenario.from_json(scenario.to_json()) == scenario


@pytest.mark.parametrize("name", sorted(CHILD_REFUSED))
def test_a_child_fault_outside_the_rules_is_refused_naming_the_field(name: str) -> None:
    scenario, field, says = CHILD_REFUSED[name]
    with pytest.raises(ScenarioError, match=re.escape(f"scenario.{field}: ")) as err:
        scenario.validate()
    assert says in str(err.value)


@pytest.mark.parametrize("microbatch", [1, 4, 7])
@pytest.mark.parametrize("at_step", [1, 2, 5])
def test_a_mid_launch_kill_needs_exactly_its_tail_of_steps(at_step: int, microbatch: int) -> None:
    """Runner process over endless data, with ``at_step + child_tail_steps`` steps: valid;
    one step fewer leaves the rank too few rows to need its replacement workers."""
    s = workers_killed(ChildFault(1, at_step)).with_(
        data=DataSpec(sources=(SourceSpec("a", exhausted="repeat"),), microbatch=microbatch)
    )
    steps = at_step + child_tail_steps(s, 0, 1)
    assert steps * microbatch >= CHILD_TAIL_ROWS
    first = replace(s.launches[0], steps=steps, checkpoints=(CheckpointAt(steps),))
    valid = s.with_(launches=(first, s.launches[1]))
    assert valid.validate() is valid and normalised(valid) == valid
    short = replace(first, steps=steps - 1, checkpoints=(CheckpointAt(steps - 1),))
    with pytest.raises(ScenarioError, match=re.escape(f"say {steps}")):
        s.with_(launches=(short, s.launches[1])).validate()


@pytest.mark.parametrize("name", sorted(CHILD_REFUSED))
def test_normalising_a_child_fault_brings_it_inside_the_rules_and_then_changes_nothing(
    name: str,
) -> None:
    scenario, _, _ = CHILD_REFUSED[name]
    fixed = normalised(scenario).validate()
    assert violations(fixed) == []
    assert normalised(fixed) == fixed


@pytest.mark.parametrize(
    "name", ["inline-runner", "mtp-mode", "finite-data", "beside-a-rank-fault", "beside-a-lag"]
)
def test_normalising_drops_a_child_fault_where_the_rules_forbid_it(name: str) -> None:
    scenario, _, _ = CHILD_REFUSED[name]
    fixed = normalised(scenario)
    assert [ph.child_faults for ph in fixed.launches] == [(), ()]


@pytest.mark.parametrize(("drawn", "placed"), [(1, 1), (2, 0), (5, 1)])
def test_normalising_moves_a_child_fault_onto_a_rank_of_the_launch(drawn: int, placed: int) -> None:
    scenario = workers_killed(ChildFault(drawn, 2), steps=2 + TAIL)
    assert normalised(scenario).launches[0].child_faults == (ChildFault(placed, 2),)


def test_normalising_a_mid_launch_kill_adds_its_tail_and_moves_the_end_checkpoint() -> None:
    """The checkpoint at the old end moves to the new one (what the replacement workers
    delivered is then compared, and handed on); one before it stays where it was."""
    scenario = workers_killed(steps=5, checkpoints=(CheckpointAt(1), CheckpointAt(5)))
    first = normalised(scenario).launches[0]
    assert first.steps == 2 + TAIL
    assert first.checkpoints == (CheckpointAt(1), CheckpointAt(2 + TAIL))
    assert first.child_faults == (ChildFault(1, 2),)
    assert normalised(scenario).restore_index(0) == 1


@pytest.mark.parametrize("at_step", [3, 9], ids=["at-the-end", "past-the-end"])
def test_normalising_leaves_a_last_step_kill_without_a_tail(at_step: int) -> None:
    """A kill at the last step (or past it, moved there) needs no rows after it."""
    fixed = normalised(workers_killed(ChildFault(1, at_step), steps=3))
    assert fixed == workers_killed(ChildFault(1, 3), steps=3)
    assert fixed.validate() is fixed
