"""Zephon's known defect ``string-key-zero-cid-restore``, shown by a standalone script.

``string_key_zero_cid.py`` (torch and zephon only) checkpoints right after ``iter()`` (every
lane's next chunk id 0) and restores it after its keys became strings: through Zephon's own
``aggregate_serializer="json"`` on two ranks, and through ``json.dumps``/``json.loads`` on
one. Both are refused today; their controls (msgpack, pickle, plain JSON once every lane
drew a chunk) restore. The test is a strict xfail that asserts the restore succeeds, so CI
turns red when Zephon fixes it; anything but the defect's own symptom (a control refused, a
different error, a run that reproduces only sometimes, a hang) fails it outright.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.zephon.repro.launch import json_lines, run_script
from zephon_chaos.explore.known import NO_NEXT_CID, STRING_KEY_ZERO_CID_RESTORE

SCRIPT = Path(__file__).with_name("string_key_zero_cid.py")
RUNS = 3
DEADLINE_S = 120.0
"""6 s measured a run on 2 loaded cores (importing torch, two rounds through a directory)."""
DEFECT_CASES = ("serializer-json", "persist-plain-json")
CONTROL_CASES = ("serializer-msgpack", "persist-pickle", "persist-plain-json-after-a-step")


def _run(tmp_path: Path, n: int) -> dict[str, dict[str, Any]]:
    """Run the script once; every process it started is killed, whatever happens."""
    return json_lines(run_script(SCRIPT, tmp_path / f"run{n}", DEADLINE_S), "case")


def _refused(case: dict[str, Any]) -> bool:
    """True: every rank refused with the defect's error; False: every rank restored."""
    outcomes = set(case["restore"].values())
    if outcomes == {"ok"}:
        return False
    if case["keys"] == ["str"] and all(NO_NEXT_CID in o for o in outcomes):
        return True
    pytest.fail(f"{case['case']}: neither restored nor the defect's error: {case}")


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason=f"known Zephon defect {STRING_KEY_ZERO_CID_RESTORE.id}: "
    "zephon 0.2.0 _internal/engine.py Engine.load_state_dict: `saved_next = "
    "ckpt.lane_next_cid.get(str(lane)) or ckpt.lane_next_cid.get(int(lane))` falls through "
    "a stored 0 under the string key and raises 'Lane N does not have next cid in the "
    "checkpoint'",
)
def test_a_string_keyed_checkpoint_restores_before_every_lane_drew_a_chunk(
    tmp_path: Path,
) -> None:
    runs = [_run(tmp_path, n) for n in range(RUNS)]
    for n, cases in enumerate(runs):
        missing = sorted(set(DEFECT_CASES + CONTROL_CASES) - set(cases))
        if missing:
            pytest.fail(f"run {n} reported no {missing}: {cases}")
        refused_controls = {c: cases[c] for c in CONTROL_CASES if _refused(cases[c])}
        if refused_controls:
            pytest.fail(f"run {n}: a control was refused: {refused_controls}")
    refused = {c: [_refused(cases[c]) for cases in runs] for c in DEFECT_CASES}
    for case, seen in refused.items():
        if len(set(seen)) > 1:
            pytest.fail(f"{case} was refused in only {sum(seen)} of {RUNS} runs: not one outcome")
    assert not any(any(seen) for seen in refused.values()), {
        c: [cases[c]["restore"] for cases in runs] for c in DEFECT_CASES
    }
