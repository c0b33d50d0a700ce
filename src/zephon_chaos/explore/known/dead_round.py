"""What a relaunch meets of a round a dead launch left open in its namespace (the runner
reads it before each launch: ``PhaseRun.met_round``, ``runner.relaunches``).

Two readings, told apart by the round the relaunch met, and each only where a rank's own
error names that very round (the trigger, not the symptom alone):

- ``dead-round-meets-relaunch`` (a limitation): the dead leader left no outcome, so a
  relaunched follower that reads the announcement before its leader replaces it joins the
  dead round and waits out ``aggregate_timeout_s`` for its outcome; Zephon documents this
  isolation as "best effort" and leaves failed-round artifacts to manual clean-up;
- ``failed-round-open-in-dir`` (a defect): with ``aggregate_dir`` the dead launch's leader
  recorded the round's failure, yet its followers take it for open and fail at once with the
  dead launch's failure notice; with a key-value store the same notice closes the round.
"""

from __future__ import annotations

from zephon_chaos.explore.known.defect import KnownDefect, KnownKind, run_of
from zephon_chaos.faults.leftover_round import LeftoverRound
from zephon_chaos.problem import Problem
from zephon_chaos.runner import PhaseRun, ScenarioOutcome

FAILED_ON_LEADER = "Checkpoint round {round_id} failed on leader"


def _met(outcome: ScenarioOutcome, problem: Problem) -> tuple[PhaseRun, LeftoverRound] | None:
    run = run_of(outcome, problem)
    met = getattr(run, "met_round", None)  # only launches that met one carry it
    if run is None or met is None or run.cleared_round:
        return None
    return run, met


def _errors(run: PhaseRun) -> list[str]:
    """Every error of the launch: each attempt's of each checkpoint, each checkpoint's and each
    rank's. A checkpoint keeps only its last attempt's error, so under a ``lockstep`` or
    ``independent`` retry the dead round's notice, met by the first attempt, is in that
    attempt's record alone."""
    found = [
        str(ev.get("error") or "")
        for rec in run.records
        for ev in rec.events
        if ev.get("kind") == "checkpoint_attempt"
    ]
    found += [c.error or "" for rec in run.records for c in rec.checkpoints]
    found += [str((rec.error or {}).get("error", "")) for rec in run.records]
    return [e for e in found if e]


def _joined_dead_round(outcome: ScenarioOutcome, problem: Problem) -> bool:
    met = _met(outcome, problem)
    if met is None or met[1].failed:
        return False
    run, dead = met
    return any(dead.round_id in e and "Timed out" in e for e in _errors(run))


def _joined_failed_round(outcome: ScenarioOutcome, problem: Problem) -> bool:
    met = _met(outcome, problem)
    if met is None or not met[1].failed:
        return False
    run, dead = met
    notice = FAILED_ON_LEADER.format(round_id=dead.round_id)
    return any(notice in e for e in _errors(run))


DEAD_ROUND_MEETS_RELAUNCH = KnownDefect(
    id="dead-round-meets-relaunch",
    kind=KnownKind.LIMITATION,
    summary=(
        "a relaunch that restores the same checkpoint as a launch whose leader died mid-round, "
        "with the same run id, reuses that launch's namespace: a follower that reads the dead "
        "round's announcement before its leader replaces it joins that round and fails after "
        "aggregate_timeout_s, and the relaunch's first checkpoint fails"
    ),
    evidence=(
        "zephon 0.2.0 _internal/coordination.py: RoundCoordinator._scoped_run_id names the "
        "namespace {run_id}-{reload_count}; KVCoordinator's docstring: 'Restoring the same "
        "checkpoint twice reuses that namespace, so isolation between such attempts is best "
        "effort, as with aggregate_dir'; _read_open_round_id skips an announcement only with "
        "a result or older than aggregate_timeout_s + 30 s; RoundCoordinator.cleanup leaves "
        "failed-round artifacts to 'manual cleanup once every participant has stopped'. "
        "Standalone: tests/zephon/repro/dead_round_meets_relaunch.py"
    ),
    explains=_joined_dead_round,
    consequence=(
        "the relaunch's first checkpoint is lost after aggregate_timeout_s (180 s by default); "
        "without a retry the relaunch fails and spends a torchrun restart"
    ),
    mitigation=(
        "a run id per restart or per launch (the relaunch gets a namespace of its own), or an "
        "operator step that deletes the open round's announcement before the relaunch: "
        "tests/unit/inproc/test_leftover_round.py runs the same scenario with each"
    ),
)

FAILED_ROUND_OPEN_IN_DIR = KnownDefect(
    id="failed-round-open-in-dir",
    summary=(
        "with aggregate_dir, a relaunch that restores the same checkpoint as a launch whose "
        "round failed (its leader wrote the failure notice), with the same run id, has its "
        "followers join that failed round: their checkpoint() fails at once with the dead "
        "launch's notice, and the relaunch's own round fails"
    ),
    evidence=(
        "zephon 0.2.0 _internal/coordination.py: _read_open_round_id takes a round for open "
        "unless _result_location exists; FileCoordinator._failure_location is a separate "
        "failed_<rid>.txt and _close_round (deleting round.current) runs only on success, so "
        "a failed round stays announced and open, and FileCoordinator._wait_for_outcome raises "
        "its notice; KVCoordinator._failure_location returns _result_location, so with a store "
        "the notice closes the round (lines 441-465, 571, 576-583, 808-809, 889-893; "
        "992-993). Standalone: tests/zephon/repro/failed_round_open_in_dir.py"
    ),
    explains=_joined_failed_round,
)
