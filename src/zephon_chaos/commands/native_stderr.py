"""Native code's stderr to a file, Python's where it was.

The in-process tier runs c10d's ``TCPStore`` clients in this process, and when a link fault
cuts or resets them, c10d's C++ logging writes a warning and a stack of native frames to file
descriptor 2 for every retry: thousands of lines in 15 minutes that bury the explorer's
progress. ``TORCH_CPP_LOG_LEVEL`` silences warnings but not errors, so the descriptor itself
is pointed at a file in the report, and ``sys.stderr`` (progress, messages), when it wrote to
that descriptor, at a copy of it. Nothing is lost: the file keeps every native line.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _on_descriptor_2() -> bool:
    try:
        return sys.stderr.fileno() == 2
    except (AttributeError, OSError, io.UnsupportedOperation):
        return False  # captured (pytest's capsys) or replaced: not on the descriptor


@contextmanager
def native_stderr_to(path: Path) -> Iterator[None]:
    """Within: what writes to descriptor 2 directly appends to ``path``; ``sys.stderr`` goes
    where it went before (read it inside, not before). Both restored on exit."""
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
    if python_side is not None:
        sys.stderr = python_side
    try:
        yield
    finally:
        if python_side is not None:
            python_side.flush()
        os.dup2(terminal, 2)
        os.close(terminal)
        sys.stderr = saved
        if python_side is not None:
            python_side.close()
