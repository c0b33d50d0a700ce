"""An exploration's step summary on GitHub Actions: scenario counts, findings by kind.

Under GitHub Actions the runner names a file in ``GITHUB_STEP_SUMMARY``; Markdown appended to
it shows on the run's page. ``explore`` appends a short one (the full report stays
``summary.md``, an artifact), made from the typed values of the result, never from the text
report.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from zephon_chaos.explore.budget import format_duration
from zephon_chaos.explore.findings import Section
from zephon_chaos.explore.summary import ExploreResult

ENV = "GITHUB_STEP_SUMMARY"


def step_summary(result: ExploreResult) -> str:
    shard = f", shard {result.shard}" if result.shard else ""
    stopped = " (interrupted)" if result.interrupted else ""
    lines = [
        f"## zephon-chaos explore: {result.tier} tier, seed {result.seed}{shard}",
        "",
        f"{result.scenarios} scenarios in {format_duration(result.elapsed_s)} of a "
        f"{format_duration(result.budget_s)} budget{stopped}.",
        "",
        "| tier | scenarios | new | refused | per minute |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {t.tier} | {t.scenarios} | {t.new_scenarios} | {t.refused} | {t.rate:.1f} |"
        for t in result.tiers.values()
    ]
    lines += ["", "| findings | count |", "|---|---|"]
    lines += [f"| {s.value} | {len(result.in_section(s))} |" for s in Section]
    if result.findings:
        lines += ["", "| signature | kind | label | tier |", "|---|---|---|---|"]
        lines += [
            f"| `{f.signature}` | {f.section.value} | {f.label.value} | {f.tier} |"
            for f in result.findings
        ]
    return "\n".join(lines) + "\n"


def append_step_summary(result: ExploreResult, env: Mapping[str, str] = os.environ) -> Path | None:
    """Append :func:`step_summary` to the file ``GITHUB_STEP_SUMMARY`` names; None (nothing
    written) outside GitHub Actions."""
    name = env.get(ENV)
    if not name:
        return None
    path = Path(name)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(step_summary(result))
    return path
