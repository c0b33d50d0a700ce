"""Run a standalone reproduction script with a deadline, and leave no process behind.

The scripts import nothing but torch and zephon (that is what makes them evidence), so
what they share lives here, on the test side: the launch, the deadline, the kill of every
process they started, and reading the JSON lines they print.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from zephon_chaos.procs import ProcessRegistry


def run_script(
    script: Path,
    work: Path,
    deadline_s: float,
    *,
    nproc: int | None = None,
    env: dict[str, str] | None = None,
    args: list[str] | None = None,
) -> str:
    """Run ``script`` with ``args`` (under torchrun on ``nproc`` ranks, else plain python) in
    ``work``; fail the test on its deadline, a non-zero exit or a surviving process; its
    output."""
    (work / "pids").mkdir(parents=True)
    registry = ProcessRegistry(tag=f"repro-{uuid.uuid4().hex[:8]}", pid_dir=work / "pids")
    argv = [sys.executable, str(script), *(args or [])]
    logs = work / "rank-logs"
    if nproc is not None:
        # Each rank's stderr is also kept in its own file (``--tee 2``; stdout, where the
        # scripts print their JSON lines, stays as it is), so that a failure shows every
        # rank's traceback whole rather than the end of the interleaved output.
        argv[1:1] = [
            *("-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc)),
            *("--log-dir", str(logs), "--tee", "2"),
        ]
    full_env = {**os.environ, **registry.env(), "TMPDIR": str(work), **(env or {})}
    # The ranks of a torchrun script share one stdout pipe, and torchrun starts them with
    # ``python -u``: there print(line) writes the line and its newline in two calls, so two
    # ranks' lines could meet as '{...}{...}' (seen in CI). The scripts therefore print each
    # JSON line with its newline in one write (``print(text + "\n", end="")``), which a
    # pipe keeps whole (under PIPE_BUF).
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=full_env,
        start_new_session=True,
    )
    registry.add(proc.pid)
    try:
        out, _ = proc.communicate(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        registry.kill_all()
        out, _ = proc.communicate()
        pytest.fail(
            f"{script.name} passed its {deadline_s:.0f} s deadline:\n{out.decode()[-3000:]}"
            f"{rank_errors(logs)}"
        )
    finally:
        survivors = registry.kill_all()
    if survivors:
        pytest.fail(f"processes of {script.name} survived: {survivors}")
    text = out.decode(errors="replace")
    if proc.returncode != 0:
        pytest.fail(f"{script.name} exited {proc.returncode}:\n{text[-3000:]}{rank_errors(logs)}")
    return text


def rank_errors(logs: Path, tail: int = 4000) -> str:
    """The end of every rank's stderr file that torchrun kept under ``logs``, each under a
    heading naming it ("" when there are none: a plain-python script, or no rank started)."""
    parts = []
    for path in sorted(logs.glob("*/attempt_*/*/stderr.log")):
        err = path.read_text(errors="replace").strip()
        if err:
            parts.append(f"\n--- {path.relative_to(logs)} ---\n{err[-tail:]}")
    return "".join(parts)


def json_lines(text: str, key: str) -> dict[Any, dict[str, Any]]:
    """The JSON objects the script printed whose first key is ``key``, by that key's value."""
    prefix = '{"' + key + '"'
    found = [json.loads(line) for line in text.splitlines() if line.startswith(prefix)]
    return {line[key]: line for line in found}


def reported(text: str, key: str, expected: list[Any], script: Path) -> dict[Any, dict[str, Any]]:
    """``json_lines(text, key)``, which must be exactly one line for each ``expected`` value:
    otherwise the test fails, showing the end of the script's output."""
    lines = json_lines(text, key)
    if sorted(lines) != sorted(expected):
        pytest.fail(f"{script.name} reported {key} {sorted(lines)}:\n{text[-3000:]}")
    return lines


Attempts = dict[int, list[str]]
"""Each rank's outcome of each checkpoint attempt, as a script that retries prints them."""


def rank_attempts(script: Path, work: Path, world: int, deadline_s: float) -> Attempts:
    """Run ``script`` once; each rank's ``attempts`` line (one per rank, or the test fails)."""
    text = run_script(script, work, deadline_s)
    return {
        r: line["attempts"] for r, line in reported(text, "rank", [*range(world)], script).items()
    }


def completed(ranks: Attempts) -> bool:
    """The last attempt succeeded on every rank."""
    return all(attempts[-1] == "ok" for attempts in ranks.values())


def assert_every_retry_completes(runs: list[Attempts], shapes: list[bool]) -> None:
    """The body of a defect's strict xfail over several runs: each run shows the defect's shape
    (``shapes[n]``) or a completed retry, never a third thing (``pytest.fail``, which no xfail
    hides), and every run agrees; then it asserts no run shows the defect, which fails while
    the defect lasts and passes once it is fixed."""
    for n, ranks in enumerate(runs):
        if not shapes[n] and not completed(ranks):
            pytest.fail(f"run {n}: neither the defect's shape nor a completed retry: {ranks}")
    if len(set(shapes)) > 1:
        pytest.fail(f"the retry was refused in only {sum(shapes)} of {len(runs)} runs: {runs}")
    assert not any(shapes), runs
