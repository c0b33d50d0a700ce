"""Live progress on stderr: scenarios run, findings, rate, time left.

On a terminal one line is rewritten in place every second; into a file or pipe a line is
written every ``interval_s`` seconds and whenever a finding appears, so logs stay readable.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from zephon_chaos.explore.budget import format_duration


class Progress:
    def __init__(
        self, deadline: float, stream: TextIO | None = None, interval_s: float = 15.0
    ) -> None:
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval_s = 1.0 if self.tty else interval_s
        self.deadline = deadline
        self.started = time.monotonic()
        self.tier = ""
        self.scenarios = 0
        self.findings = 0
        self.phase = "searching"
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def line(self) -> str:
        now = time.monotonic()
        elapsed = max(now - self.started, 1e-9)
        rate = 60.0 * self.scenarios / elapsed
        return (
            f"explore [{self.tier}] {self.phase}: {self.scenarios} scenarios, "
            f"{self.findings} finding(s), {rate:.1f}/min, "
            f"{format_duration(self.deadline - now)} left"
        )

    def _write(self, text: str, final: bool = False) -> None:
        with self._lock:
            if self.tty:
                self.stream.write("\r\x1b[2K" + text + ("\n" if final else ""))
            else:
                self.stream.write(text + "\n")
            self.stream.flush()

    def note(self, text: str) -> None:
        """A line of its own (a finding, a tier change), then the status line again."""
        with self._lock:
            if self.tty:
                self.stream.write("\r\x1b[2K")
            self.stream.write(text + "\n")
            self.stream.flush()
        if self.tty:
            self._write(self.line())

    def start(self) -> Progress:
        self._thread = threading.Thread(target=self._run, name="zc-explore-progress", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._write(self.line())

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        self._write(self.line(), final=True)
