"""A Zephon defect shown by a standalone script: a pipeline's child processes (the MTP child,
the workers of ``runner="process"``) outlive a parent killed by a signal.

``orphaned_children.py`` (torch and zephon only) kills a process that runs a pipeline, with
SIGKILL or SIGTERM, and watches its descendants; the control exits normally and its children
end. The test is a strict xfail asserting that none survive, so CI turns red when Zephon
fixes it; a control whose children survive, or a case that started none, fails outright.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.zephon.repro.launch import run_script
from tests.zephon.repro.orphaned_children import CASES, DEADLINE_S, ENDS

pytestmark = pytest.mark.slow
"""About 2 minutes: nine pipelines in processes of their own, six watched for 8 s."""

SCRIPT = Path(__file__).with_name("orphaned_children.py")


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="Zephon defect: zephon 0.2.0 _internal/mtp.py: at the dead parent's end of the "
    "control pipe _drain_ctrl's recv() raises EOFError (430-431) and the MTP child then blocks "
    "putting an error sentinel on its full data queue (376-379), never closing its engine; "
    "_internal/runners/process.py _process_worker_main waits in task_queue.get() (456) "
    "without looking at its parent",
)
def test_a_pipelines_children_end_when_its_process_is_killed(tmp_path: Path) -> None:
    text = run_script(SCRIPT, tmp_path, DEADLINE_S * len(CASES) * len(ENDS))
    # One line per case and end (``json_lines`` keys by the first key alone).
    found = [json.loads(line) for line in text.splitlines() if line.startswith('{"case"')]
    lines: dict[tuple[str, str], dict[str, Any]] = {(r["case"], r["end"]): r for r in found}
    if sorted(lines) != sorted((c, e) for c in CASES for e in ENDS):
        pytest.fail(f"the script reported {sorted(lines)}:\n{text[-3000:]}")
    for (case, end), line in lines.items():
        if line["children"] == 0:
            pytest.fail(f"{case}/{end} started no child process: {line}")
        if end == "exit" and line["alive"]:
            pytest.fail(f"the control's children outlived a normal exit: {line}")
    killed = {k: v["alive"] for k, v in lines.items() if k[1] != "exit"}
    assert not any(killed.values()), f"children alive after their process was killed: {killed}"
