"""At the end of a session, say what became of the GPU tier's tests, and why they skipped.

The tier is the plugin's (``chaos_gpu`` tests and users of its GPU fixtures, whose reports
carry ``GPU_ATTR``), never a project's own tests that it happens to mark ``gpu``.

``tox -e gpu`` on a machine without CUDA exits 0 with every test skipped; the summary line
``GPU tests skipped: <reason> (N tests)`` makes that visible instead of a silent green.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from zephon_chaos.fixtures.gpu import SKIP_PREFIX
from zephon_chaos.fixtures.reach import GPU_ATTR


def gpu_outcomes(stats: dict[str, list[Any]]) -> dict[str, tuple[str, str | None]]:
    """nodeid → (outcome, skip reason) of every test of the tier in the reporter's stats."""
    outcomes: dict[str, tuple[str, str | None]] = {}
    for reports in stats.values():
        for report in reports:
            if not isinstance(report, pytest.TestReport) or not getattr(report, GPU_ATTR, False):
                continue  # deselected items and warnings share the stats
            nodeid = report.nodeid
            if report.skipped:
                outcomes[nodeid] = ("skipped", skip_reason(report))
            elif report.failed:
                outcomes[nodeid] = ("failed", None)
            elif report.when == "call" and outcomes.get(nodeid, ("",))[0] != "failed":
                outcomes[nodeid] = ("passed", None)
    return outcomes


def skip_reason(report: Any) -> str:
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    text = text.removeprefix("Skipped: ")
    return text.removeprefix(SKIP_PREFIX)


def summary_lines(outcomes: dict[str, tuple[str, str | None]]) -> list[str]:
    if not outcomes:
        return []
    skipped = Counter(reason for state, reason in outcomes.values() if state == "skipped")
    ran = sum(1 for state, _ in outcomes.values() if state != "skipped")
    reasons = [f"{reason} ({n} test{'s' if n > 1 else ''})" for reason, n in skipped.items()]
    if not ran:
        return [f"GPU tests skipped: {r}" for r in reasons]
    lines = [f"GPU tests: {ran} ran, {sum(skipped.values())} skipped"]
    return lines + [f"  skipped: {r}" for r in reasons]


def write_summary(terminalreporter: Any) -> None:
    """The ``zephon-chaos GPU tier`` section, where the session had tests of the tier."""
    lines = summary_lines(gpu_outcomes(terminalreporter.stats))
    if not lines:
        return
    terminalreporter.write_sep("=", "zephon-chaos GPU tier")
    for line in lines:
        terminalreporter.write_line(line)
