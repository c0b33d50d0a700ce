"""A pipeline stand-in for the rank's checkpointing tests: ``checkpoint()`` succeeds or fails
call by call as the test scripts it, with no Zephon underneath."""

from __future__ import annotations

from typing import Any


class ScriptedPipe:
    """Each ``checkpoint()`` takes the next of ``outcomes``: True returns a copy of ``ckpt``,
    False raises ``error`` (a Zephon timeout's text, as the retry policies read it)."""

    def __init__(self, ckpt: dict[str, Any], error: str, *outcomes: bool) -> None:
        self.ckpt = ckpt
        self.error = error
        self.outcomes = list(outcomes)

    def checkpoint(self) -> dict[str, Any]:
        if self.outcomes.pop(0):
            return dict(self.ckpt)
        raise RuntimeError(self.error)
