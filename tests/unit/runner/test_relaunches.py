"""Between launches the harness reads Zephon's state and changes none of it: the check that
proves it fails when anything else changes that state, and takes each deployment's own steps."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from zephon_chaos.deployment import Deployment
from zephon_chaos.faults.leftover_round import DirRounds, LeftoverRound, StoreRounds
from zephon_chaos.harness_problem import HarnessGap
from zephon_chaos.runner.relaunches import Meeting, Relaunches
from zephon_chaos.workload.spec import PipelineSpec, WorkloadSpec

SCOPE = "zc-run-0"
"""The namespace of a launch of run id ``zc-run`` that restores nothing."""


def _spec() -> WorkloadSpec:
    return WorkloadSpec(pipeline=PipelineSpec(run_id="zc-run"))


def _leave_a_failed_round(base: Path, round_id: str = "17") -> Path:
    """What ``FileCoordinator`` leaves of a round whose leader wrote its failure notice."""
    agg = base / SCOPE / ".zephon_agg"
    agg.mkdir(parents=True)
    (agg / "round.current").write_text(round_id)
    (agg / f"failed_{round_id}.txt").write_text("RuntimeError: timed out")
    return agg


@pytest.fixture
def store() -> Iterator[Any]:
    """A hosted store, as ``store_explicit`` runs one: its server and its endpoint."""
    from zephon_chaos.launch.store_host import StoreHost

    with StoreHost() as host:
        yield host


def test_a_relaunch_meets_the_directory_as_the_last_launch_left_it(tmp_path: Path) -> None:
    world = Relaunches(Deployment(), tmp_path / "aggregate")
    base = world.directory(tmp_path / "phase0")
    assert world.before_launch(_spec(), 0) == Meeting()
    _leave_a_failed_round(base)
    world.after_launch(serving=True)
    assert world.directory(tmp_path / "phase1") == base, "one directory for the job"
    met = world.before_launch(_spec(), 1)
    assert met == Meeting(LeftoverRound(f"{SCOPE}/.zephon_agg", "17", failed=True), False)
    assert world.found == world.left, "the harness changed nothing"
    assert (base / SCOPE / ".zephon_agg" / "round.current").exists()


def test_a_directory_per_launch_is_a_fresh_one(tmp_path: Path) -> None:
    world = Relaunches(Deployment(aggregate_dir="launch"), tmp_path / "aggregate")
    first = world.directory(tmp_path / "phase0")
    world.before_launch(_spec(), 0)
    _leave_a_failed_round(first)
    world.after_launch(serving=True)
    assert world.directory(tmp_path / "phase1") != first
    assert world.before_launch(_spec(), 1) == Meeting()


def test_a_change_between_launches_that_no_step_makes_is_the_harness_problem(
    tmp_path: Path,
) -> None:
    world = Relaunches(Deployment(), tmp_path / "aggregate")
    base = world.directory(tmp_path / "phase0")
    world.before_launch(_spec(), 0)
    agg = _leave_a_failed_round(base)
    world.after_launch(serving=True)
    (agg / "round.current").unlink()  # what the harness used to do, unasked
    world.directory(tmp_path / "phase1")
    (problem,) = world.before_launch(_spec(), 1).problems
    assert problem.gap is HarnessGap.CHANGED_BETWEEN_LAUNCHES


def test_the_operator_step_clears_the_round_after_the_check(tmp_path: Path) -> None:
    world = Relaunches(Deployment(operator="clear_failed_rounds"), tmp_path / "aggregate")
    base = world.directory(tmp_path / "phase0")
    world.before_launch(_spec(), 0)
    agg = _leave_a_failed_round(base)
    world.after_launch(serving=True)
    world.directory(tmp_path / "phase1")
    met = world.before_launch(_spec(), 1)
    assert met.round is not None and met.cleared and met.problems == ()
    assert not (agg / "round.current").exists()
    assert (agg / "failed_17.txt").exists(), "only the announcement goes"


def test_the_hosted_store_is_checked_key_for_key(store: Any) -> None:
    world = Relaunches(Deployment(), Path("unused"))
    world.use_store(store.endpoint)
    world.before_launch(_spec(), 0)
    store.store.set(f"zephon/{SCOPE}/round", '{"round": "5", "ts": 0}')
    world.after_launch(serving=True)
    met = world.before_launch(_spec(), 1)
    assert met == Meeting(LeftoverRound(f"zephon/{SCOPE}", "5"))
    world.after_launch(serving=True)
    store.store.delete_key(f"zephon/{SCOPE}/round")
    (problem,) = world.before_launch(_spec(), 2).problems
    assert problem.gap is HarnessGap.CHANGED_BETWEEN_LAUNCHES


def test_a_round_with_an_outcome_in_the_store_is_not_left_open(store: Any) -> None:
    store.store.set(f"zephon/{SCOPE}/round", '{"round": "5", "ts": 0}')
    store.store.set(f"zephon/{SCOPE}/5/outcome", "F...")
    assert StoreRounds(store.endpoint).open_round(SCOPE) is None


def test_a_merged_result_closes_a_directory_round(tmp_path: Path) -> None:
    agg = _leave_a_failed_round(tmp_path)
    (agg / "merged_17.ckpt").write_bytes(b"x")
    assert DirRounds(tmp_path).open_round(SCOPE) is None


def test_a_run_id_per_restart_scopes_each_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    from zephon_chaos.faults.leftover_round import launch_scope
    from zephon_chaos.rank.main import _restart_scoped

    spec = WorkloadSpec(pipeline=PipelineSpec(run_id="zc-run"), run_id_per_restart=True)
    assert launch_scope(spec) == "zc-run-r0-0"
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "2")
    assert _restart_scoped(spec).run_id == "zc-run-r2"
    assert _restart_scoped(_spec()).run_id == "zc-run"
