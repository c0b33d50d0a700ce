"""Stack capture on plain processes: py-spy, the faulthandler fallback, and its bounds."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from zephon_chaos.diagnostics.stacks import (
    STACKS_SUBDIR,
    Target,
    Who,
    capture_stacks,
    rank_of_record,
)
from zephon_chaos.procs import SPAWNHOOK_DIR, ProcId, proc_id

PROGRAM = """\
import os, signal, sys
def stop_myself():
    os.kill(os.getpid(), signal.SIGSTOP)
def park_forever():
    print("parked", flush=True)
    while True:
        signal.pause()  # a signal (the stack dump's, say) ends one pause, not the wait
if sys.argv[1] == "stop":
    print("stopping", flush=True)
    stop_myself()
park_forever()
"""


@pytest.fixture
def start_program(tmp_path: Path) -> Iterator[Callable[..., tuple[ProcId, Path | None]]]:
    """Start PROGRAM (with the spawn hook unless ``hooked=False``); killed after the test."""
    procs: list[subprocess.Popen[bytes]] = []
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()

    def start(mode: str = "park", hooked: bool = True) -> tuple[ProcId, Path | None]:
        env = dict(os.environ)
        if hooked:
            env.update(PYTHONPATH=SPAWNHOOK_DIR, ZEPHON_CHAOS_PID_DIR=str(pid_dir))
        proc = subprocess.Popen(
            [sys.executable, "-c", PROGRAM, mode], env=env, stdout=subprocess.PIPE
        )
        procs.append(proc)
        assert proc.stdout is not None
        proc.stdout.readline()  # "parked" / "stopping": the program reached its wait
        if mode == "stop":
            _wait_stopped(proc.pid)
        pid = proc_id(proc.pid)
        assert pid is not None
        stack_file = pid_dir / STACKS_SUBDIR / f"{pid.pid}-{pid.ticks}"
        return pid, stack_file if hooked else None

    yield start
    for proc in procs:
        proc.kill()
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
        proc.wait(timeout=30)
        if proc.stdout:
            proc.stdout.close()


def _wait_stopped(pid: int) -> None:
    end = time.monotonic() + 30
    while Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
        assert time.monotonic() < end, "the program never stopped itself"
        time.sleep(0.01)  # a state change of another process has no event to wait on


@pytest.mark.parametrize("pyspy", ["on", "off"])
@pytest.mark.parametrize("mode", ["park", "stop"])
def test_stacks_name_the_function_each_process_waits_in(
    start_program, monkeypatch: pytest.MonkeyPatch, pyspy: str, mode: str
) -> None:
    if pyspy == "off":
        monkeypatch.setenv("ZEPHON_CHAOS_PYSPY", "off")
    pid, stack_file = start_program(mode)
    stacks = capture_stacks([Target(f"rank 0 (pid {pid.pid})", pid, stack_file)], budget_s=8)
    text = stacks[f"rank 0 (pid {pid.pid})"]
    expected = "stop_myself" if mode == "stop" else "park_forever"
    assert expected in text, text
    if pyspy == "off":
        assert text.startswith("(via faulthandler)")
        stopped_note = "faulthandler cannot run in a stopped process" in text
        assert stopped_note == (mode == "stop")
    assert pid.alive()


def test_a_process_without_the_hook_is_never_sent_the_stack_signal(
    start_program, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZEPHON_CHAOS_PYSPY", "off")
    pid, _ = start_program(hooked=False)
    stacks = capture_stacks([Target("process", pid, None)], budget_s=2)
    assert stacks["process"].startswith("no stack captured:")
    assert "py-spy: off" not in stacks["process"]
    assert "faulthandler: not armed" in stacks["process"]
    assert pid.alive(), "SIGUSR1 would have killed a process that did not arm faulthandler"


def test_a_py_spy_that_hangs_cannot_stretch_the_capture(
    start_program, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    stuck = tmp_path / "py-spy"
    stuck.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(600)\n")
    stuck.chmod(0o700)
    monkeypatch.setenv("ZEPHON_CHAOS_PYSPY", str(stuck))
    pid, stack_file = start_program()
    started = time.monotonic()
    stacks = capture_stacks([Target("rank 0", pid, stack_file)], budget_s=4, per_call_s=1)
    assert time.monotonic() - started < 4 + 2
    assert "py-spy: no answer within" in stacks["rank 0"] or "faulthandler" in stacks["rank 0"]
    assert "park_forever" in stacks["rank 0"]  # faulthandler answered instead


@pytest.mark.parametrize(
    ("who", "text"),
    [
        (("rank", 2, 11), "rank 2 (pid 11)"),
        (("agent", 0, 12), "agent 0 (pid 12)"),
        (("child", 1, 13), "child of rank 1 (pid 13)"),
        (("process", None, 14), "process (pid 14)"),
    ],
)
def test_a_captured_process_is_named_by_text_and_known_by_values(
    who: tuple[str, int | None, int], text: str
) -> None:
    """Reports and JSON read the text; a known hang's proof reads the values, and they
    survive a pickle (results cross process boundaries)."""
    label = Who(*who)
    assert label == text and json.dumps({label: 1}) == json.dumps({text: 1})
    back = pickle.loads(pickle.dumps(label))
    assert (back.role, back.rank, back.pid) == who and back == text


def test_a_childs_rank_is_read_as_a_number_from_its_spawn_record() -> None:
    """The spawn hook records ``RANK`` as the environment gives it, text: a child's
    ``Who.rank`` must equal its rank's, or no proof groups them."""
    assert rank_of_record({"rank": "3"}) == 3 == Who("child", rank_of_record({"rank": "3"}), 1).rank
    assert rank_of_record({}) is None and rank_of_record({"rank": "x"}) is None


FORMING = """\
import datetime, sys
import torch.distributed as dist
print("forming", flush=True)
dist.init_process_group(
    "gloo", init_method=sys.argv[1], rank=1, world_size=2, timeout=datetime.timedelta(minutes=5)
)
"""


def test_a_process_waiting_inside_torch_distributed_is_dumped_with_its_native_frames(
    tmp_path: Path,
) -> None:
    """A rank that never joins its group waits below Python (the store client's connect
    retries, a lock): its native frames say where. Its Python frames read the same."""
    import socket

    from zephon_chaos.diagnostics.frames import describe_stuck

    with socket.socket() as reserved:  # bound, never listening: every connect is refused
        reserved.bind(("127.0.0.1", 0))
        url = f"tcp://127.0.0.1:{reserved.getsockname()[1]}"
        proc = subprocess.Popen([sys.executable, "-c", FORMING, url], stdout=subprocess.PIPE)
        try:
            assert proc.stdout is not None and proc.stdout.readline() == b"forming\n"
            pid = proc_id(proc.pid)
            assert pid is not None
            end = time.monotonic() + 60
            while True:  # torch's import and the rendezvous's first calls come before it
                text = capture_stacks([Target("rank 1", pid, None)], budget_s=8)["rank 1"]
                if "_create_c10d_store" in (describe_stuck(text, pid.pid) or ""):
                    break
                assert time.monotonic() < end, text
        finally:
            proc.kill()
            proc.wait(timeout=30)
            assert proc.stdout is not None
            proc.stdout.close()
    assert "TCPStore::TCPStore (" in text, text
