"""Attach group reports to the pytest item, shown only when the test fails."""

from __future__ import annotations

from typing import Any

from zephon_chaos.launch.result import GroupResult

REPORTS_KEY = "_zephon_chaos_reports"


def attach_group_report(item: Any, result: GroupResult) -> None:
    """Keep the result on the item; the plugin adds it as sections of a failing report."""
    reports: list[GroupResult] = item.__dict__.setdefault(REPORTS_KEY, [])
    if result not in reports:
        reports.append(result)


def group_reports(item: Any) -> list[GroupResult]:
    return list(item.__dict__.get(REPORTS_KEY, []))
