"""Exit statuses in words: ``exitcode -9`` means nothing to a person; ``killed by SIGKILL`` does."""

from __future__ import annotations

import signal


def describe(code: int | None) -> str:
    """Describe a Popen-style return code (negative = killed by that signal)."""
    if code is None:
        return "still running"
    if code == 0:
        return "exited 0 (success)"
    if code < 0:
        return f"killed by {signal_name(-code)}"
    if code > 128 and code - 128 in _SIGNALS:
        return f"exited {code} (the shell's code for {signal_name(code - 128)})"
    return f"exited {code}"


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


_SIGNALS = {s.value for s in signal.Signals}
