"""Fixtures of the hygiene tests."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest


@pytest.fixture
def sigint_heard() -> Iterator[None]:
    """SIGINT as an interactive session has it, for the test and the processes it starts.

    A job started in the background of a non-interactive shell (``cmd &``, ``nohup``) has
    SIGINT ignored, and that survives exec: the interrupt guard then rightly leaves SIGINT
    alone, and a test of what SIGINT does would see nothing. Python's handler in the test's
    process is reset to the default by exec, so a session it starts hears SIGINT too."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
