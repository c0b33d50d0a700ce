"""DP x TP layouts in process: rank threads with Zephon's dp args, judged by the same oracles."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from zephon_chaos.explore.signature import signature
from zephon_chaos.inproc import InprocLauncher
from zephon_chaos.inproc.runner import InprocScenarioRunner
from zephon_chaos.launch.launch_spec import LaunchSpec
from zephon_chaos.launch.result import GroupResult
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.records import record_path
from zephon_chaos.workload.spec import CheckpointAt, PipelineSpec

SCENARIO = Scenario(
    pipeline=PipelineSpec(canonical_replicas=4),
    launches=(
        Launch(4, 2, (CheckpointAt(1, 1),), tp=2),  # 2 x 2, mid-window
        Launch(2, 2, (CheckpointAt(1),), tp=2),  # 1 x 2: DP changes, TP fixed
        Launch(2, 2, (CheckpointAt(1),)),  # 2 x 1: both change
        Launch(4, 2, tp=2),  # 2 x 2: TP changes, DP fixed
    ),
    name="dp-x-tp",
)


class _SkippingPeer(InprocLauncher):
    """Rank 1 (rank 0's TP peer) records its first batch of launch ``phase`` one sample short:
    a divergence inside a DP group that the global-batch oracle (reading rank 0) cannot see."""

    phase = "phase1"

    def __call__(self, spec: LaunchSpec) -> GroupResult:
        result = super().__call__(spec)
        if spec.name.endswith(self.phase):
            path = record_path(Path(spec.args[0]).parent, 1)
            lines = path.read_text().splitlines()
            first = next(i for i, line in enumerate(lines) if '"kind": "batch"' in line)
            batch = json.loads(lines[first])
            lines[first] = json.dumps({**batch, "ids": batch["ids"][1:]})
            path.write_text("\n".join(lines) + "\n")
        return result


def _runner(root: Path, launcher: InprocLauncher) -> InprocScenarioRunner:
    return InprocScenarioRunner(root, launcher=launcher, deadline_s=120.0)


@pytest.fixture
def no_rank_threads_left() -> Iterator[None]:
    yield
    assert not [t for t in threading.enumerate() if t.name.startswith("zc-s")]


def test_threads_resume_across_every_layout_change(tmp_path: Path, no_rank_threads_left) -> None:
    with _runner(tmp_path, InprocLauncher(tmpdir=tmp_path / "tmp")) as runner:
        outcome = runner.run(SCENARIO)
    assert outcome.ok, outcome.report()
    assert outcome.verdict is not None
    # 2 x 2 -> 1 x 2 relays lanes mid-window: Zephon's weaker contract applies.
    assert outcome.verdict.contract == "mid-window contract (windows as multisets)"
    assert [(r.from_world, r.from_tp, r.to_world, r.to_tp) for r in outcome.resumes] == [
        (4, 2, 2, 2),
        (2, 2, 2, 1),
        (2, 1, 4, 2),
    ]


def test_a_divergence_inside_a_dp_group_fails_the_scenario_with_its_signature(
    tmp_path: Path, no_rank_threads_left
) -> None:
    scenario = SCENARIO.with_(launches=SCENARIO.launches[:2])
    with _runner(tmp_path, _SkippingPeer(tmpdir=tmp_path / "tmp")) as runner:
        outcome = runner.run(scenario)
    assert outcome.verdict is not None and outcome.verdict.ok  # rank 0's streams are intact
    assert not outcome.ok
    [problem] = outcome.problems
    assert problem.text.startswith("phase 1: DP group 0 diverged: rank 1's batch 0")
    assert signature(outcome) == "batches-identical.dp-group-diverged.resized.mid-window"
