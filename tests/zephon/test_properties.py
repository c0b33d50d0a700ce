"""Elastic resume as a property: generated scenarios on both tiers, and Zephon's known defects.

Every generated scenario must meet the oracles (global-batch identity, or the mid-window
contract after a mid-window resize; checkpoint invariants; refusals with Zephon's error;
crashes relaunched from the last checkpoint). A failure is shrunk by Hypothesis, rerun
twice, labeled reproducible or flaky, and saved under ``--chaos-artifacts`` (default
``./chaos-artifacts``) with its replay command. ``--chaos-profile`` sizes the search.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import Phase as HypothesisPhase
from hypothesis import given, settings

from zephon_chaos.explore.known import (
    CHECKPOINT_AFTER_RESTORE,
    MTP_WARNING_STAYS_IN_CHILD,
    STRING_KEY_ZERO_CID_RESTORE,
)
from zephon_chaos.explore.property import ScenarioProperty
from zephon_chaos.inproc import inproc_runner
from zephon_chaos.inproc.runner import InprocScenarioRunner
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.strategies import scenarios
from zephon_chaos.workload.spec import CheckpointAt, PipelineSpec

TORCHRUN_EXAMPLES = 6
"""A torchrun scenario costs 10-30 s here via the CLI path (2-6 s via the warm lane): the
torchrun properties cap their example counts."""
STORE_FAULT_EXAMPLES = 3
"""Store-fault scenarios run longer (a failing round waits out its 2 s budget, a stalled link
its short deadline): the explorer searches that space and ``tox -e deep`` samples it; the
default run keeps the targeted fault tests (test_faults_*.py)."""


@pytest.fixture
def findings_dir(request: pytest.FixtureRequest) -> Path:
    chosen = request.config.getoption("--chaos-artifacts", default=None)
    return Path(chosen) if chosen else request.config.rootpath / "chaos-artifacts"


@pytest.fixture
def inproc(chaos_tmp_root: Path) -> Iterator[InprocScenarioRunner]:
    with inproc_runner(chaos_tmp_root / "inproc") as runner:
        yield runner


def test_generated_scenarios_resume_correctly_in_process(
    inproc: InprocScenarioRunner, findings_dir: Path
) -> None:
    prop = ScenarioProperty(inproc, "inproc", findings_dir)

    @given(scenarios(tier="inproc", max_world=3, max_phases=3))
    def check(scenario: Scenario) -> None:
        prop.check(scenario)

    prop.verify(check)
    assert prop.runs > 0 or HypothesisPhase.generate not in settings().phases  # the replay profile


@pytest.mark.cpu
@pytest.mark.parametrize(
    ("store_faults", "examples"),
    [
        pytest.param(False, TORCHRUN_EXAMPLES, marks=pytest.mark.slow, id="processes"),
        pytest.param(
            True,
            STORE_FAULT_EXAMPLES,
            marks=[pytest.mark.chaos, pytest.mark.slow],
            id="store-faults",
        ),
    ],
)
def test_generated_scenarios_resume_correctly_on_torchrun(
    resume_check, findings_dir: Path, store_faults: bool, examples: int
) -> None:
    """``store-faults``: every scenario aggregates through torchrun's store, and a launch may
    carry a fault on one rank's link (latency, a cut, a reset, timed by a point of a round)
    with a retry policy; the fault oracle judges the faulted round, the global-batch oracle
    the resume from whatever checkpoint survived."""
    prop = ScenarioProperty(resume_check.runner, "torchrun", findings_dir)

    @settings(max_examples=min(settings().max_examples, examples))
    @given(scenarios(tier="torchrun", max_world=3, max_phases=3, store_faults=store_faults))
    def check(scenario: Scenario) -> None:
        prop.check(scenario)

    prop.verify(check)
    assert prop.runs > 0 or HypothesisPhase.generate not in settings().phases


# ---- known defects of Zephon: strict xfails, so CI turns red when one is fixed ----------

CHECKPOINT_BEFORE_FIRST_BATCH = Scenario(
    pipeline=PipelineSpec(canonical_replicas=2),
    launches=(
        Launch(1, 1, (CheckpointAt(0, 1),)),  # mid-window: lane 0 has 1 batch, lane 1 none
        Launch(1, 1, (CheckpointAt(0),)),  # restored, then checkpointed before any batch
    ),
    name="checkpoint-after-restore-before-first-batch",
)


@pytest.mark.xfail(
    strict=True,
    reason=f"known Zephon defect {CHECKPOINT_AFTER_RESTORE.id}: "
    f"{CHECKPOINT_AFTER_RESTORE.summary}. Evidence: {CHECKPOINT_AFTER_RESTORE.evidence}",
)
def test_a_checkpoint_right_after_restore_warns_like_any_mid_window_checkpoint(
    inproc: InprocScenarioRunner,
) -> None:
    outcome = inproc.run(CHECKPOINT_BEFORE_FIRST_BATCH)
    assert outcome.ok, outcome.report()


def test_the_same_position_checkpointed_after_a_batch_does_warn(
    inproc: InprocScenarioRunner,
) -> None:
    """The control for the xfail above: two batches later (lane counts 2 and 1), the round
    runs and rank 0, which merges, warns."""
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=2),
        launches=(Launch(1, 1, (CheckpointAt(0, 1),)), Launch(1, 2, (CheckpointAt(1),))),
    )
    outcome = inproc.run(scenario)
    assert outcome.ok, outcome.report()
    (facts,) = outcome.phases[1].checkpoints.facts
    assert facts.mid_window and facts.warned == [0]


_CHECKPOINT_PROBE = """
import json, sys, warnings
from zephon_chaos.workload.data import build_pipeline
from zephon_chaos.workload.spec import DataSpec, PipelineSpec

pipe = build_pipeline(
    DataSpec(), PipelineSpec(canonical_replicas=2, mtp_mode=sys.argv[2] == "mtp"),
    world_size=1, rank=0, aggregate_dir=sys.argv[1],
)
it = iter(pipe)
next(it)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ckpt = pipe.checkpoint()
it.close()
print(json.dumps({"lane_emitted": {str(k): v for k, v in ckpt["lane_emitted"].items()},
                  "warnings": [str(w.message) for w in caught]}))
"""


def _mid_window_checkpoint_warnings(tmp_path: Path, mode: str) -> list[str]:
    """One rank over C=2: one batch (lane 0 only), then a checkpoint; the caller's warnings.

    In a process of its own: MTP's child and multiprocessing's resource tracker end with it.
    """
    done = subprocess.run(
        [sys.executable, "-c", _CHECKPOINT_PROBE, str(tmp_path / "aggregate"), mode],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["lane_emitted"] == {"0": 1, "1": 0}
    return list(seen["warnings"])


@pytest.mark.xfail(
    strict=True,
    reason=f"known Zephon defect {MTP_WARNING_STAYS_IN_CHILD.id}: "
    f"{MTP_WARNING_STAYS_IN_CHILD.summary}. Evidence: {MTP_WARNING_STAYS_IN_CHILD.evidence}",
)
def test_a_mid_window_checkpoint_in_mtp_mode_warns_the_caller(tmp_path: Path) -> None:
    caught = _mid_window_checkpoint_warnings(tmp_path, "mtp")
    assert any("Checkpoint taken mid-window" in w for w in caught), caught


def test_a_mid_window_checkpoint_inline_warns_the_caller(tmp_path: Path) -> None:
    """The control for the xfail above."""
    caught = _mid_window_checkpoint_warnings(tmp_path, "inline")
    assert any("Checkpoint taken mid-window" in w for w in caught), caught


def _string_keyed(checkpoint: CheckpointAt, persist_format: str = "pickle") -> Scenario:
    """C=2 over one launch and its relaunch; the keys become strings through the json codec
    (a round over two ranks) or through plain JSON persistence (one rank)."""
    world, serializer = (2, "json") if persist_format == "pickle" else (1, "msgpack")
    return Scenario(
        pipeline=PipelineSpec(canonical_replicas=2, aggregate_serializer=serializer),
        launches=(Launch(world, 1, (checkpoint,)), Launch(world, 1)),
        persist_format=persist_format,
        name="string-keyed-restore",
    )


@pytest.mark.xfail(
    strict=True,
    reason=f"known Zephon defect {STRING_KEY_ZERO_CID_RESTORE.id}: "
    f"{STRING_KEY_ZERO_CID_RESTORE.summary}. Evidence: {STRING_KEY_ZERO_CID_RESTORE.evidence}",
)
@pytest.mark.parametrize(
    "persist_format", ["pickle", "plain_json"], ids=["json-codec", "plain-json"]
)
def test_a_string_keyed_checkpoint_before_the_first_batch_restores(
    inproc: InprocScenarioRunner, persist_format: str
) -> None:
    outcome = inproc.run(_string_keyed(CheckpointAt(0), persist_format))
    assert outcome.ok, outcome.report()


def test_a_string_keyed_checkpoint_after_every_lane_drew_restores(
    inproc: InprocScenarioRunner,
) -> None:
    """The control for the xfail above: one global step later every lane's next chunk id is
    1, and the json codec's string keys restore."""
    outcome = inproc.run(_string_keyed(CheckpointAt(1)))
    assert outcome.ok, outcome.report()
