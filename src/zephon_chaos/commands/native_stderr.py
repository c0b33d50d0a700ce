"""Native code's stderr to a file, Python's where it was.

The in-process tier runs c10d's ``TCPStore`` clients in this process, and when a link fault
cuts or resets them, c10d's C++ logging writes a warning and a stack of native frames to file
descriptor 2 for every retry: thousands of lines in 15 minutes that bury the explorer's
progress. ``TORCH_CPP_LOG_LEVEL`` silences warnings but not errors, so the descriptor itself
is pointed at a file in the report, and ``sys.stderr`` (progress, messages), when it wrote to
that descriptor, at a copy of it. Nothing is lost: the file keeps every native line.

Zephon's own log lines (``[PR 0][PID ...] Failed to publish checkpoint failure``) are Python
writes of the in-process ranks to ``sys.stderr``; where ``divert`` says the writing thread is
such a rank, they go to the same file, beside the native lines of the same faults.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def _on_descriptor_2() -> bool:
    try:
        return sys.stderr.fileno() == 2
    except (AttributeError, OSError, io.UnsupportedOperation):
        return False  # captured (pytest's capsys) or replaced: not on the descriptor


class _Diverting(io.TextIOBase):
    """``sys.stderr`` that sends the writes of threads ``divert`` names to ``file``."""

    def __init__(self, terminal: io.TextIOBase, file: io.TextIOBase,
                 divert: Callable[[], bool]) -> None:
        self._terminal, self._file, self._divert = terminal, file, divert

    def write(self, text: str) -> int:
        (self._file if self._divert() else self._terminal).write(text)
        return len(text)

    def flush(self) -> None:
        self._terminal.flush()
        self._file.flush()

    def isatty(self) -> bool:
        return self._terminal.isatty()


@contextmanager
def native_stderr_to(path: Path, divert: Callable[[], bool] | None = None) -> Iterator[None]:
    """Within: what writes to descriptor 2 directly appends to ``path``, and so do the
    ``sys.stderr`` writes of threads for which ``divert()`` is true; other ``sys.stderr``
    writes go where they went before (read it inside, not before). Restored on exit."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    terminal = os.dup(2)
    saved = sys.stderr
    python_side = None
    if _on_descriptor_2():
        python_side = open(  # noqa: SIM115 (closed below, after descriptor 2 is back)
            os.dup(terminal), "w", buffering=1, encoding="utf-8", errors="backslashreplace"
        )
    with path.open("ab") as native:
        os.dup2(native.fileno(), 2)
    diverted = None
    if divert is not None:
        diverted = path.open("a", buffering=1, encoding="utf-8", errors="backslashreplace")
        sys.stderr = _Diverting(python_side or saved, diverted, divert)
    elif python_side is not None:
        sys.stderr = python_side
    try:
        yield
    finally:
        for stream in (python_side, diverted):
            if stream is not None:
                stream.flush()
        os.dup2(terminal, 2)
        os.close(terminal)
        sys.stderr = saved
        for stream in (python_side, diverted):
            if stream is not None:
                stream.close()
