"""The timings an exploration measured (:mod:`zephon_chaos.oracles.liveness`), as one table.

Scenarios differ in ``aggregate_timeout_s``, so besides seconds each row shows the largest
share of its own bound any one measurement took (1.0 = at the bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from zephon_chaos.oracles.liveness import LivenessVerdict, Step
from zephon_chaos.runner import ScenarioOutcome

_ROWS = {Step.FETCH: "next()", Step.CHECKPOINT: "checkpoint() attempt", Step.RESTORE: "restore()"}
LEADER_FIRST = "failure reaches the others (leader failed first)"
FOLLOWER_FIRST = "failure reaches the others (a follower failed first)"


@dataclass
class LivenessTally:
    """Measured (seconds, bound) pairs per row, over every launch of an exploration."""

    rows: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    excluded: int = 0
    """Steps left out because a scheduled fault stalled them on purpose."""

    def add(self, outcome: ScenarioOutcome) -> None:
        for run in outcome.phases:
            if run.liveness is not None:
                self.add_verdict(run.liveness)

    def add_verdict(self, v: LivenessVerdict) -> None:
        for t in v.timings:
            bound = v.bounds.wait_bound_s(v.timeout_s, first_fetch=t.first)
            self.rows.setdefault(_ROWS[t.step], []).append((t.seconds, bound))
        bound = v.bounds.propagation_bound_s(v.timeout_s)
        for p in v.propagations:
            if p.max_lag is not None:
                row = LEADER_FIRST if p.by_leader else FOLLOWER_FIRST
                self.rows.setdefault(row, []).append((p.max_lag, bound))
        self.excluded += len(v.excluded)

    def section(self) -> list[str]:
        """Markdown lines for the explore summary (none if nothing was measured)."""
        if not self.rows:
            return []
        lines = [
            "",
            "## Liveness",
            "",
            "| measured | n | median s | p95 s | max s | max share of bound |",
            "|---|---|---|---|---|---|",
        ]
        order = [*_ROWS.values(), LEADER_FIRST, FOLLOWER_FIRST]
        for name in (r for r in order if r in self.rows):
            pairs = self.rows[name]
            values = sorted(s for s, _ in pairs)
            share = max(s / b for s, b in pairs if b > 0)
            lines.append(
                f"| {name} | {len(values)} | {_rank(values, 0.5):.3f} | "
                f"{_rank(values, 0.95):.3f} | {values[-1]:.3f} | {share:.2f} |"
            )
        lines += [
            "",
            f"Bounds and why: docs/liveness.md. Steps a scheduled fault stalls on purpose, "
            f"left out: {self.excluded}.",
        ]
        return lines


def _rank(sorted_values: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile of an ascending, non-empty list."""
    index = max(0, min(len(sorted_values) - 1, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[index]
