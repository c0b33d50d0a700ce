"""A launch torchrun restarted, judged from its recorded folders: the attempt the fault
spared is judged as the launch, with what it met, and one torchrun restarted again ends it."""

from __future__ import annotations

from pathlib import Path

from zephon_chaos.faults.restart import MET_ROUND, attempt_dir
from zephon_chaos.launch.result import GroupResult
from zephon_chaos.problem import Area, ProblemKind
from zephon_chaos.runner.outcome import ScenarioOutcome
from zephon_chaos.runner.resume import Resume, restarted_attempt
from zephon_chaos.scenario import Launch, Scenario
from zephon_chaos.workload.records import RecordWriter
from zephon_chaos.workload.spec import PipelineSpec, RankFault, WorkloadSpec


def recorded(out: Path, rank: int, *events: dict[str, object]) -> None:
    writer = RecordWriter(out, rank)
    for event in events:
        writer.write(**event)  # type: ignore[arg-type]
    writer.close()


def judged(tmp_path: Path, attempts: int) -> tuple[ScenarioOutcome, object]:
    """Two ranks, rank 1 exits at step 0 of attempt 0, ``attempts`` attempts in all."""
    fault = RankFault(1, 0, "exit", restart=0)
    scenario = Scenario(
        pipeline=PipelineSpec(canonical_replicas=2),
        launches=(Launch(2, 2, rank_faults=(fault,), max_restarts=attempts - 1),),
    ).validate()
    out = tmp_path / "phase0"
    for attempt in range(attempts):
        here = attempt_dir(out, attempt)
        for rank in (0, 1):
            start = {"kind": "start", "rank": rank, "world": 2, "lanes": [rank], "restored": None}
            recorded(here, rank, start)
    recorded(out, 1, {"kind": "fault", "action": "exit"})
    dead = {"kind": MET_ROUND, "where": "store", "scope": "zc-run-0", "attempt": 1}
    recorded(attempt_dir(out, 1), 0, {**dead, "round": "9", "namespace": "zephon/zc-run-0"})
    recorded(attempt_dir(out, 1), 1, {"kind": "error", "error": "RuntimeError: Timed out 9"})
    result = GroupResult("g", [0], [], False, 1.0, tmp_path, [])
    outcome = ScenarioOutcome(scenario, reference=None)
    spec = WorkloadSpec(out_dir=str(out))
    return outcome, restarted_attempt(scenario, 0, spec, result, Resume(), outcome)


def test_the_attempt_the_fault_spared_is_judged_with_the_round_it_met(tmp_path: Path) -> None:
    outcome, restarted = judged(tmp_path, 2)
    assert restarted is not None
    assert restarted.out == tmp_path / "phase0" / "restart1"  # type: ignore[attr-defined]
    assert restarted.met is not None and restarted.met.round_id == "9"  # type: ignore[attr-defined]
    assert restarted.failed is None  # type: ignore[attr-defined]
    assert outcome.problems == [], [p.text for p in outcome.problems]


def test_an_attempt_torchrun_restarted_again_ends_the_launch_failed(tmp_path: Path) -> None:
    _, restarted = judged(tmp_path, 3)
    failed = restarted.failed  # type: ignore[attr-defined]
    assert failed is not None and failed.is_(Area.LAUNCH, ProblemKind.FAILED)
    assert "Timed out 9" in failed.text, "the spared attempt's own error, the trigger's words"
