"""The machine a measurement ran on, in one line (ratios survive load; absolute times do not)."""

from __future__ import annotations

import os


def load_note() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores"
