"""The kernel's word on a SIGKILL nobody in the harness sent: was it the OOM killer?

``exitcode -9`` is the most common unexplained torchrun failure. The kernel logs each OOM kill
("Out of memory: Killed process 1234 (python)", "oom-kill:...,pid=1234,"). Its ring buffer is
readable through ``/dev/kmsg`` where ``kernel.dmesg_restrict`` allows; otherwise the report
says it could not look, and where to look instead.
"""

from __future__ import annotations

import errno
import os
import re
import time
from dataclasses import dataclass, field

KMSG = "/dev/kmsg"
MAX_RECORDS = 200_000
MAX_SECONDS = 2.0
_OOM_LINE = re.compile(
    r"(?:Killed process (?P<a>\d+)\b)|(?:oom-kill:.*?\bpid=(?P<b>\d+)\b)"
    r"|(?:oom_reaper: reaped process (?P<c>\d+)\b)"
)


@dataclass
class KernelEvidence:
    """What the kernel log says about one PID: ``readable`` False when it could not be read."""

    pid: int
    readable: bool
    lines: list[str] = field(default_factory=list)
    why_unreadable: str = ""

    @property
    def oom_killed(self) -> bool:
        return bool(self.lines)

    def describe(self) -> str:
        if not self.readable:
            return (
                f"kernel log not readable here ({self.why_unreadable}); run `dmesg | grep -i "
                f"'killed process {self.pid}'` on the host to confirm an OOM kill"
            )
        if self.lines:
            return "kernel log: " + " | ".join(self.lines[-3:])
        return (
            f"the kernel log records no OOM kill of pid {self.pid}: another process sent it "
            "(in a container the kernel logs host PIDs, so look there too)"
        )


def read_kernel_log(path: str = KMSG) -> tuple[list[str] | None, str]:
    """Every record of the kernel's ring buffer as text, or (None, why) if it is not readable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return None, f"{path}: {exc.strerror or exc}"
    lines: list[str] = []
    end = time.monotonic() + MAX_SECONDS
    try:
        while len(lines) < MAX_RECORDS and time.monotonic() < end:
            try:
                record = os.read(fd, 8192)
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # the record was overwritten while we read: skip
                    continue
                if exc.errno == errno.EAGAIN:
                    break
                return None, f"{path}: {exc.strerror or exc}"
            if not record:
                break
            # "prio,seq,usec,flags;message\n continuation..."
            head, _, message = record.decode(errors="replace").partition(";")
            lines.append(message.splitlines()[0] if message else head)
    finally:
        os.close(fd)
    return lines, ""


def oom_evidence(pid: int, log: tuple[list[str] | None, str] | None = None) -> KernelEvidence:
    """OOM-kill lines naming ``pid`` (``log`` defaults to reading the kernel log now)."""
    lines, why = log if log is not None else read_kernel_log()
    if lines is None:
        return KernelEvidence(pid, readable=False, why_unreadable=why)
    found = []
    for line in lines:
        m = _OOM_LINE.search(line)
        if m and int(m["a"] or m["b"] or m["c"]) == pid:
            found.append(line.strip())
    return KernelEvidence(pid, readable=True, lines=found)
