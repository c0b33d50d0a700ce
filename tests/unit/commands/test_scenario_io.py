"""How ``run`` and ``replay`` run a scenario file: as it was found, unless told otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from zephon_chaos.cli import build_parser
from zephon_chaos.commands import UsageError
from zephon_chaos.commands._scenario_io import RunSetting, Source, choose, prepare
from zephon_chaos.launch.launch_spec import DEFAULT_LAUNCH_LANE, LAUNCH_LANES
from zephon_chaos.scenario import Found, Launch, Scenario
from zephon_chaos.workload.spec import CheckpointAt, PipelineSpec

FOUND = Found(tier="torchrun", launch="cli", signature="batches-identical.missing.resized.boundary")
OTHER_LANE = next(lane for lane in LAUNCH_LANES if lane != FOUND.launch)


def test_a_file_without_a_record_runs_on_auto_and_the_default_lane() -> None:
    assert choose(None, None, None) == RunSetting(
        "auto", Source.DEFAULT, DEFAULT_LAUNCH_LANE, Source.DEFAULT
    )


def test_a_recorded_file_runs_on_its_tier_and_lane() -> None:
    assert choose(FOUND, None, None) == RunSetting("torchrun", Source.FILE, "cli", Source.FILE)


def test_the_options_given_win_over_the_record() -> None:
    setting = choose(FOUND, "inproc", OTHER_LANE)
    assert setting == RunSetting("inproc", Source.OPTION, OTHER_LANE, Source.OPTION)
    assert choose(FOUND, None, OTHER_LANE).tier_from is Source.FILE


def test_an_unknown_lane_option_is_refused_naming_the_lanes() -> None:
    with pytest.raises(UsageError, match=r"--launch 'fork': choose one of cli, warm"):
        choose(FOUND, None, "fork")


def test_the_line_says_the_lane_only_where_it_plays_a_part() -> None:
    on_torchrun = RunSetting("torchrun", Source.FILE, "cli", Source.OPTION)
    assert on_torchrun.describe() == "the torchrun tier (as found), launch cli (given)"
    assert RunSetting("inproc", Source.OPTION, "cli", Source.FILE).describe() == (
        "the inproc tier (given)"
    )


def _saved(tmp_path: Path, found: Found | None) -> Path:
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=2),
        launches=(Launch(2, 3, (CheckpointAt(1),)), Launch(1, 2)),
        found=found,
    ).validate()
    return scenario.save(tmp_path / "finding.json")


@pytest.mark.parametrize("command", ["run", "replay"])
def test_prepare_takes_the_record_of_the_file(tmp_path: Path, command: str) -> None:
    args = build_parser().parse_args([command, str(_saved(tmp_path, FOUND))])
    _, setting = prepare(args)
    assert setting == RunSetting("torchrun", Source.FILE, "cli", Source.FILE)


def test_prepare_resolves_auto_for_a_file_without_a_record(tmp_path: Path) -> None:
    args = build_parser().parse_args(["replay", str(_saved(tmp_path, None))])
    scenario, setting = prepare(args)
    assert scenario.found is None
    assert setting == RunSetting("inproc", Source.DEFAULT, DEFAULT_LAUNCH_LANE, Source.DEFAULT)


def test_a_run_or_replay_cuts_a_known_hang_short_as_explore_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner ``run`` and ``replay`` make knows the known hangs the explorer's runners
    know, so a replayed hang ends when recognised, not at its deadline."""
    import zephon_chaos.explore.tiers as tiers
    from zephon_chaos.commands._scenario_io import run_once
    from zephon_chaos.explore.known import HANG_SIGNATURES
    from zephon_chaos.runner import ScenarioOutcome

    made = []

    class Runner:
        hang_signatures: object = None
        reference_cache: dict[str, object] = {}

        def run(self, scenario: Scenario) -> ScenarioOutcome:
            made.append(self.hang_signatures)
            return ScenarioOutcome(scenario, None)

    monkeypatch.setattr(tiers, "_new_runner", lambda *a, **k: Runner())
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=2),
        launches=(Launch(2, 1, (CheckpointAt(1),)),),
    )
    run_once(scenario, "torchrun", tmp_path, 60.0)
    assert made == [HANG_SIGNATURES] and HANG_SIGNATURES
