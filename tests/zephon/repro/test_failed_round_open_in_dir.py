"""A Zephon defect, standalone: with ``aggregate_dir``, a relaunch restoring the same
checkpoint as a launch whose checkpoint round failed joins that dead launch's round, and its
follower raises the old failure notice (``failed_round_open_in_dir.py``, torch and zephon
only, ranks as threads of one process).

Cause, in zephon 0.2.0 ``_internal/coordination.py``: both launches' rounds live under
``{run_id}-{reload_count}`` (``_scoped_run_id``, lines 371-378; ``FileCoordinator.agg_dir``,
lines 743-780, the path at 758-761); ``RoundCoordinator._read_open_round_id`` (lines 441-465)
treats an announced round as open unless its result exists (line 463);
``FileCoordinator._failure_location`` (lines 808-809) is a separate ``failed_<rid>.txt`` and
``_close_round`` (lines 868-869) runs only when ``_lead`` succeeds (line 571), so the failed
round stays announced and open, and ``FileCoordinator._wait_for_outcome`` (lines 882-896)
raises its notice. With a key-value store the failure notice is the round's outcome
(``KVCoordinator._failure_location``, lines 992-993, returns ``_result_location``), so a
follower skips the failed round: the control. Zephon calls isolation between attempts
restoring one checkpoint "best effort" (lines 911-913), which a round left with no outcome
can break; here the outcome is recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.zephon.repro.launch import reported, run_script

SCRIPT = Path(__file__).with_name("failed_round_open_in_dir.py")
DEADLINE_S = 120.0
"""20 s measured a run on 2 cores at load 9, 15 s of it importing torch; the rest is nine
launches, five of which wait out a 1 s budget."""
DEFECT_CASE = "dir"
CONTROL_CASES = ("dir-new-run-id", "store")
LEADER_MISSED_FOLLOWER = "waiting for checkpoint shards: Missing ranks=[1]"
NO_ROUND_ID = "waiting for round id at "


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each case's outcomes, from one run shared by this module's tests; launches A and B
    went as designed in every case, or the test fails here."""
    text = run_script(SCRIPT, tmp_path_factory.mktemp("failed-round-dir"), DEADLINE_S)
    found = reported(text, "case", [DEFECT_CASE, *CONTROL_CASES], SCRIPT)
    for name, case in found.items():
        if case["a"] != {"0": "ok", "1": "ok"} or LEADER_MISSED_FOLLOWER not in case.get(
            "b_leader", ""
        ):
            pytest.fail(f"{name}: launch A did not complete or launch B failed otherwise: {case}")
        if not case["b_round"]:
            pytest.fail(f"{name}: launch B's round id could not be read back: {case}")
    return found


def _joined_the_failed_round(case: dict[str, Any]) -> bool:
    return f"Checkpoint round {case['b_round']} failed on leader: " in case["c_follower"]


def test_launch_b_leaves_its_failed_round_announced_with_its_notice(
    cases: dict[str, dict[str, Any]],
) -> None:
    """What the relaunch finds: the directory keeps the announcement beside a separate
    failure file and no result; the store keeps the notice as the round's outcome."""
    rid = cases[DEFECT_CASE]["b_round"]
    left = cases[DEFECT_CASE]["b_left"]
    assert {"round.current", f"failed_{rid}.txt"} <= set(left), left
    assert f"merged_{rid}.ckpt" not in left, left
    store = cases["store"]
    assert store["b_left"] == ["round", f"{store['b_round']}/outcome"], store


def test_a_follower_of_another_run_id_or_over_a_store_skips_the_failed_round(
    cases: dict[str, dict[str, Any]],
) -> None:
    """The controls: with no leader calling, the relaunch's follower waits out its budget for
    a round id instead of joining launch B's round."""
    for name in CONTROL_CASES:
        case = cases[name]
        assert NO_ROUND_ID in case["c_follower"], case
        assert not _joined_the_failed_round(case), case


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason=(
        "Zephon defect: with aggregate_dir a failed round keeps round.current and has no "
        "merged file (its notice is failed_<rid>.txt), so a relaunch restoring the same "
        "checkpoint (same {run_id}-{reload_count} dir) joins it and its follower raises "
        "'Checkpoint round <old rid> failed on leader: ...' (see this module's docstring)"
    ),
)
def test_a_relaunch_does_not_join_a_round_that_failed_before_it(
    cases: dict[str, dict[str, Any]],
) -> None:
    case = cases[DEFECT_CASE]
    assert not _joined_the_failed_round(case), case
