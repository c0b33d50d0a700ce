"""Signals a rank sends itself (or its agent) for a scheduled fault: one table for all callers."""

from __future__ import annotations

import os
import signal


def signal_self(action: str) -> bool:
    """Apply ``action`` if it is a signal or an exit; False for actions the caller handles."""
    if action == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)
    elif action == "sigstop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif action == "exit":
        os._exit(17)
    elif action == "kill_agent":
        os.kill(os.getppid(), signal.SIGKILL)
    else:
        return False
    return True
