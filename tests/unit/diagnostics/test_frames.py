"""Reading py-spy and faulthandler dumps, and naming the frame a process is stuck in."""

from __future__ import annotations

import pytest

from zephon_chaos.diagnostics.frames import describe_stuck, main_thread, parse_stacks, stuck_frame

PYSPY = """\
Process 4242: /venv/bin/python -u /work/train.py
Python v3.11.7 (/usr/bin/python3.11)

Thread 4250 (idle): "Thread-1 (heartbeat)"
    wait (/usr/lib/python3.11/threading.py:324)
    heartbeat (/work/train.py:12)
    Thread.run (/usr/lib/python3.11/threading.py:982)
    Thread._bootstrap (/usr/lib/python3.11/threading.py:1002)
Thread 4242 (idle): "MainThread"
    barrier (/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py:4159)
    wrapper (/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py:81)
    train_step (/work/train.py:42)
    main (/work/train.py:60)
    <module> (/work/train.py:64)
"""

FAULTHANDLER = """\
Thread 0x00007f5ef27bb6c0 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 324 in wait
  File "/work/train.py", line 12 in heartbeat
  File "/usr/lib/python3.11/threading.py", line 1002 in _bootstrap

Current thread 0x00007f5ef3222b80 (most recent call first):
  File "/venv/lib/python3.11/site-packages/torch/distributed/c10d.py", line 4159 in barrier
  File "/work/train.py", line 42 in train_step
  File "/work/train.py", line 64 in <module>
"""


@pytest.mark.parametrize("dump", [PYSPY, FAULTHANDLER], ids=["py-spy", "faulthandler"])
def test_the_stuck_frame_is_the_programs_innermost_frame_of_the_main_thread(dump: str) -> None:
    threads = parse_stacks(dump)
    assert len(threads) == 2
    frame = stuck_frame(dump, pid=4242)
    assert frame is not None
    assert (frame.func, frame.file, frame.line) == ("train_step", "/work/train.py", 42)
    described = describe_stuck(dump, pid=4242)
    assert described is not None
    assert described.startswith("train_step (work/train.py:42), inside barrier (")


def test_the_main_thread_is_found_by_pid_when_threads_have_no_names() -> None:
    dump = PYSPY.replace(': "MainThread"', "").replace(': "Thread-1 (heartbeat)"', "")
    thread = main_thread(parse_stacks(dump), pid=4242)
    assert thread is not None and thread.tid == "4242"


def test_only_machinery_names_its_innermost_frame() -> None:
    dump = (
        "Thread 7 (idle)\n"
        "    _invoke_run (/venv/lib/python3.11/site-packages/torch/distributed/elastic/agent/"
        "server/api.py:923)\n"
        "    _run_module_as_main (<frozen runpy>:198)\n"
    )
    frame = stuck_frame(dump, pid=7)
    assert frame is not None and frame.func == "_invoke_run"


def test_an_empty_or_foreign_dump_names_nothing() -> None:
    assert stuck_frame("") is None
    assert stuck_frame("py-spy: Permission denied (os error 13)") is None
