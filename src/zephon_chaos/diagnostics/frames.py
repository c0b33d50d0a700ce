"""Read stack dumps (py-spy's and faulthandler's text) and name the frame a process is stuck in.

A person reading a hang report wants one line per process: *where* it waits. That is the
innermost frame of the main thread that belongs to the program (or to Zephon), not to the
interpreter's standard library, torch, or the harness's spawn hook: a rank blocked in
``dist.barrier()`` is "stuck in train_step (train.py:42)", not in ``distributed_c10d.py``.
"""

from __future__ import annotations

import re
import sysconfig
from dataclasses import dataclass, field

# py-spy (--full-filenames):   "    busy_loop (/path/hang.py:7)"
_PYSPY_FRAME = re.compile(r"^ {4}(?P<func>\S.*?) \((?P<file>.*):(?P<line>\d+)\)\s*$")
_PYSPY_THREAD = re.compile(
    r'^Thread (?P<tid>0x[0-9A-Fa-f]+|\d+) \((?P<state>[^)]*)\)(?::\s*"(?P<name>.*)")?'
)
# faulthandler:                 '  File "/path/hang.py", line 7 in busy_loop'
_FH_FRAME = re.compile(r'^\s+File "(?P<file>.*)", line (?P<line>\d+) in (?P<func>.*?)\s*$')
_FH_THREAD = re.compile(r"^(?P<current>Current thread|Thread) (?P<tid>0x[0-9a-fA-F]+)")

_STDLIB_DIRS = tuple(
    p.rstrip("/") + "/"
    for p in {sysconfig.get_paths().get("stdlib", ""), sysconfig.get_paths().get("platstdlib", "")}
    if p
)
_STDLIB_PATTERN = re.compile(r"/lib/python3\.\d+/(?!site-packages/|dist-packages/)")
INTERNAL_PACKAGES = ("torch", "numpy", "_pytest", "pluggy", "execnet")
"""Third-party packages whose frames are machinery, not the place a program is stuck."""
_INTERNAL_PARTS = (*(f"-packages/{name}/" for name in INTERNAL_PACKAGES), "/_spawnhook/")
_ENTRY_FUNCS = {"<module>", "_run_module_as_main", "_run_code"}


@dataclass(frozen=True)
class Frame:
    func: str
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.func} ({self.file}:{self.line})"

    @property
    def internal(self) -> bool:
        """True for interpreter, torch and harness machinery (see module docstring)."""
        path = self.file
        if path.startswith("<frozen"):
            return True
        if path.startswith(_STDLIB_DIRS) or _STDLIB_PATTERN.search(path):
            return True
        return any(part in path for part in _INTERNAL_PARTS)


@dataclass
class ThreadStack:
    """One thread of a dump; ``frames`` innermost first, as both tools print them."""

    header: str
    tid: str = ""
    name: str = ""
    current: bool = False
    frames: list[Frame] = field(default_factory=list)

    @property
    def outermost(self) -> Frame | None:
        return self.frames[-1] if self.frames else None


def parse_stacks(text: str) -> list[ThreadStack]:
    """Threads and frames of a py-spy or faulthandler dump (unknown lines are skipped)."""
    threads: list[ThreadStack] = []
    for raw in text.splitlines():
        line = raw.rstrip("\n")
        m = _PYSPY_THREAD.match(line)
        if m:
            threads.append(ThreadStack(line, tid=m["tid"], name=m["name"] or ""))
            continue
        m = _FH_THREAD.match(line)
        if m:
            threads.append(
                ThreadStack(line, tid=m["tid"], current=m["current"] == "Current thread")
            )
            continue
        if not threads:
            continue
        m = _PYSPY_FRAME.match(line) or _FH_FRAME.match(line)
        if m:
            threads[-1].frames.append(Frame(m["func"], m["file"], int(m["line"])))
    return threads


def main_thread(threads: list[ThreadStack], pid: int | None = None) -> ThreadStack | None:
    """The main thread: named so, or the OS thread whose id is the PID, or the one running
    the program's entry (``<module>``, runpy), or the thread that caught the signal."""
    if not threads:
        return None
    for pick in (
        lambda t: t.name == "MainThread",
        lambda t: pid is not None and t.tid == str(pid),
        lambda t: t.outermost is not None and t.outermost.func.split(".")[-1] in _ENTRY_FUNCS,
        lambda t: t.current,
    ):
        for thread in threads:
            if pick(thread):
                return thread
    return threads[-1]


def stuck_frame(text: str, pid: int | None = None) -> Frame | None:
    """The innermost frame of the main thread in the program's own code; None if unknown.

    Falls back to the innermost frame of the main thread when every frame is machinery.
    """
    thread = main_thread(parse_stacks(text), pid)
    if thread is None or not thread.frames:
        return None
    for frame in thread.frames:
        if not frame.internal:
            return frame
    return thread.frames[0]


def describe_stuck(text: str, pid: int | None = None) -> str | None:
    """``"busy_loop (hang.py:7)"`` plus the innermost call when that is machinery."""
    frame = stuck_frame(text, pid)
    if frame is None:
        return None
    thread = main_thread(parse_stacks(text), pid)
    innermost = thread.frames[0] if thread and thread.frames else frame
    described = f"{frame.func} ({_short(frame.file)}:{frame.line})"
    if innermost != frame:
        described += f", inside {innermost.func} ({_short(innermost.file)}:{innermost.line})"
    return described


def _short(path: str) -> str:
    """The last two parts of a path: enough to find the file, short enough for a summary."""
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-2:]) if len(parts) > 2 else path
